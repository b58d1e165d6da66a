"""`RunningAttempt`: the attempt a worker process runs, as its threads share it (runs in
the worker: its main thread makes one per job; the receiver, heartbeat and waiting
threads read it under the worker's locks)."""

from __future__ import annotations

import math

from actors.context import Context
from actors.mail import CancelSignal, Inbox

__all__ = ["RunningAttempt"]


class RunningAttempt:
    """The attempt a worker is running. `ctx` is set once its job is loaded."""

    __slots__ = ("attempt_id", "cancel", "crossing_error", "ctx", "delegated", "inbox",
                 "interval", "next_beat", "pending", "stop_cause")  # fmt: skip

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
