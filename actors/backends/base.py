"""The seam between Zeus and the isolation backends (thread, process, Ray).

Zeus talks to a child only through messages: it starts the child with a
`ChildSpec` and a `send` callable, and the child reports through `send` (one
way: up, to Zeus). Zeus in turn asks the handle to `cancel()` (cooperative) or
`kill()` (force), and passes the owner's messages down with `put_mail()`.
`ChildHandle` declares every member Zeus may use, with the default of each
optional one, as anyio's backend classes do.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from actors.backends.inputs import InputsVia
from actors.clock import Clock
from actors.mail import Mail
from actors.models import Brief
from actors.speaks import Invocation, Pricing

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
    deadline: float  # clock time, were it to start running now
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
    # A command agent: what its standard output speaks (`actors.speaks`); for an agent
    # CLI, how it is run (its program, the user's args, the session to resume).
    speaks: str = "lines"
    invocation: Invocation | None = None
    pricing: Pricing | None = None  # prices a stream's tokens as they come
    exit_grace_s: float = 10.0  # alive this long after its terminal event: stopped
    # The latest its deadline may be once it starts (its delegation's whole deadline: a
    # nested one's parent's), clock time; None: no such bound. A child that starts
    # later than `start()` returns keeps `deadline - now` of running time, up to this.
    deadline_cap: float | None = None


class ChildHandle(ABC):
    """Zeus's handle on one running attempt; every backend's handle derives from it.

    Zeus calls its members from its actor thread only. The four abstract ones
    every handle defines; the others have a default here, which a backend
    overrides when it offers more (a process knows its start time, Ray its node).
    """

    # -- what every handle defines ---------------------------------------------------
    @property
    @abstractmethod
    def pid(self) -> int | None:
        """The child's process id, where it has one (None for a thread, or not yet known)."""

    @property
    @abstractmethod
    def killable(self) -> bool:
        """Whether `kill()` can really stop the child (a process can, a thread cannot)."""

    @abstractmethod
    def cancel(self) -> None:
        """Ask the child to stop cooperatively; returns at once."""

    @abstractmethod
    def kill(self) -> None:
        """Force the child to stop; returns at once, and `Finished` follows through `send`.

        A thread cannot be killed: this does nothing there, and Zeus fences it.
        """

    # -- what a handle may offer (the defaults say what Zeus assumes without it) -----
    def cancel_for(self, cause: str) -> None:
        """`cancel()`, saying why (an `AttemptOutcome` value): a child that can outlive its
        Zeus keeps the cause, for the next one (docs/design.md, "Reattach")."""
        self.cancel()

    #: Alive as it starts (handed to a thread already running): its start is its first
    #: sign of life, and it sends no separate one. Default: it says when it lives.
    alive: bool = False
    #: The process's start time (as psutil's `create_time()`): a pid plus this names it
    #: (journaled with `attempt.started`). Default: unknown.
    pid_start_time: float | None = None
    #: Where it runs ("ip/node id"), where the backend has nodes. Default: this host.
    node: str | None = None
    #: Whether it still waits for a node: Zeus announces it once `Placed` comes.
    #: Default: placed as it starts.
    placing: bool = False
    #: Whether its code begins to run after `start()` returns (a worker takes its job, a
    #: command's program is started): it then says so with `Started` (or `Placed`), and
    #: its deadline and stale clock start there (docs/design.md, "An attempt's clock").
    #: Default: running as it starts.
    starts_later: bool = False
    #: Fields `attempt.started` records so that `zeus sweep` can find it later
    #: (Ray's address and job). Default: none.
    journal_fields: Mapping[str, str] = MappingProxyType({})

    def put_mail(self, mail: Mail) -> None:
        """Put the owner's message in the child's own mailbox (`ctx.receive()` reads it);
        one way only, to the child. Default: a backend without a mailbox drops it."""
        del mail


class Backend(Protocol):
    def start(self, spec: ChildSpec, send: Send) -> ChildHandle:
        """Start the attempt; called in Zeus's actor thread, must not block on the work."""

    def close(self) -> None:
        """Release the backend's resources (called when Zeus stops)."""
