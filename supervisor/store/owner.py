"""One live owner per store: who owns it, whether that owner is alive, and the claim.

The claim is one write transaction (`BEGIN IMMEDIATE`): SQLite's write lock lets
one opener at a time read the owner row and, when its owner is gone, write its
own; a second opener racing it waits for that lock (the busy timeout) and then
finds the first alive. A lock file would also be freed by the kernel when its
holder dies, but it is a second file beside the store, and the owner row is
needed anyway to name the owner in `StoreBusy`; the row's (pid, start time) is
checked the way the sweep checks a child, so a reused pid never passes for the
owner.
"""

from __future__ import annotations

import datetime
import os
import socket
import sqlite3
from collections.abc import Callable

from actors.osproc import process_running, process_start_time
from supervisor.errors import StoreBusy, StoreError
from supervisor.store.base import Owner

__all__ = ["claim", "me", "owner_alive", "release"]


def me(now: float) -> Owner:
    """This process as a store's owner."""
    pid = os.getpid()
    return Owner(pid=pid, pid_start_time=process_start_time(pid), host=socket.gethostname(),
                 since=now, heartbeat=now)


def owner_alive(owner: Owner) -> bool:
    """Alive unless shown gone: on this host, its pid is absent or is another process
    now (the start time differs). An owner on another host cannot be shown gone here."""
    if owner.host != socket.gethostname():
        return True
    return process_running(owner.pid, owner.pid_start_time) is not False


def _when(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def claim(
    con: sqlite3.Connection, path: str, now: Callable[[], float],
    migrate: Callable[[sqlite3.Connection], object] | None = None,
) -> tuple[Owner, Owner | None, int]:
    """Make this process the store's owner: (this owner, the dead one it replaced or None,
    the number of this ownership: one more than the last's). `migrate` runs in the same
    transaction once the store is found free (an older schema brought up to date).

    `StoreBusy` names a live owner; the store is not changed then.
    """
    try:
        con.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        raise StoreError(f"{path}: cannot lock the store to claim it ({exc}); another "
                         "process holds it: try again, or stop that process") from None
    try:
        row = con.execute(
            "SELECT pid, pid_start_time, host, since, heartbeat, released, session FROM owner"
        ).fetchone()
        previous = None
        if row is not None and row[5] is None:
            previous = Owner(pid=row[0], pid_start_time=row[1], host=row[2], since=row[3],
                             heartbeat=row[4])
            if owner_alive(previous):
                raise StoreBusy(
                    f"{path}: the store is owned by a live Zeus (pid {previous.pid} on "
                    f"{previous.host}, since {_when(previous.since)}, last heartbeat "
                    f"{_when(previous.heartbeat)}); stop it first, or give another store",
                    pid=previous.pid, host=previous.host, since=previous.since,
                )
        if migrate is not None:
            migrate(con)
        owner = me(now())
        session = (row[6] if row is not None else 0) + 1
        con.execute(
            "INSERT OR REPLACE INTO owner (id, pid, pid_start_time, host, since, heartbeat,"
            " released, session) VALUES (1, ?, ?, ?, ?, ?, NULL, ?)",
            (owner.pid, owner.pid_start_time, owner.host, owner.since, owner.heartbeat,
             session),
        )
        con.execute("COMMIT")
    except BaseException:
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise
    return owner, previous, session


def release(con: sqlite3.Connection, owner: Owner, at: float) -> None:
    """Give the store up (a clean stop): the next opener finds no owner to outlive."""
    con.execute("UPDATE owner SET released = ? WHERE pid = ? AND host = ?",
                (at, owner.pid, owner.host))
