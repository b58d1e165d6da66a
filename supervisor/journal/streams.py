"""Event subscriptions: `handle.events()` streams one delegation's event dicts.

Zeus's actor thread publishes; any number of host threads and event loops
consume. With no subscriber nothing here runs: the actor checks one bool.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["EventStream", "Subscriptions", "short_text"]

_END = "delegation.settled"


class EventStream:
    """One subscriber's events, both an iterator and an async iterator.

    It ends after the delegation's `delegation.settled` (at once, if it had
    settled before the subscription). `close()` ends it early.
    """

    def __init__(self, delegation_id: str, on_close: Callable[[EventStream], None]) -> None:
        self.delegation_id = delegation_id
        self._on_close = on_close
        self._ready = threading.Condition()
        self._items: deque[dict[str, Any]] = deque()
        self._closed = False
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    # -- Zeus's thread ---------------------------------------------------------------
    def put(self, record: dict[str, Any]) -> None:
        with self._ready:
            if self._closed:
                return
            self._items.append(record)
            self._wake()

    def end(self) -> None:
        with self._ready:
            self._closed = True
            self._wake()

    def _wake(self) -> None:
        """Called with the condition held."""
        self._ready.notify_all()
        waiters, self._waiters = self._waiters, []
        for loop, waiter in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                loop.call_soon_threadsafe(_resolve, waiter)

    # -- the consumer's thread or loop -----------------------------------------------
    def close(self) -> None:
        """Stop receiving; iteration ends once what was received is consumed."""
        self.end()
        self._on_close(self)

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> dict[str, Any]:
        with self._ready:
            while not self._items and not self._closed:
                self._ready.wait()
            if self._items:
                return self._items.popleft()
        raise StopIteration

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        while True:
            with self._ready:
                if self._items:
                    return self._items.popleft()
                if self._closed:
                    raise StopAsyncIteration
                waiter: asyncio.Future[None] = loop.create_future()
                self._waiters.append((loop, waiter))
            await waiter


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Subscriptions:
    """Streams by delegation id. `active` is what the actor reads before doing anything."""

    def __init__(self, on_change: Callable[[bool], None]) -> None:
        self._lock = threading.Lock()
        self._streams: dict[str, list[EventStream]] = {}
        self._on_change = on_change
        self.active = False
        self.published = 0  # records offered to subscribers (a benchmark's and a test's counter)

    def subscribe(self, delegation_id: str) -> EventStream:
        stream = EventStream(delegation_id, self._remove)
        with self._lock:
            self._streams.setdefault(delegation_id, []).append(stream)
            self._set_active()
        return stream

    def _remove(self, stream: EventStream) -> None:
        with self._lock:
            streams = self._streams.get(stream.delegation_id, [])
            if stream in streams:
                streams.remove(stream)
            if not streams:
                self._streams.pop(stream.delegation_id, None)
            self._set_active()

    def _set_active(self) -> None:
        """Called with the lock held."""
        active = bool(self._streams)
        if active != self.active:
            self.active = active
            self._on_change(active)

    def wants(self, delegation_id: str | None) -> bool:
        return self.active and delegation_id in self._streams

    def publish(self, record: dict[str, Any]) -> None:
        """Runs in Zeus's actor thread: hand `record` to its delegation's subscribers."""
        delegation_id: str = record.get("delegation_id") or ""
        with self._lock:
            streams = self._streams.get(delegation_id)
            if not streams:
                return
            ending = record.get("event") == _END
            if ending:
                del self._streams[delegation_id]
                self._set_active()
            streams = list(streams)
        self.published += 1
        for stream in streams:
            stream.put(record)
            if ending:
                stream.end()


def short_text(item: Any, limit: int = 200) -> str:
    """A partial result as one short line of text (for the journal's `attempt.partial`)."""
    text = item if isinstance(item, str) else repr(item)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
