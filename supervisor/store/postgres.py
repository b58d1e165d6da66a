"""`PostgresStore`: the store in a PostgreSQL database, shared by many live hosts.

```python
store = PostgresStore.open("postgresql://zeus@db/agents")   # registers this host
store.host_id                                  # new at every open
keeper = store.lease_keeper()                  # its own connection, for another thread
keeper.renew()                                 # seconds left by the database's clock; None: lost
store.take_over(host_id, limit=8)              # an expired host's open trees, epoch bumped
```

The same interface as `SqliteStore` (docs/design.md, "The store"), with hosts in
place of one owner: every open registers a host incarnation with a lease
(`lease_until`, judged only by the database's `now()`), each delegation names the
host that owns it and an epoch, and every commit first locks this host's row
(still leased, not taken) and conditions each row it writes on owning the
delegation under its epoch. A commit that finds itself fenced writes nothing and
raises `StoreFenced`; the charges it held are kept, and written late (`write_late`),
as a fenced host's children's are: spend is a fact, which no fence refuses. Times of
delegations and attempts are wall-clock epoch seconds, as the SQLite store keeps them.

`ZEUS_STORE_CRASH_AFTER=KIND[:N]` ends the process after a commit, as with the SQLite
store (supervisor/store/sqlite.py says how), for the crash tests.

The store is used from one thread at a time (Zeus's actor thread); its lease
keeper from one other thread (the renewal's). psycopg is imported only by this module
and its two parts (pg_schema: the tables and statements; pg_hosts: hosts and leases).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from actors import AttemptRecord, Brief, Status, Summary, Usage
from actors.osproc import process_running, process_start_time
from actors.speaks import SessionTotals
from supervisor.errors import StoreError, StoreFenced
from supervisor.store import reads
from supervisor.store.base import OpenDelegation, Owner, StoreCounts, StoredDelegation
from supervisor.store.owner import owner_alive
from supervisor.store.pg_hosts import (
    RENEW,
    SETTLED,
    Host,
    LeaseKeeper,
    away,
    connect,
    hosts,
    read_only,
    register,
)
from supervisor.store.pg_schema import (
    ATTEMPT_COLUMNS,
    FENCED,
    KINDS,
    LATE_CHARGE,
    LEASED,
    STATEMENTS,
    Qmark,
    is_postgres_url,
    prepare,
    shown,
)
from supervisor.store.schema import SESSION_TOTALS, SESSIONS_PRUNE
from supervisor.store.shared import Joined, SharedStore
from supervisor.store.sqlite import CRASH_EXIT, _crash_after
from supervisor.store.writes import Charges, PolicyIds, SessionCharges, item_json

try:
    import psycopg
    from psycopg.types.numeric import Int8Dumper
    from psycopg.types.string import StrDumper
except ImportError:  # pragma: no cover - the extra is missing
    psycopg = None  # type: ignore[assignment]
    Int8Dumper = StrDumper = object  # type: ignore[assignment,misc]

__all__ = ["Host", "LeaseKeeper", "PostgresStore", "hosts", "is_postgres_url", "read_only"]

_T = TypeVar("_T")
_DAY_S = 86_400.0
_BACKOFF_S = (0.05, 0.2, 0.5, 1.0, 2.0)  # waits between reconnects; the last repeats
_CLOSE_AGAIN_S = 0.1  # a closing store whose last writes found the database away
_NOTIFY = f"SELECT pg_notify('{SETTLED}', %s)"
_PAYLOAD_CHARS = 7000  # a notification's payload holds under 8,000 bytes


class _Text(StrDumper):
    """A str as PostgreSQL text, which cannot hold NUL: one is stored as U+FFFD, so that a
    commit is never refused for good over it (a key with one is refused at dispatch)."""

    def dump(self, obj: str) -> Any:
        return super().dump(obj.replace("\x00", "\ufffd") if "\x00" in obj else obj)


def _adapted(con: Any) -> Any:
    """`con` binding a commit's values as its statements declare them: every int as a
    bigint (one prepared plan for each statement, whatever the numbers), every str as
    text."""
    con.adapters.register_dumper(int, Int8Dumper)
    con.adapters.register_dumper(str, _Text)
    return con


def _late_row(attempt_id: str, usage: Sequence[float], progress: int) -> tuple[Any, ...]:
    """A `LATE_CHARGE` row: `usage` (calls, input and output tokens, cost) charged by
    `attempt_id`, up to its charge numbered `progress`."""
    return (*usage, progress, attempt_id, progress, progress)


def _payloads(ids: Iterable[str]) -> Iterator[str]:
    """`ids`, one per line, in payloads that each fit a notification."""
    chunk: list[str] = []
    size = 0
    for d_id in ids:
        if len(d_id) >= _PAYLOAD_CHARS:  # no room: its watchers find it by their poll
            continue
        if chunk and size + len(d_id) + 1 > _PAYLOAD_CHARS:
            yield "\n".join(chunk)
            chunk, size = [], 0
        chunk.append(d_id)
        size += len(d_id) + 1
    if chunk:
        yield "\n".join(chunk)


# A dead host's workers that begin to stop for its lease within this long are waited for.
_STOPPING_SOON_S = 0.5


def _await_stopping_workers(con: psycopg.Connection[Any], lease_s: float) -> None:
    """A restart on this machine while the last host's workers stop themselves for its
    lease (their deadline passed, or comes within `_STOPPING_SOON_S`) waits until they
    have stopped, at most the ladder's bound past that deadline: each then leaves behind
    what it held (its attempt stopped by the lease, its charges) for recovery to judge
    as a takeover does, where a worker caught mid-stop would be killed as a survivor,
    its charges lost and its writer blocked (docs/design.md, "Only a cancel settles
    `cancelled`"). The workers' deadline is that host's `LeaseKeeper.child_deadline`."""
    rows = con.execute(
        "SELECT pid, pid_start_time, extract(epoch FROM lease_until - now())::float8,"
        " bound_s FROM hosts WHERE released IS NULL AND taken_by IS NULL AND host = %s",
        (socket.gethostname(),)).fetchall()
    wait_s = 0.0
    for pid, pid_start, left_s, bound_s in rows:
        if process_running(pid, pid_start) is not False:
            continue  # alive: its workers are its own
        stops_in = left_s - min(bound_s, lease_s / 2)
        if stops_in < _STOPPING_SOON_S:
            wait_s = max(wait_s, stops_in + bound_s)
    if wait_s > 0:
        time.sleep(wait_s)


def _owner(joined: Joined) -> Owner:
    """This process as the host incarnation `joined`."""
    pid = os.getpid()
    return Owner(pid=pid, pid_start_time=process_start_time(pid), host=socket.gethostname(),
                 since=joined.since, heartbeat=joined.since)


class Held:
    """The delegations this host holds and the epoch of each, with their attempts: what
    conditions its writes. A delegation is let go once its settlement and the end of its
    every attempt have landed, since nothing writes for it after that (a settled
    delegation's reports are not taken; its last attempt may end after it settled), so a
    host's memory does not grow with every delegation it ever ran."""

    def __init__(self) -> None:
        self.epochs: dict[str, int] = {}  # delegation id -> the epoch this host holds
        self.delegation_of: dict[str, str] = {}  # attempt id -> its delegation id
        self._attempts: dict[str, list[str]] = {}  # delegation id -> its attempts known
        self._running: dict[str, set[str]] = {}  # delegation id -> attempts not ended
        self._settled: set[str] = set()  # settled, an attempt still to end

    def attempt(self, attempt_id: str, delegation_id: str, *, running: bool) -> None:
        if self.delegation_of.setdefault(attempt_id, delegation_id) != delegation_id:
            return
        known = self._attempts.setdefault(delegation_id, [])
        if attempt_id not in known:
            known.append(attempt_id)
        if running:
            self._running.setdefault(delegation_id, set()).add(attempt_id)

    def landed(self, ended: Iterable[str], settled: Iterable[str]) -> None:
        """A commit with these attempts' ends and these settlements landed."""
        touched = set()
        for attempt_id in ended:
            delegation_id = self.delegation_of.get(attempt_id)
            if delegation_id is not None:
                self._running.get(delegation_id, set()).discard(attempt_id)
                touched.add(delegation_id)
        for delegation_id in settled:
            self._settled.add(delegation_id)
            touched.add(delegation_id)
        for delegation_id in touched & self._settled:
            if not self._running.get(delegation_id):
                self._let_go(delegation_id)

    def _let_go(self, delegation_id: str) -> None:
        self._settled.discard(delegation_id)
        self._running.pop(delegation_id, None)
        self.epochs.pop(delegation_id, None)
        for attempt_id in self._attempts.pop(delegation_id, ()):
            self.delegation_of.pop(attempt_id, None)

    def __len__(self) -> int:
        return len(self.epochs)


class PostgresStore(SharedStore):
    """The store in a PostgreSQL database. Make one with `PostgresStore.open`."""

    def __init__(self, url: str, con: Any, *, host_id: str, n: int, lease_s: float,
                 bound_s: float, keep_days: float, now: Callable[[], float],
                 owner: Owner) -> None:
        self.url = url
        self.path = shown(url)
        self.previous_owner: Owner | None = None  # hosts are taken over, not replaced
        self.host_id = host_id
        self.lease_s = lease_s
        self.bound_s = bound_s
        self._con: Any = con
        self._owner = owner
        self._keep_days = keep_days
        self._now = now
        self._buffer: dict[str, list[tuple[Any, ...]]] = {kind: [] for kind in KINDS}
        self._charges = Charges()  # attempt id -> usage summed this turn
        self._sessions = SessionCharges()  # agent CLI session id -> its charges this turn
        # Charges of attempts this host lost with its lease, and of its fenced commits:
        # `LATE_CHARGE` rows, written by `write_late` whoever owns their delegations now,
        # and kept when this host becomes a new incarnation.
        self._late: list[tuple[Any, ...]] = []
        self._late_sessions = SessionCharges()
        self._policies = PolicyIds()
        self._held = Held()
        self._writable = True
        self._fenced = False
        self._retry_at = 0.0  # monotonic time before which no reconnect is tried
        self._failures = 0
        self._seq = n << 32
        self._keeper: LeaseKeeper | None = None
        self._crash = _crash_after()
        self._crash_seen = 0
        self._number = 0  # commits made (each stamps the host's row)
        self._unsure: tuple[int, dict[str, int]] | None = None  # a commit whose end was lost
        self._away: str | None = None  # what to say while the database does not answer

    @classmethod
    def open(cls, url: str, *, lease_s: float = 10.0, bound_s: float = 0.0,
             keep_days: float = 30.0,
             now: Callable[[], float] = time.time) -> PostgresStore:
        """Open (or create) the store at `url` and register this host with a lease of
        `lease_s` seconds (many live hosts share one store). `StoreError` when the
        database cannot be reached, holds another application's tables, or a newer
        schema: it is then not changed. `now` is the wall clock for pruning. The caller
        renews the lease (`lease()`: Zeus's lease keeper); `bound_s` is its children's
        ladder's bound, which a taker waits past the lease's end."""
        if not lease_s > 0:
            raise StoreError(f"lease_s must be > 0 (got {lease_s!r})")
        host_id = uuid.uuid4().hex
        where = shown(url)
        try:
            con = _adapted(connect(url, host_id, lease_s))
        except StoreError:
            raise
        except psycopg.Error as exc:
            raise StoreError(f"{where}: cannot connect to the store ({exc}); check the "
                             "URL and that the database is up") from None
        try:
            prepare(con, url)
            _await_stopping_workers(con, lease_s)
            joined = register(con, host_id, lease_s, bound_s)
            store = cls(url, con, host_id=host_id, n=joined.n, lease_s=lease_s,
                        bound_s=bound_s, keep_days=keep_days, now=now,
                        owner=_owner(joined))
            store._adopt_local_dead()
            store.prune()
        except psycopg.Error as exc:
            con.close()
            raise StoreError(f"{where}: cannot use the store: {exc}") from None
        except BaseException:
            con.close()
            raise
        return store

    # -- state ----------------------------------------------------------------------------
    @property
    def writable(self) -> bool:
        return self._writable

    @property
    def fenced(self) -> bool:
        """This host was fenced: its lease was lost or taken; it writes nothing more."""
        return self._fenced

    @property
    def owner(self) -> Owner:
        return self._owner

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def _connection(self) -> Any:
        """The connection, made again (with backoff between tries, a quarter of the lease
        at most, so that a write that waits out a restart within the lease is tried
        several times) after it was lost. `StoreError` while the database is away."""
        con = self._con
        if con is not None and not con.closed and not con.broken:
            return con
        if time.monotonic() < self._retry_at:
            raise StoreError(self._away or away(self.url, "reconnecting"))
        try:
            self._con = _adapted(connect(self.url, self.host_id, self.lease_s))
        except psycopg.Error as exc:
            self._con = None
            self._retry_at = time.monotonic() + min(self.lease_s / 4, _BACKOFF_S[
                min(self._failures, len(_BACKOFF_S) - 1)])
            self._failures += 1
            self._away = away(self.url, exc)
            raise StoreError(self._away) from None
        self._failures = 0
        self._away = None
        return self._con

    def _lost(self, exc: Exception) -> StoreError:
        """A failed statement: the connection is dropped when it broke (the next call makes
        it again); the error to raise: the database does not answer, or it refused."""
        con = self._con
        if con is not None and (con.broken or isinstance(exc, psycopg.OperationalError)):
            with contextlib.suppress(Exception):
                con.close()
            self._con = None
            self._away = away(self.url, exc)
            return StoreError(self._away)
        return StoreError(f"{self.path}: cannot use the store ({exc}); nothing new starts "
                          "until a write succeeds (what this turn wrote is kept and written "
                          "by the next commit)")

    def why_unwritable(self) -> str:
        """Why nothing new starts while `writable` is False: the database away (its URL
        without a password), else what the server refused."""
        return self._away or (f"{self.path}: the last commit was refused; nothing new "
                              "starts until a write succeeds")

    # -- writes -----------------------------------------------------------------------------
    def record_delegation(
        self, delegation_id: str, *, key: str | None, parent_id: str | None,
        ordinal: int | None, agent: str, brief: Brief, policy: BaseModel | dict[str, Any],
        deadline: float | None, created: float,
    ) -> None:
        self._held.epochs[delegation_id] = 1
        policy_id, policy_text = self._policies.id_of(policy)
        if policy_text is not None:  # the first delegation with it: the policy goes first
            self._buffer["policy"].append((policy_id, policy_text))
        self._buffer["recorded"].append((
            delegation_id, key, parent_id, ordinal, agent, brief.model_dump_json(),
            policy_id, deadline, created, self._next(), self.host_id, 1,
        ))

    def _epoch(self, delegation_id: str) -> int:
        return self._held.epochs.get(delegation_id, 0)  # 0: never held here, so never written

    def epoch(self, delegation_id: str) -> int:
        """The epoch this host holds the delegation under (recorded here: 1; taken over or
        reopened: as the claim bumped it); one it does not hold, as committed (1 if the
        store has none)."""
        held = self._held.epochs.get(delegation_id)
        if held is not None:
            return held
        row = self._read(lambda con: con.execute(
            "SELECT epoch FROM delegations WHERE id = ?", (delegation_id,)).fetchone())
        return 1 if row is None else int(row[0])

    def _of(self, attempt_id: str) -> tuple[str, str, int]:
        """What conditions a write to the attempt: its delegation, this host, the epoch."""
        delegation_id = self._held.delegation_of.get(attempt_id, "")
        return delegation_id, self.host_id, self._epoch(delegation_id)

    def attempt_started(
        self, attempt_id: str, *, delegation_id: str, number: int, agent: str,
        started: float, deadline: float | None,
    ) -> None:
        self._held.attempt(attempt_id, delegation_id, running=True)
        self._buffer["attempt_started"].append(
            (attempt_id, delegation_id, number, agent, started, deadline, self._next(),
             delegation_id, self.host_id, self._epoch(delegation_id)))

    def attempt_identity(
        self, attempt_id: str, *, pid: int | None, pid_start_time: float | None,
        pgid: int | None, node: str | None, started: float | None = None,
        deadline: float | None = None,
    ) -> None:
        self._buffer["attempt_identity"].append(
            (pid, pid_start_time, pgid, node, self._next(), started, deadline, attempt_id,
             *self._of(attempt_id)))

    def attempt_in_tool(self, attempt_id: str, tool: str | None) -> None:
        self._buffer["attempt_tool"].append((tool, attempt_id, *self._of(attempt_id)))

    def charge(self, delegation_id: str, attempt_id: str, usage: Usage, *,
               session: tuple[str, SessionTotals] | None = None, progress: int = 0) -> None:
        self._held.attempt(attempt_id, delegation_id, running=False)
        self._charges.add(attempt_id, usage, progress)
        if session is not None:
            self._sessions.add(*session)

    def partial(self, delegation_id: str, attempt_id: str, item: Any) -> None:
        self._buffer["partial"].append(
            (delegation_id, attempt_id, self._next(), item_json(item), delegation_id,
             self.host_id, self._epoch(delegation_id)))

    def attempt_ended(
        self, attempt_id: str, *, outcome: str, ended: float, error: str | None,
        record: AttemptRecord,
    ) -> None:
        self._buffer["attempt_ended"].append(
            (str(outcome), ended, error, record.model_dump_json(), self._next(), attempt_id,
             *self._of(attempt_id)))

    def retry_scheduled(
        self, delegation_id: str, *, after_attempt: str, due: float, agent: str
    ) -> None:
        self._buffer["retry_scheduled"].append(
            (delegation_id, after_attempt, due, agent, self._next(), delegation_id,
             self.host_id, self._epoch(delegation_id)))

    def settled(self, delegation_id: str, *, status: Status, summary: Summary, at: float) -> None:
        self._buffer["settled"].append(
            (str(status), summary.model_dump_json(), at, self._next(), delegation_id,
             self.host_id, self._epoch(delegation_id)))

    def _fence(self, what: str) -> StoreFenced:
        """Fenced: nothing more is decided here; what its commits charged, unwritten, is
        kept as late charges (spend is a fact: no fence refuses it)."""
        self._fenced = True
        self._writable = False
        self.keep_late()
        return StoreFenced(f"{self.path}: host {self.host_id} is fenced ({what}): nothing "
                           "of this commit was written; it must stop its children and "
                           "write nothing more", host_id=self.host_id)

    def commit(self) -> None:
        """One transaction for the turn's writes, under this host's lease: `StoreFenced`
        (nothing written) when the lease is lost or a delegation is no longer this host's
        under its epoch; `StoreError` (the writes kept for the next try) when the
        database cannot be reached."""
        if self._fenced:
            raise self._fence("its lease was lost earlier")
        buffer = self._buffer
        if self._charges:  # a failed commit's charge rows stay, apart from later ones
            buffer["charge"].extend((*usage, attempt_id, *self._of(attempt_id))
                                    for attempt_id, usage in self._charges.items())
            self._charges.clear()
        if self._sessions:  # (the same: what they add to their sessions, with them)
            buffer["session"].extend(self._sessions.rows(self._now()))
            self._sessions.clear()
        kinds = [kind for kind, rows in buffer.items() if rows]
        if not kinds and self._writable:
            return
        fenced: str | None = None
        for attempt in (1, 2):  # a connection found broken: made again at once, once
            try:
                fenced = self._write(kinds)
                break
            except psycopg.Error as exc:
                self._writable = False
                error = self._lost(exc)
                if attempt == 2 or self._con is not None:
                    raise error from None
            except StoreError:
                self._writable = False
                raise
        if fenced is not None:
            raise self._fence(fenced)
        self._writable = True
        if buffer["attempt_ended"] or buffer["settled"]:
            self._held.landed((row[5] for row in buffer["attempt_ended"]),
                              (row[4] for row in buffer["settled"]))
        for kind in kinds:
            buffer[kind] = []
        self._charges.clear()
        if self._crash is not None and self._crash[0] in kinds:  # a test's crash point
            self._crash_seen += 1
            if self._crash_seen >= self._crash[1]:
                os._exit(CRASH_EXIT)

    def _write(self, kinds: list[str]) -> str | None:
        """The commit's transaction: None when it was written, else why it was fenced
        (then nothing was). Each commit stamps this host's row with its number, so that
        after a connection lost during COMMIT the next one knows whether it landed."""
        con = self._connection()
        buffer = self._buffer
        if self._unsure is not None:  # the last commit's COMMIT was sent, its answer lost
            number, sizes = self._unsure
            row = con.execute("SELECT commit_no FROM hosts WHERE id = %s",
                              (self.host_id,)).fetchone()
            if row is not None and row[0] == number:  # it landed: not again
                for kind, size in sizes.items():
                    del buffer[kind][:size]
                kinds = [kind for kind in kinds if buffer[kind]]
            self._unsure = None
        self._number += 1
        sizes = {kind: len(buffer[kind]) for kind in kinds}
        self._unsure = (self._number, sizes)  # until the server answers
        try:
            # One round trip and one transaction: the statements go in a pipeline, their
            # values bound by psycopg, and the server runs all up to its one sync as one
            # transaction (an error anywhere rolls back all, and skips the rest).
            with con.pipeline():
                cur = con.cursor()
                cur.execute(STATEMENTS["hold"], (self._number, self.host_id), prepare=True)
                for kind in kinds:
                    cur.executemany(STATEMENTS[kind], buffer[kind])
                if "settled" in sizes:  # word to the hosts that watch them, once this lands
                    cur.executemany(_NOTIFY, [(ids,) for ids in _payloads(
                        row[4] for row in buffer["settled"])])
        except psycopg.Error as exc:
            if exc.sqlstate == FENCED:
                self._unsure = None
                return exc.diag.message_primary or "a write it no longer holds"
            if not (isinstance(exc, psycopg.OperationalError) or con.broken):
                self._unsure = None  # refused by the server: nothing was written
            raise
        self._unsure = None
        return None

    # -- spend is a fact ---------------------------------------------------------------------
    def keep_late(self) -> None:
        """The charges and session totals buffered for commits that will never land (this
        host is fenced), kept as late charges."""
        charges, self._buffer["charge"] = self._buffer["charge"], []
        self._late.extend(_late_row(row[5], row[:4], row[4]) for row in charges)
        self._late.extend(_late_row(attempt_id, usage[:4], int(usage[4]))
                          for attempt_id, usage in self._charges.items())
        self._charges.clear()
        sessions, self._buffer["session"] = self._buffer["session"], []
        for session_id, *summed, _ in sessions:
            self._late_sessions.add(session_id, SessionTotals(*summed))
        for session_id, totals in self._sessions.items():
            self._late_sessions.add(session_id, totals)
        self._sessions.clear()

    def charge_late(self, attempt_id: str, usage: Usage, progress: int) -> None:
        self._late.append(_late_row(attempt_id, (usage.calls, usage.input_tokens,
                                                 usage.output_tokens, usage.cost), progress))

    @property
    def late_pending(self) -> bool:
        return bool(self._late or self._late_sessions)

    def write_late(self) -> None:
        rows, sessions = self._late, self._late_sessions.rows(self._now())
        if not rows and not sessions:
            return
        try:
            con = self._connection()
            with con.pipeline():  # one transaction, as a commit is (no hold: no fence)
                cur = con.cursor()
                cur.executemany(LATE_CHARGE, rows)
                cur.executemany(STATEMENTS["session"], sessions)
        except psycopg.Error as exc:
            raise self._lost(exc) from None
        del self._late[:len(rows)]
        self._late_sessions.clear()

    def usage_of(self, attempt_ids: Iterable[str]) -> dict[str, Usage]:
        wanted = list(attempt_ids)
        if not wanted:
            return {}
        rows = self._read(lambda con: con.execute(
            "SELECT id, calls, input_tokens, output_tokens, cost FROM attempts"
            " WHERE id = ANY(?)", (wanted,)).fetchall())
        return {row[0]: Usage.model_construct(calls=row[1], input_tokens=row[2],
                                              output_tokens=row[3], cost=row[4])
                for row in rows}

    # -- takeover ---------------------------------------------------------------------------
    def lease(self) -> LeaseKeeper:
        return self.lease_keeper()

    def next_ids(self, agent: str) -> int:
        return self.lease_keeper().next_ids(agent)

    def lease_keeper(self) -> LeaseKeeper:
        """This host's lease on a connection of its own, for the renewal's thread (one
        keeper per store; `close()` releases through it)."""
        if self._keeper is None:
            self._keeper = LeaseKeeper(self.url, self.host_id, self.lease_s, self.bound_s)
        return self._keeper

    def unrecorded(self) -> dict[str, str | None]:
        """The delegations this host recorded that no commit has written (a fenced host's:
        no other host knows them), each with its key."""
        return {row[0]: row[1] for row in self._buffer["recorded"]}

    def become(self, joined: Joined) -> None:
        """Be the new incarnation `joined` that this fenced host's lease keeper registered
        (Zeus's thread): nothing held, nothing buffered (every write of the old one was for
        delegations it no longer holds) but its charges, kept as late ones, writable again,
        on a connection named after it."""
        self.keep_late()
        self.host_id = joined.host_id
        self._owner = _owner(joined)
        self._seq = joined.n << 32
        self._held = Held()
        self._buffer = {kind: [] for kind in KINDS}
        self._charges = Charges()
        self._sessions = SessionCharges()
        self._policies = PolicyIds()
        self._fenced = False
        self._writable = True
        self._unsure = None
        self._number = 0
        if self._con is not None:
            with contextlib.suppress(Exception):
                self._con.close()
            self._con = None

    def hosts(self) -> list[Host]:
        """Every host of the store, oldest first, with its lease and how much it owns."""
        return self._read(hosts)

    def _adopt_local_dead(self) -> None:
        """Take over, at once and whole, every host of this machine whose process is shown
        gone (its pid absent or another process now): a restart here recovers what the
        last host here left open, as with a SQLite store, without waiting for its lease.
        The last such host is `previous_owner`."""
        rows = self._con.execute(
            "SELECT id, pid, pid_start_time, host, extract(epoch FROM since)::float8,"
            " extract(epoch FROM lease_until)::float8 FROM hosts WHERE released IS NULL"
            " AND taken_by IS NULL AND host = %s AND id <> %s ORDER BY n",
            (self._owner.host, self.host_id)).fetchall()
        for host_id, pid, pid_start, host, since, lease_until in rows:
            dead = Owner(pid=pid, pid_start_time=pid_start, host=host, since=since,
                         heartbeat=lease_until - self.lease_s)
            if owner_alive(dead):
                continue
            while self._take(host_id, 1 << 30, None):
                pass
            self.previous_owner = dead

    def take_over(self, host_id: str, limit: int, *, margin_s: float = 0.0) -> list[str]:
        """Claim open delegation trees (a root and its open descendants together) of the
        host `host_id`, whose lease must have ended more than `margin_s` ago: at most
        `limit` roots, the epoch of each claimed delegation bumped, committed at once.
        The ids claimed, parents before children; call again until it gives none (other
        takers claim other trees meanwhile: `FOR UPDATE SKIP LOCKED`). Its database
        sessions are ended first, so no frozen transaction of it holds a row. `StoreFenced`
        when this host's own lease is lost; `StoreError` when the database is away."""
        return self._take(host_id, limit, margin_s)

    def _take(self, host_id: str, limit: int, margin_s: float | None) -> list[str]:
        """`take_over`; with `margin_s` None, whatever its lease (its process is gone)."""
        expired = ("" if margin_s is None else  # past its own ladder's bound too
                   " AND lease_until + make_interval(secs => bound_s + %s) < now()")
        self.commit()  # what came before, first (fenced: `StoreFenced`)
        margin = () if margin_s is None else (margin_s,)
        try:
            con = self._connection()
            if con.execute("SELECT 1 FROM hosts WHERE id = %s AND id <> %s AND released IS"
                           " NULL" + expired, (host_id, self.host_id, *margin)
                           ).fetchone() is None:
                return []  # alive, released, or unknown: nothing to take
            # a frozen session of it could hold row locks the claim would skip for good
            con.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE"
                        " application_name = %s", (f"zeus-{host_id}",))
        except psycopg.Error as exc:
            raise self._lost(exc) from None
        with self._leased() as con:
            if con.execute(
                    "UPDATE hosts SET taken_by = COALESCE(taken_by, %s), taken_at ="
                    " COALESCE(taken_at, now()) WHERE id = %s AND id <> %s AND released IS"
                    " NULL" + expired + " RETURNING 1",
                    (self.host_id, host_id, self.host_id, *margin)).fetchone() is None:
                return []
            claimed = con.execute(
                "WITH RECURSIVE roots AS (SELECT d.id FROM delegations d WHERE d.owner = %s"
                " AND d.status IS NULL AND NOT EXISTS (SELECT 1 FROM delegations p WHERE"
                " p.id = d.parent_id AND p.owner = %s AND p.status IS NULL)"
                " ORDER BY d.seq LIMIT %s FOR UPDATE SKIP LOCKED),"
                " tree(id) AS (SELECT id FROM roots UNION SELECT c.id FROM delegations c"
                " JOIN tree ON c.parent_id = tree.id WHERE c.owner = %s"
                " AND c.status IS NULL)"
                " UPDATE delegations SET owner = %s, epoch = epoch + 1 WHERE id IN"
                " (SELECT id FROM tree) AND owner = %s RETURNING id, epoch, seq",
                (host_id, host_id, limit, host_id, self.host_id, host_id)).fetchall()
        for d_id, epoch, _ in claimed:
            self._held.epochs[d_id] = int(epoch)
        return [d_id for d_id, _, _ in sorted(claimed, key=lambda r: r[2])]

    def take_claims(self, host_id: str, *, margin_s: float) -> list[tuple[str, str, Brief]]:
        """The keys the host `host_id` claimed and never dispatched (it died between the
        claim and the record), made this host's to dispatch under their claimed ids: each
        key, id and brief. Its lease must have ended more than its bound plus `margin_s`
        ago. `StoreFenced` when this host's own lease is lost."""
        with self._leased() as con:
            rows = con.execute(
                "UPDATE keys k SET host = %s WHERE k.host = %s AND k.host <> %s AND NOT"
                " EXISTS (SELECT 1 FROM delegations d WHERE d.id = k.delegation_id) AND"
                " EXISTS (SELECT 1 FROM hosts h WHERE h.id = k.host AND h.lease_until +"
                " make_interval(secs => h.bound_s + %s) < now()) RETURNING k.key,"
                " k.delegation_id, k.brief",
                (self.host_id, host_id, self.host_id, margin_s)).fetchall()
        return [(key, d_id, Brief.model_validate_json(text)) for key, d_id, text in rows]

    def reclaim_key(self, key: str, delegation_id: str, was: str) -> bool:
        """Make this incarnation's the claim of `key` for `delegation_id` that its earlier
        incarnation `was` made and never recorded, committed at once; False when a taker
        of `was` took the claim over (it dispatches it)."""
        with self._leased() as con:
            return con.execute(
                "UPDATE keys k SET host = %s WHERE k.key = %s AND k.delegation_id = %s AND"
                " k.host = %s AND NOT EXISTS (SELECT 1 FROM delegations d WHERE d.id ="
                " k.delegation_id) RETURNING 1", (self.host_id, key, delegation_id, was)
            ).fetchone() is not None

    @contextlib.contextmanager
    def _leased(self) -> Iterator[Any]:
        """The connection inside a transaction of its own, entered only while this host
        holds its lease (its row held against a taker till the end): `StoreFenced`
        (nothing written) once it does not, `StoreError` when the database is away."""
        if self._fenced:
            raise self._fence("its lease was lost earlier")
        try:
            con = self._connection()
            with con.transaction():
                if con.execute(LEASED, (self.host_id,)).fetchone() is None:
                    raise _Rollback
                yield con
        except _Rollback:
            raise self._fence("its lease ended or was taken over") from None
        except psycopg.Error as exc:
            raise self._lost(exc) from None

    def open_delegations_of(self, ids: Iterable[str]) -> list[OpenDelegation]:
        """The open delegations among `ids` (those `take_over` claimed), parents before
        children, as `open_delegations` gives them."""
        wanted = list(ids)
        if not wanted:
            return []
        return self._opened(self._read(
            reads.open_delegations, None, "status IS NULL AND owner = ? AND id = ANY(?)",
            (self.host_id, wanted), attempt_columns=ATTEMPT_COLUMNS))

    def _opened(self, found: list[OpenDelegation]) -> list[OpenDelegation]:
        """`found` remembered as this host's (their attempts' delegations) and put parents
        first (a taker's seq can be lower than the host it took from)."""
        for o in found:
            for a in o.attempts:
                self._held.attempt(a.id, o.delegation.id, running=a.open)
        ids = {o.delegation.id for o in found}
        done: set[str] = set()
        ordered: list[OpenDelegation] = []
        by_id = {o.delegation.id: o for o in found}

        def place(o: OpenDelegation) -> None:
            if o.delegation.id in done:
                return
            done.add(o.delegation.id)
            parent = o.delegation.parent_id
            if parent is not None and parent in ids:
                place(by_id[parent])
            ordered.append(o)

        for o in found:
            place(o)
        return ordered

    # -- readers ----------------------------------------------------------------------------
    def _read(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """`fn` on the connection; one found broken (the server restarted, or a taker
        ended this host's sessions) is made again at once, once."""
        for attempt in (1, 2):
            try:
                return fn(Qmark(self._connection()), *args, **kwargs)
            except psycopg.Error as exc:
                error = self._lost(exc)
                if attempt == 2 or self._con is not None:
                    raise error from None
        raise AssertionError("unreachable")

    def open_delegations(self) -> list[OpenDelegation]:
        """This host's open delegations (what it owns), parents before children."""
        return self._opened(self._read(reads.open_delegations, None,
                                       "status IS NULL AND owner = ?", (self.host_id,),
                                       attempt_columns=ATTEMPT_COLUMNS))

    def delegation_as_open(self, delegation_id: str) -> OpenDelegation | None:
        found = self._read(reads.open_delegations, delegation_id,
                           attempt_columns=ATTEMPT_COLUMNS)
        if found:
            for a in found[0].attempts:
                self._held.attempt(a.id, delegation_id, running=a.open)
        return found[0] if found else None

    def blocked(self) -> list[tuple[StoredDelegation, Summary]]:
        return self._read(reads.blocked)

    def reopen(self, delegation_id: str, answer: dict[str, Any] | None = None) -> None:
        """Open a settled delegation again and make it this host's (the epoch bumped)."""
        self._claim(delegation_id, "status = NULL, summary = NULL, settled = NULL,"
                                   " settled_seq = NULL, answer = %s, ",
                    (json.dumps(answer) if answer is not None else None,))

    def claim_settled(self, delegation_id: str) -> None:
        """Make the settled delegation this host's (the epoch bumped), committed at once,
        so that a verb can settle it again (whichever host settled it, and however long
        ago this one let go of it)."""
        self._claim(delegation_id, "", settled=True)

    def _claim(self, delegation_id: str, clear: str, values: tuple[Any, ...] = (), *,
               settled: bool = False) -> None:
        self.commit()
        with self._leased() as con:
            row = con.execute(
                f"UPDATE delegations SET {clear}owner = %s, epoch = epoch + 1 WHERE id = %s"
                + (" AND status IS NOT NULL" if settled else "") + " RETURNING epoch",
                (*values, self.host_id, delegation_id)).fetchone()
        if row is not None:
            self._held.epochs[delegation_id] = int(row[0])

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
        row = self._read(lambda con: con.execute(
            "SELECT coalesce(sum(calls), 0)::bigint, coalesce(sum(input_tokens), 0)::bigint,"
            " coalesce(sum(output_tokens), 0)::bigint, coalesce(sum(cost), 0)::float8"
            " FROM attempts").fetchone())
        return Usage(calls=row[0], input_tokens=row[1], output_tokens=row[2], cost=row[3])

    def sessions(self) -> set[tuple[str, str]]:
        rows = self._read(lambda con: con.execute(
            "SELECT DISTINCT a.agent, d.brief::jsonb ->> 'session' FROM attempts a JOIN"
            " delegations d ON d.id = a.delegation_id WHERE d.brief::jsonb ->> 'session'"
            " IS NOT NULL").fetchall())
        return {(agent, str(key)) for agent, key in rows}

    def agent_sessions(self) -> list[tuple[str, str, str]]:
        rows = self._read(lambda con: con.execute(
            "SELECT a.agent, d.brief::jsonb ->> 'session', a.record::jsonb ->> 'session_id'"
            " FROM attempts a JOIN delegations d ON d.id = a.delegation_id WHERE"
            " d.brief::jsonb ->> 'session' IS NOT NULL AND a.record IS NOT NULL AND"
            " a.record::jsonb ->> 'session_id' IS NOT NULL ORDER BY a.end_seq").fetchall())
        return [(agent, str(key), str(sid)) for agent, key, sid in rows]

    def issued(self) -> dict[str, int]:
        return self._read(reads.issued)

    # -- life -------------------------------------------------------------------------------
    def heartbeat(self) -> None:
        """Renew this host's lease (on the store's own connection)."""
        try:
            con = self._connection()
            con.execute(RENEW, (self.lease_s, self.host_id))
        except psycopg.Error as exc:
            raise self._lost(exc) from None

    def session_totals(self, session_id: str) -> SessionTotals | None:
        row = self._read(lambda con: con.execute(SESSION_TOTALS, (session_id,)).fetchone())
        return SessionTotals(*row) if row is not None else None

    def prune(self) -> int:
        cutoff = self._now() - self._keep_days * _DAY_S
        doomed = ("SELECT d.id FROM delegations d WHERE d.settled < %s AND NOT EXISTS"
                  " (SELECT 1 FROM delegations p WHERE p.id = d.parent_id AND p.status IS"
                  " NULL)")
        try:
            con = self._connection()
            with con.transaction():
                Qmark(con).execute(SESSIONS_PRUNE, (cutoff,))  # charged nothing since
                ids = [r[0] for r in con.execute(doomed, (cutoff,)).fetchall()]
                if ids:
                    for table in ("attempts", "partials", "retries"):
                        con.execute(f"DELETE FROM {table} WHERE delegation_id = ANY(%s)",
                                    (ids,))
                    con.execute("DELETE FROM keys WHERE delegation_id = ANY(%s)", (ids,))
                    con.execute("DELETE FROM delegations WHERE id = ANY(%s)", (ids,))
        except psycopg.Error as exc:
            raise self._lost(exc) from None
        return len(ids)

    def close(self) -> None:
        """Commit what is buffered, release this host (its lease ended) and disconnect. A
        host fenced meanwhile (its lease lost) writes nothing and says nothing more: its
        delegations are another host's. While the database is away the last writes wait
        for it, as any write does, until this host's lease would have ended (after that
        they would be fenced): `StoreError` then."""
        give_up = time.monotonic() + self.lease_s
        try:
            while True:
                self._retry_at = 0.0  # the last chance to write: no backoff waited out
                try:
                    self._release()
                    return
                except StoreError:
                    if time.monotonic() >= give_up:
                        raise
                time.sleep(_CLOSE_AGAIN_S)  # the stopping thread: the database restarts
        finally:
            if self._keeper is not None:
                self._keeper.close()
            if self._con is not None:
                with contextlib.suppress(Exception):
                    self._con.close()
                self._con = None


    def _release(self) -> None:
        """`close`'s writes, once: what is buffered, then this host's release."""
        try:
            if not self._fenced:
                with contextlib.suppress(StoreFenced):
                    self.commit()
            if not self._fenced:
                con = self._connection()
                con.execute("UPDATE hosts SET released = now(), lease_until = now()"
                            " WHERE id = %s AND taken_by IS NULL", (self.host_id,))
        except psycopg.Error as exc:
            raise self._lost(exc) from None


class _Rollback(Exception):
    """Leaves a transaction block, rolling it back (psycopg rolls back on any exception)."""
