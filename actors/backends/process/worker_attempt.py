"""`RunningAttempt`: the attempt a worker process runs, as its threads share it (runs in
the worker: its main thread makes one per job; the receiver, heartbeat and waiting
threads read it under the worker's locks), and the `Finished` of an attempt that failed
in the worker itself (`unreadable`, `crossing_failed`)."""

from __future__ import annotations

import math
import traceback as tb

from actors.context import Context
from actors.errors import describe_error
from actors.mail import CancelSignal, Inbox
from actors.models import AttemptOutcome
from actors.protocol import Finished

__all__ = ["RunningAttempt", "crossing_failed", "unreadable"]


def unreadable(attempt_id: str, exc: BaseException, pid: int) -> Finished:
    """The attempt's job could not be unpickled here (e.g. its work's module fails to import)."""
    return Finished(
        attempt_id,
        AttemptOutcome.error,
        error="the attempt (its work function, brief, previous partial results or session) "
        f"could not be unpickled in the child process: {describe_error(exc)}",
        error_type=type(exc).__name__,
        traceback="".join(tb.format_exception(exc)),
        pid=pid,
    )


def crossing_failed(attempt_id: str, error: str, pid: int, finished: Finished) -> Finished:
    """The attempt reported (or returned) what cannot cross back: it fails with `error`."""
    return Finished(attempt_id, AttemptOutcome.error, error=error, error_type="CrossingError",
                    pid=pid, progress=finished.progress)  # fmt: skip


class RunningAttempt:
    """The attempt a worker is running. `ctx` is set once its job is loaded."""

    __slots__ = ("attempt_id", "cancel", "crossing_error", "ctx", "delegated", "inbox",
                 "interval", "lease_ended", "next_beat", "pending", "stop_cause")  # fmt: skip

    def __init__(self, attempt_id: str) -> None:
        self.attempt_id = attempt_id
        self.cancel = CancelSignal()
        self.inbox = Inbox()
        self.ctx: Context | None = None
        self.interval = 1.0
        self.next_beat = math.inf
        # Set when the agent reported something that cannot cross; fails the attempt.
        self.crossing_error: str | None = None
        self.delegated = 0  # `ctx.delegate` requests sent: the last one's ordinal (send lock)
        self.pending: dict[int, bytes] | None = None  # unanswered ones' frames (state lock)
        self.stop_cause: str | None = None  # why its supervisor cancelled it, if it said
        self.lease_ended = False  # cancelled by its worker: its host's lease ran out

    # Its changes: each says which thread makes it, under which of the worker's locks.
    def told_why(self, cause: str | None) -> None:
        """Why its supervisor cancelled it (the first cause told; the state lock)."""
        self.stop_cause = self.stop_cause or cause

    def loaded(self, ctx: Context, interval: float, now: float) -> None:
        """Its job is loaded (the main thread, the state lock): its first beat is due
        `interval` from `now`."""
        self.ctx, self.interval, self.next_beat = ctx, interval, now + interval

    def unloaded(self) -> None:
        """It ended (the main thread, both locks): its context goes, for the context's
        `send` holds the attempt, and the two would be a cycle left to the collector."""
        self.ctx = None

    def beat_due(self, now: float) -> bool:
        """Whether its beat is due at `now`; if so the next is one interval on (the
        heartbeat thread, the state lock)."""
        if self.ctx is None or self.next_beat > now:
            return False
        self.next_beat = now + self.interval
        return True

    def cannot_cross(self, error: str) -> None:
        """What it reported cannot cross (the work's thread): it fails with the first such error."""
        self.crossing_error = self.crossing_error or error

    def asked(self, request_id: int, data: bytes) -> None:
        """A `ctx.delegate` request left (the send lock; its frame kept under the state
        lock until it is answered)."""
        self.delegated += 1
        pending = self.pending = self.pending or {}
        pending[request_id] = data

    def lease_ran_out(self) -> None:
        """Its worker cancels it: its host's lease ran out (the backstop thread, the state lock)."""
        self.lease_ended = True
