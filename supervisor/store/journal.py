"""A store read as a journal: the events its rows stand for, in the order they were written.

`store_events(path)` opens the store read-only (its owner may be running) and
yields the same dicts a JSONL journal holds (docs/formats.md), rebuilt from the
rows: `zeus.started` (the owner; while it holds the store, `owner_alive` and its
last `heartbeat`), `delegation.dispatched`, `attempt.started`, `attempt.spawned`
(the child's pid), `attempt.timed_out` / `attempt.stale` / `attempt.budget_exceeded`
(for an attempt that ended so), `attempt.completed` / `attempt.failed`,
`retry.scheduled`, `delegation.settled`, and `zeus.stopped` when the owner gave
the store up. Heartbeats and charges are not events here. Called from the
CLI's main thread (`zeus tree|timeouts|sweep STORE`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from actors import Summary
from supervisor.errors import StoreError
from supervisor.store import reads
from supervisor.store.base import Owner, StoredDelegation
from supervisor.store.owner import owner_alive
from supervisor.store.schema import inspect, is_sqlite_file, readonly_uri

__all__ = ["blocked_delegations", "by_hand", "is_sqlite_file", "is_store_url",
           "left_by_gone_hosts", "open_count", "path_or_url", "resolved_by_hand", "store_events"]

Event = dict[str, Any]
_STOPPED = {"timeout": "attempt.timed_out", "stale": "attempt.stale",
            "budget_exceeded": "attempt.budget_exceeded"}


_BY_HAND = "resolved by hand as "


def resolved_by_hand(status: str, who: str, note: str) -> str:
    """The line a summary keeps in its risks once a person settled it (`zeus.resolve`):
    the store keeps no event, so `by_hand` reads it back for `zeus tree STORE`."""
    return f"{_BY_HAND}{status} by {who}: {note}"


def by_hand(risks: Iterable[Any]) -> tuple[str, str, str] | None:
    """(status, who, note) of a summary a person settled, from its risks; None: none."""
    for risk in reversed(list(risks)):
        if isinstance(risk, str) and risk.startswith(_BY_HAND) and ": " in risk:
            head, note = risk[len(_BY_HAND):].split(": ", 1)
            status, sep, who = head.partition(" by ")
            if sep:
                return status, who, note
    return None


def _base(event: str, ts: float, delegation_id: str | None, attempt_id: str | None,
          parent_id: str | None, agent: str | None, **fields: Any) -> tuple[float, Event]:
    return ts, {"ts": ts, "event": event, "delegation_id": delegation_id,
                "attempt_id": attempt_id, "parent_id": parent_id, "agent": agent, **fields}


def _owner_state(owner: tuple[Any, ...] | None) -> Event:
    """Whether the store's owner lives and its last heartbeat (wall clock), for
    `zeus.started`: a store holds no heartbeat events, so a reader needs them to say how
    long an open delegation has run (to now, or to the dead owner's last heartbeat)."""
    if owner is None or owner[2] is not None:  # none yet, or released: `zeus.stopped` says it
        return {}
    pid, since, _, pid_start, host, heartbeat = owner
    alive = owner_alive(Owner(pid=pid, pid_start_time=pid_start, host=host, since=since,
                              heartbeat=heartbeat))
    return {"owner_alive": alive, "heartbeat": heartbeat}


def is_store_url(where: object) -> bool:
    """`where` names a PostgreSQL store (`postgresql://` or `postgres://`)."""
    return isinstance(where, str) and where.startswith(("postgresql://", "postgres://"))


_is_url = is_store_url


def path_or_url(text: str) -> Path | str:
    """A command-line argument naming a journal or a store: a PostgreSQL URL as given
    (a path would fold its `//`), anything else a path."""
    return text if is_store_url(text) else Path(text)


def store_events(path: str | Path) -> Iterator[Event]:
    """The store's events in write order. `StoreError` when it is not a Zeus store. A
    PostgreSQL store (a URL) is read in one read-only transaction; its `zeus.started`
    carries `hosts`, every host with its lease and how many open delegations it owns."""
    if _is_url(path):
        from supervisor.store.postgres import read_only

        with read_only(str(path)) as (con, hosts):
            yield from _events(con, _hosts_head(hosts))
        return
    con = _read_only(path)
    try:
        yield from _events(con)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: cannot read the store: {exc}") from None
    finally:
        con.close()


def _hosts_head(hosts: list[Any]) -> tuple[Event, float | None]:
    """`zeus.started`'s fields for a store of many hosts (the first host's pid; live
    while a host holds its lease), and when the last host stopped if all did."""
    live = [h for h in hosts if h.released is None and h.taken_by is None
            and h.lease_left_s > 0]
    ended = [h.released for h in hosts if h.released is not None]
    stopped = max(ended) if hosts and len(ended) == len(hosts) else None
    return {
        "pid": hosts[0].pid if hosts else None, "since": hosts[0].since if hosts else None,
        "owner_alive": bool(live) if hosts else None,
        "heartbeat": max((h.lease_until for h in hosts), default=None),
        "hosts": [{"id": h.id, "pid": h.pid, "host": h.host, "since": h.since,
                   "lease_until": h.lease_until, "lease_left_s": round(h.lease_left_s, 3),
                   "released": h.released, "taken_by": h.taken_by, "owns": h.owns}
                  for h in hosts],
    }, stopped


def _read_only(path: str | Path) -> sqlite3.Connection:
    if inspect(path) is None:
        raise StoreError(f"{path}: no store there (no file, or an empty one)")
    return sqlite3.connect(readonly_uri(path), uri=True)


def blocked_delegations(path: str | Path) -> list[tuple[StoredDelegation, Summary]]:
    """What waits for a person in the store: each delegation settled `blocked`, oldest
    first, with its summary (its reason in `error`). Read-only: its owner may run."""
    if _is_url(path):
        from supervisor.store.postgres import read_only

        with read_only(str(path)) as (con, _):
            return reads.blocked(con)
    con = _read_only(path)
    try:
        return reads.blocked(con)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: cannot read the store: {exc}") from None
    finally:
        con.close()


def left_by_gone_hosts(path: str | Path) -> list[tuple[StoredDelegation, float | None]]:
    """What a host that is gone left open, with its last sign of life (its owner's last
    heartbeat, a shared store's host's lease end): its outcome is unknown until a Zeus
    opens the store and recovers it (docs/design.md, "The store"). Read-only."""
    if _is_url(path):
        from supervisor.store.postgres import read_only

        with read_only(str(path)) as (con, hosts):
            return [(d, h.lease_until) for h in hosts
                    if h.released is None and h.taken_by is None and h.lease_left_s <= 0
                    for d in reads.open_rows(con, "status IS NULL AND owner = ?", (h.id,))]
    con = _read_only(path)
    try:
        owner = con.execute("SELECT pid, since, released, pid_start_time, host, heartbeat"
                            " FROM owner").fetchone()
        if _owner_state(owner).get("owner_alive") is not False:  # none, released or alive
            return []
        return [(d, owner[5]) for d in reads.open_rows(con)]
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: cannot read the store: {exc}") from None
    finally:
        con.close()


def open_count(path: str | Path) -> int:
    """How many delegations the store holds open (0 for no store). Read-only."""
    if _is_url(path):
        from supervisor.store.postgres import read_only

        with read_only(str(path)) as (con, _):
            return reads.counts(con).open
    if inspect(path) is None:
        return 0
    con = sqlite3.connect(readonly_uri(path), uri=True)
    try:
        return reads.counts(con).open
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: cannot read the store: {exc}") from None
    finally:
        con.close()


def _events(con: Any, hosts: tuple[Event, float | None] | None = None) -> Iterator[Event]:
    """The events of the store on `con`: a SQLite file's (its one owner), or, with
    `hosts` (`zeus.started`'s fields and when the last host stopped), a shared store's,
    whose `delegation.dispatched` names the host that owns the delegation now (`host`)."""
    if hosts is None:
        owner = con.execute("SELECT pid, since, released, pid_start_time, host, heartbeat"
                            " FROM owner").fetchone()
        head = {"pid": owner[0] if owner else None, **_owner_state(owner)}
        since, stopped = (owner[1], owner[2]) if owner else (None, None)
    else:
        head, stopped = dict(hosts[0]), hosts[1]
        since = head.pop("since")
    first = con.execute("SELECT min(created) FROM delegations").fetchone()[0]
    known = [x for x in (since, first) if x is not None]
    started = min(known) if known else 0.0
    yield {"ts": started, "event": "zeus.started", "delegation_id": None, "attempt_id": None,
           "parent_id": None, "agent": None, "routing": None, "store": True, **head}
    depth: dict[str, int] = {}
    parents: dict[str, str | None] = {}
    rows: list[tuple[int, tuple[float, Event]]] = []
    ends: dict[str, float] = {}
    owner = "d.owner" if hosts is not None else "NULL"  # a shared store's rows name their host
    for (d_id, parent, agent, brief, policy, created, seq, status, summary,
         settled, settled_seq, host) in con.execute(
            "SELECT d.id, d.parent_id, d.agent, d.brief, p.policy, d.created, d.seq, d.status,"
            f" d.summary, d.settled, d.settled_seq, {owner} FROM delegations d"
            " LEFT JOIN policies p ON p.id = d.policy ORDER BY d.seq"):
        depth[d_id] = depth.get(parent, 0) + 1 if parent else 1
        parents[d_id] = parent
        b, p = json.loads(brief), json.loads(policy) if policy else {}
        owned = {} if host is None else {"host": host}
        rows.append((seq, _base("delegation.dispatched", created, d_id, None, parent, agent,
                                scope=b.get("scope"), depth=depth[d_id], policy=p,
                                timeout_s=b.get("timeout_s") or p.get("timeout_s"),
                                **owned)))
        if status is not None:
            s = json.loads(summary)
            rows.append((settled_seq, _base(
                "delegation.settled", settled, d_id, None, parent, agent, status=status,
                duration_s=s.get("duration_s"), attempts=len(s.get("attempts", ())),
                timeout_kind=s.get("timeout_kind"),
                error=(s.get("error") or "").split("\n")[0] or None, usage=s.get("usage"))))
            hand = by_hand(s.get("risks") or ())
            if hand is not None:  # a person settled it (`zeus resolve`)
                rows.append((settled_seq, _base("delegation.resolved", settled, d_id, None,
                                                parent, agent, status=hand[0], who=hand[1],
                                                why=hand[2])))
    for (a_id, d_id, number, agent, start, deadline, seq, pid, pid_start, node, identity_seq,
         outcome, ended, error, record, end_seq) in con.execute(
            "SELECT id, delegation_id, number, agent, started, deadline, seq, pid,"
            " pid_start_time, node, identity_seq, outcome, ended, error, record, end_seq"
            " FROM attempts"):
        parent = parents.get(d_id)
        rows.append((seq, _base("attempt.started", start, d_id, a_id, parent, agent,
                                attempt=number, pid=None, pid_start_time=None, node=None,
                                deadline_s=None if deadline is None else deadline - start)))
        if identity_seq is not None:
            rows.append((identity_seq, _base("attempt.spawned", start, d_id, a_id, parent,
                                             agent, pid=pid, pid_start_time=pid_start,
                                             node=node)))
        if outcome is not None:
            ends[a_id] = ended
            r = json.loads(record) if record else {}
            name = "attempt.completed" if outcome == "completed" else "attempt.failed"
            extra = {} if name == "attempt.completed" else {
                "outcome": outcome, "error": error, "tool_calls": r.get("tool_calls"),
                "last_tool": r.get("last_tool")}
            if outcome in _STOPPED:  # the stop that ended it, as the journal says it first
                rows.append((end_seq, _base(_STOPPED[outcome], ended, d_id, a_id, parent,
                                            agent, elapsed_s=round(ended - start, 6))))
            rows.append((end_seq, _base(name, ended, d_id, a_id, parent, agent,
                                        duration_s=r.get("duration_s", ended - start), **extra)))
    for d_id, after, due, agent, seq in con.execute(
            "SELECT delegation_id, after_attempt, due, agent, seq FROM retries"):
        at = ends.get(after, due)
        rows.append((seq, _base("retry.scheduled", at, d_id, after, parents.get(d_id), agent,
                                backoff_s=round(max(0.0, due - at), 6), next_agent=agent)))
    rows.sort(key=lambda r: r[0])
    yield from (event for _, (_, event) in rows)
    if stopped is not None:
        yield {"ts": stopped, "event": "zeus.stopped", "delegation_id": None,
               "attempt_id": None, "parent_id": None, "agent": None}
