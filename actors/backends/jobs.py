"""A job: what the code of one attempt runs with (`Job`, and the `Context` it makes), and
how it goes down a worker's jobs pipe, written by the supervisor (`encode_job`, in
Zeus's thread) and read in the worker (`decode_job`, `WorkStore`, in its main thread).

On the pipe a job is the `Job`'s fields pickled as one tuple (`_wire.dumps`), at
the end of a `Run` frame (`actors.backends.frames`), after the work function's
part. The worker imports this module: it stays light.

A job of a backend with a store carries `orphan`: how the worker waits to be picked
up if its supervisor dies during or after it (`actors.backends.process.worker_wait`). A
job of a backend whose host holds a lease carries `lease`: where the worker reads the
lease's deadline, and the attempt's grace and term (`actors.backends.process.worker_lease`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from actors import wire as _wire
from actors.backends.backstop import kill_by
from actors.backends.base import ChildSpec
from actors.clock import Clock, SystemClock
from actors.context import Context
from actors.mail import Flag, Inbox
from actors.models import Brief

__all__ = ["Job", "Orphan", "WorkStore", "decode_job", "encode_job", "real_deadline"]

# How a worker whose supervisor died waits to be picked up: (grace_s, the directory it
# listens in, the key a connector must know, term_s of its kill ladder once the grace
# is over). None: it stops at once, as without a store.
Orphan = tuple[float, str, bytes, float]


class Job(NamedTuple):
    """A job as the worker reads it (the work function aside)."""

    brief: Brief
    agent: str
    delegation_id: str
    attempt: int
    deadline: float  # on the worker's monotonic clock
    interval: float  # heartbeat_interval_s
    previous_partials: list[Any]
    depth: int
    framing: str
    session_key: str | None
    session: dict[str, Any] | None  # the session to start from, if the brief carries one
    previous_error: str | None
    reasoning_effort: str | None
    budget_left: dict[str, float] | None
    hard_stop: float | None  # the worker's kill-by time (`_backstop`)
    orphan: Orphan | None
    # When `deadline` and `hard_stop` were reckoned (worker's monotonic clock), and the
    # latest the deadline may move to: a worker that takes the job later moves both on
    # by its wait (`started`). None: they hold as they are (the thread backend).
    reckoned_at: float | None = None
    cap: float = math.inf
    # The host's lease file and the attempt's grace_s and term_s; None: no lease.
    lease: tuple[str, float, float] | None = None
    epoch: int = 1  # the delegation's epoch (`ctx.fence`); a reattached worker keeps it
    previous_blocker: str | None = None  # `ctx.previous_blocker`, `ctx.note`
    note: str | None = None

    @classmethod
    def from_spec(cls, spec: ChildSpec, *, deadline: float, hard_stop: float | None) -> Job:
        """The job of the attempt `spec`, with its deadline on the clock it will run on."""
        return cls._make(_fields(spec, spec.brief, deadline, hard_stop, None))

    def started(self, now: float) -> Job:
        """The job as it starts to run at `now` (monotonic): its deadline is the running
        time it was given from now, no later than its cap; its kill-by time keeps its
        distance from the deadline (docs/design.md, "An attempt's clock")."""
        if self.reckoned_at is None or now <= self.reckoned_at:
            return self
        deadline = min(self.deadline + (now - self.reckoned_at), self.cap)
        if deadline <= self.deadline:
            return self
        hard_stop = None if self.hard_stop is None else self.hard_stop + (deadline - self.deadline)
        return self._replace(deadline=deadline, hard_stop=hard_stop, reckoned_at=now)

    def context(
        self,
        attempt_id: str,
        *,
        clock: Clock,
        send: Callable[[object], None],
        cancel_event: Flag,
        session: dict[str, Any] | None,
        inbox: Inbox,
    ) -> Context:
        """The `Context` the work function runs with (in the worker, or the thread backend)."""
        return Context(
            brief=self.brief,
            agent=self.agent,
            delegation_id=self.delegation_id,
            attempt=self.attempt,
            attempt_id=attempt_id,
            deadline=self.deadline,
            clock=clock,
            send=send,
            cancel_event=cancel_event,
            heartbeat_interval_s=self.interval,
            session=session,
            previous_partials=self.previous_partials,
            depth=self.depth,
            framing=self.framing,
            previous_error=self.previous_error,
            reasoning_effort=self.reasoning_effort,
            budget_left=self.budget_left,
            inbox=inbox,
            epoch=self.epoch,
            previous_blocker=self.previous_blocker,
            note=self.note,
        )


def _fields(
    spec: ChildSpec, brief: Any, deadline: float, hard_stop: float | None, orphan: Orphan | None,
    reckoned_at: float | None = None, cap: float = math.inf, lease: str | None = None,
) -> tuple[Any, ...]:
    """The fields of the job of `spec`, in `Job`'s order, with `brief` as given."""
    return (
        brief, spec.agent, spec.delegation_id, spec.attempt, deadline,
        spec.heartbeat_interval_s, list(spec.previous_partials), spec.depth, spec.framing,
        spec.session_key, spec.session, spec.previous_error, spec.reasoning_effort,
        spec.budget_left, hard_stop, orphan, reckoned_at, cap,
        None if lease is None else (lease, spec.grace_s, spec.term_s), spec.epoch,
        spec.previous_blocker, spec.note,
    )  # fmt: skip


