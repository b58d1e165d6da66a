"""The PostgreSQL store's schema and statements: the tables (created under an advisory
lock), each write's statement conditioned on this host's epoch (`STATEMENTS`, their
values bound by psycopg), and the check of a database that is not a Zeus store. No
psycopg here: the statements are text, run by `PostgresStore` (postgres) on its
connection."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from supervisor.errors import StoreError
from supervisor.store import reads
from supervisor.store.schema import APPLICATION, SCHEMA_VERSION, SESSION_CHARGE

__all__ = ["ATTEMPT_COLUMNS", "DDL", "FENCED", "KINDS", "LATE_CHARGE", "LEASED", "STATEMENTS",
           "TABLES", "Qmark", "is_postgres_url", "prepare", "shown"]

ATTEMPT_COLUMNS = reads.ATTEMPT_COLUMNS + ", in_tool"  # what a taker reads of an attempt
LOCK_KEY = 0x5A455553  # "ZEUS": the advisory lock that creating the schema holds
TABLES = ("meta", "hosts", "policies", "delegations", "attempts", "partials", "retries",
          "keys", "id_blocks")

FENCED = "ZF001"  # the SQLSTATE of a conditioned write that found nothing it holds
# What such a write calls: its transaction aborts with `FENCED`, the message saying why.
_FENCED_FUNCTION = (
    "CREATE FUNCTION zeus_fenced(why TEXT, found BIGINT) RETURNS INTEGER"
    f" LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION USING ERRCODE = '{FENCED}',"
    " MESSAGE = why, DETAIL = found || ' rows matched'; END $$")

# What takes a store of each older version to the next one (schema.py's, in this
# engine's types), run by `prepare` under the advisory lock.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: ("CREATE TABLE agent_sessions (id TEXT PRIMARY KEY,"
        " input_tokens BIGINT NOT NULL DEFAULT 0,"
        " cached_input_tokens BIGINT NOT NULL DEFAULT 0,"
        " output_tokens BIGINT NOT NULL DEFAULT 0,"
        " cost DOUBLE PRECISION NOT NULL DEFAULT 0, charged DOUBLE PRECISION NOT NULL)",),
    2: ("ALTER TABLE attempts ADD COLUMN charged_progress BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE delegations ADD COLUMN answer TEXT", _FENCED_FUNCTION),
}

DDL = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE SEQUENCE hosts_n;
CREATE TABLE id_blocks (agent TEXT PRIMARY KEY, taken BIGINT NOT NULL);
CREATE TABLE keys (
    key TEXT PRIMARY KEY, delegation_id TEXT NOT NULL, brief TEXT NOT NULL, host TEXT NOT NULL
);
CREATE INDEX keys_host ON keys (host);
CREATE TABLE hosts (
    id TEXT PRIMARY KEY, n BIGINT NOT NULL, pid INTEGER NOT NULL, pid_start_time DOUBLE
    PRECISION, host TEXT NOT NULL, since TIMESTAMPTZ NOT NULL DEFAULT now(),
    lease_until TIMESTAMPTZ NOT NULL, released TIMESTAMPTZ, taken_by TEXT,
    taken_at TIMESTAMPTZ, commit_no BIGINT NOT NULL DEFAULT 0,
    bound_s DOUBLE PRECISION NOT NULL DEFAULT 0
);
CREATE TABLE policies (id TEXT PRIMARY KEY, policy TEXT NOT NULL);
CREATE TABLE delegations (
    id TEXT PRIMARY KEY, key TEXT UNIQUE, parent_id TEXT, ordinal INTEGER,
    agent TEXT NOT NULL, brief TEXT NOT NULL, policy TEXT NOT NULL REFERENCES policies,
    deadline DOUBLE PRECISION, created DOUBLE PRECISION NOT NULL, seq BIGINT NOT NULL,
    status TEXT, summary TEXT, settled DOUBLE PRECISION, settled_seq BIGINT,
    owner TEXT NOT NULL, epoch INTEGER NOT NULL DEFAULT 1, answer TEXT
);
CREATE INDEX delegations_parent ON delegations (parent_id, ordinal)
    WHERE parent_id IS NOT NULL;
CREATE INDEX delegations_open ON delegations (owner, seq) WHERE status IS NULL;
CREATE TABLE attempts (
    id TEXT PRIMARY KEY, delegation_id TEXT NOT NULL, number INTEGER NOT NULL,
    agent TEXT NOT NULL, started DOUBLE PRECISION NOT NULL, deadline DOUBLE PRECISION,
    seq BIGINT NOT NULL, pid INTEGER, pid_start_time DOUBLE PRECISION, pgid INTEGER,
    node TEXT, identity_seq BIGINT, calls BIGINT NOT NULL DEFAULT 0,
    input_tokens BIGINT NOT NULL DEFAULT 0, output_tokens BIGINT NOT NULL DEFAULT 0,
    cost DOUBLE PRECISION NOT NULL DEFAULT 0, outcome TEXT, ended DOUBLE PRECISION,
    error TEXT, record TEXT, end_seq BIGINT, in_tool TEXT,
    charged_progress BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX attempts_delegation ON attempts (delegation_id, number);
CREATE TABLE partials (
    delegation_id TEXT NOT NULL, attempt_id TEXT NOT NULL, seq BIGINT NOT NULL,
    item TEXT NOT NULL
);
CREATE INDEX partials_delegation ON partials (delegation_id, seq);
CREATE TABLE retries (
    delegation_id TEXT NOT NULL, after_attempt TEXT NOT NULL, due DOUBLE PRECISION NOT NULL,
    agent TEXT NOT NULL, seq BIGINT NOT NULL
);
CREATE INDEX retries_delegation ON retries (delegation_id, seq);
""" + ";\n".join((*MIGRATIONS[1], _FENCED_FUNCTION)) + ";\n"

