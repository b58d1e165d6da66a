"""The one channel from Ray children back to Zeus (`Reporter`), and Zeus's control items
(cancels, an owner's messages) on their way to the children that watch for them.

A Ray actor: it runs in a Ray worker process, never in Zeus's; the backend
(`actors.backends.ray.place`) wraps it with `ray.remote`. How children and Zeus
use it: `actors.backends.ray.child`.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["Reporter"]


class Reporter:
    """The one channel from Ray children back to Zeus. A Ray actor (async: its methods
    interleave on one event loop in the reporter's process)."""

    def __init__(self) -> None:
        self._items: list[tuple[Any, ...]] = []
        self._ready = asyncio.Event()
        self._control: dict[str, list[Any]] = {}  # attempt id -> items not yet taken
        self._watchers: dict[str, asyncio.Event] = {}
        self._replies: dict[int, asyncio.Future[bytes]] = {}

    async def post(self, attempt_id: str, messages: list[bytes]) -> None:
        """A child's batch (fire and forget)."""
        self._items.append(("m", attempt_id, messages))
        self._ready.set()

    async def drain(self) -> list[tuple[Any, ...]]:
        """Zeus's long poll: everything posted since the last drain, once there is something."""
        await self._ready.wait()
        items, self._items = self._items, []
        self._ready.clear()
        return items

    async def delegate(self, attempt_id: str, request_id: int, brief: bytes) -> bytes:
        """A child's `ctx.delegate()`: waits for Zeus's `reply`."""
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._replies[request_id] = future
        self._items.append(("d", attempt_id, request_id, brief))
        self._ready.set()
        return await future

    async def reply(self, request_id: int, result: bytes) -> None:
        future = self._replies.pop(request_id, None)
        if future is not None and not future.done():
            future.set_result(result)

    async def control(self, attempt_id: str, item: Any) -> None:
        """Zeus: `item` (`frames.Cancel`, `frames.MailTo`) for the attempt, kept until it
        asks."""
        self._control.setdefault(attempt_id, []).append(item)
        watcher = self._watchers.get(attempt_id)
        if watcher is not None:
            watcher.set()

    async def watch(self, attempt_id: str) -> list[Any]:
        """A child: wait for control items; [] once `release`d (the attempt ended)."""
        if attempt_id not in self._control:
            watcher = self._watchers.setdefault(attempt_id, asyncio.Event())
            await watcher.wait()
            self._watchers.pop(attempt_id, None)
        return self._control.pop(attempt_id, [])

    async def release(self, attempt_id: str) -> None:
        """The attempt ended: end its watch, forget its control items."""
        self._control.pop(attempt_id, None)
        watcher = self._watchers.pop(attempt_id, None)
        if watcher is not None:
            watcher.set()
