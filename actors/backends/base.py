"""The seam between Zeus and the isolation backends (thread, process, Ray).

`Backend` declares everything Zeus asks of a backend, each member but `start` with a
default (what Zeus assumes without it): starting and closing, readying, and what a
store's durability needs after a crash (finding and reattaching the children that
waited, confirming a stored attempt's child gone, stopping what is left), and a host's
lease pushed down to its children.

Zeus talks to a child only through messages: it starts the child with a
`ChildSpec` and a `send` callable, and the child reports through `send` (one
way: up, to Zeus). Zeus in turn asks the handle to `cancel()` (cooperative) or
`kill()` (force), and passes the owner's messages down with `put_mail()`.
`ChildHandle` declares every member Zeus may use, with the default of each
optional one, as anyio's backend classes do.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, overload

from actors.backends.inputs import InputsVia
from actors.clock import Clock
from actors.mail import Mail
from actors.models import Brief
from actors.osproc import child_gone, confirm_gone
from actors.speaks import Invocation, Pricing

__all__ = ["Backend", "ChildHandle", "ChildSpec", "Found", "Send", "StoredChild", "WaitingChild",
           "as_backend"]

Send = Callable[[object], None]


@dataclass(slots=True)
class ChildSpec:
    """Everything a backend needs to start one attempt. Read-only by convention, not
    frozen: a frozen dataclass sets each field through `object.__setattr__`, several
    times the cost, and one is built for every attempt."""

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
    # An agent CLI's retry that continues the stopped attempt's session (its prompt says
    # why it stopped and asks it to go on), and the side-effect tool calls earlier
    # attempts made, as `Name(detail)`, which a fresh one's prompt names.
    continues_session: bool = False
    earlier_tools: tuple[str, ...] = ()
    # A delegation a person resumed once it was blocked (`zeus.resume(id, note=...)`): why
    # it was blocked and what the person said (`ctx.previous_blocker`, `ctx.note`; an agent
    # CLI's prompt quotes both). None on a first run.
    previous_blocker: str | None = None
    note: str | None = None
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
    # A program's: the agent's `env:`, added to the host's environment (`${VAR}` in a value
    # read from it as the program starts; `actors.backends.command.io.program_env`).
    env: Mapping[str, str] | None = field(default=None, compare=False)
    # The latest its deadline may be once it starts (its delegation's whole deadline: a
    # nested one's parent's), clock time; None: no such bound. A child that starts
    # later than `start()` returns keeps `deadline - now` of running time, up to this.
    deadline_cap: float | None = None
    # The delegation's epoch on its store (`ctx.fence`): 1 in memory and on a store of one
    # host; larger once another host took the delegation over, or it was reopened.
    epoch: int = 1


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


@dataclass(frozen=True, slots=True)
class StoredChild:
    """What a store knows of an open attempt's child, as recovery hands it to the backend
    the attempt ran on (`Backend.find_waiting`, `Backend.confirm_gone`)."""

    attempt_id: str
    agent: str
    pid: int | None = None  # None: a thread, or a child whose pid was never recorded
    pid_start_time: float | None = None
    pgid: int | None = None  # a process group it leads
    node: str | None = None  # where it ran, where the backend has nodes


class WaitingChild:
    """A child that outlived its Zeus, found by `Backend.find_waiting`: one that waits to be
    picked up (`Backend.reattach`), or one that is gone and left what it held."""

    agent: str
    attempt_id: str | None  # the attempt it runs or ran; None: an idle one (holds a session)
    pid: int | None
    finished: bool  # its attempt's result is among what it holds: adopted, not run on
    session_key: str | None  # the session an idle one holds
    #: Gone, leaving its reports (`left()`): nothing of it runs to be stopped.
    gone: bool = False

    def left(self) -> list[object]:
        """What a child that is gone left for its attempt (its charges and partial
        results, as child messages), counted when the attempt then ends lost. Default:
        nothing."""
        return []

    def release(self) -> None:
        """Recovery committed what it took from this child: drop what the child left
        behind (recovery, Zeus's thread). Default: nothing to drop."""
        return None


@dataclass(slots=True)
class Found:
    """What `Backend.find_waiting` found: the children that waited, by attempt id, and idle
    ones; `named` are the given children whose pid the store never got, named now (the
    mark each worker leaves before it runs a job), with that pid from here on."""

    waiting: dict[str, WaitingChild] = field(default_factory=dict)
    idle: list[WaitingChild] = field(default_factory=list)
    named: dict[str, StoredChild] = field(default_factory=dict)
    #: Whether the backend looked (it keeps children that wait for the next Zeus): a
    #: session its children held that was not found is then lost with them.
    searched: bool = False


class Backend(ABC):
    """One isolation backend (threads, processes, Ray), as Zeus's core sees it.

    Every member Zeus calls is declared here; each but `start` has a default, which says
    what Zeus assumes of a backend without it. The core never asks which backend it has.
    Zeus's actor thread calls `start`, the recovery members (`find_waiting`, `reattach`,
    `stop_left`, `confirm_gone`) and `extend_lease`; the host's thread calls `close`, and
    a thread of its own `prestart` (docs/design.md, "The backend seam").
    """

    #: Whether `prestart()` readies anything (Zeus then runs it on a thread of its own
    #: as it starts). Default: nothing to ready.
    readies: bool = False
    #: Whether its children run inside the host's process (threads): one whose attempt
    #: was recorded had started the work, and went with its host. Default: they run
    #: outside it, and one without a recorded pid may never have started.
    runs_in_host: bool = False

    @abstractmethod
    def start(self, spec: ChildSpec, send: Send) -> ChildHandle:
        """Start the attempt; called in Zeus's actor thread, must not block on the work."""

    def close(self) -> None:
        """Release the backend's resources (the host's thread, as Zeus stops): stop every
        child and wait until each has ended. Default: nothing to release."""
        return None

    def prestart(self) -> None:
        """Ready the backend so that its first `start()` does not stall Zeus's mailbox;
        blocks until ready (Zeus calls it on a thread of its own, when `readies`).
        Default: nothing to ready."""
        return None

    # -- after a crash (recovery, Zeus's thread) --------------------------------------
    def find_waiting(self, children: Sequence[StoredChild]) -> Found:
        """Look for the children that outlived the last Zeus and wait for this one:
        `children` are the store's open attempts on this backend (each looked for by
        its pid, or its mark when it has none); idle ones are found too. Default:
        nothing waits."""
        del children
        return Found()

    @overload
    def reattach(self, child: WaitingChild, spec: ChildSpec, send: Send) -> ChildHandle | None:
        ...
    @overload
    def reattach(self, child: WaitingChild, spec: None, send: Send) -> bool: ...
    def reattach(self, child: WaitingChild, spec: ChildSpec | None,
                 send: Send) -> ChildHandle | bool | None:
        """Pick up a child `find_waiting` found: what it buffered goes to `send`, in order,
        before this returns. `spec`: its attempt, rebuilt (the same attempt id): its
        handle is returned, or None when it cannot be picked up (it died meanwhile).
        `spec` None: an idle child, kept by the backend (a warm worker holding its
        session) when this returns True. Default: nothing waits, nothing is picked up."""
        del child, send
        return None if spec is not None else False

    def stop_left(self) -> None:
        """Stop every child `find_waiting` found that was not picked up, and return once
        each is gone (nothing runs again beside a job that is still stopping). Default:
        nothing was found."""
        return None

    def confirm_gone(self, child: StoredChild) -> bool | None:
        """Whether the stored attempt's child is gone, stopping it first if it still runs:
        True confirmed gone, False still there, None this backend cannot tell. May wait a
        few seconds for a child it stopped to exit. Default: a child with no pid ran in
        its host's process, gone with it; one with a pid is a process of this machine,
        confirmed by its pid, start time and process group (a survivor is killed first)."""
        if child.pid is None:
            return True
        return confirm_gone(child.pid, child.pid_start_time, child.pgid, kill=True)

    def child_gone(self, child: StoredChild) -> bool:
        """Whether the stored attempt's child is confirmed gone, looked at now and never
        stopped (a person's `zeus resume`, Zeus's thread): False while it may still run.
        Default: a child with no pid ran in its host's process, gone with it; one with a
        pid is a process of this machine, judged by its pid, start time and group."""
        if child.pid is None:
            return True
        return child_gone(child.pid, child.pid_start_time, child.pgid)

    # -- several hosts on one store (docs/design.md, "The backend seam") ---------------
    def extend_lease(self, until_monotonic: float | None) -> None:
        """The host's lease on its store runs until `until_monotonic` (CLOCK_MONOTONIC
        time; None: no lease, a store of one host): the children of this backend stop
        themselves once it passes without a further extension, so that none runs after
        its host's lease ended (docs/design.md). Called in Zeus's thread at each renewal.
        Default: its children cannot be told, and nothing is done."""
        del until_monotonic


class StartOnly(Backend):
    """A backend given as an object with only `start` and `close` (the seam as it was),
    with every other member's default."""

    def __init__(self, backend: Any) -> None:
        self.wrapped = backend

    def start(self, spec: ChildSpec, send: Send) -> ChildHandle:
        handle: ChildHandle = self.wrapped.start(spec, send)
        return handle

    def close(self) -> None:
        self.wrapped.close()


def as_backend(backend: object) -> Backend:
    """`backend` as a `Backend`: itself, or one given with only `start` and `close`
    wrapped with the defaults of the rest (`Zeus.start(backends=...)`)."""
    return backend if isinstance(backend, Backend) else StartOnly(backend)