# This host still holds its lease: its row is locked for the commit (and stamped with the
# commit's number), so a taker, which updates it, waits for the commit to end.
_HOLD = ("UPDATE hosts SET commit_no = %s WHERE id = %s AND taken_by IS NULL AND released"
         " IS NULL AND lease_until > now() RETURNING 1")
LEASED = ("SELECT 1 FROM hosts WHERE id = %s AND taken_by IS NULL AND released IS NULL"
           " AND lease_until > now() FOR SHARE")
_OWNED = "SELECT 1 FROM delegations d WHERE d.id = %s AND d.owner = %s AND d.epoch = %s"
# The attempt's delegation is named, not joined: a correlated subquery here was planned
# as a scan of every delegation (a prepared plan made while the table was small).
_ATTEMPT_OWNED = " AND EXISTS (" + _OWNED + ")"

# One statement per kind of write, applied in this order by each commit; each row ends with
# what conditions it (this host and the delegation's epoch), so a fenced row changes nothing.
@functools.lru_cache(maxsize=64)
def _pg(sql: str) -> str:
    return sql.replace("?", "%s")


_SQL: dict[str, str] = {
    "policy": "INSERT INTO policies (id, policy) VALUES (%s, %s) ON CONFLICT DO NOTHING",
    "recorded": "INSERT INTO delegations (id, key, parent_id, ordinal, agent, brief, policy,"
                " deadline, created, seq, owner, epoch) VALUES (%s, %s, %s, %s, %s, %s, %s,"
                " %s, %s, %s, %s, %s)",
    "attempt_started": "INSERT INTO attempts (id, delegation_id, number, agent, started,"
                       " deadline, seq) SELECT %s, %s, %s, %s, %s, %s, %s WHERE EXISTS ("
                       + _OWNED + ")",
    "attempt_identity": "UPDATE attempts SET pid = %s, pid_start_time = %s, pgid = %s,"
                        " node = %s, identity_seq = %s, started = COALESCE(%s, started),"
                        " deadline = COALESCE(%s, deadline) WHERE id = %s" + _ATTEMPT_OWNED,
    "attempt_tool": "UPDATE attempts SET in_tool = %s WHERE id = %s" + _ATTEMPT_OWNED,
    "charge": "UPDATE attempts SET calls = calls + %s, input_tokens = input_tokens + %s,"
              " output_tokens = output_tokens + %s, cost = cost + %s,"
              " charged_progress = GREATEST(charged_progress, %s) WHERE id = %s"
              + _ATTEMPT_OWNED,
    # What a turn's charges add to an agent CLI session: a fact, as a charge is, so
    # written whatever the epoch (in the commit of its charge).
    "session": _pg(SESSION_CHARGE),
    "partial": "INSERT INTO partials (delegation_id, attempt_id, seq, item)"
               " SELECT %s, %s, %s, %s WHERE EXISTS (" + _OWNED + ")",
    "attempt_ended": "UPDATE attempts SET outcome = %s, ended = %s, error = %s, record = %s,"
                     " end_seq = %s WHERE id = %s" + _ATTEMPT_OWNED,
    "retry_scheduled": "INSERT INTO retries (delegation_id, after_attempt, due, agent, seq)"
                       " SELECT %s, %s, %s, %s, %s WHERE EXISTS (" + _OWNED + ")",
    "settled": "UPDATE delegations SET status = %s, summary = %s, settled = %s,"
               " settled_seq = %s WHERE id = %s AND owner = %s AND epoch = %s",
}
KINDS = tuple(_SQL)  # the buffered writes, in the order a commit sends them
_UNCONDITIONED = ("policy", "recorded", "session")  # this host's own new row; a session's sum


