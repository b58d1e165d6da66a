"""Zeus's timers: messages to its own mailbox later, each attempt's one timer at its
deadline or stale moment, and how late the timers fall due (the mailbox's lag).
Every method runs in Zeus's actor thread (the clock's timer thread only sends)."""

from __future__ import annotations

from collections.abc import Callable

from actors.clock import Clock, Timer, check_when
from supervisor.core.messages import AttemptDue
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
        and re-arms when it comes (`AttemptDue`). The timer holds the attempt's id,
        not the attempt: once cancelled it keeps nothing of the delegation alive.
        `TimerError` if its deadline or stale moment is not a finite time.
        """
        when = check_when(min(a.deadline, a.watch.stale_at(a.stale_after_s)))
        if a.watch.progress < 0:
            when = min(when, self._clock.now() + a.stale_after_s)
        if a.due is not None:
            a.due.cancel()  # moved: the first sign of life, a long tool call ending
        due = AttemptDue(a.id, when)
        tell = self._tell
        a.due_at = when
        a.due = self._clock.call_at(when, lambda: tell(due))
        a.timers.append(a.due)

    def observe_lag(self, due_at: float) -> None:
        """A timer fell due at `due_at` and is handled now: warn when the mailbox lags."""
        self.lag, warn = self.lag.observe(due_at, self._clock.now())
        if warn:
            self._events.emit("supervisor.mailbox_lag", lag_s=round(self.lag.last_s, 6),
                              threshold_s=LAG_WARN_S, queued=self._queued())
