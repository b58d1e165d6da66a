"""What crosses a worker's pipes, as typed frames: every frame is made and read here.

Both sides import this module (the supervisor process, and the worker, which it
keeps light: it imports only `actors.wire` and the protocol). One frame is one
message of `actors.wire.write_frame`; its first byte (or, on the report pipe, the
first item of the pickled tuple) says which frame it is:

    jobs pipe       `Run`     J + attempt_id + NUL + `WORK_HEADER` + the work function's
                              bytes (none: the one kept under its token) + the job
                              (`actors.backends.jobs.encode_job`)
                    `Stop`    S (sent only to an idle worker)
    control pipe    `Cancel`  C + attempt_id [+ NUL + cause]: the cooperative cancel of that
                              attempt, and why
                    `MailTo`  M + attempt_id + NUL + message: the owner's (`ctx.receive()`)
                    `Reply`   R + request id (8 bytes) + reply: a `ctx.delegate()` answer
    report pipe     the child's messages as tuples (kind, *fields): `Heartbeat`,
                    `Partial`, `Charge`, `ToolCall`, `AgentSession`, and last
                    `Finished` (`pack`);
                    `Delegate` (DELEGATE, request id, brief, ordinal); first of all
                    `StartedAt` (STARTED, when, kill-by time): the worker took the job;
                    on Ray also `PlacedAt` (PLACED, pid, node), which says where the
                    attempt runs

A worker whose supervisor is gone waits to be picked up on a socket
(`actors.backends.process.worker_wait`); once a connector has authenticated:

    worker -> it    `Hello`   (HELLO, pid, start time, agent, attempt id, finished,
                              session key, lease file), pickled: what the worker holds
    it -> worker    `ATTACH_FRAME` (A) or `STOP_FRAME` (S: stop the job, exit), or
                    it hangs up and the worker waits on
    after A         the worker's held report frames in order, its unanswered
                    `Delegate`s again, `CAUGHT_UP_FRAME` (K); then the socket carries
                    what the three pipes carry, both ways (`is_job` tells a job apart)

A cancel or a message may overtake its job (another pipe): the worker keeps it
until the job comes. On Ray an attempt's job is one argument of its task
(`ray_job`, a dict pickled); the reporter carries the report frames, and its
control items are `Cancel` and `MailTo` values.
"""

from __future__ import annotations

import operator
import struct
from typing import Any, NamedTuple

from actors import wire as _wire
from actors.backends.base import ChildSpec
from actors.models import AttemptOutcome
from actors.protocol import AgentSession, Charge, Finished, Heartbeat, Partial, ToolCall

__all__ = [
    "ATTACH_FRAME",
    "CAUGHT_UP_FRAME",
    "DELEGATE",
    "PLACED",
    "STARTED",
    "STOP",
    "STOP_FRAME",
    "WORK_HEADER",
    "Cancel",
    "Delegate",
    "Hello",
    "MailTo",
    "Message",
    "PlacedAt",
    "Reply",
    "Run",
    "StartedAt",
    "Stop",
    "cancel_frame",
    "delegate_frame",
    "finished_frame",
    "hello_frame",
    "is_job",
    "mail_frame",
    "pack",
    "placed_frame",
    "ray_job",
    "read_control",
    "read_hello",
    "read_job",
    "read_ray_job",
    "read_report",
    "reply_frame",
    "report_frame",
    "run_frame",
    "started_frame",
    "unpack",
    "work_part",
]

_RUN, _STOP, _CANCEL, _MAIL, _REPLY = b"J", b"S", b"C", b"M", b"R"
_JOBS = (_RUN, _STOP)

# The work function's part of a `Run`: forget the functions kept, token (0: do not
# keep), size of its bytes (0: the one kept under that token); then the bytes.
WORK_HEADER = struct.Struct("!?QI")
_REQUEST = struct.Struct("!Q")


# -- the jobs pipe ------------------------------------------------------------------------


class Run(NamedTuple):
    """Run an attempt: its work function (by token, or its bytes) and its job."""

    attempt_id: str
    flush: bool  # forget the work functions kept first
    token: int  # 0: not to be kept
    work: bytes  # empty: the one kept under `token`
    job: memoryview  # `jobs.decode_job` reads it


class Stop:
    """Exit (an idle worker)."""

    __slots__ = ()


STOP = Stop()
STOP_FRAME = _STOP  # the `Stop` frame


def work_part(flush: bool, token: int, work: bytes) -> bytes:
    """The work function's part of a `Run` frame (`WORK_HEADER`, then its bytes)."""
    return WORK_HEADER.pack(flush, token, len(work)) + work


def run_frame(attempt_id: str, work: bytes, job: bytes) -> bytes:
    """A `Run` frame: `work` is what `work_part` made, `job` what `encode_job` made."""
    return _RUN + attempt_id.encode() + b"\0" + work + job


