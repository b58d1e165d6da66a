"""The one clock. Only `SystemClock` reads `time.monotonic()` or sleeps.

A clock tells time (`now()`, seconds, monotonic) and runs timers
(`call_at(when, fn)`): one timer service for the whole supervisor, not a
thread per child. Tests inject `FakeClock`, where time moves only when the
test calls `advance()`, and due timers run in the advancing thread, in order.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["Clock", "FakeClock", "SystemClock", "Timer"]


class Timer:
    """A scheduled callback; `cancel()` is idempotent and thread-safe."""

    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds."""

    def wall(self) -> float:
        """Seconds since the epoch, for event timestamps."""

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        """Run `callback` at clock time `when` (in the timer thread, or the advancing one)."""

    def close(self) -> None:
        """Stop the timer service; pending timers never run."""


class _TimerHeap:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()

    def push(self, timer: Timer) -> None:
        heapq.heappush(self._heap, (timer.when, next(self._seq), timer))

    def next_when(self) -> float | None:
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> Timer | None:
        when = self.next_when()
        if when is None or when > now:
            return None
        return heapq.heappop(self._heap)[2]


class SystemClock:
    """Real time, with one daemon timer thread started on first use."""

    def __init__(self) -> None:
        self._heap = _TimerHeap()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._wake_at = float("-inf")  # when the timer thread wakes by itself; -inf: awake

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        timer = Timer(when, callback)
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

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def _run(self) -> None:
        """Runs in the `zeus-timers` thread: fires due timers in time order."""
        while True:
            with self._cond:
                if self._closed:
                    return
                now = time.monotonic()
                timer = self._heap.pop_due(now)
                if timer is None:
                    when = self._heap.next_when()
                    self._wake_at = float("inf") if when is None else when
                    self._cond.wait(None if when is None else max(0.0, when - now))
                    self._wake_at = float("-inf")  # awake: it looks at the heap again anyway
                    continue
            if not timer.cancelled:
                # A timer callback must never kill the service.
                with contextlib.suppress(Exception):
                    timer.callback()


class FakeClock:
    """Time that moves only when a test calls `advance()`; timers run in that call."""

    def __init__(self, start: float = 1000.0, wall_start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._wall_offset = wall_start - start
        self._heap = _TimerHeap()
        self._lock = threading.RLock()

    def now(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._now + self._wall_offset

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        timer = Timer(when, callback)
        with self._lock:
            self._heap.push(timer)
        return timer

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
                    return
                self._now = max(self._now, timer.when)
            if not timer.cancelled:
                timer.callback()

    def pending(self) -> list[float]:
        """When the live timers are due (for assertions)."""
        with self._lock:
            return sorted(w for w, _, t in self._heap._heap if not t.cancelled)

    def close(self) -> None:
        pass
