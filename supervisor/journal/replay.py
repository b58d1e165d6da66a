"""The supervision tree rebuilt from a journal's events, one event at a time.

`Journal` holds one `Run` per `zeus.started` (a journal file may hold several
runs; the records are in `runs`). `Journal.apply(event)` folds in one event,
so a live view can follow; one handler per pinned event says what it changes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from supervisor.journal.runs import (
    Event,
    ReplayedAttempt,
    ReplayedDelegation,
    ReplayedTool,
    Run,
    TimeoutEntry,
    num,
)

if TYPE_CHECKING:
    from actors import Summary

__all__ = ["Journal"]

def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


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
            run.store = event.get("store") is True
            alive = event.get("owner_alive")
            run.owner_alive = alive if isinstance(alive, bool) else None
            run.owner_heartbeat_ts = num(event.get("heartbeat"))
            hosts = event.get("hosts")
            run.hosts = [h for h in hosts if isinstance(h, dict)] if isinstance(
                hosts, list) else []
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
        if name == "attempt.reattached" and a is not None:
            self._carry_over(a)
        handler = _HANDLERS.get(str(name))
        if handler is not None:
            handler(run, d, a, event, ts)

    def _carry_over(self, a: ReplayedAttempt) -> None:
        """A reattached attempt keeps what an earlier run said of it (its later run only
        picks it up): its tool calls and the one it is in, its session, its note."""
        before = next((r.attempts[a.id] for r in reversed(self.runs[:-1])
                       if a.id in r.attempts), None)
        if before is None or a.tools or a.session_id is not None:
            return
        copies = {id(t): dataclasses.replace(t) for t in before.tools}
        a.tools = list(copies.values())
        a.open_tools = [copies.get(id(t), t) for t in before.open_tools]
        a.last_tool, a.session_id = before.last_tool, before.session_id
        a.note, a.progress = before.note, before.progress

    def settled_before(self, summary: Summary) -> None:
        """A delegation that settled before this run, as its summary tells it: a store
        gave it back (`dispatch(key=K)` of a settled key), so no event of this run is
        its. Nothing when the run knows it already."""
        run = self.run
        if summary.id in run.delegations:
            return
        d = self._delegation(run, summary.id, {"agent": summary.agent})
        d.scope, d.earlier = summary.scope, True
        for record in summary.attempts:
            a = self._attempt(run, d, record.id, {"agent": record.agent})
            a.outcome, a.duration_s, a.pid = record.outcome.value, record.duration_s, record.pid
            a.error, a.session_id = record.error, record.session_id
            a.tool_calls, a.last_tool = record.tool_calls, record.last_tool
        d.status, d.duration_s = summary.status.value, summary.duration_s
        d.error, d.timeout_kind = summary.error, summary.timeout_kind

    def _delegation(self, run: Run, delegation_id: str, event: Event) -> ReplayedDelegation:
        d = run.delegations.get(delegation_id)
        if d is not None:
            return d
        d = ReplayedDelegation(
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

    def _attempt(
        self, run: Run, d: ReplayedDelegation, attempt_id: str, event: Event
    ) -> ReplayedAttempt:
        a = run.attempts.get(attempt_id)
        if a is None:
            a = ReplayedAttempt(id=attempt_id, delegation_id=d.id, agent=_str(event.get("agent")))
            run.attempts[attempt_id] = a
            d.attempts.append(a)
        return a


_Handler = Callable[[Run, ReplayedDelegation, ReplayedAttempt | None, Event, float | None], None]


def _dispatched(
    run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None, e: Event, ts: float | None
) -> None:
    d.agent = _str(e.get("agent")) or d.agent
    d.scope = _str(e.get("scope"))
    d.depth = _int(e.get("depth"))
    d.policy = e["policy"] if isinstance(e.get("policy"), dict) else {}
    d.timeout_s = num(e.get("timeout_s")) or num(d.policy.get("timeout_s"))
    d.dispatched_ts = ts


def _started(
    run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None, e: Event, ts: float | None
) -> None:
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


def _reattached(
    run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None, e: Event, ts: float | None
) -> None:
    _started(run, d, a, e, ts)
    if a is not None:
        a.reattached = True


def _spawned(
    run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None, e: Event, ts: float | None
) -> None:
    """A process started after `attempt.started` (outside Zeus's mailbox): its pid."""
    if a is not None:
        a.pid = _int(e.get("pid"))
        a.pid_start_time = num(e.get("pid_start_time"))


def _heartbeat(
    run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None, e: Event, ts: float | None
) -> None:
    if a is not None:
        a.progress = e.get("progress")
        a.note = _str(e.get("note")) or a.note


def _tool(
    run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None, e: Event, ts: float | None
) -> None:
    """A tool call started, or ended: paired with its start by its call id, else with the
    latest start of its name; an end without one is a call seen only once it was over."""
    if a is None:
        return
    name = _str(e.get("tool")) or "tool"
    call_id = _str(e.get("call_id"))
    a.last_tool = name
    if e.get("phase") == "start":
        call = ReplayedTool(name, e.get("side_effects") is True, call_id, started_ts=ts)
        a.tools.append(call)
        a.open_tools.append(call)
        return
    began = next((t for t in reversed(a.open_tools) if t.call_id == call_id
                  and (call_id is not None or t.tool == name)), None)
    if began is not None:
        a.open_tools.remove(began)
    else:
        began = ReplayedTool(name, e.get("side_effects") is True, call_id)
        a.tools.append(began)
    began.ended_ts = ts
    began.duration_s = num(e.get("duration_s"))


def _timed_out(
    run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None, e: Event, ts: float | None
) -> None:
    if a is None:
        return
    elapsed = num(e.get("elapsed_s"))
    stale = e.get("event") == "attempt.stale"
    if stale:
        a.stale_after_s = elapsed
    else:
        a.timed_out_after_s = elapsed
    run.unresolved_timeouts.setdefault(d.id, []).append(len(run.timeouts))
    run.timeouts.append(
        TimeoutEntry(
            ts, d.id, a.id, a.agent, "stale" if stale else "deadline", elapsed, a.deadline_s
        )
    )


def _budget(
    run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None, e: Event, ts: float | None
) -> None:
    if a is not None:
        a.budget_exceeded = True


def _killed(
    run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None, e: Event, ts: float | None
) -> None:
    if a is not None:
        a.killed = _str(e.get("how"))
        a.kill_latency_s = num(e.get("latency_s"))
        a.pid = a.pid if a.pid is not None else _int(e.get("pid"))


def _session(
    run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None, e: Event, ts: float | None
) -> None:
    if a is not None:
        a.session_id = _str(e.get("session_id"))


def _fenced(
    run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None, e: Event, ts: float | None
) -> None:
    if a is not None:
        reason = _str(e.get("reason")) or "fenced"
        a.fenced = reason if a.fenced is None else f"{a.fenced}; {reason}"


def _ended(
    run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None, e: Event, ts: float | None
) -> None:
    if a is None:
        return
    a.ended_ts = ts
    a.duration_s = num(e.get("duration_s"))
    bad = e.get("bad_lines")
    a.bad_lines = bad if isinstance(bad, int) and not isinstance(bad, bool) else None
    a.session_id = _str(e.get("session_id")) or a.session_id
    if e.get("event") == "attempt.completed":
        a.outcome = "completed"
    else:
        a.outcome = _str(e.get("outcome")) or "error"
        a.error = _str(e.get("error"))
        calls = e.get("tool_calls")
        a.tool_calls = calls if isinstance(calls, int) and not isinstance(calls, bool) else None
        a.last_tool = _str(e.get("last_tool"))


def _lost(
    run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None, e: Event, ts: float | None
) -> None:
    """An attempt of an earlier run that recovery found gone (docs/design.md, "The store")."""
    if a is None:
        return
    a.ended_ts = ts
    a.outcome = "lost"
    a.error = _str(e.get("reason"))
    a.duration_s = num(e.get("duration_s"))
    a.pid = a.pid if a.pid is not None else _int(e.get("pid"))


def _then(run: Run, d: ReplayedDelegation, what: str) -> None:
    """Say in the timeout log what followed the delegation's unresolved timeouts."""
    for i in run.unresolved_timeouts.pop(d.id, ()):
        run.timeouts[i] = dataclasses.replace(run.timeouts[i], then=what)


def _retry(
    run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None, e: Event, ts: float | None
) -> None:
    backoff = num(e.get("backoff_s"))
    step = f"retry in {backoff:.2f}s" if backoff is not None else "retry"
    nxt = _str(e.get("next_attempt_id"))
    if a is not None:
        a.then = f"{step} as {nxt}" if nxt else step
    _then(run, d, step)


def _fallback(
    run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None, e: Event, ts: float | None
) -> None:
    step = f"fallback {e.get('from')} -> {e.get('to')}"
    if a is not None:
        a.then = step
    _then(run, d, step)


def _cancel(
    run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None, e: Event, ts: float | None
) -> None:
    d.cancel_requested = True
    d.cancel_reason = _str(e.get("reason"))


def _settled(
    run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None, e: Event, ts: float | None
) -> None:
    d.status = _str(e.get("status")) or "unknown"
    d.settled_ts = ts
    d.duration_s = num(e.get("duration_s"))
    d.error = _str(e.get("error"))
    d.timeout_kind = _str(e.get("timeout_kind"))
    _then(run, d, f"settled {d.status}")


def _resolved(
    run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None, e: Event, ts: float | None
) -> None:
    """A person settled it by hand (`zeus resolve`): the status they gave, who, why."""
    d.status = _str(e.get("status")) or d.status or "unknown"
    d.settled_ts = d.settled_ts if d.settled_ts is not None else ts
    d.resolved_by = _str(e.get("who")) or "?"
    d.resolved_note = _str(e.get("why"))
    _then(run, d, f"settled {d.status} by hand")


_HANDLERS: dict[str, _Handler] = {
    "delegation.dispatched": _dispatched,
    "attempt.started": _started,
    "attempt.spawned": _spawned,
    "attempt.session": _session,
    "attempt.reattached": _reattached,  # the same attempt, supervised on by a later run
    "attempt.heartbeat": _heartbeat,
    "attempt.tool": _tool,
    "attempt.timed_out": _timed_out,
    "attempt.stale": _timed_out,
    "attempt.budget_exceeded": _budget,
    "attempt.killed": _killed,
    "attempt.fenced": _fenced,
    "attempt.completed": _ended,
    "attempt.failed": _ended,
    "attempt.lost": _lost,
    "retry.scheduled": _retry,
    "fallback.dispatched": _fallback,
    "delegation.cancel_requested": _cancel,
    "delegation.settled": _settled,
    "delegation.resolved": _resolved,
}
