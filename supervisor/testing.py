"""For people who test their agents and hosts: a clock that moves only when told,
an event recorder, and the two mailbox controls that force a race into a known order.

```python
clock, events = FakeClock(), EventRecorder()
with Zeus.start(routing, log=events, clock=clock) as zeus:
    with held(zeus):                  # Zeus's mailbox waits; messages queue in order
        handle = zeus.dispatch(brief)
        zeus.cancel(handle.id)
    sync(zeus)                        # every message sent so far has been handled
```
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from actors.clock import FakeClock

if TYPE_CHECKING:
    from supervisor.core.zeus import Zeus

__all__ = ["EventRecorder", "FakeClock", "held", "sync"]


def held(zeus: Zeus) -> contextlib.AbstractContextManager[None]:
    """Hold Zeus's mailbox for the block: messages sent meanwhile queue up in order."""
    return zeus._held()


def sync(zeus: Zeus) -> None:
    """Wait until Zeus has handled every message sent before this call."""
    zeus._sync()


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
