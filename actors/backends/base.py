"""The seam between Zeus and the isolation backends (thread, process, Ray).

Zeus talks to a child only through messages: it starts the child with a
`ChildSpec` and a `send` callable, and the child reports through `send`.
Zeus in turn asks the handle to `cancel()` (cooperative) or `kill()` (force).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from actors.backends.inputs import InputsVia
from actors.clock import Clock
from actors.models import Brief

__all__ = ["Backend", "ChildHandle", "ChildSpec", "Send"]

Send = Callable[[object], None]


@dataclass(slots=True)
class ChildSpec:
    """Everything a backend needs to start one attempt. Read-only by convention (a frozen
    dataclass of this size costs 8 us to build against 2, for every attempt)."""

    agent: str
    delegation_id: str
    attempt: int
    attempt_id: str
    brief: Brief
    deadline: float  # clock time
    clock: Clock
    work: Callable[..., Any] | None = None
    command: tuple[str, ...] | None = None
    inputs_via: InputsVia = "argv"  # how a command receives the inputs (actors.backends.inputs)
    heartbeat_interval_s: float = 1.0
    term_s: float = 0.5
    grace_s: float = 0.0  # how long Zeus waits after a cooperative cancel before it kills
    session: dict[str, Any] | None = field(default=None, compare=False)
    session_key: str | None = None
    previous_partials: tuple[Any, ...] = ()
    depth: int = 1
    framing: str = ""
    # Process isolation: how many idle warm workers of this agent to keep (None:
    # the backend's default; 0: none, every attempt starts a fresh process).
    session_max: int | None = None
    previous_error: str | None = None  # how the delegation's previous attempt ended
    reasoning_effort: str | None = None
    # What the attempt may still spend before some budget (its own, an ancestor's, the
    # tree's) is over: {"calls": 3, "cost": 0.25}; the child stops itself past it.
    budget_left: dict[str, float] | None = None
    # Ray isolation: what the attempt asks of a node (num_cpus, num_gpus, memory, custom).
    resources: Mapping[str, float] | None = field(default=None, compare=False)


class ChildHandle(Protocol):
    """Zeus's handle on one running attempt. Methods are called from Zeus's actor thread."""

    @property
    def pid(self) -> int | None:
        """The child's process id, where it has one."""

    @property
    def killable(self) -> bool:
        """Whether `kill()` can really stop the child (a process can, a thread cannot)."""

    def cancel(self) -> None:
        """Ask the child to stop cooperatively; returns at once."""

    def kill(self) -> None:
        """Force the child to stop; returns at once, and `Finished` follows through `send`.

        A thread cannot be killed: this does nothing there, and Zeus fences it.
        """


class Backend(Protocol):
    def start(self, spec: ChildSpec, send: Send) -> ChildHandle:
        """Start the attempt; called in Zeus's actor thread, must not block on the work."""

    def close(self) -> None:
        """Release the backend's resources (called when Zeus stops)."""
