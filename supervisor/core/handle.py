"""Handles the host holds: one per delegation (`Handle`) and per group (`GroupHandle`).

A handle's summary lives in a real `concurrent.futures.Future` (`handle.future`),
set once in Zeus's actor thread. Awaiting a handle never blocks the event
loop, works from any loop (or several), and follows structured concurrency:
a task cancelled while it awaits cancels the delegation, unless it awaited
through `asyncio.shield(handle)`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Generator, Sequence
from typing import Any, Protocol

from actors import Summary
from supervisor.core.future import DelegationFuture
from supervisor.core.loopwake import waker
from supervisor.journal.streams import EventStream

__all__ = ["AWAITER_CANCELLED", "GroupHandle", "Handle", "Steering"]

# Taken only by the handles of watched dispatches: no lock of its own built per handle.
_FIRST_STREAM_TAKEN = threading.Lock()

# The reason a delegation is cancelled with when the task awaiting it is cancelled.
AWAITER_CANCELLED = "the awaiting task was cancelled"


class Steering(Protocol):
    """What a handle asks of the Zeus that made it (`Zeus` is one): the host's public
    calls on a delegation by id. Called from any of the host's threads."""

    def cancel(self, delegation_id: str, reason: str | None = None) -> None: ...

    def send(self, delegation_id: str, message: object) -> bool: ...

    def events(self, delegation_id: str) -> EventStream: ...


class Handle:
    """The host's handle on one delegation. Thread-safe; awaitable from asyncio."""

    def __init__(
        self, delegation_id: str, steering: Steering, settled: DelegationFuture,
        first_stream: EventStream | None = None,
    ) -> None:
        self.id = delegation_id
        self._steering = steering
        self._settled = settled
        self._first_stream = first_stream  # opened at dispatch (`watch=True`), not yet taken

    @property
    def future(self) -> concurrent.futures.Future[Summary]:
        """The summary's `concurrent.futures.Future` (its `cancel()` cancels the delegation)."""
        return self._settled

    def result(self, timeout: float | None = None) -> Summary:
        """Block until settled and return the summary (the same one every time).

        Raises the built-in `TimeoutError` when `timeout` runs out; the delegation
        goes on (a wait that runs out cancels nothing).
        """
        try:
            return self._settled.result(timeout)
        except TimeoutError:
            raise TimeoutError(
                f"{self.id} not settled within {timeout} s; the delegation goes on "
                "(call .result() again, or .cancel() it)"
            ) from None

    def done(self) -> bool:
        return self._settled.done()

    def cancel(self, reason: str | None = None) -> None:
        """Ask Zeus to cancel this delegation (a no-op once settled)."""
        self._steering.cancel(self.id, reason=reason)

    def send(self, message: object) -> bool:
        """Put `message` in the running child's own mailbox (`ctx.receive()`).

        False once settled; a message sent between attempts goes to the next
        attempt. `TypeError` at once when it cannot cross to the child (a
        process child needs a picklable object, a command a JSON-able one).
        """
        return self._steering.send(self.id, message)

    def events(self) -> EventStream:
        """This delegation's events from now on; iterate (sync or async) until settled.

        For a handle of `zeus.dispatch(brief, watch=True)`, the first call's stream
        holds every event from `delegation.dispatched` on.
        """
        if self._first_stream is not None:
            with _FIRST_STREAM_TAKEN:  # given once, whichever thread asks first
                stream, self._first_stream = self._first_stream, None
            if stream is not None:
                return stream
        stream = self._steering.events(self.id)
        if self._settled.done():  # nothing more will come (its `delegation.settled` may have)
            stream.close()
        return stream

    def add_done_callback(self, callback: Callable[[Summary], None]) -> None:
        """Call `callback(summary)` once settled, in Zeus's thread (or at once if settled).

        It runs inside Zeus's mailbox: keep it quick and hand real work to another
        thread. An exception it raises is logged and changes nothing.
        """
        self._settled.add_callback(callback)

    def __await__(self) -> Generator[Any, None, Summary]:
        return _settlement([self]).__await__()

    def __repr__(self) -> str:
        summary = self._settled.summary
        return f"<Handle {self.id} {summary.status if summary else 'open'}>"


class GroupHandle:
    """Handles of a group of delegations dispatched together, in brief order.

    Awaiting it gives every summary in brief order; a task cancelled while it
    awaits cancels every member still open.
    """

    def __init__(self, group_id: str, handles: list[Handle]) -> None:
        self.id = group_id
        self.handles = handles

    @property
    def ids(self) -> list[str]:
        return [h.id for h in self.handles]

    def results(self, timeout: float | None = None) -> list[Summary]:
        """Every summary, in brief order; `TimeoutError` if `timeout` runs out first."""
        if timeout is None:
            return [h.result() for h in self.handles]
        deadline = _monotonic() + timeout
        return [h.result(max(0.0, deadline - _monotonic())) for h in self.handles]

    def done(self) -> bool:
        return all(h.done() for h in self.handles)

    def cancel(self, reason: str | None = None) -> None:
        for handle in self.handles:
            handle.cancel(reason)

    def __await__(self) -> Generator[Any, None, list[Summary]]:
        return _settlements(self.handles).__await__()

    def __repr__(self) -> str:
        done = sum(h.done() for h in self.handles)
        return f"<GroupHandle {self.id} {done}/{len(self.handles)} settled>"


async def _settlement(handles: Sequence[Handle]) -> Summary:
    return (await _settlements(handles))[0]


async def _settlements(handles: Sequence[Handle]) -> list[Summary]:
    """Wait, in the running loop, until every handle settled; their summaries in order.

    Runs in the awaiting task. Zeus's thread wakes the loop once the last one
    settled (`_loopwake`); a loop closed meanwhile is simply not woken. If the
    task is cancelled first, each delegation still open is cancelled with it.
    """
    futures = [h._settled for h in handles]
    if not all(f.done() for f in futures):
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        wake = waker(loop).wake
        if len(futures) == 1:
            futures[0].add_wake(lambda: wake(waiter))
        else:
            open_count = [len(futures)]
            lock = threading.Lock()

            def settled_one(_future: object) -> None:  # Zeus's thread, or this one if settled
                with lock:
                    open_count[0] -= 1
                    if open_count[0]:
                        return
                wake(waiter)

            for future in futures:  # called once per future: each counts once
                future.add_done_callback(settled_one)
        try:
            await waiter
        except asyncio.CancelledError:
            for handle in handles:
                if not handle.done():
                    handle.cancel(AWAITER_CANCELLED)
            raise
    return [f.result() for f in futures]


def _monotonic() -> float:
    # The host's own waiting uses real time, whatever clock Zeus runs on.
    return time.monotonic()
