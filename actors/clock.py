"""The one clock. Only `SystemClock` reads `time.monotonic()` or sleeps.

A clock tells time (`now()`, seconds, monotonic), runs timers (`call_at(when,
fn)`: one timer service for the whole supervisor, not a thread per child) and
lets a child wait on it (`wait(signal, seconds)`, what `ctx.sleep` does). Tests
inject `FakeClock`, where time moves only when the test calls `advance()` (or,
with `autojump_threshold`, when every sleeper has waited that long in real
time), and due timers run in the advancing thread, in order.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from actors.mail import CancelSignal

__all__ = ["Clock", "FakeClock", "SystemClock", "Timer", "TimerError"]

# The longest the timer thread waits before it looks at its heap again: a timer
# due later than this (a week away, or never) costs one wake-up per hour, and no
# wait ever reaches the platform's limit on a timeout.
MAX_WAIT_S = 3600.0

ErrorHook = Callable[[BaseException], None]


class TimerError(ValueError):
    """A timer that cannot be scheduled: its time is not a finite number."""


def check_when(when: float) -> float:
    """`when` as a float, or `TimerError` if no timer service could keep it."""
    try:
        value = float(when)
    except (TypeError, ValueError, OverflowError) as exc:
        raise TimerError(f"cannot schedule a timer at {when!r}: {exc}") from None
    if not math.isfinite(value):
        raise TimerError(f"cannot schedule a timer at {value!r} s: a timer needs a finite time")
    return value


class Timer:
    """A scheduled callback; `cancel()` is idempotent and thread-safe.

    A cancelled timer lets go of its callback at once (and with it whatever the
    callback refers to), though its slot may stay in the heap until it is
    compacted or falls due.
    """

    __slots__ = ("_heap", "callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback: Callable[[], None] | None = callback
        self.cancelled = False
        self._heap: _TimerHeap | None = None

    def cancel(self) -> None:
        if self.cancelled:
            return
        self.cancelled = True
        self.callback = None
        heap = self._heap
        if heap is not None:
            heap.cancelled += 1  # a hint for compaction; an occasional lost count is harmless


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds."""

    def wall(self) -> float:
        """Seconds since the epoch, for event timestamps."""

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        """Run `callback` at clock time `when` (in the timer thread, or the advancing one)."""

    def wait(self, signal: CancelSignal, seconds: float) -> bool:
        """Wait until `signal` is set or `seconds` of this clock passed; True if it was set.
        Called from a child's thread (`ctx.sleep`)."""

    def close(self) -> None:
        """Stop the timer service; pending timers never run."""


def run_callback(timer: Timer, on_error: ErrorHook | None) -> None:
    """Run a due timer's callback; whatever it raises goes to `on_error`, never further.

    Runs in the timer thread (or the hub's): one failing callback, even with a
    `BaseException` such as `SystemExit`, must not stop the timers of everyone else.
    """
    callback = timer.callback
    if timer.cancelled or callback is None:
        return
    timer.callback = None  # it runs once; what it refers to can go as soon as it returns
    try:
        callback()
    except BaseException as exc:  # noqa: BLE001 - the service outlives any callback
        report_error(exc, on_error)


def report_error(exc: BaseException, on_error: ErrorHook | None) -> None:
    """Hand `exc` to `on_error`, or print it; a failing hook is printed too."""
    if on_error is not None:
        # A broken hook must not stop the service either: then the error is printed.
        with contextlib.suppress(BaseException):
            on_error(exc)
            return
    with contextlib.suppress(BaseException):  # no stderr left: nothing more to do
        sys.stderr.write("".join(traceback.format_exception(exc)))


