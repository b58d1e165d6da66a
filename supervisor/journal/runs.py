"""A run as the journal tells it: records that `replay.Journal` hands each event to.

A `Run` per `zeus.started`: its delegations (`ReplayedDelegation`) nested by
`parent_id`, each with its attempts (`ReplayedAttempt`: pids, outcomes, timings,
tool calls as `ReplayedTool`), its final status, and the run's timeout log
(`TimeoutEntry`). Each record changes only through its own `on_<event>` methods, one
per pinned event it is told. These are what was written down, not the live state
(`supervisor.core.state`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors import AttemptRecord, Summary

__all__ = [
    "Event", "ReplayedAttempt", "ReplayedDelegation", "ReplayedTool", "Run", "TimeoutEntry",
    "int_of", "num", "str_of",
]

Event = dict[str, Any]


def num(value: Any) -> float | None:
    """`value` as a float when it is a number (not a bool), else None."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def int_of(value: Any) -> int | None:
    """`value` when it is an int (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def str_of(value: Any) -> str | None:
    """`value` when it is a string, else None."""
    return value if isinstance(value, str) else None


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

    def on_end(self, ts: float | None, duration_s: float | None) -> None:
        self.ended_ts, self.duration_s = ts, duration_s


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

    # -- what each event changes -----------------------------------------------------
    def on_event(self, ts: float | None) -> None:
        if ts is not None:
            self.last_ts = ts

    def on_started(self, e: Event, ts: float | None) -> None:
        self.number = int_of(e.get("attempt"))
        self.pid = int_of(e.get("pid"))
        self.pid_start_time = num(e.get("pid_start_time"))
        self.node = str_of(e.get("node"))
        self.ray_address = str_of(e.get("ray_address"))
        self.ray_job = str_of(e.get("ray_job"))
        self.deadline_s = num(e.get("deadline_s"))
        self.started_ts = ts

    def on_reattached(self, e: Event, ts: float | None, before: ReplayedAttempt | None) -> None:
        """Supervised on by a later run: it keeps what `before` (an earlier run's record of
        it) said, its tool calls and the one it is in, its session, its note, unless this
        run has told of them already (copies: the earlier row stays as it was)."""
        self.on_started(e, ts)
        self.reattached = True
        if before is None or self.tools or self.session_id is not None:
            return
        copies = {id(t): dataclasses.replace(t) for t in before.tools}
        self.tools = list(copies.values())
        self.open_tools = [copies.get(id(t), t) for t in before.open_tools]
        self.last_tool, self.session_id = before.last_tool, before.session_id
        self.note, self.progress = before.note, before.progress

    def on_spawned(self, e: Event) -> None:
        """A process started after `attempt.started` (outside Zeus's mailbox): its pid."""
        self.pid = int_of(e.get("pid"))
        self.pid_start_time = num(e.get("pid_start_time"))

    def on_heartbeat(self, e: Event) -> None:
        self.progress = e.get("progress")
        self.note = str_of(e.get("note")) or self.note

    def on_tool(self, e: Event, ts: float | None) -> None:
        """A tool call started, or ended: paired with its start by its call id, else with
        the latest start of its name; an end without one is a call seen only once it was
        over."""
        name = str_of(e.get("tool")) or "tool"
        call_id = str_of(e.get("call_id"))
        self.last_tool = name
        if e.get("phase") == "start":
            call = ReplayedTool(name, e.get("side_effects") is True, call_id, started_ts=ts)
            self.tools.append(call)
            self.open_tools.append(call)
            return
        began = next((t for t in reversed(self.open_tools) if t.call_id == call_id
                      and (call_id is not None or t.tool == name)), None)
        if began is not None:
            self.open_tools.remove(began)
        else:
            began = ReplayedTool(name, e.get("side_effects") is True, call_id)
            self.tools.append(began)
        began.on_end(ts, num(e.get("duration_s")))

    def on_out_of_time(self, elapsed_s: float | None, *, stale: bool) -> None:
        if stale:
            self.stale_after_s = elapsed_s
        else:
            self.timed_out_after_s = elapsed_s

    def on_budget_exceeded(self) -> None:
        self.budget_exceeded = True

    def on_killed(self, e: Event) -> None:
        self.killed = str_of(e.get("how"))
        self.kill_latency_s = num(e.get("latency_s"))
        self.pid = self.pid if self.pid is not None else int_of(e.get("pid"))

    def on_session(self, e: Event) -> None:
        self.session_id = str_of(e.get("session_id"))

    def on_fenced(self, e: Event) -> None:
        reason = str_of(e.get("reason")) or "fenced"
        self.fenced = reason if self.fenced is None else f"{self.fenced}; {reason}"

    def on_ended(self, e: Event, ts: float | None) -> None:
        self.ended_ts = ts
        self.duration_s = num(e.get("duration_s"))
        self.bad_lines = int_of(e.get("bad_lines"))
        self.session_id = str_of(e.get("session_id")) or self.session_id
        if e.get("event") == "attempt.completed":
            self.outcome = "completed"
        else:
            self.outcome = str_of(e.get("outcome")) or "error"
            self.error = str_of(e.get("error"))
            self.tool_calls = int_of(e.get("tool_calls"))
            self.last_tool = str_of(e.get("last_tool"))

    def on_lost(self, e: Event, ts: float | None) -> None:
        """An attempt of an earlier run that recovery found gone (docs/design.md, "The
        store")."""
        self.ended_ts = ts
        self.outcome = "lost"
        self.error = str_of(e.get("reason"))
        self.duration_s = num(e.get("duration_s"))
        self.pid = self.pid if self.pid is not None else int_of(e.get("pid"))

    def on_next(self, step: str) -> None:
        """What Zeus did next: a retry, a fallback."""
        self.then = step

    def on_settled_before(self, record: AttemptRecord) -> None:
        """As the stored summary of a delegation settled before this run tells it."""
        self.outcome, self.duration_s, self.pid = (record.outcome.value, record.duration_s,
                                                   record.pid)
        self.error, self.session_id = record.error, record.session_id
        self.tool_calls, self.last_tool = record.tool_calls, record.last_tool


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

    # -- what each event changes -----------------------------------------------------
    def on_event(self, ts: float | None, child: ReplayedDelegation | None = None,
                 attempt: ReplayedAttempt | None = None) -> None:
        """An event of it at `ts`; one that first named `child` (a delegation it made) or
        `attempt` (one of its own) adds it."""
        self.last_ts = ts if ts is not None else self.last_ts
        if child is not None:
            self.children.append(child)
        if attempt is not None:
            self.attempts.append(attempt)

    def on_dispatched(self, e: Event, ts: float | None) -> None:
        self.agent = str_of(e.get("agent")) or self.agent
        self.scope = str_of(e.get("scope"))
        self.depth = int_of(e.get("depth"))
        self.policy = e["policy"] if isinstance(e.get("policy"), dict) else {}
        self.timeout_s = num(e.get("timeout_s")) or num(self.policy.get("timeout_s"))
        self.dispatched_ts = ts

    def on_cancel_requested(self, e: Event) -> None:
        self.cancel_requested = True
        self.cancel_reason = str_of(e.get("reason"))

    def on_settled(self, e: Event, ts: float | None) -> None:
        self.status = str_of(e.get("status")) or "unknown"
        self.settled_ts = ts
        self.duration_s = num(e.get("duration_s"))
        self.error = str_of(e.get("error"))
        self.timeout_kind = str_of(e.get("timeout_kind"))

    def on_resolved(self, e: Event, ts: float | None) -> None:
        """A person settled it by hand (`zeus resolve`): the status they gave, who, why."""
        self.status = str_of(e.get("status")) or self.status or "unknown"
        self.settled_ts = self.settled_ts if self.settled_ts is not None else ts
        self.resolved_by = str_of(e.get("who")) or "?"
        self.resolved_note = str_of(e.get("why"))

    def on_settled_before(self, summary: Summary) -> None:
        """Settled before this run, as its stored summary tells it (a store gave it back)."""
        self.scope, self.earlier = summary.scope, True
        self.status, self.duration_s = summary.status.value, summary.duration_s
        self.error, self.timeout_kind = summary.error, summary.timeout_kind


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

    # -- what each event changes -----------------------------------------------------
    def on_event(self, ts: float | None, line: int | None) -> None:
        """One more event of this run, at `ts`, read from `line`."""
        self.events += 1
        if self.first_line is None:
            self.first_line = line
        if ts is not None:
            self.last_ts = ts if self.last_ts is None else max(self.last_ts, ts)

    def on_started(self, e: Event, ts: float | None) -> None:
        """`zeus.started`: whose run it is, and where its store is."""
        self.zeus_pid = int_of(e.get("pid"))
        self.started_ts = ts
        self.routing = str_of(e.get("routing"))
        self.store = e.get("store") is True
        alive = e.get("owner_alive")
        self.owner_alive = alive if isinstance(alive, bool) else None
        self.owner_heartbeat_ts = num(e.get("heartbeat"))
        hosts = e.get("hosts")
        self.hosts = [h for h in hosts if isinstance(h, dict)] if isinstance(hosts, list) else []

    def on_stopped(self, ts: float | None) -> None:
        self.stopped_ts = ts

    def on_intensity_exceeded(self, e: Event) -> None:
        self.intensity.append(e)

    def add_delegation(self, d: ReplayedDelegation, parent: ReplayedDelegation | None) -> None:
        """`d`, first named now, under `parent` (a root without one)."""
        self.delegations[d.id] = d
        if parent is not None:
            parent.on_event(None, child=d)
        else:
            self.roots.append(d)

    def add_attempt(self, d: ReplayedDelegation, a: ReplayedAttempt) -> None:
        """`a`, first named now, an attempt of `d`."""
        self.attempts[a.id] = a
        d.on_event(None, attempt=a)

    def on_out_of_time(self, d: ReplayedDelegation, a: ReplayedAttempt, e: Event,
                       ts: float | None) -> None:
        """`attempt.timed_out` or `attempt.stale`: the attempt's, and a line of the log."""
        elapsed = num(e.get("elapsed_s"))
        stale = e.get("event") == "attempt.stale"
        a.on_out_of_time(elapsed, stale=stale)
        self.unresolved_timeouts.setdefault(d.id, []).append(len(self.timeouts))
        self.timeouts.append(TimeoutEntry(ts, d.id, a.id, a.agent,
                                          "stale" if stale else "deadline", elapsed,
                                          a.deadline_s))

    def then(self, d: ReplayedDelegation, what: str) -> None:
        """Say in the timeout log what followed the delegation's unresolved timeouts."""
        for i in self.unresolved_timeouts.pop(d.id, ()):
            self.timeouts[i] = dataclasses.replace(self.timeouts[i], then=what)
