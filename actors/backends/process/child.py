"""Zeus's handle on one attempt in a worker process (`ProcessChild`), and `report`, which
passes what the attempt reports up to its owner.

The handle owns the attempt's state; the worker table (`actors.backends.process.worker_table`)
binds it to a worker and carries out its stops, through the small `AttemptStops`
interface that the handle is given: the handle never reaches into the backend.
"""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING, Protocol

from actors.backends import frames
from actors.backends.base import ChildHandle, ChildSpec, Send
from actors.mail import Mail

if TYPE_CHECKING:
    from actors.backends.process.worker_table import WorkerRecord

__all__ = ["AttemptStops", "ProcessChild", "report"]


class AttemptStops(Protocol):
    """What a `ProcessChild` asks of the worker table that holds it (Zeus's thread)."""

    def cancel(self, child: ProcessChild) -> None:
        """The cooperative cancel, down its worker's control pipe (or once it has one)."""

    def kill(self, child: ProcessChild) -> None:
        """The kill ladder on its worker (or, still starting, no process at all)."""

    def mail(self, child: ProcessChild, frame: bytes) -> None:
        """Post a `MailTo` frame to its worker, or keep it until the worker exists."""


class ProcessChild(ChildHandle):
    """Zeus's handle on one attempt in a worker process. `cancel`/`kill` return at once."""

    starts_later = True  # when its worker takes the job (`Started`), not as it is sent

    def __init__(self, stops: AttemptStops, spec: ChildSpec, send: Send) -> None:
        self.spec = spec
        self.attempt_id = spec.attempt_id
        self.send = send
        self._stops = stops
        self.worker: WorkerRecord | None = None
        # Guarded by the worker table's lock (`finished` is written by the hub thread
        # only, or before the attempt reaches a worker):
        self.finished = False
        self.cancel_t: float | None = None
        self.kill_t: float | None = None
        self.progress = 0
        self.read_error: str | None = None
        self.hard_stop: float | None = None  # the worker kills itself then (`_backstop`)
        self.early_mail: list[bytes] = []  # sent before its worker existed (under the lock)
        self.stop_cause: str | None = None  # why Zeus cancelled it (`cancel_for`)

    @property
    def pid(self) -> int | None:
        return self.worker.pid if self.worker is not None else None

    @property
    def pid_start_time(self) -> float | None:  # type: ignore[override]
        """The worker's start time (as psutil's `create_time()`): a pid plus this names it."""
        return self.worker.start_time if self.worker is not None else None

    @property
    def killable(self) -> bool:
        # Before its worker exists too (the spawner then never starts it); not once it
        # was refused without a process.
        return self.worker is not None or not self.finished

    def cancel(self) -> None:
        """Set the child Context's cancel event (a message down the pipe)."""
        self._stops.cancel(self)

    def cancel_for(self, cause: str) -> None:
        """`cancel()`, with its cause: the worker reports it in the attempt's `Finished`."""
        self.stop_cause = cause
        self._stops.cancel(self)

    def put_mail(self, mail: Mail) -> None:
        """Send the owner's message down the control pipe (`ctx.receive()` reads it)."""
        data = mail.encode("process").pickled
        assert data is not None
        self._stops.mail(self, frames.mail_frame(self.attempt_id, data))

    def kill(self) -> None:
        """SIGTERM to the worker's group now, SIGKILL after `term_s`; `Finished` after reaping."""
        self._stops.kill(self)

    # -- its state's changes: the worker table makes them, under its lock ------------
    @property
    def stopped(self) -> bool:
        """Whether a cancel or kill was asked for it."""
        return self.cancel_t is not None or self.kill_t is not None

    def bound_to(self, worker: WorkerRecord | None) -> None:
        """It runs on `worker` from now on (None: the job never reached it)."""
        self.worker = worker

    def asks_cancel(self, now: float) -> bool:
        """Whether its cooperative cancel is still to be sent (and note when it was asked)."""
        if self.finished or self.cancel_t is not None:
            return False
        self.cancel_t = now
        return True

    def asks_kill(self, now: float) -> None:
        """Note when its kill was asked (the first time)."""
        if self.kill_t is None:
            self.kill_t = now

    def ends(self) -> bool:
        """Whether this is its end (False if it had already ended)."""
        if self.finished:
            return False
        self.finished = True
        return True

    def unreadable(self, error: str) -> bool:
        """What its worker sends could not be read: whether this is the first such error
        (its end becomes it)."""
        if self.read_error is not None:
            return False
        self.read_error = error
        return True


def report(child: ProcessChild, message: object) -> None:
    """Pass `message` up to the attempt's owner; a failing receiver is printed, never raised."""
    try:
        child.send(message)
    except Exception:  # noqa: BLE001 - a failing receiver must not stop the hub
        traceback.print_exc()
