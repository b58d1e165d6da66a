"""Zeus's handle on one attempt on Ray (`RayChild`), and how its end becomes a `Finished`:
the value the child returned, or what Ray said (a kill, a worker or node death).

Runs in Zeus's process (the backend's pump thread builds the endings). The handle
asks its stops of the backend through the small `RayStops` interface it is given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Protocol

from actors.backends import frames
from actors.backends.base import ChildHandle, ChildSpec, Send
from actors.backends.ray.causes import describe_ray_failure
from actors.backends.ray.place import never_granted
from actors.mail import Mail
from actors.models import AttemptOutcome
from actors.protocol import Finished

__all__ = ["RayChild", "RayStops", "Session", "ended_by_ray", "returned"]


class Session:
    """A warm session actor: its Ray handle, and where it runs once known."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.pid: int | None = None
        self.node: str | None = None

    def placed_at(self, pid: int, node: str) -> None:
        """The pump thread: where its worker runs, as the child said."""
        self.pid, self.node = pid, node


class RayStops(Protocol):
    """What a `RayChild` asks of the backend that started it (Zeus's thread)."""

    def cancel_attempt(self, child: RayChild) -> None:
        """The cooperative cancel (through the reporter, or the session actor)."""

    def kill_attempt(self, child: RayChild) -> None:
        """`ray.cancel(force=True)` (a task) or `ray.kill` (a session actor)."""

    def mail_attempt(self, child: RayChild, data: bytes) -> None:
        """The owner's message, pickled, on its way to the child's `ctx.receive()`."""


class RayChild(ChildHandle):
    """Zeus's handle on one attempt on Ray. `cancel`/`kill` return at once.

    Fields are written by Zeus's thread (`cancel_t`, `kill_t`, `mailed`) and the
    pump thread (the rest), under the backend's lock where both look.
    """

    pid: int | None = None  # its worker's, once it is placed

    def __init__(
        self, stops: RayStops, spec: ChildSpec, send: Send, journal_fields: Mapping[str, str]
    ) -> None:
        self.spec = spec
        self.attempt_id = spec.attempt_id
        self.send = send
        self._stops = stops
        self.journal_fields = journal_fields
        self.ref: Any = None
        self.session: Session | None = None
        self.node: str | None = None
        self.placing = True  # until the child says where it runs
        self.received = 0  # messages of this attempt drained from the reporter
        self.progress = 0
        self.finished = False
        # Its end, held until it may go: (Finished, messages it posted, when Ray said so).
        self.held: tuple[Finished, int, float] | None = None
        self.cancel_t: float | None = None
        self.kill_t: float | None = None
        self.read_error: str | None = None
        self.mailed = 0  # the owner's messages sent to it (the reporter keeps them until asked)

    @property
    def killable(self) -> bool:
        return self.ref is not None

    # -- Zeus's thread, under the backend's lock -------------------------------------
    def submitted(self, ref: Any, session: Session | None = None) -> None:
        """Ray took the attempt: its task's (or session actor call's) object ref. A warm
        session already placed tells where the attempt runs."""
        self.ref, self.session = ref, session
        if session is not None:
            self.pid, self.node = session.pid, session.node
            self.placing = session.pid is None

    def asks_cancel(self, now: float) -> bool:
        """Whether the cooperative cancel is still to be sent (and note when it was asked)."""
        if self.finished or self.cancel_t is not None or self.ref is None:
            return False
        self.cancel_t = now
        return True

    def asks_kill(self, now: float) -> bool:
        """Whether the kill is still to be done (and note when it was asked)."""
        if self.finished or self.kill_t is not None or self.ref is None:
            return False
        self.kill_t = now
        return True

    def next_mail(self, data: bytes) -> frames.MailTo | None:
        """The owner's next message to it, numbered; None once it has ended or never ran."""
        if self.finished or self.ref is None:
            return None
        self.mailed += 1
        return frames.MailTo(self.attempt_id, data, self.mailed)

    # -- the pump thread -------------------------------------------------------------
    def placed_at(self, pid: int, node: str) -> None:
        """The child said where it runs (and so where its warm session does)."""
        self.pid, self.node, self.placing = pid, node, False
        if self.session is not None:
            self.session.placed_at(pid, node)

    def drained(self) -> None:
        """One more of its messages came out of the reporter."""
        self.received += 1

    def reported(self, progress: int) -> None:
        """A message of its arrived, at this progress count."""
        self.progress = max(self.progress, progress)

    def unreadable(self, error: str) -> None:
        """A message of its could not be read here: its end becomes this error (the first)."""
        self.read_error = self.read_error or error

    def hold(self, finished: Finished, posted: int, now: float) -> None:
        """Ray said it ended: keep its `Finished` until its messages are in."""
        self.held = (finished, posted, now)

    def let_go(self) -> None:
        """Its held end is on its way."""
        self.held = None

    def ends(self) -> bool:
        """Whether this is its end (False if it had already ended); under the backend's lock."""
        if self.finished:
            return False
        self.finished = True
        return True

    def cancel(self) -> None:
        """Set the child Context's cancel event (through the reporter or its session actor)."""
        self._stops.cancel_attempt(self)

    def put_mail(self, mail: Mail) -> None:
        """The owner's message, to the child's `ctx.receive()` (through the reporter, or
        its session actor)."""
        data = mail.encode("ray").pickled
        assert data is not None
        self._stops.mail_attempt(self, data)

    def kill(self) -> None:
        """`ray.cancel(force=True)` (a task) or `ray.kill` (a session actor)."""
        self._stops.kill_attempt(self)


def returned(child: RayChild, data: bytes, now: float) -> Finished:
    """The `Finished` the child returned (its attempt id and pid as Zeus knows them)."""
    if child.kill_t is not None:
        return ended_by_ray(child, None, now)
    try:
        finished = frames.read_report(data)
        assert isinstance(finished, Finished)
    except Exception as exc:  # noqa: BLE001 - a result class Zeus's process cannot import
        finished = Finished(child.attempt_id, AttemptOutcome.error,
                            error=f"the result could not be read in the supervisor: {exc}",
                            error_type=type(exc).__name__)
    finished = dataclasses.replace(finished, attempt_id=child.attempt_id,
                                   pid=finished.pid or child.pid)
    if child.read_error is not None:
        return Finished(child.attempt_id, AttemptOutcome.error, error=child.read_error,
                        error_type="CrossingError", pid=child.pid,
                        progress=finished.progress)
    if child.cancel_t is not None and finished.outcome is AttemptOutcome.cancelled:
        return dataclasses.replace(finished, killed="cooperative",
                                   kill_latency_s=now - child.cancel_t)
    return finished

def ended_by_ray(child: RayChild, exc: BaseException | None, now: float) -> Finished:
    """The `Finished` of an attempt that Zeus killed (exc may be None) or Ray ended."""
    if child.kill_t is not None:
        error = never_granted(child.spec.resources) if child.placing else None
        return Finished(child.attempt_id, AttemptOutcome.cancelled, pid=child.pid,
                        killed="kill", kill_latency_s=now - child.kill_t,
                        progress=child.progress, error=error,
                        error_type="ResourcesNeverGranted" if error else None)
    assert exc is not None
    ending = describe_ray_failure(exc)
    text = str(exc).strip().splitlines()
    detail = text[-1] if text else type(exc).__name__
    return Finished(child.attempt_id, ending.outcome, pid=child.pid,
                    error=f"{ending.cause} ({ending.error_type}): {detail}"[:2000],
                    error_type=ending.error_type, progress=child.progress)
