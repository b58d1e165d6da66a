"""A throwaway PostgreSQL for the tests: `initdb` and `pg_ctl` on a temporary directory,
reached over a Unix socket only, run as the `postgres` user when the tests run as root
(initdb refuses root). One server per test session; a fresh database per test.

`find_bin_dir()` is None where no PostgreSQL is installed: the tests that need one are
then skipped with `SKIP`, which says what to install.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["SKIP", "PostgresServer", "count_rows", "find_bin_dir", "is_postgres", "open_store"]

SKIP = ("no PostgreSQL server binaries here (apt-get install postgresql, or put initdb and "
        "pg_ctl on PATH) or no psycopg (pip install 'zeus-supervisor[postgres]')")


def find_bin_dir() -> Path | None:
    """The directory of `initdb` and `pg_ctl`: Debian's newest, else whatever PATH has."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return None
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parent.parent.name)
                   if Path(p).parent.parent.name.isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(os.path.realpath(on_path)).parent
    return None


class PostgresServer:
    """One server on a temporary directory; `database()` makes a fresh, empty database
    and gives its URL. `stop(mode)` and `start()` restart it (a crash: mode `immediate`)."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="zeus-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root / "sock"
        self.socket_dir.mkdir()
        self._as: list[str] = []
        if os.getuid() == 0:
            user = pwd.getpwnam("postgres")
            for p in (self.root, self.socket_dir):
                os.chown(p, user.pw_uid, user.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        self._names = itertools.count(1)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "zeus",
                  "--no-sync", "-E", "UTF8")
        # A test server: no fsync (what a crash of the server loses is not the tests' point:
        # `pg_ctl stop -m immediate` keeps the WAL the server wrote, so no commit is lost).
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write("\nfsync = off\nfull_page_writes = off\nmax_connections = 200\n"
                       "shared_buffers = 32MB\n")
        self.start()

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run([*self._as, str(self.bin_dir / tool), *args], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=self.root)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://zeus@/{database}?host={self.socket_dir}"

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"),
                  "-o", f"-k {self.socket_dir} -c listen_addresses=''", "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def database(self) -> str:
        """A new empty database; its URL."""
        import psycopg

        name = f"t{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as con:
            con.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return self.url(name)

    def close(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def is_postgres(where: str | Path) -> bool:
    return str(where).startswith(("postgresql://", "postgres://"))


def open_store(where: str | Path, **kwargs: Any) -> Any:
    """The store at `where`, a SQLite path or a PostgreSQL URL, opened with `kwargs`
    (`synchronous` is the SQLite store's and `lease_s` the PostgreSQL store's only)."""
    if is_postgres(where):
        from supervisor.store.postgres import PostgresStore

        kwargs.pop("synchronous", None)
        return PostgresStore.open(str(where), **kwargs)
    from supervisor.store import SqliteStore

    kwargs.pop("lease_s", None)
    return SqliteStore.open(where, **kwargs)


def count_rows(where: str | Path, table: str) -> int:
    """How many rows `table` holds, read on a connection of its own."""
    assert table.isidentifier()
    if is_postgres(where):
        import psycopg

        with psycopg.connect(str(where)) as con:
            row = con.execute(f"SELECT count(*) FROM {table}").fetchone()
            assert row is not None
            return int(row[0])
    import sqlite3

    con = sqlite3.connect(where)
    try:
        return int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        con.close()
