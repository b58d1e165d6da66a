"""The JSON the endpoints answer, made from a `View`: plain dicts of plain values.

`TreeCache.body` is `GET /api/tree`: the run's delegations in dispatch order, each with
`id`, `agent`, `status`, `parent_id` (the delegation that made it) and its
`attempts` (each with its latest tool calls, for the timeline), plus the timeout
tracking table and timeout log (`zeus timeouts`).
`delegation` is `GET /api/delegations/{id}`: one delegation with its
settlement (or its open state), each attempt's evidence and every event.
Statuses are the tracking table's: a settled status, `in progress`, or
`unsettled` (the run stopped without settling it). `hosts` is a shared store's
hosts, each with its lease as of now, and each delegation of one names its `host`.
"""

from __future__ import annotations

import json
import time
from typing import Any

from supervisor.journal import (
    Event,
    ReplayedAttempt,
    ReplayedDelegation,
    ReplayedTool,
    Run,
    TrackingRow,
    tracking_rows,
)
from supervisor.ui.view import View

__all__ = ["TreeCache", "delegation", "hosts"]

_SCOPE_CHARS = 240  # the tree shows the start of a scope; the delegation page shows it all
_TOOLS_SHOWN = 200  # an attempt's latest tool calls drawn on the timeline; the rest counted


def _tool(t: ReplayedTool) -> dict[str, Any]:
    fields = {"tool": t.tool, "side_effects": t.side_effects, "call_id": t.call_id,
              "started_ts": t.started_ts, "ended_ts": t.ended_ts, "duration_s": t.duration_s}
    return {k: v for k, v in fields.items() if v is not None}


def _tools(a: ReplayedAttempt) -> dict[str, Any]:
    """Its latest tool calls (`attempt.tool`), how many earlier ones are left out, and the
    one it is in while it runs."""
    shown = a.tools[-_TOOLS_SHOWN:]
    in_tool = a.in_tool
    return {
        "tools": [_tool(t) for t in shown] or None,
        "tools_left_out": len(a.tools) - len(shown) or None,
        "in_tool": None if in_tool is None else _tool(in_tool),
    }


def _attempt(a: ReplayedAttempt) -> dict[str, Any]:
    """What the journal says of an attempt: only the fields it has a value for."""
    fields = {
        "id": a.id,
        "agent": a.agent,
        "number": a.number,
        "outcome": a.outcome,
        "started_ts": a.started_ts,
        "ended_ts": a.ended_ts,
        "last_ts": a.last_ts,
        "deadline_s": a.deadline_s,
        "duration_s": a.duration_s,
        "timed_out_after_s": a.timed_out_after_s,
        "stale_after_s": a.stale_after_s,
        "budget_exceeded": a.budget_exceeded,
        "killed": a.killed,
        "kill_latency_s": a.kill_latency_s,
        "fenced": a.fenced,
        "pid": a.pid,
        "node": a.node,
        "progress": a.progress,
        "note": a.note,
        "tool_calls": a.tool_calls,
        "last_tool": a.last_tool,
        "bad_lines": a.bad_lines or None,
        "session_id": a.session_id,
        "error": a.error,
        "then": a.then,
        "reattached": a.reattached,
        **_tools(a),
    }
    return {k: v for k, v in fields.items() if v is not None and v is not False}


def _spend(events: list[Event]) -> tuple[dict[str, Any] | None, dict[str, int]]:
    """The last usage the events report, and how many partial results each attempt sent."""
    usage: dict[str, Any] | None = None
    partials: dict[str, int] = {}
    for e in events:
        if isinstance(e.get("usage"), dict):
            usage = e["usage"]
        if e.get("event") == "attempt.partial" and isinstance(e.get("attempt_id"), str):
            partials[e["attempt_id"]] = partials.get(e["attempt_id"], 0) + 1
    return usage, partials


def _budget(d: ReplayedDelegation) -> dict[str, Any]:
    budget = d.policy.get("budget")
    if not isinstance(budget, dict):
        return {}
    return {k: v for k, v in budget.items() if v is not None}


def _delegation(
    run: Run, d: ReplayedDelegation, row: TrackingRow, parent: str | None, events: list[Event]
) -> dict[str, Any]:
    usage, partials = _spend(events)
    attempts = [_attempt(a) | {"partials": partials.get(a.id, 0)} for a in d.attempts]
    host = next((e.get("host") for e in events if e.get("event") == "delegation.dispatched"),
                None)
    return {
        "id": d.id,
        "agent": d.agent,
        "agents": d.agents,
        "status": row.status,
        "parent_id": parent,
        "host": host if isinstance(host, str) else None,  # a shared store's: its owner now
        "depth": d.depth,
        "scope": (d.scope or "")[:_SCOPE_CHARS],
        "timeout_s": d.timeout_s,
        "partial_ok": d.partial_ok,
        "dispatched_ts": d.dispatched_ts,
        "settled_ts": d.settled_ts,
        "elapsed_s": row.elapsed_s,
        "error": d.error,
        "timeout_kind": d.timeout_kind,
        "cancel_requested": d.cancel_requested,
        "cancel_reason": d.cancel_reason,
        # settled by hand by a person (`zeus resolve`): who and their note
        "resolved": None if d.resolved_by is None else {"by": d.resolved_by,
                                                        "note": d.resolved_note},
        "retries": sum(1 for a in d.attempts if a.then and a.then.startswith("retry")),
        "fallbacks": sum(1 for a in d.attempts if a.then and a.then.startswith("fallback")),
        "usage": usage,
        "budget": _budget(d),
        "attempts": attempts,
    }