def is_job(data: bytes) -> bool:
    """Whether a frame from a socket that carries both pipes' frames is a job (`Run`, `Stop`)."""
    return data[:1] in _JOBS


def read_job(data: bytes) -> Run | Stop:
    """The frame a worker's main thread read from its jobs pipe."""
    if data[:1] == _STOP:
        return STOP
    head, _, payload = data.partition(b"\0")
    flush, token, size = WORK_HEADER.unpack_from(payload)
    start = WORK_HEADER.size
    return Run(head[1:].decode(), flush, token, payload[start : start + size],
               memoryview(payload)[start + size :])  # fmt: skip


# -- the control pipe ---------------------------------------------------------------------


class Cancel(NamedTuple):
    """The cooperative cancel of an attempt, and why its supervisor asks (`cause`: an
    `AttemptOutcome` value; the worker reports it in the attempt's `Finished`)."""

    attempt_id: str
    cause: str | None = None


class MailTo(NamedTuple):
    """The owner's message to an attempt (`_wire.dumps`'d, read by `ctx.receive()`).

    `seq` numbers an attempt's messages from 1 where they may arrive out of order
    (Ray's actors run calls concurrently); a pipe keeps the order (0).
    """

    attempt_id: str
    data: bytes
    seq: int = 0


class Reply(NamedTuple):
    """The answer to a `ctx.delegate()` (`_wire.dumps`'d)."""

    request_id: int
    payload: bytes


def cancel_frame(attempt_id: str, cause: str | None = None) -> bytes:
    return _CANCEL + attempt_id.encode() + (b"\0" + cause.encode() if cause else b"")


def mail_frame(attempt_id: str, data: bytes) -> bytes:
    return _MAIL + attempt_id.encode() + b"\0" + data


def reply_frame(request_id: int, payload: bytes) -> bytes:
    return _REPLY + _REQUEST.pack(request_id) + payload


def read_control(data: bytes) -> Cancel | MailTo | Reply | None:
    """The frame a worker's receiver thread read from its control pipe (None: unknown)."""
    kind = data[:1]
    if kind == _CANCEL:
        attempt_id, _, cause = data[1:].partition(b"\0")
        return Cancel(attempt_id.decode(), cause.decode() or None)
    if kind == _REPLY:
        (request_id,) = _REQUEST.unpack_from(data, 1)
        return Reply(request_id, data[1 + _REQUEST.size :])
    if kind == _MAIL:
        attempt_id, _, body = data[1:].partition(b"\0")
        return MailTo(attempt_id.decode(), body)
    return None


# -- the report pipe (and Ray's reporter) -------------------------------------------------

# The child's messages go as tuples (kind, *fields): a slotted dataclass would pickle
# through `dataclasses.fields()`, a call per field on every message each way.
Message = Heartbeat | Partial | Charge | ToolCall | Finished | AgentSession
_MESSAGES: tuple[type[Message], ...] = (Heartbeat, Partial, Charge, ToolCall, Finished,
                                        AgentSession)
_KIND = {cls: kind for kind, cls in enumerate(_MESSAGES)}
_FINISHED = _KIND[Finished]
_OUTCOMES = {outcome.value: outcome for outcome in AttemptOutcome}
_FIELDS = {cls: operator.attrgetter(*cls.__slots__) for cls in _MESSAGES}
DELEGATE = len(_MESSAGES)  # (DELEGATE, request id, brief): a `ctx.delegate()` request
PLACED = "placed"  # (PLACED, pid, node): where a Ray attempt runs
STARTED = "started"  # (STARTED, when, hard_stop): the worker took the job


class Delegate(NamedTuple):
    """A `ctx.delegate()` request from the child: the supervisor answers with a `Reply`.

    `ordinal` numbers the attempt's requests from 1 in the order they were made (a
    reattached orchestrator's requests are matched to what the store holds by it).
    """

    request_id: int
    brief: Any
    ordinal: int


class PlacedAt(NamedTuple):
    """Where a Ray attempt runs: its worker's pid and its node."""

    pid: int
    node: str


class StartedAt(NamedTuple):
    """The worker took the attempt's job: when (its monotonic clock, the host's), and its
    kill-by time from then (`actors.backends.backstop`; None: none)."""

    at: float
    hard_stop: float | None


def pack(message: Message) -> tuple[Any, ...]:
    """A protocol message as a plain tuple for the wire.

    A `Finished` carries its outcome as the plain string: an enum member pickles
    through `__reduce_ex__` and unpickles through a call of its class.
    """
    cls = type(message)
    fields = _FIELDS[cls](message)
    if cls is Finished:
        return (_FINISHED, fields[0], fields[1].value, *fields[2:])
    return (_KIND[cls], *fields)


