"""What `zeus.tree()` returns: the open delegations as a tree, with the supervisor's own
counters. Built in Zeus's actor thread (the `Snapshot` message)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from actors import Usage
from supervisor.core.settlement import as_record
from supervisor.core.state import Delegation
from supervisor.rules.lag import MailboxLag
from supervisor.rules.tree_shape import nest

__all__ = ["snapshot_node", "tree_snapshot"]


def tree_snapshot(
    open_: Mapping[str, Delegation],
    now: float,
    *,
    queued: int,
    settled: int,
    abandoned_threads: int,
    dropped: int,
    lag: MailboxLag,
    usage: Usage,
) -> dict[str, Any]:
    """The open delegations nested under their parents, and the counters beside them."""
    return {
        "delegations": nest({d.id: snapshot_node(d, now) for d in open_.values()}),
        "open": len(open_),
        "queued": queued,
        "settled": settled,
        "abandoned_threads": abandoned_threads,
        "dropped_messages": dropped,
        "mailbox_lag": lag.snapshot(),
        "usage": usage.model_dump(),
        "actor_cpu_s": time.thread_time(),  # CPU the supervisor's own thread has used
    }


def snapshot_node(d: Delegation, now: float) -> dict[str, Any]:
    """One open delegation as `zeus.tree()` shows it (children filled in by the caller)."""
    a = d.current
    attempts = [as_record(r).model_dump(mode="json") for r in d.attempts]
    if a is not None:
        attempts.append({
            "id": a.id,
            "agent": a.agent,
            # starting: its child does not run the work yet (its deadline is the bound on
            # that wait, spawn_timeout_s; docs/design.md, "An attempt's clock")
            "state": "stopping" if a.stopping_since is not None
            else "starting" if a.start_by is not None else "running",
            "pid": a.pid,
            "node": a.child.node if a.child else None,
            "elapsed_s": round(now - a.started_at, 3),
            "deadline_in_s": round(a.deadline - now, 3),
            "timeout_s": round(a.deadline - a.started_at, 3),
            "progress": a.watch.progress,
            "last_progress_s_ago": round(now - a.watch.progressed_at, 3),
            "last_seen_s_ago": round(now - a.watch.seen_at, 3),
            "tool_calls": a.tool_calls,
            "last_tool": a.last_tool,
            "in_tool": a.in_tool,
            # how long it has been in the oldest tool call in flight
            "in_tool_s": round(now - a.tools[0].since, 3) if a.tools else None,
            "last_note": a.last_note,
        })
    return {
        "id": d.id,
        "agent": d.agent,
        "requested_agent": d.brief.agent,
        "scope": d.brief.scope,
        "state": d.state,
        "parent_id": d.parent_id,
        "depth": d.depth,
        "elapsed_s": round(now - d.dispatched_at, 3),
        "partials": len(d.partials),
        "usage": d.usage.model_dump(),
        "cancel_requested": d.cancel_requested,
        "attempts": attempts,
        "children": [],
    }