def _checked(statement: str, what: str) -> str:
    """`statement` made to abort its transaction unless it wrote one row (`zeus_fenced`
    raises `FENCED`, saying `what`): the whole commit goes to the server at once and is
    refused there. The function runs only when the check fails, so a write that holds
    costs plain SQL."""
    assert "'" not in what  # (our own words, inlined as a literal)
    return (f"WITH w AS ({statement} RETURNING 1) SELECT CASE WHEN count(*) = 1 THEN 1"
            f" ELSE zeus_fenced('{what}', count(*)) END FROM w")


_T8, _I4, _I8, _F8 = "text", "int", "bigint", "float8"
_TYPES: dict[str, tuple[str, ...]] = {  # each statement's parameters, in order
    "hold": (_I8, _T8),
    "policy": (_T8, _T8),
    "recorded": (_T8, _T8, _T8, _I4, _T8, _T8, _T8, _F8, _F8, _I8, _T8, _I4),
    "attempt_started": (_T8, _T8, _I4, _T8, _F8, _F8, _I8, _T8, _T8, _I4),
    "attempt_identity": (_I4, _F8, _I4, _T8, _I8, _F8, _F8, _T8, _T8, _T8, _I4),
    "attempt_tool": (_T8, _T8, _T8, _T8, _I4),
    "charge": (_I8, _I8, _I8, _F8, _I8, _T8, _T8, _T8, _I4),
    "session": (_T8, _I8, _I8, _I8, _F8, _F8),
    "partial": (_T8, _T8, _I8, _T8, _T8, _T8, _I4),
    "attempt_ended": (_T8, _F8, _T8, _T8, _I8, _T8, _T8, _T8, _I4),
    "retry_scheduled": (_T8, _T8, _F8, _T8, _I8, _T8, _T8, _I4),
    "settled": (_T8, _T8, _F8, _I8, _T8, _T8, _I4),
}


def _typed(sql: str, types: Sequence[str]) -> str:
    """`sql` with each `%s` placeholder cast to its parameter's type (in an `INSERT ...
    SELECT` a NULL would otherwise be text)."""
    parts = sql.split("%s")
    assert len(parts) == len(types) + 1, sql
    typed = (f"{part}%s::{kind}" for part, kind in zip(parts, types, strict=False))
    return "".join(typed) + parts[-1]