def _parents(run: Run) -> dict[str, str]:
    """Each delegation's parent as the tree nests it (a parent named by its attempt too)."""
    return {child.id: d.id for d in run.delegations.values() for child in d.children}


def _timeouts(run: Run) -> list[dict[str, Any]]:
    return [
        {
            "ts": e.ts,
            "delegation_id": e.delegation_id,
            "attempt_id": e.attempt_id,
            "agent": e.agent,
            "kind": e.kind,
            "elapsed_s": e.elapsed_s,
            "deadline_s": e.deadline_s,
            "then": e.then,
        }
        for e in run.timeouts
    ]


def _tracking(row: TrackingRow) -> dict[str, Any]:
    return {
        "delegation_id": row.delegation_id,
        "agent": row.agent,
        "timeout_s": row.timeout_s,
        "status": row.status,
        "partial_ok": row.partial_ok,
        "elapsed_s": row.elapsed_s,
        "attempts": row.attempts,
    }


def _run(view: View, run: Run) -> dict[str, Any]:
    return {
        "index": run.index,
        "of": len(view.journal.runs),
        "started_ts": run.started_ts,
        "stopped_ts": run.stopped_ts,
        "last_ts": run.last_ts,
        # Nothing more will come: its Zeus stopped, or its store's owner is dead; then
        # `ended_ts` is where open delegations' time stops.
        "owner_gone": run.owner_gone,
        "ended_ts": run.open_until(time.time()) if run.owner_gone else None,
        "events": run.events,
        "intensity_exceeded": run.intensity,
    }


def hosts(view: View) -> list[dict[str, Any]] | None:
    """A shared store's hosts, oldest first, each lease's seconds left as of now (negative
    once it expired); None for a source without hosts (a journal, a SQLite store)."""
    if view.hosts is None:
        return None
    since_read = time.monotonic() - view.hosts_read
    out = []
    for h in view.hosts:
        left = h.get("lease_left_s")
        out.append({
            "id": h.get("id"),
            "pid": h.get("pid"),
            "host": h.get("host"),
            "since": h.get("since"),
            "lease_until": h.get("lease_until"),
            "lease_left_s": round(left - since_read, 3) if isinstance(left, int | float) else None,
            "released": h.get("released"),
            "taken_by": h.get("taken_by"),
            "owns": h.get("owns"),
        })
    return out


class TreeCache:
    """`GET /api/tree`'s body, kept per delegation: a settled delegation's part is made
    again only after an event of its arrives, an open one's on every call (its elapsed
    time moves), so a large journal that grows costs what changed. Used by one thread."""

    def __init__(self) -> None:
        self._parts: dict[tuple[int, str], tuple[int, bytes, bytes]] = {}
        self._resets = 0

    def body(self, view: View, run: Run) -> bytes:
        """The tree of `run` as JSON bytes."""
        if view.resets != self._resets:
            self._parts.clear()
            self._resets = view.resets
        stale = {
            d.id: d
            for d in run.delegations.values()
            if not d.settled
            or (part := self._parts.get((run.index, d.id))) is None
            or part[0] != view.version(run, d.id)
        }
        if stale:  # the tracking table's rows of just these, as `zeus timeouts` makes them
            parents = _parents(run)
            only = Run(index=run.index, stopped_ts=run.stopped_ts, last_ts=run.last_ts,
                       store=run.store, owner_alive=run.owner_alive,
                       owner_heartbeat_ts=run.owner_heartbeat_ts, delegations=stale)
            for d, row in zip(stale.values(), tracking_rows(only), strict=True):
                events = view.events_of(run, d.id)
                self._parts[(run.index, d.id)] = (
                    view.version(run, d.id),
                    _dumps(_delegation(run, d, row, parents.get(d.id), events)),
                    _dumps(_tracking(row)),
                )
        parts = [self._parts[(run.index, d_id)] for d_id in run.delegations]
        delegations = [part[1] for part in parts]
        tracking = [part[2] for part in parts]
        rest = _dumps({
            "source": view.source.label,
            "seq": view.seq,
            "run": _run(view, run),
            "timeouts": _timeouts(run),
            "notes": view.journal.notes[-50:],
        })
        return b"".join([
            b'{"delegations": [', b", ".join(delegations), b'], "tracking": [',
            b", ".join(tracking), b"], ", rest[1:],
        ])


def _dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


def delegation(view: View, delegation_id: str) -> dict[str, Any] | None:
    """`GET /api/delegations/{id}`, or None when no run has it."""
    found = view.find(delegation_id)
    if found is None:
        return None
    run, d = found
    row = next(r for r in tracking_rows(run) if r.delegation_id == d.id)
    events = view.events_of(run, d.id)
    body = _delegation(run, d, row, _parents(run).get(d.id), events)
    settled = next((e for e in reversed(events) if e.get("event") in (
        "delegation.settled", "delegation.resolved")), None)  # the last word: a person's
    body["scope"] = d.scope
    body["policy"] = d.policy
    body["run"] = _run(view, run)
    body["summary"] = settled  # what the journal says of its settlement; None while open
    body["open"] = None if d.settled else {
        "attempt": d.attempts[-1].id if d.attempts else None,
        "since_s": row.elapsed_s,
    }
    body["children"] = [c.id for c in d.children]
    body["partial_results"] = [
        {"attempt_id": e.get("attempt_id"), "ts": e.get("ts"), "item": e.get("item")}
        for e in events
        if e.get("event") == "attempt.partial"
    ]
    body["events"] = events
    return body