def unpack(packed: tuple[Any, ...]) -> Message:
    """The protocol message that `pack` flattened."""
    kind = packed[0]
    if kind == _FINISHED:
        return Finished(packed[1], _OUTCOMES[packed[2]], *packed[3:])
    message: Message = _MESSAGES[kind](*packed[1:])
    return message


def report_frame(message: Message) -> bytes:
    """A child's message for its report pipe; `CrossingError` (naming a partial result's
    type) when it cannot cross. Runs in the child (the work's thread, or its heartbeats')."""
    what = _wire.TypeNamed("a partial result (a {})", message.item) \
        if isinstance(message, Partial) else None  # fmt: skip
    return _wire.dumps(pack(message), what)


def finished_frame(finished: Finished) -> bytes:
    """The attempt's `Finished` for the report pipe; `CrossingError` naming the result's type."""
    return _wire.dumps(pack(finished), _wire.TypeNamed("the result (a {})", finished.value))


def delegate_frame(request_id: int, brief: Any, ordinal: int) -> bytes:
    """A `Delegate` request; `CrossingError` when the brief cannot cross."""
    return _wire.dumps((DELEGATE, request_id, brief, ordinal), "the brief to delegate")


def placed_frame(pid: int, node: str) -> bytes:
    return _wire.dumps((PLACED, pid, node))


def started_frame(at: float, hard_stop: float | None) -> bytes:
    return _wire.dumps((STARTED, at, hard_stop))


def read_report(data: bytes | memoryview) -> Message | Delegate | PlacedAt | StartedAt:
    """What the child reported (raises what unpickling raises: e.g. a class missing here)."""
    packed = _wire.loads(data)
    kind = packed[0]
    if kind == DELEGATE:
        return Delegate(packed[1], packed[2], packed[3])
    if kind == STARTED:
        return StartedAt(packed[1], packed[2])
    if kind == PLACED:
        return PlacedAt(packed[1], packed[2])
    return unpack(packed)


# -- a waiting worker's socket ------------------------------------------------------------

ATTACH_FRAME = b"A"  # take over: send what you hold, then go on with me
CAUGHT_UP_FRAME = b"K"  # everything held has been sent: what follows is live
_HELLO = "hello"


class Hello(NamedTuple):
    """What a waiting worker says once a connector has authenticated."""

    pid: int
    start_time: float | None  # as `actors.osproc.process_start_time`
    agent: str
    attempt_id: str | None  # the attempt it runs or ran; None: idle, holding a session
    finished: bool  # that attempt's `Finished` is among what it holds
    session_key: str | None
    lease: str | None = None  # the lease file it reads (`actors.backends.process.lease_deadline`)


def hello_frame(hello: Hello) -> bytes:
    return _wire.dumps((_HELLO, *hello))


def read_hello(data: bytes) -> Hello:
    """The `Hello` of `hello_frame` (`ValueError` for any other frame)."""
    packed = _wire.loads(data)
    if type(packed) is not tuple or packed[:1] != (_HELLO,) or len(packed) not in (7, 8):
        raise ValueError("not a hello frame")
    return Hello(*packed[1:])


# -- Ray -----------------------------------------------------------------------------------


def ray_job(spec: ChildSpec, work: bytes, reporter: str) -> bytes:
    """The job of a Ray attempt: one argument (each one a task takes costs a no-op's time);
    `CrossingError` when it cannot cross. `work` is the work function's `_wire` bytes."""
    job = {
        "work": work,
        "reporter": reporter,
        "brief": _wire.brief_to_wire(spec.brief),
        "agent": spec.agent,
        "delegation_id": spec.delegation_id,
        "attempt": spec.attempt,
        "attempt_id": spec.attempt_id,
        "remaining_s": spec.deadline - spec.clock.now(),  # the child lives on its own clock
        "interval_s": spec.heartbeat_interval_s,
        "previous_partials": list(spec.previous_partials),
        "depth": spec.depth,
        "framing": spec.framing,
        "session_key": spec.session_key,
        "session": spec.session,
        "epoch": spec.epoch,
        # What every backend's attempt is told (`Context`): how the last attempt ended, its
        # effort, its budget, and a person's answer to its blocker.
        "previous_error": spec.previous_error,
        "reasoning_effort": spec.reasoning_effort,
        "budget_left": spec.budget_left,
        "previous_blocker": spec.previous_blocker,
        "note": spec.note,
    }
    return _wire.dumps(job, "the attempt's brief, previous partial results or session")


def read_ray_job(data: bytes) -> dict[str, Any]:
    """The job `ray_job` wrote (raises what unpickling raises)."""
    job: dict[str, Any] = _wire.loads(data)
    return job
