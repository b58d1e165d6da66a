"""Zeus's timers: messages to its own mailbox later, each attempt's one timer at its
deadline or stale moment, and how late the timers fall due (the mailbox's lag).
Every method runs in Zeus's actor thread (the clock's timer thread only sends).

The attempts' timers are kept here, not on the clock: a heap in Zeus's thread (no
lock, no `Timer` and closure per attempt), and on the clock one timer at the soonest
of them, whose message (`AttemptsDue`) hands Zeus those that fell due (`due()`).
Most are never due (the attempt ends first): an ended attempt's entry is dropped
when it comes up, or in bulk when they pile up, or all at once when none is left.
The clock's timer is not cancelled when the last attempt ends: the next attempt, due
later, needs no new one (a host that runs one or two at a time would otherwise set a
clock timer and wake the clock's thread for each attempt), and if none comes it rings
once, finds nothing due, and is not set again.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from actors.clock import Clock, Timer, check_when
from supervisor.core.messages import AttemptDue, AttemptsDue
from supervisor.core.state import Attempt
from supervisor.journal.events import EventLog
from supervisor.rules.lag import WARN_S as LAG_WARN_S
from supervisor.rules.lag import MailboxLag

__all__ = ["Timers"]


class Timers:
    """Sets timers on `clock` whose messages go to the mailbox through `tell`."""

    def __init__(
        self,
        clock: Clock,
        tell: Callable[[object], None],
        events: EventLog,
        queued: Callable[[], int | None],
    ) -> None:
        self._clock = clock
        self._tell = tell
        self._events = events
        self._queued = queued  # how many messages wait in the mailbox, for the lag warning
        self.lag = MailboxLag()
        # The attempts' timers: (when, seq, attempt id), soonest first; the seq of each
        # attempt's live entry (others are dropped as they come up); the clock's one timer.
        self._due: list[tuple[float, int, str]] = []
        self._live: dict[str, int] = {}
        self._seq = itertools.count()
        self._ring: Timer | None = None
        self._ring_at = float("inf")
        self._rang = AttemptsDue()

    def after(self, delay: float, message: object) -> Timer | None:
        """`message` to the mailbox in `delay` s; at once (and an error event) if no timer
        can be set for that delay, so a wait that cannot be kept never stops a delegation."""
        tell = self._tell
        try:
            return self._clock.call_at(self._clock.now() + delay, lambda: tell(message))
        except Exception as exc:  # noqa: BLE001 - e.g. TimerError for a delay of inf or nan
            self.refused(exc, type(message).__name__)
            tell(message)
            return None

    def refused(self, exc: BaseException, what: str) -> None:
        """A timer could not be set: said in the journal."""
        self._events.emit("zeus.internal_error", message=what,
                          error=f"a timer could not be set: {type(exc).__name__}: {exc}")

    def arm(self, a: Attempt) -> None:
        """One timer per attempt, at its deadline or the moment it would go stale.

        Before its first sign of life it is due no later than `stale_after_s` from now
        (the soonest it could go stale), so that sign moves no timer: the timer checks
        and re-arms when it comes (`AttemptDue`). Arming again moves it. The timer holds
        the attempt's id, not the attempt: once ended it keeps nothing of the delegation
        alive. `TimerError` if its deadline or stale moment is not a finite time.
        """
        when = check_when(min(a.deadline, a.watch.stale_at(a.stale_after_s)))
        if a.watch.progress < 0:
            when = min(when, self._clock.now() + a.stale_after_s)
        seq = next(self._seq)
        heapq.heappush(self._due, (when, seq, a.id))
        self._live[a.id] = seq  # an earlier entry of the same attempt is one no more
        a.due_at = when
        if when < self._ring_at:
            self._ring_for(when)
        if len(self._due) > 64 and len(self._due) > 2 * len(self._live):
            live = self._live
            self._due = [e for e in self._due if live.get(e[2]) == e[1]]
            heapq.heapify(self._due)

    def disarm(self, a: Attempt) -> None:
        """The attempt ended: neither its timer nor its grace period's falls due."""
        if a.grace is not None:
            a.grace.cancel()
        if self._live.pop(a.id, None) is not None and not self._live:
            self._due.clear()  # nothing left to time (the clock's timer stays: see above)

    def due(self) -> list[AttemptDue]:
        """The clock's timer rang (`AttemptsDue`): each attempt whose timer fell due by
        now, soonest first, with when it did; the clock's timer moves to the next."""
        now = self._clock.now()
        heap, live = self._due, self._live
        out: list[AttemptDue] = []
        while heap and heap[0][0] <= now:
            when, seq, attempt_id = heapq.heappop(heap)
            if live.get(attempt_id) == seq:
                del live[attempt_id]
                out.append(AttemptDue(attempt_id, when))
        while heap and live.get(heap[0][2]) != heap[0][1]:
            heapq.heappop(heap)  # ended or moved since: not worth a ring
        if heap and (self._ring_at <= now or heap[0][0] < self._ring_at):
            self._ring_for(heap[0][0])  # (a ring still to come is kept: it comes sooner)
        elif not heap:
            self._stop_ring()
        return out

    def _stop_ring(self) -> None:
        """No attempt's timer is left: the clock's one timer for them goes."""
        if self._ring is not None:
            self._ring.cancel()
        self._ring, self._ring_at = None, float("inf")

    def _ring_for(self, when: float) -> None:
        """The clock's one timer for the attempts, moved to `when` (rung at once if that
        has passed: a fake clock runs a timer only as it moves past it)."""
        if self._ring is not None:
            self._ring.cancel()
        tell, message = self._tell, self._rang
        self._ring_at = when
        if when <= self._clock.now():
            self._ring = None
            tell(message)
            return
        self._ring = self._clock.call_at(when, lambda: tell(message))

    def observe_lag(self, due_at: float) -> None:
        """A timer fell due at `due_at` and is handled now: warn when the mailbox lags."""
        self.lag, warn = self.lag.observe(due_at, self._clock.now())
        if warn:
            self._events.emit("supervisor.mailbox_lag", lag_s=round(self.lag.last_s, 6),
                              threshold_s=LAG_WARN_S, queued=self._queued())
