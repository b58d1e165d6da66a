"""The supervision tree rebuilt from a journal's events, one event at a time.

`Journal` holds one `Run` per `zeus.started` (a journal file may hold several
runs): delegations nested by `parent_id`, each with its attempts, pids,
outcomes, timings and final status, and the run's timeout log.
`Journal.apply(event)` folds in one event, so a live view can follow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Attempt", "Delegation", "Event", "Journal", "Run", "TimeoutEntry", "num"]

Event = dict[str, Any]


def num(value: Any) -> float | None:
    """`value` as a float when it is a number (not a bool), else None."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass
class Attempt:
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
    tool_calls: int | None = None  # how many it made, once it ended (DESIGN §15)
    last_tool: str | None = None
    last_ts: float | None = None
    then: str | None = None  # what Zeus did next: "retry in 1.20s", "fallback apollo -> athena"

    @property
    def ended(self) -> bool:
        """The journal saw this attempt end (an outcome, or fenced)."""
        return self.outcome is not None or self.fenced is not None

    @property
    def death_confirmed(self) -> bool:
        """The journal says its process is gone: killed by signal, or it crashed.

        A completed or failed attempt's process may still live (a warm session
        child, or one that was exiting when the supervisor died).
        """
        return self.killed in ("terminate", "kill") or self.outcome == "crash"


