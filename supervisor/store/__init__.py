"""Durable delegations: the store that lets Zeus's promises outlive its process.

`Store` is the interface (base), `SqliteStore` the SQLite file (sqlite), with
the read-only check of a file (schema), ownership (owner), the readers (reads)
and the store read as a journal for the CLI (journal). `PostgresStore` (postgres,
imported only when used: it needs psycopg) is the store many hosts share. docs/design.md, "The
store", says what is written when.
"""

from supervisor.store.base import (
    CRASH_KINDS,
    OpenDelegation,
    Owner,
    Recovery,
    Store,
    StoreCounts,
    StoredAttempt,
    StoredDelegation,
    StoredRetry,
)
from supervisor.store.journal import (
    blocked_delegations,
    by_hand,
    is_sqlite_file,
    is_store_url,
    left_by_gone_hosts,
    open_count,
    path_or_url,
    resolved_by_hand,
    store_events,
)
from supervisor.store.shared import ID_BLOCK, HostLease, Renewal, SettledFeed, SharedStore
from supervisor.store.sqlite import CRASH_ENV, CRASH_EXIT, SqliteStore

__all__ = [
    "CRASH_ENV",
    "CRASH_EXIT",
    "CRASH_KINDS",
    "ID_BLOCK",
    "HostLease",
    "OpenDelegation",
    "Owner",
    "Recovery",
    "Renewal",
    "SettledFeed",
    "SharedStore",
    "SqliteStore",
    "Store",
    "StoreCounts",
    "StoredAttempt",
    "StoredDelegation",
    "StoredRetry",
    "blocked_delegations",
    "by_hand",
    "is_sqlite_file",
    "is_store_url",
    "left_by_gone_hosts",
    "open_count",
    "path_or_url",
    "resolved_by_hand",
    "store_events",
]
