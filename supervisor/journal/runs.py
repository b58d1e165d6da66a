"""A run as the journal tells it: plain records that `replay.Journal` fills in.

A `Run` per `zeus.started`: its delegations (`ReplayedDelegation`) nested by
`parent_id`, each with its attempts (`ReplayedAttempt`: pids, outcomes, timings,
tool calls as `ReplayedTool`), its final status, and the run's timeout log
(`TimeoutEntry`). These are what
was written down, not the live state (`supervisor.core.state`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Event", "ReplayedAttempt", "ReplayedDelegation", "ReplayedTool", "Run", "TimeoutEntry",
    "num",
]

Event = dict[str, Any]


def num(value: Any) -> float | None:
    """`value` as a float when it is a number (not a bool), else None."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass
class ReplayedTool:
    """One tool call as the journal's `attempt.tool` events tell it: when it started (None:
    it was reported only once it was over), when it ended (None: still in flight, or cut
    short by its attempt's end), and its duration as Zeus measured it."""

    tool: str
    side_effects: bool
    call_id: str | None = None
    started_ts: float | None = None
    ended_ts: float | None = None
    duration_s: float | None = None


@dataclass
class ReplayedAttempt:
    """One attempt as the journal tells it."""

    id: str
    delegation_id: str
    agent: str | None = None
    number: int | None = None
    pid: int | None = None
    pid_start_time: float | None = None
    node: str | None = None  # a Ray child's node ("ip/node-id-prefix")
    ray_address: str | None = None  # the Ray cluster (GCS address) a Ray child ran on
    ray_job: str | None = None  # the Ray job (hex) of the supervisor that started it
    started_ts: float | None = None
    deadline_s: float | None = None
    ended_ts: float | None = None
    # completed | error | transient | timeout | stale | crash | budget_exceeded | cancelled;
    # None while the journal has not seen it end.
    outcome: str | None = None
    error: str | None = None
    duration_s: float | None = None
    timed_out_after_s: float | None = None
    stale_after_s: float | None = None
    budget_exceeded: bool = False
    killed: str | None = None  # cooperative | terminate | kill
    kill_latency_s: float | None = None
    fenced: str | None = None  # the reason, for a thread that could not be stopped
    progress: Any = None
    note: str | None = None
    # How many it made, once it ended (docs/design.md, "Stopping a child").
    tool_calls: int | None = None
    last_tool: str | None = None
    # Its tool calls in the order they started (or ended, for one seen only at its end),
    # and those of them not ended yet, oldest first.
    tools: list[ReplayedTool] = field(default_factory=list)
    open_tools: list[ReplayedTool] = field(default_factory=list, repr=False)
    # A command's event stream: lines that did not read, and its agent's own session id.
    bad_lines: int | None = None
    session_id: str | None = None
    last_ts: float | None = None
    then: str | None = None  # what Zeus did next: "retry in 1.20s", "fallback apollo -> athena"
    reattached: bool = False  # a later run picked its process up again (`attempt.reattached`)

    @property
    def ended(self) -> bool:
        """The journal saw this attempt end (an outcome, or fenced)."""
        return self.outcome is not None or self.fenced is not None

    @property
    def in_tool(self) -> ReplayedTool | None:
        """The tool call it is in while it runs: the oldest of those in flight."""
        return self.open_tools[0] if self.open_tools and not self.ended else None

    @property
    def death_confirmed(self) -> bool:
        """The journal says its process is gone: killed by signal, or it crashed.

        A completed or failed attempt's process may still live (a warm session
        child, or one that was exiting when the supervisor died).
        """
        return self.killed in ("terminate", "kill") or self.outcome == "crash"


