"""How the integrations wait on Zeus and hear its progress: the one seam to swap.

Every integration goes through these functions and nothing else of the way a
host waits (`await_summary`, `await_group`: a handle cancels its delegation when
the task awaiting it is cancelled, DESIGN §12), hears a delegation's events as
Zeus emits them (`start`, `subscribe`: a `log=` sink, called in Zeus's thread) or
steers a running child (`send`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from actors import Summary
from supervisor.core.handle import AWAITER_CANCELLED, GroupHandle, Handle
from supervisor.core.zeus import Zeus
from supervisor.journal.events import LogTarget
from supervisor.routing import Routing

__all__ = [
    "AWAITER_CANCELLED",
    "EventHub",
    "await_group",
    "await_summary",
    "send",
    "start",
    "subscribe",
    "wait_summary",
]


Event = dict[str, Any]


async def await_summary(handle: Handle) -> Summary:
    """The summary, awaited without blocking the loop.

    Cancelling the awaiting task cancels the delegation with `AWAITER_CANCELLED`,
    and the `CancelledError` goes on up (a handle does this itself, DESIGN §12).
    """
    return await handle


async def await_group(group: GroupHandle) -> list[Summary]:
    """Every summary of a group, in brief order; cancelling the task cancels the group."""
    return await group


async def wait_summary(handle: Handle, timeout_s: float | None) -> Summary | None:
    """The summary, or None when `timeout_s` runs out first. Only waits: neither the
    timeout nor cancelling the awaiting task cancels the delegation: it waits on a copy
    of the handle's future, which nothing cancels but this wait (a shielded handle would
    still be cancelled with its loop's leftover tasks when the loop closes)."""
    copy: concurrent.futures.Future[Summary] = concurrent.futures.Future()

    def settled(summary: Summary) -> None:  # Zeus's thread, or this one if settled already
        if copy.set_running_or_notify_cancel():
            copy.set_result(summary)

    handle.add_done_callback(settled)
    try:
        return await asyncio.wait_for(asyncio.wrap_future(copy), timeout_s)
    except TimeoutError:
        return None


class EventHub:
    """A `log=` sink that hands each delegation's events to its subscribers.

    `__call__` runs in Zeus's thread (for every event); `subscribe` in any thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: dict[str, list[Callable[[Event], None]]] = {}

    def __call__(self, event: Event) -> None:
        delegation_id = event.get("delegation_id")
        if delegation_id is None or delegation_id not in self._listeners:
            return
        with self._lock:
            listeners = list(self._listeners.get(delegation_id, ()))
        for listener in listeners:
            listener(event)

    def subscribe(
        self, delegation_id: str, callback: Callable[[Event], None]
    ) -> Callable[[], None]:
        with self._lock:
            self._listeners.setdefault(delegation_id, []).append(callback)

        def unsubscribe() -> None:
            with self._lock:
                listeners = self._listeners.get(delegation_id, [])
                if callback in listeners:
                    listeners.remove(callback)
                if not listeners:
                    self._listeners.pop(delegation_id, None)

        return unsubscribe


_hubs: weakref.WeakKeyDictionary[Zeus, EventHub] = weakref.WeakKeyDictionary()


def start(
    routing: Routing | str | Path | None = None,
    *,
    log: LogTarget = None,
    agents: Mapping[str, Callable[..., Any]] | None = None,
) -> Zeus:
    """`Zeus.start`, with an `EventHub` among the `log=` targets so `subscribe` works."""
    hub = EventHub()
    targets = list(log) if isinstance(log, list | tuple) else [log]
    zeus = Zeus.start(routing, agents=agents, log=[*targets, hub])
    _hubs[zeus] = hub
    return zeus


def subscribe(
    zeus: Zeus, delegation_id: str, callback: Callable[[Event], None]
) -> Callable[[], None]:
    """Call `callback(event)` for each event of this delegation from now on; returns the
    unsubscribe function. The callback runs in Zeus's thread: keep it quick. A Zeus
    not made by `start` has no events to give: nothing is ever called.
    """
    hub = _hubs.get(zeus)
    if hub is None:
        return lambda: None
    return hub.subscribe(delegation_id, callback)


def send(zeus: Zeus, delegation_id: str, message: object) -> bool:
    """Put `message` in the running child's mailbox (`ctx.receive`); False once settled.

    `UnknownDelegation` for an id Zeus never had; `TypeError` for a message that
    cannot cross to the child."""
    return zeus.send(delegation_id, message)
