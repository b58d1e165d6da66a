"""The store's readers over one SQLite connection: what recovery and lookups need.

Called by `SqliteStore` (Zeus's thread) and by the CLI's reader (its main thread).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from actors import AttemptRecord, Brief, Status, Summary, Usage
from supervisor.store.base import (
    OpenDelegation,
    StoreCounts,
    StoredAttempt,
    StoredDelegation,
    StoredRetry,
)

__all__ = ["attempt", "children", "counts", "delegation", "issued", "one", "open_delegations",
           "prune", "summary", "total_spent"]

DELEGATION_COLUMNS = ("id, key, parent_id, ordinal, agent, brief, policy, deadline, created,"
                      " status, settled")
ATTEMPT_COLUMNS = ("id, delegation_id, number, agent, started, deadline, pid, pid_start_time,"
                   " pgid, node, calls, input_tokens, output_tokens, cost, outcome, ended,"
                   " error, record")


def delegation(row: tuple[Any, ...]) -> StoredDelegation:
    return StoredDelegation(
        id=row[0], key=row[1], parent_id=row[2], ordinal=row[3], agent=row[4],
        brief=Brief.model_validate_json(row[5]), policy=json.loads(row[6]), deadline=row[7],
        created=row[8], status=Status(row[9]) if row[9] is not None else None,
        settled_at=row[10],
    )


def attempt(row: tuple[Any, ...]) -> StoredAttempt:
    return StoredAttempt(
        id=row[0], delegation_id=row[1], number=row[2], agent=row[3], started=row[4],
        deadline=row[5], pid=row[6], pid_start_time=row[7], pgid=row[8], node=row[9],
        usage=Usage(calls=row[10], input_tokens=row[11], output_tokens=row[12], cost=row[13]),
        outcome=row[14], ended=row[15], error=row[16],
        record=AttemptRecord.model_validate_json(row[17]) if row[17] is not None else None,
    )


def one(con: sqlite3.Connection, column: str, value: str) -> StoredDelegation | None:
    """The delegation whose `column` (id or key) is `value`."""
    assert column in ("id", "key")
    row = con.execute(f"SELECT {DELEGATION_COLUMNS} FROM delegations WHERE {column} = ?",
                      (value,)).fetchone()
    return delegation(row) if row is not None else None


def children(con: sqlite3.Connection, parent_id: str) -> list[StoredDelegation]:
    rows = con.execute(f"SELECT {DELEGATION_COLUMNS} FROM delegations WHERE parent_id = ?"
                       " ORDER BY ordinal, seq", (parent_id,))
    return [delegation(row) for row in rows]


def summary(con: sqlite3.Connection, column: str, value: str) -> Summary | None:
    assert column in ("id", "key")
    row = con.execute(f"SELECT summary FROM delegations WHERE {column} = ?"
                      " AND summary IS NOT NULL", (value,)).fetchone()
    return Summary.model_validate_json(row[0]) if row is not None else None


def counts(con: sqlite3.Connection) -> StoreCounts:
    open_, settled = con.execute(
        "SELECT count(*) - count(status), count(status) FROM delegations").fetchone()
    (attempts,) = con.execute("SELECT count(*) FROM attempts").fetchone()
    return StoreCounts(open=open_, settled=settled, attempts=attempts)


def total_spent(con: sqlite3.Connection) -> Usage:
    """What every stored attempt charged, summed."""
    row = con.execute("SELECT coalesce(sum(calls), 0), coalesce(sum(input_tokens), 0),"
                      " coalesce(sum(output_tokens), 0), coalesce(sum(cost), 0.0)"
                      " FROM attempts").fetchone()
    return Usage(calls=row[0], input_tokens=row[1], output_tokens=row[2], cost=row[3])


def issued(con: sqlite3.Connection) -> dict[str, int]:
    """The highest n of each agent's `<agent>-<n>` delegation ids."""
    highest: dict[str, int] = {}
    for (delegation_id,) in con.execute("SELECT id FROM delegations"):
        agent, _, n = delegation_id.rpartition("-")
        if agent and n.isdigit():
            highest[agent] = max(highest.get(agent, 0), int(n))
    return highest


def _grouped(rows: Iterable[tuple[Any, ...]]) -> dict[str, list[tuple[Any, ...]]]:
    out: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        out.setdefault(row[0], []).append(row[1:])
    return out


def open_delegations(con: sqlite3.Connection) -> list[OpenDelegation]:
    """Every open delegation in the order they were recorded (parents before children)."""
    open_ids = "SELECT id FROM delegations WHERE status IS NULL"
    rows = con.execute(f"SELECT {DELEGATION_COLUMNS} FROM delegations WHERE status IS NULL"
                       " ORDER BY seq").fetchall()
    if not rows:
        return []
    attempts = _grouped(
        (row[1], *row) for row in con.execute(
            f"SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE delegation_id IN ({open_ids})"
            " ORDER BY delegation_id, number"))
    partials = _grouped(con.execute(
        f"SELECT delegation_id, item FROM partials WHERE delegation_id IN ({open_ids})"
        " ORDER BY delegation_id, seq"))
    retries = {row[0]: StoredRetry(*row[1:]) for row in con.execute(
        f"SELECT delegation_id, after_attempt, due, agent FROM retries WHERE delegation_id IN"
        f" ({open_ids}) ORDER BY seq")}  # the last one of each wins
    found = []
    for row in rows:
        d = delegation(row)
        tried = tuple(attempt(a) for a in attempts.get(d.id, ()))
        spent = Usage()
        for a in tried:
            spent = spent + a.usage
        found.append(OpenDelegation(
            delegation=d, attempts=tried, spent=spent,
            partials=tuple(json.loads(p[0]) for p in partials.get(d.id, ())),
            retry=retries.get(d.id),
        ))
    return found


def prune(con: sqlite3.Connection, cutoff: float) -> int:
    """Delete delegations settled before `cutoff` (not those whose parent is still open),
    with their attempts, partials and retries. One transaction; how many went."""
    doomed = ("SELECT d.id FROM delegations d WHERE d.settled < ? AND NOT EXISTS (SELECT 1"
              " FROM delegations p WHERE p.id = d.parent_id AND p.status IS NULL)")
    (n,) = con.execute(f"SELECT count(*) FROM ({doomed})", (cutoff,)).fetchone()
    if not n:
        return 0
    con.execute("BEGIN")
    try:
        for table in ("attempts", "partials", "retries"):
            con.execute(f"DELETE FROM {table} WHERE delegation_id IN ({doomed})", (cutoff,))
        con.execute(f"DELETE FROM delegations WHERE id IN ({doomed})", (cutoff,))
        con.execute("COMMIT")
    except BaseException:
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise
    return int(n)
