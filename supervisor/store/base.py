"""The store's interface (`Store`) and the records its readers return.

A second implementation (Postgres, for several hosts) fills the same abstract
methods. Every method is called from one thread at a time: Zeus's actor thread
once Zeus runs (the CLI's main thread when it only reads).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from actors import AttemptRecord, Brief, Status, Summary, Usage
from actors.speaks import SessionTotals

__all__ = [
    "CRASH_KINDS",
    "OpenDelegation",
    "Owner",
    "Recovery",
    "Store",
    "StoreCounts",
    "StoredAttempt",
    "StoredDelegation",
    "StoredRetry",
    "WriteKind",
]

# The kinds of write, in the order one commit applies them (a row is inserted before a
# later kind updates it). `ZEUS_STORE_CRASH_AFTER` names one of them (sqlite module).
WriteKind = str
CRASH_KINDS: tuple[WriteKind, ...] = (
    "recorded",
    "attempt_started",
    "attempt_identity",
    "charge",
    "partial",
    "attempt_ended",
    "retry_scheduled",
    "settled",
)


class Recovery(BaseModel):
    """What a start on a store found and did (`zeus.recovered`).

    `rerun` and `blocked` are delegation ids; `ended`, the delegations recovery itself
    settled otherwise (a reader whose deadline passed while no Zeus ran: `timed_out`; one
    lost in more host crashes than `supervisor.max_recoveries`: `failed`); `reattached`
    and `adopted` attempt ids; `settled` how many settled summaries the store holds.
    Empty on a new store and without one.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    rerun: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()
    reattached: tuple[str, ...] = ()
    adopted: tuple[str, ...] = ()
    settled: int = 0
    ended: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Owner:
    """The Zeus that owns a store: its process, host, since when, and its last heartbeat."""

    pid: int
    pid_start_time: float | None
    host: str
    since: float
    heartbeat: float


@dataclass(frozen=True, slots=True)
class StoredAttempt:
    id: str
    delegation_id: str
    number: int
    agent: str
    started: float
    deadline: float | None
    pid: int | None = None
    pid_start_time: float | None = None
    pgid: int | None = None
    node: str | None = None
    usage: Usage = field(default_factory=Usage)
    outcome: str | None = None  # None: open (it had not ended when its Zeus stopped)
    ended: float | None = None
    error: str | None = None
    record: AttemptRecord | None = None
    # The progress count of its last charge committed: what its worker sends again after
    # a restart is counted only above it.
    charged_progress: int = 0
    # A thread child inside a tool call with side effects when last committed (shared
    # stores only): its name.
    in_tool: str | None = None

    @property
    def open(self) -> bool:
        return self.outcome is None


@dataclass(frozen=True, slots=True)
class StoredRetry:
    """The last retry or fallback scheduled after attempt `after_attempt`."""

    after_attempt: str
    due: float
    agent: str


@dataclass(frozen=True, slots=True)
class StoredDelegation:
    id: str
    key: str | None
    parent_id: str | None
    ordinal: int | None  # which `ctx.delegate` call of its parent's made it (0-based)
    agent: str
    brief: Brief
    policy: dict[str, Any]  # the effective policy as it was (AgentPolicy's JSON form)
    deadline: float | None  # wall-clock time
    created: float
    status: Status | None = None  # None: open
    settled_at: float | None = None
    # A person's answer to it, blocked (`zeus.resume`): its blocker, note and the attempts
    # it had made, as `Answer` keeps them (None: never answered).
    answer: dict[str, Any] | None = None

    @property
    def open(self) -> bool:
        return self.status is None


@dataclass(frozen=True, slots=True)
class OpenDelegation:
    """An open delegation as recovery needs it: its attempts (in order), spend, partials."""

    delegation: StoredDelegation
    attempts: tuple[StoredAttempt, ...]
    spent: Usage
    partials: tuple[Any, ...]
    retry: StoredRetry | None  # the last one scheduled, if any


@dataclass(frozen=True, slots=True)
class StoreCounts:
    open: int
    settled: int
    attempts: int


