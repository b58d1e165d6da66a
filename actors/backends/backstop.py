"""`Backstop`: a worker process's own hard kill-by time, kept outside the host's GIL.

Zeus decides when an attempt stops and carries it out: cancel, `grace_s`,
SIGTERM, `term_s`, SIGKILL. All of that runs in the host process; a host
frozen by one of its own threads (a thread child in a C regex holding the GIL)
cannot carry it out. So each process attempt also carries a kill-by time,
deadline + grace + term + a margin, and the worker enforces it itself: past
it, the worker kills what runs below it and its whole process group, itself
included. Zeus still decides and settles; the backstop only makes sure the
kill happens.

Two mechanisms, because agent code in the worker may hold the worker's own
GIL: a thread that wakes at the kill-by time, and a kernel interval timer
(`SIGALRM`, default action: the kernel ends the process, no Python needed)
a second later, armed only while `SIGALRM` has its default action (agent
code that uses `signal.alarm` itself keeps it, and the thread alone guards).

The same thread keeps the worker's other times (`watch`): its host's lease
(`actors.backends.process.worker_lease`). It never writes to a pipe, so a host that
stopped reading (frozen, its pipes full) cannot hold it up.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

from actors.clock import report_error
from actors.osproc import kill_descendants

__all__ = ["MARGIN_S", "Backstop", "kill_by"]

# `signal.getsignal` makes the handler an enum on every call, once per job; that of the
# C module `signal` wraps (imported by it) returns it as it is: SIG_DFL is the int 0.
_getsignal: Callable[[int], object] = getattr(
    sys.modules.get("_signal"), "getsignal", signal.getsignal
)
_SIG_DFL = int(signal.SIG_DFL)

MARGIN_S = 1.0  # past deadline + grace + term: time for the host's own ladder first
_KERNEL_AFTER_S = 1.0  # the kernel timer's lag behind the thread
_LONGEST_S = 30 * 24 * 3600.0  # a kill-by time further away than this is not armed


def kill_by(
    deadline: float, grace_s: float, term_s: float, *, now: float | None = None
) -> float | None:
    """The worker's hard kill-by time (monotonic), or None when there is none to keep.

    `now`: `time.monotonic()` if the caller has just read it (once a job, in Zeus's thread).
    """
    when = deadline + (grace_s if grace_s > 0.0 else 0.0) + (term_s if term_s > 0.0 else 0.0)
    when += MARGIN_S
    if not math.isfinite(when) or when - (time.monotonic() if now is None else now) > _LONGEST_S:
        return None
    return when


def _kill_everything() -> None:
    """Everything below this worker, then its group (itself included)."""
    kill_descendants()
    with contextlib.suppress(OSError):
        if os.getpgid(0) == os.getpid():
            os.killpg(0, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


class Backstop:
    """Armed for one attempt at a time (the worker's main thread arms and disarms it)."""

    def __init__(self, fire: Callable[[], None] = _kill_everything) -> None:
        self._fire = fire
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._when: float | None = None  # armed: the kill-by time; None: disarmed
        self._latest: float | None = None  # the last kill-by time armed, disarmed or not
        self._thread: threading.Thread | None = None
        # When the thread looks next (None: only when notified). A job whose kill-by time
        # is no sooner does not wake it: back-to-back jobs cost no hand-over between threads.
        self._wake_at: float | None = None
        self._kernel = False
        self._look: Callable[[float], float | None] | None = None  # `watch`
        self.looks = 0  # how many times the thread has looked (tests read it)

    def arm(self, when: float | None) -> None:
        """Kill the worker at monotonic time `when` unless `disarm()` comes first."""
        if when is None:
            return
        with self._lock:
            self._when = self._latest = when
            self._start_or_notify(when)
        self._kernel = False
        if _getsignal(signal.SIGALRM) == _SIG_DFL:
            try:
                signal.setitimer(
                    signal.ITIMER_REAL, max(0.001, when - time.monotonic() + _KERNEL_AFTER_S)
                )
                self._kernel = True
            except (ValueError, OSError):  # not the main thread, or no itimer
                pass

    def watch(self, look: Callable[[float], float | None]) -> None:
        """Keep another time in this thread: `look(now)` runs at each of its looks (with
        this backstop's lock held) and returns when it wants the next one (None: when
        poked, or at the next look anyway); if it raises, the backstop fires (what cannot
        tell whether the worker may run on does not let it). Starts the thread if needed."""
        with self._lock:
            self._look = look
            self._start_or_notify(None)

    def poke(self) -> None:
        """Make the thread look now (what `watch` keeps has changed)."""
        with self._lock:
            self._cond.notify()

    def _start_or_notify(self, when: float | None) -> None:
        """Called with the lock held: start the thread, or wake it if it would look after
        `when` (None: wake it)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="zeus-backstop",
                                            daemon=True)
            self._thread.start()
        elif when is None or self._wake_at is None or when < self._wake_at:
            self._cond.notify()

    def disarm(self) -> None:
        # No lock: the thread reads `_when` once per look, the old value or None, and
        # a look that found the old value past its time fires either way.
        self._when = None
        if self._kernel:
            self._kernel = False
            try:  # noqa: SIM105 - once a job: suppress() costs more than the call
                signal.setitimer(signal.ITIMER_REAL, 0)
            except (ValueError, OSError):
                pass

    def _watch(self) -> None:
        """The backstop thread: sleeps until the armed time; fires if still armed then.

        Disarmed, it still sleeps until the last time armed, not until notified:
        otherwise the next job's `arm()` would wake it, and with short jobs it
        would find each one disarmed again and wake for every job. Kill-by times
        come later job after job, so a worker's jobs keep it asleep.
        """
        with self._lock:
            while True:
                self.looks += 1
                when, now = self._when, time.monotonic()
                if when is not None and when <= now:
                    break
                look = when if when is not None else self._latest
                if look is not None and look <= now:
                    look = None
                if self._look is not None:
                    try:
                        other = self._look(now)  # may end the worker
                    except Exception as exc:  # noqa: BLE001 - it cannot tell: none runs on
                        report_error(exc, None)
                        break
                    if other is not None and (look is None or other < look):
                        look = other
                if look is None:
                    self._wake_at = None
                    self._cond.wait()
                else:
                    self._wake_at = min(look, now + 3600.0)
                    self._cond.wait(self._wake_at - now)
        self._fire()
