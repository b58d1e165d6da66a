"""`SqliteStore`: the store in one SQLite file (the standard library's `sqlite3`, WAL).

```python
store = SqliteStore.open("zeus.db")            # StoreBusy / StoreError, the file unchanged
store.record_delegation("d1", key="k", ...)    # buffered ...
store.attempt_started("d1-a1", ...)
store.commit()                                 # ... durable together: the turn's end
```

Opening checks the file read-only first (`schema.inspect`), creates a new store
whole or not at all (built beside it, then linked into place), claims ownership
(`owner.claim`) and prunes settled delegations older than `keep_days`. One
thread at a time uses a store (Zeus's actor thread once Zeus runs).

For tests, `ZEUS_STORE_CRASH_AFTER=KIND[:N]` (read once, when a store opens) ends
the process with `os._exit(CRASH_EXIT)` right after the N-th (default: first)
commit that holds a write of KIND: one of `base.CRASH_KINDS` (`recorded`,
`attempt_started`, `attempt_identity`, `charge`, `partial`, `attempt_ended`,
`retry_scheduled`, `settled`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from actors import AttemptRecord, Brief, Status, Summary, Usage
from actors.speaks import SessionTotals
from supervisor.errors import StoreError
from supervisor.store import owner as _owner
from supervisor.store import reads
from supervisor.store.base import (
    CRASH_KINDS,
    OpenDelegation,
    Owner,
    Store,
    StoreCounts,
    StoredDelegation,
)
from supervisor.store.schema import (
    APPLICATION,
    DDL,
    SCHEMA_VERSION,
    SESSION_CHARGE,
    SESSION_TOTALS,
    SESSIONS_PRUNE,
    inspect,
    migrate,
)
from supervisor.store.writes import Charges, PolicyIds, SessionCharges, item_json

__all__ = ["CRASH_ENV", "CRASH_EXIT", "SqliteStore"]

_T = TypeVar("_T")
CRASH_ENV = "ZEUS_STORE_CRASH_AFTER"
CRASH_EXIT = 86
_DAY_S = 86_400.0
_HEARTBEAT_EVERY_S = 5.0  # a commit refreshes the owner's heartbeat at most this often

# One statement per kind of write, applied in this order by each commit (a policy is
# stored once, by the hash of its JSON, before the first delegation that has it).
_SQL: dict[str, str] = {
    "policy": "INSERT OR IGNORE INTO policies (id, policy) VALUES (?, ?)",
    "recorded": "INSERT INTO delegations (id, key, parent_id, ordinal, agent, brief, policy,"
                " deadline, created, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "attempt_started": "INSERT INTO attempts (id, delegation_id, number, agent, started,"
                       " deadline, seq) VALUES (?, ?, ?, ?, ?, ?, ?)",
    "attempt_identity": "UPDATE attempts SET pid = ?, pid_start_time = ?, pgid = ?, node = ?,"
                        " identity_seq = ?, started = COALESCE(?, started),"
                        " deadline = COALESCE(?, deadline) WHERE id = ?",
    "charge": "UPDATE attempts SET calls = calls + ?, input_tokens = input_tokens + ?,"
              " output_tokens = output_tokens + ?, cost = cost + ?,"
              " charged_progress = MAX(charged_progress, ?) WHERE id = ?",
    "partial": "INSERT INTO partials (delegation_id, attempt_id, seq, item) VALUES (?, ?, ?, ?)",
    "attempt_ended": "UPDATE attempts SET outcome = ?, ended = ?, error = ?, record = ?,"
                     " end_seq = ? WHERE id = ?",
    "retry_scheduled": "INSERT INTO retries (delegation_id, after_attempt, due, agent, seq)"
                       " VALUES (?, ?, ?, ?, ?)",
    "settled": "UPDATE delegations SET status = ?, summary = ?, settled = ?, settled_seq = ?"
               " WHERE id = ?",
}
assert tuple(_SQL)[1:] == CRASH_KINDS


def _crash_after() -> tuple[str, int] | None:
    raw = os.environ.get(CRASH_ENV, "").strip()
    if not raw:
        return None
    kind, _, count = raw.partition(":")
    if kind not in CRASH_KINDS or (count and not count.isdigit()):
        raise StoreError(f"{CRASH_ENV}={raw!r}: give KIND or KIND:N, KIND one of "
                         f"{', '.join(CRASH_KINDS)}")
    return kind, int(count or 1)



class SqliteStore(Store):
    """The store in one SQLite file. Make one with `SqliteStore.open`."""

    def __init__(self, path: str, con: sqlite3.Connection, owner: Owner,
                 previous: Owner | None, *, session: int, keep_days: float,
                 now: Callable[[], float]) -> None:
        self.path = path
        self.previous_owner = previous  # the dead owner this one replaced, if any
        self._con = con
        self._owner = owner
        self._keep_days = keep_days
        self._now = now
        self._buffer: dict[str, list[tuple[Any, ...]]] = {kind: [] for kind in _SQL}
        self._charges = Charges()  # attempt id -> usage summed this turn
        self._sessions = SessionCharges()  # agent CLI session id -> its charges this turn
        self._policies = PolicyIds()
        self._writable = True
        self._beat = owner.heartbeat
        self._crash = _crash_after()
        self._crash_seen = 0
        # Every write's place in the store's history: (ownership number, write number).
        self._seq = session << 32

    @classmethod
    def open(
        cls, path: str | Path, *, synchronous: Literal["normal", "full"] = "normal",
        keep_days: float = 30.0, now: Callable[[], float] = time.time,
        busy_timeout_s: float = 5.0,
    ) -> SqliteStore:
        """Open (or create) the store at `path` and become its owner.

        `StoreBusy` when a live Zeus owns it; `StoreError` when the file is not a
        Zeus store, is corrupt or newer, or cannot be created: the file is not changed.
        `now` is the wall clock (epoch seconds) for ownership and pruning.
        """
        path = Path(path)
        if inspect(path) is None:
            _create(path)
        try:
            con = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None,
                                  check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"{path}: cannot open the store: {exc}") from None
        try:
            con.execute("PRAGMA journal_mode = WAL")
            con.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            owner, previous, session = _owner.claim(
                con, str(path), now, migrate=lambda con: migrate(con, path))
            store = cls(str(path), con, owner, previous, session=session, keep_days=keep_days,
                        now=now)
            store.prune()
        except sqlite3.Error as exc:
            con.close()
            raise StoreError(f"{path}: cannot use the store: {exc}") from None
        except BaseException:
            con.close()
            raise
        return store

    # -- state ----------------------------------------------------------------------------
    @property
    def writable(self) -> bool:
        return self._writable

    @property
    def owner(self) -> Owner:
        return self._owner

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    # -- writes -----------------------------------------------------------------------------
    def record_delegation(
        self, delegation_id: str, *, key: str | None, parent_id: str | None,
        ordinal: int | None, agent: str, brief: Brief, policy: BaseModel | dict[str, Any],
        deadline: float | None, created: float,
    ) -> None:
        policy_id, policy_text = self._policies.id_of(policy)
        if policy_text is not None:  # the first delegation with it: the policy goes first
            self._buffer["policy"].append((policy_id, policy_text))
        self._buffer["recorded"].append((
            delegation_id, key, parent_id, ordinal, agent, brief.model_dump_json(),
            policy_id, deadline, created, self._next(),
        ))

    def attempt_started(
        self, attempt_id: str, *, delegation_id: str, number: int, agent: str,
        started: float, deadline: float | None,
    ) -> None:
        self._buffer["attempt_started"].append(
            (attempt_id, delegation_id, number, agent, started, deadline, self._next()))

    def attempt_identity(
        self, attempt_id: str, *, pid: int | None, pid_start_time: float | None,
        pgid: int | None, node: str | None, started: float | None = None,
        deadline: float | None = None,
    ) -> None:
        self._buffer["attempt_identity"].append(
            (pid, pid_start_time, pgid, node, self._next(), started, deadline, attempt_id))

    def charge(self, delegation_id: str, attempt_id: str, usage: Usage, *,
               session: tuple[str, SessionTotals] | None = None, progress: int = 0) -> None:
        self._charges.add(attempt_id, usage, progress)
        if session is not None:
            self._sessions.add(*session)

    def partial(self, delegation_id: str, attempt_id: str, item: Any) -> None:
        self._buffer["partial"].append((delegation_id, attempt_id, self._next(), item_json(item)))

    def attempt_ended(
        self, attempt_id: str, *, outcome: str, ended: float, error: str | None,
        record: AttemptRecord,
    ) -> None:
        self._buffer["attempt_ended"].append(
            (str(outcome), ended, error, record.model_dump_json(), self._next(), attempt_id))

    def retry_scheduled(
        self, delegation_id: str, *, after_attempt: str, due: float, agent: str
    ) -> None:
        self._buffer["retry_scheduled"].append(
            (delegation_id, after_attempt, due, agent, self._next()))

    def settled(self, delegation_id: str, *, status: Status, summary: Summary, at: float) -> None:
        self._buffer["settled"].append(
            (str(status), summary.model_dump_json(), at, self._next(), delegation_id))

    def commit(self) -> None:
        """One transaction for the turn's writes; `StoreError` keeps them for the next try."""
        buffer = self._buffer
        if self._charges:
            buffer["charge"] = [(*usage, attempt_id) for attempt_id, usage in
                                self._charges.items()]
        kinds = [kind for kind, rows in buffer.items() if rows]
        now = self._now()
        beat = now - self._beat >= _HEARTBEAT_EVERY_S
        if not kinds and not beat:
            return
        con = self._con
        try:
            con.execute("BEGIN")
            for kind in kinds:
                con.executemany(_SQL[kind], buffer[kind])
            if self._sessions:  # (with the turn's charges, which they are part of)
                con.executemany(SESSION_CHARGE, self._sessions.rows(now))
            if beat:
                con.execute("UPDATE owner SET heartbeat = ?", (now,))
            con.execute("COMMIT")
        except sqlite3.Error as exc:
            if con.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    con.execute("ROLLBACK")
            self._writable = False
            raise StoreError(
                f"{self.path}: cannot write the store ({exc}); nothing new should start "
                "until a write succeeds: free disk space or make the file writable "
                "(what this turn wrote is kept and written by the next commit)"
            ) from None
        self._writable = True
        if beat:
            self._beat = now
        for kind in kinds:
            buffer[kind] = []
        self._charges.clear()
        self._sessions.clear()
        if self._crash is not None and self._crash[0] in kinds:  # a test's crash point
            self._crash_seen += 1
            if self._crash_seen >= self._crash[1]:
                os._exit(CRASH_EXIT)

    # -- readers ----------------------------------------------------------------------------
    def _read(self, fn: Callable[..., _T], *args: Any) -> _T:
        """`fn(connection, *args)`, a bad page or a lost file reported as a StoreError."""
        try:
            return fn(self._con, *args)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: cannot read the store ({exc}); restore it from "
                             "a backup, or move it away to start a new store") from None

    def open_delegations(self) -> list[OpenDelegation]:
        return self._read(reads.open_delegations)

    def delegation_as_open(self, delegation_id: str) -> OpenDelegation | None:
        found = self._read(reads.open_delegations, delegation_id)
        return found[0] if found else None

    def blocked(self) -> list[tuple[StoredDelegation, Summary]]:
        return self._read(reads.blocked)

    def reopen(self, delegation_id: str, answer: dict[str, Any] | None = None) -> None:
        self.commit()  # what came before it, first
        try:
            self._con.execute("BEGIN")
            reads.reopen(self._con, delegation_id,
                          json.dumps(answer) if answer is not None else None)
            self._con.execute("COMMIT")
        except sqlite3.Error as exc:
            if self._con.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self._con.execute("ROLLBACK")
            raise StoreError(f"{self.path}: cannot write the store ({exc}); free disk space "
                             "or make the file writable, then try again") from None

    def children(self, parent_id: str) -> list[StoredDelegation]:
        return self._read(reads.children, parent_id)

    def delegation(self, delegation_id: str) -> StoredDelegation | None:
        return self._read(reads.one, "id", delegation_id)

    def by_key(self, key: str) -> StoredDelegation | None:
        return self._read(reads.one, "key", key)

    def summary(self, delegation_id: str) -> Summary | None:
        return self._read(reads.summary, "id", delegation_id)

    def summary_by_key(self, key: str) -> Summary | None:
        return self._read(reads.summary, "key", key)

    def counts(self) -> StoreCounts:
        return self._read(reads.counts)

    def total_spent(self) -> Usage:
        return reads.total_spent(self._con)

    def sessions(self) -> set[tuple[str, str]]:
        return reads.sessions(self._con)

    def agent_sessions(self) -> list[tuple[str, str, str]]:
        return reads.agent_sessions(self._con)

    def issued(self) -> dict[str, int]:
        return reads.issued(self._con)

    # -- life -------------------------------------------------------------------------------
    def heartbeat(self) -> None:
        now = self._now()
        self._con.execute("UPDATE owner SET heartbeat = ?", (now,))
        self._beat = now

    def session_totals(self, session_id: str) -> SessionTotals | None:
        row = self._read(lambda con: con.execute(SESSION_TOTALS, (session_id,)).fetchone())
        return SessionTotals(*row) if row is not None else None

    def prune(self) -> int:
        cutoff = self._now() - self._keep_days * _DAY_S
        self._con.execute(SESSIONS_PRUNE, (cutoff,))  # sessions charged nothing since
        return reads.prune(self._con, cutoff)

    def close(self) -> None:
        """Commit what is buffered, give up ownership and close the file."""
        try:
            self.commit()
            _owner.release(self._con, self._owner, self._now())
        finally:
            self._con.close()


def _create(path: Path) -> None:
    """A new store at `path`, whole or not at all: built beside it, then linked into place
    (a store another opener linked first wins; it is then opened as it is)."""
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise StoreError(f"{path}: the directory {parent} does not exist; create it first")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".new", dir=parent)
    except OSError as exc:
        raise StoreError(f"{path}: cannot create the store in {parent}: "
                         f"{exc.strerror or exc}; give a writable directory") from None
    os.close(fd)
    try:
        con = sqlite3.connect(tmp, isolation_level=None)
        try:
            con.executescript("BEGIN;" + DDL + f"PRAGMA user_version = {SCHEMA_VERSION};"
                              "INSERT INTO meta VALUES ('application', "
                              f"'{APPLICATION}'); COMMIT;")
            con.execute("PRAGMA journal_mode = WAL")
        finally:
            con.close()
        if path.exists() and path.stat().st_size == 0:
            os.replace(tmp, path)  # an empty file is no store yet: take its place
        else:
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"{path}: cannot create the store: {exc}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    inspect(path)  # what is there now (ours, or a racer's) must be a store