class Store(abc.ABC):
    """Write-ahead storage of delegations, attempts, spend, partials and summaries.

    Writes are buffered and made durable together by `commit()`, once per turn of
    Zeus's mailbox: a delegation recorded before its first attempt starts, an
    attempt before its child starts, a summary before its handle resolves (the
    caller commits, then acts). Readers see what is committed. A failed commit
    raises `StoreError` and keeps the turn's writes buffered (the next commit tries
    them again); `writable` is False until one succeeds.
    """

    path: str

    @property
    @abc.abstractmethod
    def writable(self) -> bool:
        """False after a commit failed, until one succeeds: refuse new work meanwhile."""

    def why_unwritable(self) -> str:
        """Why nothing new starts while `writable` is False, and what to do: for the
        messages that refuse new work (a file's store: its disk or permissions)."""
        return (f"{self.path}: the store cannot be written, so nothing new starts (what "
                "already runs goes on): free disk space or make it writable")

    @property
    @abc.abstractmethod
    def owner(self) -> Owner:
        """This Zeus, as the store names it."""

    # -- writes (buffered; durable at the next commit) ---------------------------------
    @abc.abstractmethod
    def record_delegation(
        self, delegation_id: str, *, key: str | None, parent_id: str | None,
        ordinal: int | None, agent: str, brief: Brief, policy: BaseModel | dict[str, Any],
        deadline: float | None, created: float,
    ) -> None: ...

    @abc.abstractmethod
    def attempt_started(
        self, attempt_id: str, *, delegation_id: str, number: int, agent: str,
        started: float, deadline: float | None,
    ) -> None: ...

    @abc.abstractmethod
    def attempt_identity(
        self, attempt_id: str, *, pid: int | None, pid_start_time: float | None,
        pgid: int | None, node: str | None, started: float | None = None,
        deadline: float | None = None,
    ) -> None:
        """Who the attempt's child is; with `started` (and its `deadline`), when it began
        to run the work, which replaces the start recorded as Zeus decided it."""

    def attempt_in_tool(self, attempt_id: str, tool: str | None) -> None:
        """A thread child of the attempt is inside the tool call `tool`, which has side
        effects (None: it left it). Only a shared store keeps it: a taker cannot stop a
        thread, so it must not run such a writer again (docs/design.md, "Several
        hosts"); one host's restart blocks every writer it finds open anyway."""
        del attempt_id, tool

    @abc.abstractmethod
    def charge(self, delegation_id: str, attempt_id: str, usage: Usage, *,
               session: tuple[str, SessionTotals] | None = None, progress: int = 0) -> None:
        """`usage` charged by the attempt; `session`: the agent CLI session (its id) it was
        charged in and what it adds to that session's totals, written in the same commit.
        `progress`: the charge's progress count, kept as the attempt's `charged_progress`
        (a worker sends its charges again to the next host, which counts only those
        above it)."""

    @abc.abstractmethod
    def partial(self, delegation_id: str, attempt_id: str, item: Any) -> None: ...

    @abc.abstractmethod
    def attempt_ended(
        self, attempt_id: str, *, outcome: str, ended: float, error: str | None,
        record: AttemptRecord,
    ) -> None: ...

    @abc.abstractmethod
    def retry_scheduled(
        self, delegation_id: str, *, after_attempt: str, due: float, agent: str
    ) -> None: ...

    @abc.abstractmethod
    def settled(
        self, delegation_id: str, *, status: Status, summary: Summary, at: float
    ) -> None: ...

    @abc.abstractmethod
    def commit(self) -> None:
        """Make every buffered write durable in one transaction (the turn's end)."""

    # -- readers (what is committed) ------------------------------------------------------
    @abc.abstractmethod
    def open_delegations(self) -> list[OpenDelegation]:
        """Every open delegation, parents before their children, with what recovery needs."""

    @abc.abstractmethod
    def delegation_as_open(self, delegation_id: str) -> OpenDelegation | None:
        """One delegation (open or settled) with its attempts, spend and partials, as
        `open_delegations` gives each: what a resumed delegation is rebuilt from."""

    @abc.abstractmethod
    def blocked(self) -> list[tuple[StoredDelegation, Summary]]:
        """Every delegation settled `blocked`, oldest first, with its summary."""

    @abc.abstractmethod
    def reopen(self, delegation_id: str, answer: dict[str, Any] | None = None) -> None:
        """Open a settled delegation again (a person resumed it), committed at once with
        what is buffered: its status and summary go, its attempts and spend stay, and the
        person's `answer` is kept (`StoredDelegation.answer`), for a restart too.
        `StoreError` when it cannot be written."""

    def claim_settled(self, delegation_id: str) -> None:
        """Make the settled `delegation_id` this Zeus's to settle again (a verb resolves
        it), committed at once: a shared store's hosts each own theirs; a store of one
        owner has nothing to do."""
        del delegation_id

    @abc.abstractmethod
    def children(self, parent_id: str) -> list[StoredDelegation]:
        """The delegations `parent_id` made, in the order of its `ctx.delegate` calls."""

    @abc.abstractmethod
    def delegation(self, delegation_id: str) -> StoredDelegation | None: ...

    @abc.abstractmethod
    def by_key(self, key: str) -> StoredDelegation | None: ...

    @abc.abstractmethod
    def summary(self, delegation_id: str) -> Summary | None:
        """The settled summary of `delegation_id`, or None (open, or never stored)."""

    @abc.abstractmethod
    def summary_by_key(self, key: str) -> Summary | None: ...

    @abc.abstractmethod
    def counts(self) -> StoreCounts: ...

    @abc.abstractmethod
    def total_spent(self) -> Usage:
        """Everything every stored attempt charged (the tree's spend across restarts)."""

    @abc.abstractmethod
    def sessions(self) -> set[tuple[str, str]]:
        """(agent, session key) for every session an attempt of a stored delegation ran in:
        after a restart, the sessions whose workers may have to be found again."""

    @abc.abstractmethod
    def session_totals(self, session_id: str) -> SessionTotals | None:
        """What the agent CLI session `session_id` was charged, as committed; None when
        nothing was."""

    def agent_sessions(self) -> list[tuple[str, str, str]]:
        """(agent, session key, the agent program's own session id) of each ended attempt
        whose brief named a session and whose program said its session id (an agent CLI's),
        oldest first: after a restart, a follow-up in that session resumes it. Default: none
        kept."""
        return []

    def epoch(self, delegation_id: str) -> int:
        """The delegation's current epoch (`ctx.fence`), which grows each time another
        host takes it over. Default: 1, a store of one host, where a delegation never
        moves."""
        del delegation_id
        return 1

    @abc.abstractmethod
    def issued(self) -> dict[str, int]:
        """For each agent, the highest n of the `<agent>-<n>` ids stored: a Zeus that
        recovers the store gives out ids after them."""

    # -- life -------------------------------------------------------------------------------
    @abc.abstractmethod
    def heartbeat(self) -> None:
        """Say that the owner is alive (committed at once)."""

    @abc.abstractmethod
    def prune(self) -> int:
        """Drop settled delegations older than `keep_days`; how many were dropped."""

    @abc.abstractmethod
    def close(self) -> None:
        """Commit what is buffered and give up ownership (a later opener need not recover)."""