class _TimerHeap:
    """Timers by due time. Cancelled ones are dropped lazily, and in bulk when they pile up."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        self.cancelled = 0  # timers cancelled while in the heap (approximately)

    def push(self, timer: Timer) -> None:
        timer._heap = self
        heapq.heappush(self._heap, (timer.when, next(self._seq), timer))
        if self.cancelled > 64 and self.cancelled * 2 > len(self._heap):
            self._compact()

    def _compact(self) -> None:
        """Drop every cancelled timer (most deadlines are cancelled long before they fall due)."""
        self._heap = [entry for entry in self._heap if not entry[2].cancelled]
        heapq.heapify(self._heap)
        self.cancelled = 0

    def __len__(self) -> int:
        return len(self._heap)

    def next_when(self) -> float | None:
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
            self.cancelled = max(0, self.cancelled - 1)
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> Timer | None:
        when = self.next_when()
        if when is None or when > now:
            return None
        timer = heapq.heappop(self._heap)[2]
        timer._heap = None
        return timer


class SystemClock:
    """Real time, with one daemon timer thread started on first use.

    `on_error(exc)` is called in the timer thread with whatever a callback
    raised (by default it is printed); the thread goes on with the next timer.
    """

    def __init__(self, on_error: ErrorHook | None = None) -> None:
        self.on_error = on_error
        self._heap = _TimerHeap()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._wake_at = float("-inf")  # when the timer thread wakes by itself; -inf: awake

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    def wait(self, signal: CancelSignal, seconds: float) -> bool:
        """Real time: the signal's own wait, no timer (called from a child's thread)."""
        return signal.wait(seconds)

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        """`TimerError` (in the caller's thread) for a time that is not a finite number."""
        timer = Timer(check_when(when), callback)
        with self._cond:
            if self._closed:
                timer.cancel()
                return timer
            self._heap.push(timer)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="zeus-timers", daemon=True)
                self._thread.start()
            elif when < self._wake_at:
                # Wake the timer thread only when its next wake-up moves earlier: most
                # timers (deadlines) are cancelled long before they fall due.
                self._cond.notify()
        return timer

    def parked_until(self) -> float | None:
        """When the timer thread, asleep now, wakes by itself (`inf`: only a new timer
        wakes it); None while it runs or has not started. For tests, any thread."""
        with self._cond:
            return None if self._wake_at == float("-inf") else self._wake_at

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def _run(self) -> None:
        """Runs in the `zeus-timers` thread: fires due timers in time order, until closed.

        Nothing ends it but `close()`: a callback's exception, whatever its type,
        goes to `on_error`, and so does a fault of the loop itself.
        """
        while True:
            try:
                if self._step():
                    return
            except BaseException as exc:  # noqa: BLE001 - the one timer thread must not die
                report_error(exc, self.on_error)

    def _step(self) -> bool:
        """Wait for the next due timer and run it; True once the clock is closed."""
        with self._cond:
            if self._closed:
                return True
            now = time.monotonic()
            timer = self._heap.pop_due(now)
            if timer is None:
                when = self._heap.next_when()
                self._wake_at = float("inf") if when is None else when
                wait = MAX_WAIT_S if when is None else min(max(0.0, when - now), MAX_WAIT_S)
                self._cond.wait(wait)
                self._wake_at = float("-inf")  # awake: it looks at the heap again anyway
                return False
        run_callback(timer, self.on_error)
        return False


