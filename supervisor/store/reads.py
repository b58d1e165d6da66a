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

__all__ = ["attempt", "blocked", "children", "counts", "delegation", "issued", "one",
           "open_delegations", "prune", "reopen", "summary", "total_spent"]

DELEGATION_COLUMNS = ("d.id, d.key, d.parent_id, d.ordinal, d.agent, d.brief, d.policy,"
                      " d.deadline, d.created, d.status, d.settled, d.answer")
FROM_DELEGATIONS = "FROM delegations d"
ATTEMPT_COLUMNS = ("id, delegation_id, number, agent, started, deadline, pid, pid_start_time,"
                   " pgid, node, calls, input_tokens, output_tokens, cost, outcome, ended,"
                   " error, record, charged_progress")


class Policies:
    """Stored policies by id, each read once (delegations of one agent share it)."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self._con = con
        self._known: dict[str, dict[str, Any]] = {}

    def __call__(self, policy_id: str) -> dict[str, Any]:
        found = self._known.get(policy_id)
        if found is None:
            row = self._con.execute("SELECT policy FROM policies WHERE id = ?",
                                    (policy_id,)).fetchone()
            found = self._known[policy_id] = json.loads(row[0]) if row else {}
        return found


def delegation(row: tuple[Any, ...], policies: Policies) -> StoredDelegation:
    """A delegation from its row; its policy dict is shared with others: do not change it."""
    return StoredDelegation(
        id=row[0], key=row[1], parent_id=row[2], ordinal=row[3], agent=row[4],
        brief=Brief.model_validate_json(row[5]), policy=policies(row[6]), deadline=row[7],
        created=row[8], status=Status(row[9]) if row[9] is not None else None,
        settled_at=row[10], answer=json.loads(row[11]) if row[11] is not None else None,
    )


def attempt(row: tuple[Any, ...]) -> StoredAttempt:
    return StoredAttempt(
        id=row[0], delegation_id=row[1], number=row[2], agent=row[3], started=row[4],
        deadline=row[5], pid=row[6], pid_start_time=row[7], pgid=row[8], node=row[9],
        usage=Usage.model_construct(calls=row[10], input_tokens=row[11],
                                    output_tokens=row[12], cost=row[13]),  # ours: valid
        outcome=row[14], ended=row[15], error=row[16],
        record=AttemptRecord.model_validate_json(row[17]) if row[17] is not None else None,
        charged_progress=row[18],
        in_tool=row[19] if len(row) > 19 else None,  # a shared store's column
    )


def one(con: sqlite3.Connection, column: str, value: str) -> StoredDelegation | None:
    """The delegation whose `column` (id or key) is `value`."""
    assert column in ("id", "key")
    row = con.execute(f"SELECT {DELEGATION_COLUMNS} {FROM_DELEGATIONS} WHERE d.{column} = ?",
                      (value,)).fetchone()
    return delegation(row, Policies(con)) if row is not None else None


def children(con: sqlite3.Connection, parent_id: str) -> list[StoredDelegation]:
    rows = con.execute(f"SELECT {DELEGATION_COLUMNS} {FROM_DELEGATIONS} WHERE d.parent_id = ?"
                       " ORDER BY d.ordinal, d.seq", (parent_id,)).fetchall()
    policies = Policies(con)
    return [delegation(row, policies) for row in rows]


def summary(con: sqlite3.Connection, column: str, value: str) -> Summary | None:
    assert column in ("id", "key")
    row = con.execute(f"SELECT summary FROM delegations WHERE {column} = ?"
                      " AND summary IS NOT NULL", (value,)).fetchone()
    return Summary.model_validate_json(row[0]) if row is not None else None


def counts(con: sqlite3.Connection) -> StoreCounts:
    # settled from its partial index; open ones have none (an index that every delegation
    # enters and leaves costs two pages a delegation at each commit): counted from all
    (total,) = con.execute("SELECT count(*) FROM delegations").fetchone()
    (settled,) = con.execute(
        "SELECT count(*) FROM delegations WHERE settled IS NOT NULL").fetchone()
    open_ = total - settled
    (attempts,) = con.execute("SELECT count(*) FROM attempts").fetchone()
    return StoreCounts(open=open_, settled=settled, attempts=attempts)


def total_spent(con: sqlite3.Connection) -> Usage:
    """What every stored attempt charged, summed."""
    row = con.execute("SELECT coalesce(sum(calls), 0), coalesce(sum(input_tokens), 0),"
                      " coalesce(sum(output_tokens), 0), coalesce(sum(cost), 0.0)"
                      " FROM attempts").fetchone()
    return Usage(calls=row[0], input_tokens=row[1], output_tokens=row[2], cost=row[3])


def agent_sessions(con: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """(agent, session key, agent session id) of each ended attempt that has all three,
    in write order."""
    rows = con.execute(
        "SELECT a.agent, json_extract(d.brief, '$.session'),"
        " json_extract(a.record, '$.session_id') FROM attempts a"
        " JOIN delegations d ON d.id = a.delegation_id"
        " WHERE json_extract(d.brief, '$.session') IS NOT NULL"
        " AND json_extract(a.record, '$.session_id') IS NOT NULL ORDER BY a.end_seq")
    return [(agent, str(key), str(sid)) for agent, key, sid in rows]


def sessions(con: sqlite3.Connection) -> set[tuple[str, str]]:
    """(agent, session key) of every stored attempt whose brief names a session."""
    rows = con.execute(
        "SELECT DISTINCT a.agent, json_extract(d.brief, '$.session') FROM attempts a"
        " JOIN delegations d ON d.id = a.delegation_id"
        " WHERE json_extract(d.brief, '$.session') IS NOT NULL")
    return {(agent, str(key)) for agent, key in rows}


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


def open_delegations(con: Any, only: str | None = None, where: str | None = None,
                     args: tuple[Any, ...] = (), *,
                     attempt_columns: str = ATTEMPT_COLUMNS) -> list[OpenDelegation]:
    """Every open delegation in the order they were recorded (parents before children);
    with `only`, that one delegation, open or settled, as recovery would see it; with
    `where` (a condition on the delegations' own columns) and its `args`, those.
    `attempt_columns`: `ATTEMPT_COLUMNS`, and a shared store's `in_tool` after them."""
    if where is None:
        where, args = ("status IS NULL", ()) if only is None else ("id = ?", (only,))
    open_ids = f"SELECT id FROM delegations WHERE {where}"
    rows = con.execute(f"SELECT {DELEGATION_COLUMNS} {FROM_DELEGATIONS} WHERE d.{where}"
                       " ORDER BY d.seq", args).fetchall()
    if not rows:
        return []
    attempts = _grouped(
        (row[1], *row) for row in con.execute(
            f"SELECT {attempt_columns} FROM attempts WHERE delegation_id IN ({open_ids})"
            " ORDER BY delegation_id, number", args))
    partials = _grouped(con.execute(
        f"SELECT delegation_id, item FROM partials WHERE delegation_id IN ({open_ids})"
        " ORDER BY delegation_id, seq", args))
    retries = {row[0]: StoredRetry(*row[1:]) for row in con.execute(
        f"SELECT delegation_id, after_attempt, due, agent FROM retries WHERE delegation_id IN"
        f" ({open_ids}) ORDER BY seq", args)}  # the last one of each wins
    found = []
    policies = Policies(con)
    for row in rows:
        d = delegation(row, policies)
        tried = tuple(attempt(a) for a in attempts.get(d.id, ()))
        spent = tried[0].usage if len(tried) == 1 else sum_usage(a.usage for a in tried)
        found.append(OpenDelegation(
            delegation=d, attempts=tried, spent=spent,
            partials=tuple(json.loads(p[0]) for p in partials.get(d.id, ())),
            retry=retries.get(d.id),
        ))
    return found


def open_rows(con: Any, where: str = "status IS NULL",
              args: tuple[Any, ...] = ()) -> list[StoredDelegation]:
    """The open delegations (with `where`, a condition on their own columns: those), in
    the order they were recorded, without their attempts."""
    rows = con.execute(f"SELECT {DELEGATION_COLUMNS} {FROM_DELEGATIONS} WHERE d.{where}"
                       " ORDER BY d.seq", args).fetchall()
    policies = Policies(con)
    return [delegation(row, policies) for row in rows]


def blocked(con: sqlite3.Connection) -> list[tuple[StoredDelegation, Summary]]:
    """Every delegation settled `blocked` (what waits for a person), oldest first, with
    its summary (its reason in `error`)."""
    rows = con.execute(f"SELECT {DELEGATION_COLUMNS}, d.summary {FROM_DELEGATIONS}"
                       " WHERE d.status = 'blocked' ORDER BY d.settled_seq").fetchall()
    policies = Policies(con)
    return [(delegation(row[:-1], policies), Summary.model_validate_json(row[-1]))
            for row in rows]


def reopen(con: sqlite3.Connection, delegation_id: str, answer: str | None) -> None:
    """A settled delegation open again (a person resumed it): its status and summary go,
    the person's answer (JSON) is kept, its attempts, spend and partial results stay. One
    transaction."""
    con.execute("UPDATE delegations SET status = NULL, summary = NULL, settled = NULL,"
                " settled_seq = NULL, answer = ? WHERE id = ?", (answer, delegation_id))


def sum_usage(usages: Iterable[Usage]) -> Usage:
    calls = input_tokens = output_tokens = 0
    cost = 0.0
    for u in usages:
        calls += u.calls
        input_tokens += u.input_tokens
        output_tokens += u.output_tokens
        cost += u.cost
    return Usage.model_construct(calls=calls, input_tokens=input_tokens,
                                 output_tokens=output_tokens, cost=cost)


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
