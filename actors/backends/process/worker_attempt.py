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