class FakeClock:
    """Time that moves only when a test calls `advance()`; timers run in that call.

    `wait()` (`ctx.sleep`) ends once time passes the sleeper's wake-up, or on its
    signal. With `autojump_threshold=s` (settable at any time, as on trio's
    `MockClock`), once threads sleep and none has come or gone for `s` seconds
    of real time, a daemon thread jumps time to the next timer (a wake-up, or
    any other such as a deadline). Only sleepers are seen: a thread computing
    meanwhile does not hold time back.
    """

    def __init__(
        self,
        start: float = 1000.0,
        wall_start: float = 1_700_000_000.0,
        *,
        autojump_threshold: float | None = None,
    ) -> None:
        self._now = start
        self._wall_offset = wall_start - start
        self._heap = _TimerHeap()
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)  # a sleeper came or went, time moved
        self._threshold: float | None = None
        self._sleepers = 0
        self._quiet_since = time.monotonic()  # real time of the last change the jumper sees
        self._jumper: threading.Thread | None = None
        self.jumps = 0  # how many times the autojump thread moved time (for assertions)
        self.autojump_threshold = autojump_threshold

    @property
    def autojump_threshold(self) -> float | None:
        """Seconds of real time every sleeper waits before time jumps (None: never)."""
        return self._threshold

    @autojump_threshold.setter
    def autojump_threshold(self, seconds: float | None) -> None:
        if seconds is not None and not seconds >= 0:
            raise ValueError(f"autojump_threshold must be seconds >= 0 or None, not {seconds!r}")
        with self._lock:
            self._threshold = seconds
            self._sleeper_changed(0)

    def now(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._now + self._wall_offset

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        """`TimerError` for a time that is not a finite number, as `SystemClock`."""
        timer = Timer(check_when(when), callback)
        with self._lock:
            self._heap.push(timer)
        return timer

    def wait(self, signal: CancelSignal, seconds: float) -> bool:
        """Wait until `signal` is set or this clock reaches now + `seconds`; True if set.
        Called from a child's thread; time moves in another (the test's, or the jumper)."""
        if signal.is_set() or not seconds > 0:  # nan, as with a real wait: no wait at all
            return signal.is_set()
        woke = threading.Event()
        with self._lock:
            # Forever (inf) is no timer: only the signal, or nothing, wakes the sleeper.
            timer = Timer(self._now + seconds, woke.set)
            if math.isfinite(timer.when):
                self._heap.push(timer)
            self._sleeper_changed(+1)
        forget = signal.on_set(woke.set)
        try:
            woke.wait()
        finally:
            forget()
            timer.cancel()
            with self._lock:
                self._sleeper_changed(-1)
        return signal.is_set()

    def sleepers(self) -> int:
        """How many threads wait in `wait()` now (`wait_for_sleepers` waits for some)."""
        with self._lock:
            return self._sleepers

    def wait_for_sleepers(self, count: int = 1, timeout: float = 10.0) -> None:
        """Block until at least `count` threads wait in `wait()` (a safety bound, not an
        assertion: `AssertionError` if they did not within `timeout` seconds of real time)."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._sleepers >= count, timeout):
                raise AssertionError(f"{self._sleepers} sleeper(s), not {count}, after {timeout}s")

    def _sleeper_changed(self, delta: int) -> None:
        """With the lock held: count a sleeper in or out; start the jumper if it is needed."""
        self._sleepers += delta
        self._quiet_since = time.monotonic()
        self._changed.notify_all()
        if self._threshold is not None and self._sleepers and self._jumper is None:
            self._jumper = threading.Thread(
                target=self._autojump, name=f"fake-clock-autojump-{id(self):x}", daemon=True
            )
            self._jumper.start()

    def _autojump(self) -> None:
        """Runs in the `fake-clock-autojump` thread while anyone sleeps on this clock."""
        me = threading.current_thread()
        try:
            while True:
                with self._changed:
                    threshold = self._threshold
                    if not self._sleepers or threshold is None:
                        self._jumper = None  # in the same hold: the next sleeper starts one
                        return
                    quiet = time.monotonic() - self._quiet_since
                    when = self._heap.next_when()
                    if quiet < threshold or when is None:
                        self._changed.wait(None if when is None else threshold - quiet)
                        continue
                    self.jumps += 1
                    self._quiet_since = time.monotonic()
                self.advance(max(0.0, when - self._now))
        except BaseException:  # a timer's callback raised: the test sees it; the next
            with self._lock:  # sleeper starts another jumper
                if self._jumper is me:
                    self._jumper = None
            raise

    def advance(self, seconds: float) -> None:
        """Move time forward, running every timer that falls due, in order."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        target = self._now + seconds
        while True:
            with self._lock:
                timer = self._heap.pop_due(target)
                if timer is None:
                    self._now = target
                    self._quiet_since = time.monotonic()
                    self._changed.notify_all()
                    return
                self._now = max(self._now, timer.when)
            callback = timer.callback
            timer.callback = None
            if not timer.cancelled and callback is not None:
                callback()  # in the test's thread: what it raises is the test's to see

    def pending(self) -> list[float]:
        """When the live timers are due (for assertions)."""
        with self._lock:
            return sorted(w for w, _, t in self._heap._heap if not t.cancelled)

    def close(self) -> None:
        pass