@dataclass
class Delegation:
    """One delegation: its attempts, the delegations it made, and how it settled."""

    id: str
    agent: str | None = None  # the agent it was dispatched to
    parent_id: str | None = None
    scope: str | None = None
    depth: int | None = None
    policy: dict[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None
    dispatched_ts: float | None = None
    attempts: list[Attempt] = field(default_factory=list)
    children: list[Delegation] = field(default_factory=list)
    status: str | None = None  # None until `delegation.settled`
    settled_ts: float | None = None
    duration_s: float | None = None
    error: str | None = None
    timeout_kind: str | None = None
    cancel_reason: str | None = None
    cancel_requested: bool = False
    last_ts: float | None = None

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
    delegations: dict[str, Delegation] = field(default_factory=dict)
    attempts: dict[str, Attempt] = field(default_factory=dict)
    roots: list[Delegation] = field(default_factory=list)
    timeouts: list[TimeoutEntry] = field(default_factory=list)
    intensity: list[Event] = field(default_factory=list)
    events: int = 0
    last_ts: float | None = None

    @property
    def stopped(self) -> bool:
        return self.stopped_ts is not None

    def incomplete(self) -> list[Delegation]:
        """The delegations that did not settle `completed` (open ones included)."""
        return [d for d in self.delegations.values() if d.status != "completed"]


class Journal:
    """A journal's runs, rebuilt one event at a time. The last run is `journal.run`."""

    def __init__(self, notes: Iterable[str] = ()) -> None:
        self.notes: list[str] = list(notes)
        self.runs: list[Run] = [Run(index=1)]

    @property
    def run(self) -> Run:
        return self.runs[-1]

    @property
    def events(self) -> int:
        return sum(r.events for r in self.runs)

    def apply(self, event: Event, *, line: int | None = None) -> None:
        """Fold one event into the tree. Unknown events are counted and otherwise ignored."""
        name = event.get("event")
        run = self.run
        if name == "zeus.started" and run.events:
            run = Run(index=len(self.runs) + 1)
            self.runs.append(run)
        run.events += 1
        if run.first_line is None:
            run.first_line = line
        ts = num(event.get("ts"))
        if ts is not None:
            run.last_ts = ts if run.last_ts is None else max(run.last_ts, ts)
        if name == "zeus.started":
            run.zeus_pid = _int(event.get("pid"))
            run.started_ts = ts
            run.routing = _str(event.get("routing"))
            return
        if name == "zeus.stopped":
            run.stopped_ts = ts
            return
        if name == "supervisor.intensity_exceeded":
            run.intensity.append(event)
            return
        delegation_id = _str(event.get("delegation_id"))
        if delegation_id is None:
            return
        d = self._delegation(run, delegation_id, event)
        d.last_ts = ts if ts is not None else d.last_ts
        attempt_id = _str(event.get("attempt_id"))
        a = self._attempt(run, d, attempt_id, event) if attempt_id else None
        if a is not None and ts is not None:
            a.last_ts = ts
        handler = _HANDLERS.get(str(name))
        if handler is not None:
            handler(run, d, a, event, ts)

    def _delegation(self, run: Run, delegation_id: str, event: Event) -> Delegation:
        d = run.delegations.get(delegation_id)
        if d is not None:
            return d
        d = Delegation(
            id=delegation_id, agent=_str(event.get("agent")), parent_id=_str(event.get("parent_id"))
        )
        run.delegations[delegation_id] = d
        parent_id = d.parent_id or ""
        parent = run.delegations.get(parent_id)
        if parent is None and parent_id in run.attempts:  # a parent named by its attempt
            parent = run.delegations.get(run.attempts[parent_id].delegation_id)
        if parent is not None and parent is not d:
            parent.children.append(d)
        else:
            run.roots.append(d)
        return d

    def _attempt(self, run: Run, d: Delegation, attempt_id: str, event: Event) -> Attempt:
        a = run.attempts.get(attempt_id)
        if a is None:
            a = Attempt(id=attempt_id, delegation_id=d.id, agent=_str(event.get("agent")))
            run.attempts[attempt_id] = a
            d.attempts.append(a)
        return a


_Handler = Callable[[Run, Delegation, Attempt | None, Event, float | None], None]


def _dispatched(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    d.agent = _str(e.get("agent")) or d.agent
    d.scope = _str(e.get("scope"))
    d.depth = _int(e.get("depth"))
    d.policy = e["policy"] if isinstance(e.get("policy"), dict) else {}
    d.timeout_s = num(e.get("timeout_s")) or num(d.policy.get("timeout_s"))
    d.dispatched_ts = ts


def _started(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    if a is None:
        return
    a.number = _int(e.get("attempt"))
    a.pid = _int(e.get("pid"))
    a.pid_start_time = num(e.get("pid_start_time"))
    node, address, job = e.get("node"), e.get("ray_address"), e.get("ray_job")
    a.node = node if isinstance(node, str) else None
    a.ray_address = address if isinstance(address, str) else None
    a.ray_job = job if isinstance(job, str) else None
    a.deadline_s = num(e.get("deadline_s"))
    a.started_ts = ts


def _spawned(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    """A process started after `attempt.started` (outside Zeus's mailbox): its pid."""
    if a is not None:
        a.pid = _int(e.get("pid"))
        a.pid_start_time = num(e.get("pid_start_time"))


def _heartbeat(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    if a is not None:
        a.progress = e.get("progress")
        a.note = _str(e.get("note")) or a.note


def _timed_out(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    if a is None:
        return
    elapsed = num(e.get("elapsed_s"))
    stale = e.get("event") == "attempt.stale"
    if stale:
        a.stale_after_s = elapsed
    else:
        a.timed_out_after_s = elapsed
    run.timeouts.append(
        TimeoutEntry(
            ts, d.id, a.id, a.agent, "stale" if stale else "deadline", elapsed, a.deadline_s
        )
    )


def _budget(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    if a is not None:
        a.budget_exceeded = True


def _killed(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    if a is not None:
        a.killed = _str(e.get("how"))
        a.kill_latency_s = num(e.get("latency_s"))
        a.pid = a.pid if a.pid is not None else _int(e.get("pid"))


def _fenced(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    if a is not None:
        reason = _str(e.get("reason")) or "fenced"
        a.fenced = reason if a.fenced is None else f"{a.fenced}; {reason}"


def _ended(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    if a is None:
        return
    a.ended_ts = ts
    a.duration_s = num(e.get("duration_s"))
    if e.get("event") == "attempt.completed":
        a.outcome = "completed"
    else:
        a.outcome = _str(e.get("outcome")) or "error"
        a.error = _str(e.get("error"))
        calls = e.get("tool_calls")
        a.tool_calls = calls if isinstance(calls, int) and not isinstance(calls, bool) else None
        a.last_tool = _str(e.get("last_tool"))


def _then(run: Run, d: Delegation, what: str) -> None:
    """Say in the timeout log what followed the delegation's unresolved timeouts."""
    for i, entry in enumerate(run.timeouts):
        if entry.delegation_id == d.id and entry.then is None:
            run.timeouts[i] = dataclasses.replace(entry, then=what)


def _retry(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    backoff = num(e.get("backoff_s"))
    step = f"retry in {backoff:.2f}s" if backoff is not None else "retry"
    nxt = _str(e.get("next_attempt_id"))
    if a is not None:
        a.then = f"{step} as {nxt}" if nxt else step
    _then(run, d, step)


def _fallback(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    step = f"fallback {e.get('from')} -> {e.get('to')}"
    if a is not None:
        a.then = step
    _then(run, d, step)


def _cancel(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    d.cancel_requested = True
    d.cancel_reason = _str(e.get("reason"))


def _settled(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    d.status = _str(e.get("status")) or "unknown"
    d.settled_ts = ts
    d.duration_s = num(e.get("duration_s"))
    d.error = _str(e.get("error"))
    d.timeout_kind = _str(e.get("timeout_kind"))
    _then(run, d, f"settled {d.status}")


_HANDLERS: dict[str, _Handler] = {
    "delegation.dispatched": _dispatched,
    "attempt.started": _started,
    "attempt.spawned": _spawned,
    "attempt.heartbeat": _heartbeat,
    "attempt.timed_out": _timed_out,
    "attempt.stale": _timed_out,
    "attempt.budget_exceeded": _budget,
    "attempt.killed": _killed,
    "attempt.fenced": _fenced,
    "attempt.completed": _ended,
    "attempt.failed": _ended,
    "retry.scheduled": _retry,
    "fallback.dispatched": _fallback,
    "delegation.cancel_requested": _cancel,
    "delegation.settled": _settled,
}