# Each kind of write as a commit sends it (its values bound by psycopg, each statement
# prepared once a session): conditioned on this host's hold, or not (`_UNCONDITIONED`).
STATEMENTS = {kind: _typed(sql if kind in _UNCONDITIONED else
                           _checked(sql, f"a {kind} write for a delegation it no longer holds"),
                           _TYPES[kind])
              for kind, sql in _SQL.items()}
STATEMENTS["hold"] = _typed(_checked(_HOLD.removesuffix(" RETURNING 1"),
                                     "its lease ended or was taken over"), _TYPES["hold"])
# A charge written late, by a host that lost the attempt with its lease: a fact, so
# conditioned on no host or epoch, but only on being new to the attempt (its progress
# count above the attempt's `charged_progress`; 0: a charge not numbered, always new).
LATE_CHARGE = _typed(
    "UPDATE attempts SET calls = calls + %s, input_tokens = input_tokens + %s,"
    " output_tokens = output_tokens + %s, cost = cost + %s,"
    " charged_progress = GREATEST(charged_progress, %s)"
    " WHERE id = %s AND (%s = 0 OR charged_progress < %s)",
    (_I8, _I8, _I8, _F8, _I8, _T8, _I8, _I8))


def is_postgres_url(store: object) -> bool:
    """`store` names a PostgreSQL database (`postgresql://` or `postgres://`)."""
    return isinstance(store, str) and store.startswith(("postgresql://", "postgres://"))


def shown(url: str) -> str:
    """The URL without its password (in the user part or a `password=` parameter), for
    messages."""
    parts = urlsplit(url)
    netloc, query = parts.netloc, parts.query
    if parts.password is not None:
        user, _, where = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}:***@{where}"
    if query:
        query = "&".join("password=***" if p.partition("=")[0] == "password" else p
                         for p in query.split("&"))
    if (netloc, query) == (parts.netloc, parts.query):
        return url
    return urlunsplit(parts._replace(netloc=netloc, query=query))


class Qmark:
    """A psycopg connection behind the `?` placeholders the shared readers write."""

    def __init__(self, con: Any) -> None:
        self._con = con

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self._con.execute(_pg(sql), args)


def prepare(con: Any, url: str) -> None:
    """Create the schema on an empty database, or check the one there and migrate an older
    one in place, under an advisory lock (hosts that start together on an empty database
    create it once). `StoreError`, the database unchanged, for tables of another
    application or a newer schema."""
    where = shown(url)
    with con.transaction():
        con.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        tables = {r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = current_schema()")}
        if "meta" not in tables:
            if tables:
                raise StoreError(
                    f"{where}: the database holds tables of another application "
                    f"({', '.join(sorted(tables)[:5])}); give an empty database (or "
                    "one made by Zeus). The database was left as it is.")
            con.execute(DDL)
            con.execute("INSERT INTO meta VALUES ('application', %s), ('schema_version', %s)",
                        (APPLICATION, str(SCHEMA_VERSION)))
            return
        meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("application") != APPLICATION or not set(TABLES) <= tables:
            raise StoreError(f"{where}: the database is not a Zeus store (its meta table "
                             "is another application's); give an empty database. The "
                             "database was left as it is.")
        version = int(meta.get("schema_version", "0"))
        if version > SCHEMA_VERSION:
            raise StoreError(f"{where}: the store has schema version {version}, newer than "
                             f"this Zeus reads ({SCHEMA_VERSION}); upgrade zeus-supervisor "
                             "to open it. The database was left as it is.")
        for step in range(version, SCHEMA_VERSION):  # an older store, migrated in place
            for statement in MIGRATIONS[step]:
                con.execute(statement)
        if version < SCHEMA_VERSION:
            con.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'",
                        (str(SCHEMA_VERSION),))
        # A store made before attempts kept their tool call, and before a taker looked
        # for a dead host's claims (hosts of both kinds can share it: an older one
        # leaves the column empty).
        con.execute("ALTER TABLE attempts ADD COLUMN IF NOT EXISTS in_tool TEXT")
        con.execute("CREATE INDEX IF NOT EXISTS keys_host ON keys (host)")  # (takeover's)