def real_deadline(spec: ChildSpec, now: float | None = None) -> tuple[float, float | None]:
    """The attempt's deadline on the real monotonic clock, and the worker's kill-by time
    (`now`: `time.monotonic()`, if the caller has just read it)."""
    # The spec's clock may be a fake one; the child lives on the real one.
    if now is None:
        now = time.monotonic()
    deadline = now + (spec.deadline - spec.clock.now())
    # The worker's own kill-by time (`_backstop`), on a real clock only: a fake
    # deadline says nothing about real time.
    hard_stop = (
        kill_by(deadline, spec.grace_s, spec.term_s, now=now)
        if isinstance(spec.clock, SystemClock) else None
    )  # fmt: skip
    return deadline, hard_stop


def encode_job(
    spec: ChildSpec, reattach: tuple[float, str, bytes] | None = None, lease: str | None = None
) -> tuple[bytes, float | None]:
    """The attempt but its work function, pickled, and the worker's kill-by time;
    `CrossingError` if it cannot cross. `reattach`: (grace_s, directory, key) of the
    backend's store, which the job's `orphan` carries with the spec's `term_s`. `lease`:
    the path of the host's lease file, if it holds one."""
    now = time.monotonic()
    deadline, hard_stop = real_deadline(spec, now)
    cap = math.inf if spec.deadline_cap is None else now + (spec.deadline_cap - spec.clock.now())
    orphan = None if reattach is None else (*reattach, spec.term_s)
    # The fields go as a plain tuple, the brief as its pickling state (no Job on the way).
    fields = _fields(spec, _wire.brief_to_wire(spec.brief), deadline, hard_stop, orphan,
                     now, cap, lease)  # fmt: skip
    what = "the attempt's brief, previous partial results or session"
    return _wire.dumps(fields, what), hard_stop


def decode_job(data: bytes | memoryview) -> Job:
    """The job `encode_job` wrote (raises whatever unpickling raises)."""
    brief, *rest = _wire.loads(data)
    return Job(_wire.brief_from_wire(brief), *rest)


class WorkStore:
    """The work functions a worker was sent, by token (the worker's main thread)."""

    def __init__(self) -> None:
        # The function, or its bytes until they unpickle.
        self._works: dict[int, Any] = {}

    def get(self, flush: bool, token: int, data: bytes) -> Any:
        """The work function: `data` unpickled, or the one kept under `token` if `data` is empty.

        Token 0: not to be kept. A function is kept once it has been unpickled;
        bytes that failed to unpickle are kept as bytes and tried again next time.
        """
        if flush:
            self._works.clear()
        if not token:
            return _wire.loads(data)
        if data:
            self._works[token] = data
        work = self._works.get(token)
        if work is None:
            raise LookupError(f"work function {token} was never sent to this worker")
        if isinstance(work, bytes):
            work = _wire.loads(work)
            self._works[token] = work
        return work
