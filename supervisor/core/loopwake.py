"""Waking asyncio waiters from Zeus's thread, one `call_soon_threadsafe` per burst.

Each event loop that awaits handles gets one `LoopWaker`. Zeus's actor thread
queues the waiters that settled; the first one queued schedules a single
drain in the loop, which wakes every waiter queued by then. A thousand
settlements in a burst cost the loop one wake-up instead of a thousand, and
Zeus's thread one write to the loop's self-pipe. A loop closed meanwhile is not
woken, and nothing is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections import deque

__all__ = ["waker"]

_WAKERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopWaker] = (
    weakref.WeakKeyDictionary()
)


class LoopWaker:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)
        self._pending: deque[asyncio.Future[None]] = deque()
        self._scheduled = False

    def wake(self, waiter: asyncio.Future[None]) -> None:
        """Any thread: wake `waiter` in its loop soon.

        No lock: `deque.append` and the flag are atomic under the GIL, and the
        drain clears the flag before it takes the queue, so no waiter is missed
        (at worst the loop drains twice).
        """
        self._pending.append(waiter)
        if self._scheduled:
            return
        self._scheduled = True
        loop = self._loop()
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        """The loop's thread: resolve every waiter queued so far."""
        self._scheduled = False
        pending = self._pending
        while pending:
            waiter = pending.popleft()
            if not waiter.done():
                waiter.set_result(None)


def waker(loop: asyncio.AbstractEventLoop) -> LoopWaker:
    """The running loop's waker (called in that loop's thread)."""
    found = _WAKERS.get(loop)
    if found is None:
        found = _WAKERS[loop] = LoopWaker(loop)
    return found