@dataclass
class ReplayedDelegation:
    """One delegation: its attempts, the delegations it made, and how it settled."""

    id: str
    agent: str | None = None  # the agent it was dispatched to
    parent_id: str | None = None
    scope: str | None = None
    depth: int | None = None
    policy: dict[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None
    dispatched_ts: float | None = None
    attempts: list[ReplayedAttempt] = field(default_factory=list)
    children: list[ReplayedDelegation] = field(default_factory=list)
    status: str | None = None  # None until `delegation.settled`
    settled_ts: float | None = None
    duration_s: float | None = None
    error: str | None = None
    timeout_kind: str | None = None
    cancel_reason: str | None = None
    cancel_requested: bool = False
    last_ts: float | None = None
    # Settled before this run: a store gave back its summary (`Journal.settled_before`).
    earlier: bool = False
    # Settled by hand by a person (`delegation.resolved`): who, and the note they gave.
    resolved_by: str | None = None
    resolved_note: str | None = None

    @property
    def settled(self) -> bool:
        return self.status is not None

    @property
    def partial_ok(self) -> bool | None:
        value = self.policy.get("partial_ok")
        return value if isinstance(value, bool) else None

    @property
    def agents(self) -> list[str]:
        """The agents that ran it, in order (more than one after a fallback)."""
        seen = [self.agent] if self.agent else []
        seen += [a.agent for a in self.attempts if a.agent]
        return list(dict.fromkeys(seen))

    @property
    def agent_timeouts(self) -> list[float | None]:
        """The deadline each of `agents` ran under: the dispatched timeout for the first,
        each fallback's first attempt deadline (to a tenth of a second: it is measured)."""
        first: dict[str, float | None] = {}
        for a in self.attempts:
            if a.agent is not None and a.agent not in first:
                first[a.agent] = None if a.deadline_s is None else round(a.deadline_s, 1)
        return [self.timeout_s if n == 0 else first.get(agent)
                for n, agent in enumerate(self.agents)]

    def elapsed(self, now: float | None) -> float | None:
        """Seconds from dispatch to settlement, or to `now` while it is open."""
        if self.duration_s is not None:
            return self.duration_s
        if self.dispatched_ts is None or now is None:
            return None
        return max(0.0, now - self.dispatched_ts)


@dataclass(frozen=True)
class TimeoutEntry:
    """One line of the timeout log: an attempt that ran out of time or went stale."""

    ts: float | None
    delegation_id: str
    attempt_id: str
    agent: str | None
    kind: str  # deadline | stale
    elapsed_s: float | None
    deadline_s: float | None
    then: str | None = None  # what followed: a retry, a fallback, or the settlement


@dataclass
class Run:
    """Everything between one `zeus.started` and the next (or the end of the file)."""

    index: int
    first_line: int | None = None
    zeus_pid: int | None = None
    started_ts: float | None = None
    stopped_ts: float | None = None
    routing: str | None = None
    delegations: dict[str, ReplayedDelegation] = field(default_factory=dict)
    attempts: dict[str, ReplayedAttempt] = field(default_factory=dict)
    roots: list[ReplayedDelegation] = field(default_factory=list)
    timeouts: list[TimeoutEntry] = field(default_factory=list)
    # delegation id -> the indexes in `timeouts` of its entries that say nothing yet of what
    # followed (so a journal of many delegations is not scanned once per settlement)
    unresolved_timeouts: dict[str, list[int]] = field(default_factory=dict, repr=False)
    intensity: list[Event] = field(default_factory=list)
    events: int = 0
    last_ts: float | None = None
    # Read from a durable store (its `zeus.started` says so): no heartbeat events there,
    # so an open delegation runs until now while the store's owner lives, and until the
    # owner's last heartbeat once it is dead (`owner_alive` False).
    store: bool = False
    owner_alive: bool | None = None
    owner_heartbeat_ts: float | None = None
    # A store shared by many hosts (PostgreSQL): each host, its lease and what it owns.
    hosts: list[Event] = field(default_factory=list)

    @property
    def stopped(self) -> bool:
        return self.stopped_ts is not None

    @property
    def owner_gone(self) -> bool:
        """The Zeus that wrote this run is no more: it stopped, or its store's owner died."""
        return self.stopped or self.owner_alive is False

    def open_until(self, now: float) -> float | None:
        """Where an open delegation's time stops, given `now` (the wall clock): the last
        event of a journal (its heartbeats keep it fresh); for a store, `now` while its
        owner lives, its last sign of life once dead (None: no time known)."""
        if not self.store or self.stopped:
            return self.last_ts
        if self.owner_alive is False:
            known = [t for t in (self.last_ts, self.owner_heartbeat_ts) if t is not None]
            return max(known) if known else None
        return now

    def incomplete(self) -> list[ReplayedDelegation]:
        """The delegations that did not settle `completed` (open ones included)."""
        return [d for d in self.delegations.values() if d.status != "completed"]
