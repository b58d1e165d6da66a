"""For people who test their agents and hosts: a clock that moves only when told,
an event recorder, the mailbox controls that force a race into a known order,
a few read-outs of Zeus's inside that a test may assert on, and a store that
runs out of room (`store_full`).

```python
clock, events = FakeClock(), EventRecorder()
with Zeus.start(routing, log=events, clock=clock) as zeus:
    with held(zeus):                  # Zeus's mailbox waits; messages queue in order
        handle = zeus.dispatch(brief)
        zeus.cancel(handle.id)
    sync(zeus)                        # every message sent so far has been handled
```

`tell(zeus, message)` puts a child's message in the mailbox as its backend would,
and `wait_queued(zeus, n)` waits until n messages wait there (a child's `Finished`
while the mailbox is held, say).

`FakeClock` also drives `ctx.sleep`: a child sleeping on it wakes when the test
advances the clock (`clock.wait_for_sleepers()` waits until it sleeps), or, with
`FakeClock(autojump_threshold=0.01)`, when every sleeper has waited that long.

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
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from actors.clock import FakeClock

if TYPE_CHECKING:
    from supervisor.core.zeus import Zeus
    from supervisor.store import SqliteStore

__all__ = [
    "EventCosts",
    "EventRecorder",
    "FakeClock",
    "event_costs",
    "held",
    "kept",
    "mailbox",
    "queued",
    "store_full",
    "sync",
    "tell",
    "wait_queued",
    "wait_stopped",
]


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


def tell(zeus: Zeus, message: object) -> None:
    """Put `message` in Zeus's mailbox as a child's backend would (an `actors.protocol`
    message such as a `Charge` or a `Finished`): with `held`, a race in a chosen order."""
    zeus._tell(message)


def mailbox(zeus: Zeus) -> Any:
    """Zeus's mailbox itself: the queue its actor was made with (a `queue.SimpleQueue`,
    through the hook pykka calls to make an actor's inbox)."""
    return zeus._ref.actor_inbox


def queued(zeus: Zeus) -> int:
    """How many messages wait in Zeus's mailbox now (any thread; exact while `held`)."""
    return int(mailbox(zeus).qsize())


def wait_queued(zeus: Zeus, count: int = 1, timeout: float = 10.0) -> None:
    """Block until at least `count` messages wait in Zeus's mailbox, for instance a
    child's `Finished` while the mailbox is `held` (a safety bound, not an assertion:
    `AssertionError` if they did not come within `timeout` seconds of real time)."""
    end = time.monotonic() + timeout
    while (have := queued(zeus)) < count:
        if time.monotonic() > end:
            raise AssertionError(f"{have} message(s) in Zeus's mailbox, not {count}, "
                                 f"after {timeout}s")
        time.sleep(0.001)


def wait_stopped(zeus: Zeus, timeout: float = 10.0) -> bool:
    """Wait until `zeus.stop()` (or `astop()`, in its own thread) has finished; True if so."""
    return zeus._stopped.wait(timeout)


def kept(zeus: Zeus) -> int:
    """How many delegations Zeus keeps a handle for: the open ones and the settled ones
    within `keep_settled`."""
    return len(zeus._book)


@dataclass(frozen=True)
class EventCosts:
    """What Zeus's events cost now: whether it builds them at all (`enabled`: a log, a
    journal or a subscriber wants them), whether any stream is subscribed, and how many
    records were offered to subscribers so far."""

    enabled: bool
    subscribed: bool
    published: int


def event_costs(zeus: Zeus) -> EventCosts:
    """Read `EventCosts` (from any thread; `sync(zeus)` first for a settled figure)."""
    events = zeus._events
    return EventCosts(events.enabled, events.subscriptions.active,
                      events.subscriptions.published)


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
