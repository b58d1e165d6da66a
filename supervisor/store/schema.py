"""The store's file: its schema, and the read-only check that a file is a Zeus store.

`inspect(path)` runs before anything may write: it reads the header, then opens
the file read-only (`mode=ro`) and reads the schema version and the meta table.
A file that is not a Zeus store, a torn or corrupt one, or one of a newer schema
raises `StoreError` naming the file and what to do, and the file is not changed. A
store of an older schema is migrated in place (`migrate`) by the Zeus that claims it,
in the claim's transaction.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

from actors.backends.process.reattach import children_dir
from supervisor.errors import StoreError

__all__ = [
    "APPLICATION",
    "APPLICATION_ID",
    "DDL",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SESSIONS_PRUNE",
    "SESSION_CHARGE",
    "SESSION_TOTALS",
    "SQLITE_HEADER",
    "inspect",
    "is_sqlite_file",
    "migrate",
    "readonly_uri",
]

SQLITE_HEADER = b"SQLite format 3\x00"
APPLICATION = "zeus-store"
APPLICATION_ID = 0x5A455553  # "ZEUS", in the file header (bytes 68..71)
# 1: the first store. 2: `agent_sessions`, what each agent CLI session was charged (a
# follow-up in it is charged only what its run adds, after a restart too). 3:
# `attempts.charged_progress`, the progress count of an attempt's last charge committed
# (what a worker sends again to the next host is counted only above it), and
# `delegations.answer`, a person's answer to a blocked delegation that runs again.
SCHEMA_VERSION = 3

# Columns shared by both stores' `agent_sessions` (the types are each engine's).
SESSION_CHARGE = (
    "INSERT INTO agent_sessions (id, input_tokens, cached_input_tokens, output_tokens, cost,"
    " charged) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET"
    " input_tokens = agent_sessions.input_tokens + excluded.input_tokens,"
    " cached_input_tokens = agent_sessions.cached_input_tokens + excluded.cached_input_tokens,"
    " output_tokens = agent_sessions.output_tokens + excluded.output_tokens,"
    " cost = agent_sessions.cost + excluded.cost, charged = excluded.charged")
SESSION_TOTALS = ("SELECT input_tokens, cached_input_tokens, output_tokens, cost"
                  " FROM agent_sessions WHERE id = ?")
SESSIONS_PRUNE = "DELETE FROM agent_sessions WHERE charged < ?"

_SESSIONS_DDL = """CREATE TABLE agent_sessions (
    id TEXT PRIMARY KEY, input_tokens INTEGER NOT NULL DEFAULT 0,
    cached_input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,
    cost REAL NOT NULL DEFAULT 0, charged REAL NOT NULL
) WITHOUT ROWID"""

# What takes a store of each older version to the next one (one statement each).
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (_SESSIONS_DDL,),
    2: ("ALTER TABLE attempts ADD COLUMN charged_progress INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE delegations ADD COLUMN answer TEXT"),
}

DDL = f"""
PRAGMA application_id = {APPLICATION_ID};
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE owner (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    pid INTEGER NOT NULL, pid_start_time REAL, host TEXT NOT NULL,
    since REAL NOT NULL, heartbeat REAL NOT NULL, released REAL,
    session INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE policies (id TEXT PRIMARY KEY, policy TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE delegations (
    id TEXT PRIMARY KEY, key TEXT, parent_id TEXT, ordinal INTEGER,
    agent TEXT NOT NULL, brief TEXT NOT NULL, policy TEXT NOT NULL REFERENCES policies,
    deadline REAL, created REAL NOT NULL, seq INTEGER NOT NULL,
    status TEXT, summary TEXT, settled REAL, settled_seq INTEGER, answer TEXT
);
CREATE UNIQUE INDEX delegations_key ON delegations (key) WHERE key IS NOT NULL;
CREATE INDEX delegations_parent ON delegations (parent_id, ordinal) WHERE parent_id IS NOT NULL;
CREATE TABLE attempts (
    id TEXT PRIMARY KEY, delegation_id TEXT NOT NULL, number INTEGER NOT NULL,
    agent TEXT NOT NULL, started REAL NOT NULL, deadline REAL, seq INTEGER NOT NULL,
    pid INTEGER, pid_start_time REAL, pgid INTEGER, node TEXT, identity_seq INTEGER,
    calls INTEGER NOT NULL DEFAULT 0, input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0, cost REAL NOT NULL DEFAULT 0,
    outcome TEXT, ended REAL, error TEXT, record TEXT, end_seq INTEGER,
    charged_progress INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE partials (
    delegation_id TEXT NOT NULL, attempt_id TEXT NOT NULL, seq INTEGER NOT NULL,
    item TEXT NOT NULL
);
CREATE INDEX partials_delegation ON partials (delegation_id, seq);
CREATE TABLE retries (
    delegation_id TEXT NOT NULL, after_attempt TEXT NOT NULL, due REAL NOT NULL,
    agent TEXT NOT NULL, seq INTEGER NOT NULL
);
CREATE INDEX retries_delegation ON retries (delegation_id, seq);
{_SESSIONS_DDL};
"""


def migrate(con: sqlite3.Connection, path: str | Path) -> int:
    """Bring the store on `con` to `SCHEMA_VERSION` inside the caller's write transaction
    (the file's lock held: no other opener reads or writes it meanwhile); the version it
    had. A version newer than this Zeus reads (a racer's) is refused, nothing changed."""
    version = int(con.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise _refuse(Path(path), f"has schema version {version}, newer than this Zeus "
                      f"reads ({SCHEMA_VERSION})", "upgrade zeus-supervisor to open it")
    for step in range(version, SCHEMA_VERSION):
        for statement in MIGRATIONS[step]:
            con.execute(statement)
    if version < SCHEMA_VERSION:
        con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")  # (a pragma takes no parameter)
    return version


def readonly_uri(path: str | Path) -> str:
    """A `file:` URI that opens `path` read-only. Without a write-ahead log beside it
    (a store closed cleanly, another SQLite file) it is opened immutable, so that not
    even SQLite's `-wal` and `-shm` companions are created; with one, SQLite reads the
    log (and may add the `-shm` index it needs) but never writes the file itself."""
    path = Path(path).resolve()
    immutable = "" if Path(f"{path}-wal").exists() else "&immutable=1"
    return f"file:{quote(str(path))}?mode=ro{immutable}"


def is_sqlite_file(path: str | Path) -> bool:
    """The file starts with SQLite's header (a store, or some other SQLite database)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


# A store up to this size is checked whole when it opens (about 0.1 s for 32 MB here);
# a larger one, in the tables read before anything is written (its settled rows are
# checked by SQLite as they are read, and a bad page is then a StoreError).
FULL_CHECK_BYTES = 32 * 1024 * 1024
_SMALL_TABLES = ("meta", "owner", "policies")


def _checks(size: int) -> list[str]:
    if size <= FULL_CHECK_BYTES:
        return ["PRAGMA quick_check(1)"]
    return [f"PRAGMA quick_check({table})" for table in _SMALL_TABLES]


def _refuse(path: Path, what: str, fix: str) -> StoreError:
    return StoreError(f"{path}: {what}; {fix}. The file was left as it is.")


def _refuse_emptied(path: Path) -> None:
    """An empty file is a new store only when nothing of an earlier store lies beside it:
    a store emptied in place (`: > zeus.db`) would run its keys again."""
    left = [str(p) for p in (Path(f"{path}-wal"), children_dir(path)) if p.exists()]
    if left:
        raise _refuse(path, f"is empty, but {' and '.join(left)} of an earlier store "
                      "lie beside it (a store emptied in place: its delegations would run "
                      "again)", "restore the store from a backup; or, to start a new store "
                      "on purpose, remove the file and what lies beside it, or give a new "
                      "path")


def inspect(path: str | Path) -> int | None:
    """The schema version of the Zeus store at `path`; None when there is no store yet
    (no file, or an empty one with nothing of an earlier store beside it). `StoreError`
    when the file is not one Zeus may open."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            head = f.read(100)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise _refuse(path, "is a directory", "give the path of a store file") from None
    except OSError as exc:
        raise StoreError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if not head:
        _refuse_emptied(path)
        return None
    other = "give the path of a Zeus store, or a new path for a new one"
    if not head.startswith(SQLITE_HEADER):
        raise _refuse(path, "is not a Zeus store (not an SQLite file)", other)
    if len(head) < 100:
        raise _refuse(path, "is torn (shorter than an SQLite header)",
                      "restore it from a backup, or move it away to start a new store")
    if int.from_bytes(head[68:72], "big") != APPLICATION_ID:
        raise _refuse(path, "is an SQLite database but not a Zeus store", other)
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    valid = head[24:28] == head[92:96]  # the header's page count is current
    size = path.stat().st_size
    if size % page_size or (valid and size < pages * page_size):
        raise _refuse(path, f"is torn ({size} bytes, not the {pages} pages of "
                      f"{page_size} bytes its header names)",
                      "restore it from a backup, or move it away to start a new store")
    try:
        con = sqlite3.connect(readonly_uri(path), uri=True)
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot open it read-only: {exc}") from None
    try:
        version = int(con.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise _refuse(path, f"has schema version {version}, newer than this Zeus reads "
                          f"({SCHEMA_VERSION})", "upgrade zeus-supervisor to open it")
        row = con.execute("SELECT value FROM meta WHERE key = 'application'").fetchone()
        if row is None or row[0] != APPLICATION:
            raise _refuse(path, "is an SQLite database but not a Zeus store", other)
        for check in _checks(size):
            (result,) = con.execute(check).fetchone()
            if result != "ok":
                raise sqlite3.DatabaseError(result)
    except sqlite3.DatabaseError as exc:
        raise _refuse(path, f"is corrupt ({exc})",
                      "restore it from a backup, or move it away to start a new store") from None
    finally:
        con.close()
    return version
