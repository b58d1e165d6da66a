"""For people who test their agents and hosts: a clock that moves only when told,
an event recorder, the two mailbox controls that force a race into a known order,
and a store that runs out of room (`store_full`).

```python
clock, events = FakeClock(), EventRecorder()
with Zeus.start(routing, log=events, clock=clock) as zeus:
    with held(zeus):                  # Zeus's mailbox waits; messages queue in order
        handle = zeus.dispatch(brief)
        zeus.cancel(handle.id)
    sync(zeus)                        # every message sent so far has been handled
```

A host process can be made to die at each step of a delegation's life in the
store: `ZEUS_STORE_CRASH_AFTER=KIND[:N]` in its environment (read when a store
opens) ends it with `os._exit(supervisor.store.CRASH_EXIT)` right after the N-th
commit holding a write of KIND (`recorded`, `attempt_started`,
`attempt_identity`, `charge`, `partial`, `attempt_ended`, `retry_scheduled`,
`settled`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from actors.clock import FakeClock

if TYPE_CHECKING:
    from supervisor.core.zeus import Zeus
    from supervisor.store import SqliteStore

__all__ = ["EventRecorder", "FakeClock", "held", "store_full", "sync"]


def held(zeus: Zeus) -> contextlib.AbstractContextManager[None]:
    """Hold Zeus's mailbox for the block: messages sent meanwhile queue up in order."""
    return zeus._held()


def sync(zeus: Zeus) -> None:
    """Wait until Zeus has handled every message sent before this call."""
    zeus._sync()


@contextlib.contextmanager
def store_full(store: SqliteStore | Zeus) -> Iterator[None]:
    """For the block, the store's file may not grow: a commit that needs a new page fails
    as on a full disk (SQLite's own `SQLITE_FULL`). Call from the store's thread; for a
    Zeus's own store, enter and leave it while Zeus's mailbox is `held`."""
    from supervisor.core.zeus import Zeus
    from supervisor.store import SqliteStore

    if isinstance(store, Zeus):
        store = store._store  # type: ignore[assignment]
    assert isinstance(store, SqliteStore), "store_full needs a SQLite store (or its Zeus)"
    con = store._con
    (pages,) = con.execute("PRAGMA page_count").fetchone()
    (limit,) = con.execute("PRAGMA max_page_count").fetchone()
    con.execute(f"PRAGMA max_page_count = {int(pages)}")
    try:
        yield
    finally:
        con.execute(f"PRAGMA max_page_count = {int(limit)}")


class EventRecorder:
    """An event sink for `log=` that keeps every event; a test waits for one by name.

    Called from Zeus's actor thread; read from the test's thread.
    """

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._cond = threading.Condition()

    def __call__(self, event: dict[str, Any]) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def named(self, name: str) -> list[dict[str, Any]]:
        with self._cond:
            return [e for e in self.events if e["event"] == name]

    def wait_for(self, name: str, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Block until `count` events called `name` arrived (a safety bound, not an assertion)."""
        with self._cond:
            ok = self._cond.wait_for(
                lambda: sum(e["event"] == name for e in self.events) >= count, timeout
            )
        if not ok:
            seen = [e["event"] for e in self.events]
            raise AssertionError(f"no {count} x {name} within {timeout}s; saw {seen}")
        return self.named(name)

    def names(self) -> list[str]:
        with self._cond:
            return [e["event"] for e in self.events]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        with self._cond:
            return iter(list(self.events))
