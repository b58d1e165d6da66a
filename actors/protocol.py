"""The messages a child sends to Zeus. Plain slotted dataclasses: they are the hot path
(not frozen: a frozen dataclass costs three times as much to build; treat them as
immutable all the same).

Every message names its attempt, so Zeus can drop the late messages of a
superseded or fenced attempt. `progress` is the child's progress counter,
which every context call advances.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from actors.models import AttemptOutcome, Brief, Summary, Usage

__all__ = [
    "AgentSession",
    "Charge",
    "ChildMessage",
    "DelegateRequest",
    "Finished",
    "Heartbeat",
    "Partial",
    "Placed",
    "Spawned",
    "Started",
    "ToolCall",
]


@dataclass(slots=True)
class Heartbeat:
    attempt_id: str
    progress: int
    note: str | None = None
    # A liveness beat from a process child's heartbeat thread: proves life, not progress.
    liveness: bool = False


@dataclass(slots=True)
class Partial:
    attempt_id: str
    progress: int
    item: Any


@dataclass(slots=True)
class Charge:
    attempt_id: str
    progress: int
    usage: Usage
    # The part of `usage.input_tokens` that was cached (an agent CLI's), kept with its
    # session's totals.
    cached_input_tokens: int = 0


@dataclass(slots=True)
class ToolCall:
    attempt_id: str
    progress: int
    name: str
    read_only: bool = False
    # None: a call seen only once it was over (`ctx.tool_call`); True: a long one began
    # (`with ctx.tool`); False: that long call ended. Each call its own (several may run).
    running: bool | None = None
    # The child's own id of the call (an agent CLI's), which pairs its end with its start;
    # None: a call without one (an end then pairs with the latest start of its name).
    call_id: str | None = None
    # What it was called with, in brief (`Bash`'s command), cut to 200 characters: a
    # fallback's prompt names what earlier attempts ran (docs/agent-clis.md).
    detail: str | None = None


@dataclass(slots=True)
class AgentSession:
    """The agent program's own session id (an agent CLI's conversation): a follow-up brief
    in the delegation's session resumes it."""

    attempt_id: str
    progress: int
    session_id: str


@dataclass(slots=True)
class Finished:
    """The attempt's code no longer runs: it returned, raised, or its process died.

    Each backend sends exactly one per attempt, except for a thread that never
    stops (Zeus fences that one).
    """

    attempt_id: str
    outcome: AttemptOutcome
    value: Any = None
    error: str | None = None
    error_type: str | None = None
    traceback: str | None = None
    pid: int | None = None
    killed: str | None = None  # cooperative | terminate | kill, when the backend stopped it
    kill_latency_s: float | None = None
    progress: int = 0
    # The child process's exit code when it ended with the attempt (negative: the signal).
    exit_code: int | None = None
    # Partial results the child's Context did not send (over `MAX_PARTIALS_SENT`).
    partials_dropped: int = 0
    # Why its supervisor asked it to stop (an `AttemptOutcome` value), as told with the
    # cancel: a later Zeus that reattaches it learns from this what the last one decided.
    stop_cause: str | None = None
    # Lines of a command's event stream that did not read (not JSON, an unknown event,
    # over a megabyte): counted, never fatal.
    bad_lines: int = 0
    # Why the attempt's spend is not all known (an agent CLI that reports a turn's usage
    # only at its end, stopped before it): its usage is then "at least".
    usage_unknown: str | None = None


@dataclass(slots=True)
class DelegateRequest:
    """`Context.delegate()`: the child asks Zeus for a nested delegation and waits.

    `ordinal`: which of the attempt's requests this is (1, 2, ... in the order made),
    where the backend numbers them (a process worker does, so that a reattached
    orchestrator's requests can be matched to the stored sub-delegations); else None.
    """

    attempt_id: str
    brief: Brief
    reply: Callable[[Summary | BaseException], None] = field(compare=False)
    ordinal: int | None = None


@dataclass(slots=True)
class Spawned:
    """The attempt's process now exists (started outside Zeus's mailbox): its pid, for the
    journal, so that a sweeper can name it. Sent by the backend, not by agent code."""

    attempt_id: str
    pid: int
    pid_start_time: float | None = None


@dataclass(slots=True)
class Started:
    """The attempt's code began to run: a worker took its job, a command's program was
    started. Its deadline and stale clock start here (docs/design.md, "An attempt's
    clock"), not when Zeus decided to start it. Sent by the backend of a child that
    starts after `start()` returns (`ChildHandle.starts_later`), not by agent code.

    `at`: when it began, on the host's monotonic clock (`time.monotonic()`; a worker
    runs on the same host), so that the wait for the mailbox is the agent's time too;
    None: as the message arrives."""

    attempt_id: str
    at: float | None = None


@dataclass(slots=True)
class Placed:
    """Where an attempt runs, once its backend knows (a Ray task is placed when a worker
    takes it, which may be long after `start()`): its node and the worker's pid."""

    attempt_id: str
    pid: int | None
    node: str | None


ChildMessage = (Heartbeat | Partial | Charge | ToolCall | AgentSession | Finished
                | DelegateRequest | Placed | Started)
