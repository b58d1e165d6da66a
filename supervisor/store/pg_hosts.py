"""The hosts of a PostgreSQL store and their leases: a host's row read (`Host`, `hosts`),
a connection as a host makes it (its name and its idle-in-transaction limit), a
read-only view for the CLI and the ui, and the lease kept from a thread of its own
(`LeaseKeeper`)."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from actors import Brief, Summary
from actors.osproc import process_start_time
from supervisor.errors import StoreError
from supervisor.store.pg_schema import TABLES, Qmark, shown
from supervisor.store.shared import ID_BLOCK, HostLease, Joined, Renewal, SettledFeed

try:
    import psycopg
except ImportError:  # pragma: no cover - the extra is missing
    psycopg = None  # type: ignore[assignment]

__all__ = ["RENEW", "SETTLED", "Host", "LeaseKeeper", "SettledWord", "away", "connect", "hosts",
           "read_only", "register"]

CONNECT_TIMEOUT_S = 3
# A host's lease extended by `lease_s` (the database's clock), only while it holds it:
# the seconds it has left, or no row once it is lost (args: lease_s, host id).
RENEW = ("UPDATE hosts SET lease_until = now() + make_interval(secs => %s) WHERE id = %s"
         " AND taken_by IS NULL AND released IS NULL AND lease_until >= now()"
         " RETURNING extract(epoch FROM lease_until - now())::float8 AS left_s")

# A host incarnation registered with its lease (args: id, pid, its start time, machine,
# lease_s, bound_s): its number, when it joined and the seconds its lease has.
_REGISTER = ("INSERT INTO hosts (id, n, pid, pid_start_time, host, lease_until, bound_s)"
             " VALUES (%s, nextval('hosts_n'), %s, %s, %s, now() + make_interval(secs => %s),"
             " %s) RETURNING n, extract(epoch FROM since)::float8,"
             " extract(epoch FROM lease_until - now())::float8")

# The channel a commit that settles delegations notifies, their ids the payload (one per
# line); it reaches the listeners only if the commit lands.
SETTLED = "zeus_settled"


@dataclass(frozen=True, slots=True)
class Host:
    """A host incarnation of a shared store. Times are wall-clock epoch seconds as the
    database's clock gives them; `lease_left_s` is what remained of the lease when read
    (negative once it has expired)."""

    id: str
    pid: int
    host: str
    since: float
    lease_until: float
    lease_left_s: float
    released: float | None
    taken_by: str | None
    owns: int  # open delegations it owns


_HOST_COLUMNS = ("h.id, h.pid, h.host, extract(epoch FROM h.since)::float8,"
                 " extract(epoch FROM h.lease_until)::float8,"
                 " extract(epoch FROM h.lease_until - now())::float8,"
                 " extract(epoch FROM h.released)::float8, h.taken_by,"
                 " (SELECT count(*) FROM delegations d WHERE d.owner = h.id"
                 " AND d.status IS NULL)")


def _host(row: Sequence[Any]) -> Host:
    return Host(id=row[0], pid=row[1], host=row[2], since=row[3], lease_until=row[4],
                lease_left_s=row[5], released=row[6], taken_by=row[7], owns=int(row[8]))


def hosts(con: Any) -> list[Host]:
    """Every host of the store, oldest first (the CLI's and the ui's view)."""
    rows = con.execute(f"SELECT {_HOST_COLUMNS} FROM hosts h ORDER BY h.n").fetchall()
    return [_host(r) for r in rows]


@contextlib.contextmanager
def read_only(url: str) -> Iterator[tuple[Any, list[Host]]]:
    """A read-only view of the store at `url` for the CLI and the ui (its hosts may run):
    one read-only transaction, its connection behind `?` placeholders, and the hosts.
    `StoreError` when it cannot be reached or is not a Zeus store (nothing is created)."""
    where = shown(url)
    if psycopg is None:
        raise StoreError(f"{where}: a PostgreSQL store needs psycopg: "
                         "pip install 'zeus-supervisor[postgres]'")
    try:
        con = psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S,
                              application_name="zeus-reader")
    except psycopg.Error as exc:
        raise StoreError(f"{where}: cannot connect to the store ({exc}); check the URL and "
                         "that the database is up") from None
    try:
        con.read_only = True
        with con.transaction():
            tables = {r[0] for r in con.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = current_schema()")}
            if not set(TABLES) <= tables:
                raise StoreError(f"{where}: no Zeus store there (no tables of one yet)")
            yield Qmark(con), hosts(con)
    except psycopg.Error as exc:
        raise StoreError(f"{where}: cannot read the store: {exc}") from None
    finally:
        con.close()


def register(con: Any, host_id: str, lease_s: float, bound_s: float) -> Joined:
    """This process as the host incarnation `host_id`, its lease begun (committed)."""
    pid = os.getpid()
    n, since, left_s = con.execute(_REGISTER, (host_id, pid, process_start_time(pid),
                                               socket.gethostname(), lease_s, bound_s)
                                   ).fetchone()
    return Joined(host_id, int(n), float(since), float(left_s))


def away(url: str, exc: object) -> str:
    """What a host says while the database does not answer (its URL without a password):
    not a disk to free, but a database to wait for or bring back."""
    return (f"{shown(url)}: the store cannot be written: the database does not answer "
            f"({str(exc).strip()}); nothing new starts until it does: Zeus reconnects with "
            "backoff, and what runs goes on within this host's lease (bring the database "
            "back, or check the URL)")


def connect(url: str, host_id: str, lease_s: float, *, autocommit: bool = True) -> Any:
    if psycopg is None:
        raise StoreError(f"{shown(url)}: a PostgreSQL store needs psycopg: "
                         "pip install 'zeus-supervisor[postgres]'")
    # A session idle inside a transaction longer than this is ended by the server, so a
    # frozen host never holds its row locks past its lease.
    idle_ms = max(100, int(lease_s * 1000 * 0.5))
    return psycopg.connect(
        url, autocommit=autocommit, connect_timeout=CONNECT_TIMEOUT_S,
        application_name=f"zeus-{host_id}",
        options=f"-c idle_in_transaction_session_timeout={idle_ms}",
        keepalives=1, keepalives_idle=max(1, int(lease_s / 3)), keepalives_interval=1,
        keepalives_count=3,
    )


class LeaseKeeper(HostLease):
    """This host's lease, on a connection of its own: called from one thread (the
    renewal's), while the store serves Zeus's actor thread."""

    def __init__(self, url: str, host_id: str, lease_s: float, bound_s: float = 0.0) -> None:
        self._url = url
        self._host_id = host_id
        self._lease_s = lease_s
        self._bound_s = bound_s
        self._con: Any = None
        self._lock = threading.Lock()

    @property
    def host_id(self) -> str:
        """The incarnation this lease is of (a new one after `rejoin`)."""
        return self._host_id

    def _run(self, sql: str, args: Sequence[Any]) -> list[Any]:
        with self._lock:
            for attempt in (1, 2):  # a connection lost since the last call: once more
                try:
                    if self._con is None or self._con.closed:
                        self._con = connect(self._url, self._host_id, self._lease_s)
                    return list(self._con.execute(sql, args).fetchall())
                except psycopg.OperationalError as exc:
                    with contextlib.suppress(Exception):
                        self._con.close()
                    self._con = None
                    if attempt == 2:
                        raise StoreError(away(self._url, exc)) from None
        raise AssertionError("unreachable")

    def rejoin(self) -> Joined:
        """This host registered again, as a new incarnation, on a connection named after
        it (a taker of the old one ends the old one's sessions); the renewals and reads
        from then on are the new one's. `StoreError` while the database does not answer."""
        host_id = uuid.uuid4().hex
        with self._lock:
            try:
                con = connect(self._url, host_id, self._lease_s)
            except psycopg.Error as exc:
                raise StoreError(away(self._url, exc)) from None
            try:
                joined = register(con, host_id, self._lease_s, self._bound_s)
            except psycopg.Error as exc:
                con.close()
                raise StoreError(away(self._url, exc)) from None
            if self._con is not None:
                with contextlib.suppress(Exception):
                    self._con.close()
            self._con, self._host_id = con, host_id
        return joined

    def renew(self) -> float | None:
        """Extend the lease to `lease_s` from now (the database's clock): the seconds it now
        has left; None when it is lost (expired, taken, or released). `StoreError` when the
        database cannot be reached (the lease then runs down: the caller stops its
        children before it ends)."""
        rows = self._run(RENEW, (self._lease_s, self._host_id))
        return float(rows[0][0]) if rows else None

    def keep(self, margin_s: float) -> Renewal | None:
        """`renew`, and the hosts whose leases ended more than their own ladder's bound
        (`bound_s`, which each host registers) plus `margin_s` ago and still own open
        delegations (or keys they claimed and never dispatched), in one statement: a
        host's whole traffic for its lease."""
        rows = self._run(
            f"WITH renewed AS ({RENEW}), others AS (SELECT h.id, extract(epoch FROM"
            " h.lease_until + make_interval(secs => h.bound_s + %s) - now())::float8 AS due_s"
            " FROM hosts h WHERE h.id <> %s AND h.released IS NULL AND (EXISTS (SELECT 1 FROM"
            " delegations d WHERE d.owner = h.id AND d.status IS NULL) OR EXISTS (SELECT 1"
            " FROM keys k WHERE k.host = h.id AND NOT EXISTS (SELECT 1 FROM delegations d"
            " WHERE d.id = k.delegation_id))))"
            " SELECT (SELECT left_s FROM renewed), ARRAY(SELECT id FROM others WHERE due_s < 0"
            " ORDER BY due_s), (SELECT min(due_s) FROM others WHERE due_s >= 0)",
            (self._lease_s, self._host_id, margin_s, self._host_id))
        left, expired, next_s = rows[0]
        if left is None:
            return None
        return Renewal(float(left), tuple(expired or ()),
                       None if next_s is None else float(next_s))

    def summaries(self, delegation_ids: Sequence[str]) -> dict[str, Summary]:
        rows = self._run("SELECT id, summary FROM delegations WHERE id = ANY(%s) AND summary"
                         " IS NOT NULL", (list(delegation_ids),))
        return {d_id: Summary.model_validate_json(text) for d_id, text in rows}

    def exists(self, delegation_id: str) -> bool:
        return bool(self._run("SELECT EXISTS (SELECT 1 FROM delegations WHERE id = %s) OR"
                              " EXISTS (SELECT 1 FROM keys WHERE delegation_id = %s)",
                              (delegation_id, delegation_id))[0][0])

    def claim_key(self, key: str, delegation_id: str,
                  brief: Brief) -> tuple[str, Brief, bool]:
        # A claim of the same brief whose delegation was never recorded, by a host that is
        # no longer live (it died between the two), is taken over under its own id: the
        # key is not held for ever, and a handle another host took on that id resolves.
        rows = self._run(
            "INSERT INTO keys (key, delegation_id, brief, host) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (key) DO UPDATE SET host = EXCLUDED.host WHERE keys.brief ="
            " EXCLUDED.brief AND NOT EXISTS (SELECT 1 FROM delegations d WHERE d.id ="
            " keys.delegation_id) AND NOT EXISTS (SELECT 1 FROM hosts h WHERE h.id ="
            " keys.host AND h.released IS NULL AND h.taken_by IS NULL AND h.lease_until >"
            " now()) RETURNING delegation_id, brief",
            (key, delegation_id, brief.model_dump_json(), self._host_id))
        ours = bool(rows)
        if not rows:
            rows = self._run("SELECT delegation_id, brief FROM keys WHERE key = %s", (key,))
        claimed, text = rows[0]
        return claimed, Brief.model_validate_json(text), ours

    def next_ids(self, agent: str) -> int:
        (taken,) = self._run(
            "INSERT INTO id_blocks (agent, taken) VALUES (%s, 1) ON CONFLICT (agent) DO"
            " UPDATE SET taken = id_blocks.taken + 1 RETURNING taken", (agent,))[0]
        return (int(taken) - 1) * ID_BLOCK

    def settled_feed(self) -> SettledWord:
        return SettledWord(self._url, lambda: self._host_id, self._lease_s)

    def release(self) -> None:
        """End the lease now (a clean stop) and close this connection."""
        with contextlib.suppress(StoreError):
            self._run("UPDATE hosts SET released = now(), lease_until = now() WHERE id = %s"
                      " AND released IS NULL RETURNING 1", (self._host_id,))
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                with contextlib.suppress(Exception):
                    self._con.close()
                self._con = None


class SettledWord(SettledFeed):
    """`LISTEN` on the settled channel, on a connection of its own, used from one thread
    (the one that watches other hosts' delegations)."""

    def __init__(self, url: str, host_id: Callable[[], str], lease_s: float) -> None:
        self._url = url
        self._host_id = host_id  # the incarnation's now (its connection is named after it)
        self._lease_s = lease_s
        self._con: Any = None

    def wait(self, timeout_s: float) -> set[str] | None:
        if self._con is None or self._con.closed:
            try:  # listening from now on: what settled before, only the store can say
                self._con = connect(self._url, self._host_id(), self._lease_s)
                self._con.execute(f"LISTEN {SETTLED}")
            except psycopg.Error:
                self.close()
            return None
        try:
            said = list(self._con.notifies(timeout=timeout_s, stop_after=1))
        except psycopg.Error:
            self.close()
            return None
        return {d_id for note in said for d_id in note.payload.split("\n")}

    def close(self) -> None:
        if self._con is not None:
            with contextlib.suppress(Exception):
                self._con.close()
            self._con = None
