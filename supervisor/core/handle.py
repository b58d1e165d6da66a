"""Handles the host holds: one per delegation (`Handle`) and per group (`GroupHandle`),
the future each one's summary lives in (`DelegationFuture`), and the book of handles
Zeus gives back by id (`HandleBook`).

A handle's summary lives in a real `concurrent.futures.Future` (`handle.future`),
set once in Zeus's actor thread. Awaiting a handle never blocks the event
loop, works from any loop (or several), and follows structured concurrency:
a task cancelled while it awaits cancels the delegation, unless it awaited
through `asyncio.shield(handle)`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import difflib
import logging
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Generator, Sequence
from typing import Any, Protocol

from actors import Summary
from supervisor.core.loopwake import waker
from supervisor.core.settlement import Settlement
from supervisor.journal.streams import EventStream

__all__ = [
    "AWAITER_CANCELLED",
    "DelegationFuture",
    "GroupHandle",
    "Handle",
    "HandleBook",
    "Steering",
]

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


# --------------------------------------------------------------------------------------
# The future of one delegation's summary, as Zeus's actor thread sets it.
#
# A real `concurrent.futures.Future`, so every standard tool (`as_completed`,
# `asyncio.wrap_future`) works on it; the host reaches it as `handle.future`.
# --------------------------------------------------------------------------------------


_log = logging.getLogger("supervisor")
_PENDING = "PENDING"  # the state name concurrent.futures gives a new future
_FINISHED = "FINISHED"  # and a settled one
_MAKING_CONDITION = threading.Lock()  # taken only while a future's condition or wakes are made


class DelegationFuture(concurrent.futures.Future[Summary]):
    """The future of one delegation's summary, set once, in Zeus's actor thread.

    Zeus sets it with the summary as decided (a `Settlement`); whoever reads it first
    (`result()`, and so `await`, a done-callback, `asyncio.wrap_future`) makes the
    `Summary` in its own thread, and every later read gets that one.

    `cancel()` never cancels the future itself (a delegation settles exactly
    once, with a summary): it asks Zeus to cancel the delegation, whose
    `cancelled` summary then settles the future. That is what makes a task
    awaiting `asyncio.wrap_future(handle.future)` cancel the delegation too.
    """

    def __init__(self) -> None:
        # `Future.__init__` without its `Condition` (an RLock and a deque, most of what a
        # future costs to build): that is made on first use, which for most delegations
        # is Zeus's thread setting the result, not the host's thread dispatching.
        self._state = _PENDING
        self._result = None
        self._exception = None
        self._waiters: list[Any] = []
        self._done_callbacks: list[Callable[[concurrent.futures.Future[Summary]], object]] = []
        # Set by Zeus for the host's handles. The hooks are shared, bound once, and take the
        # delegation's id: a dispatch builds no closure for them (fewer objects for the GC).
        self.delegation_id: str | None = None
        self.on_cancel: Callable[[str], None] | None = None  # `cancel()`: cancel the delegation
        # Zeus's own note of the settlement (its handle book), called with the id and summary
        # (as decided: it makes nothing) right after the done-callbacks: cheaper than one
        # more of them, never the host's code.
        self.on_settled: Callable[[str, Summary | Settlement], None] | None = None
        # Called before a wait on an open future blocks: Zeus sends the dispatches its
        # outbox still holds, so that a host blocking right after dispatching is answered.
        self.before_wait: Callable[[], None] | None = None

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        """The future's condition, made once, by whichever thread needs it first."""
        made: threading.Condition | None = self.__dict__.get("_made_condition")
        if made is None:
            with _MAKING_CONDITION:
                made = self.__dict__.setdefault("_made_condition", threading.Condition())
        return made

    def set(self, summary: Summary | Settlement) -> bool:
        """Settle with `summary` (or what it will be made of); False (and nothing changes)
        if already settled."""
        if not self._set_unwatched(summary):
            try:  # one lock round trip, not two
                self.set_result(summary)  # type: ignore[arg-type]  # made into one when read
            except concurrent.futures.InvalidStateError:
                return False
        wakes: list[Callable[[], None]] | None = self.__dict__.get("_wakes")
        if wakes is not None:
            for wake in list(wakes):  # a copy: a task's thread may append meanwhile
                _call_wake(wake)
        if self.on_settled is not None and self.delegation_id is not None:
            self.on_settled(self.delegation_id, summary)
        return True

    def _set_unwatched(self, summary: Summary | Settlement) -> bool:
        """Settle a future whose condition nobody made (no thread waits on it, no callback,
        no `wait()` or `as_completed` watches it: each of those makes it first) without
        making one; False, and nothing changes, if it has one (or is settled: `set_result`
        then says so). An awaited handle's future is one: its task waits by `add_wake`.

        The check and the settling are one step under the lock that making a condition
        takes, so a thread that makes one just after finds the future finished."""
        if "_made_condition" in self.__dict__:
            return False
        with _MAKING_CONDITION:
            if "_made_condition" in self.__dict__ or self._state != _PENDING:
                return False
            self._result = summary  # type: ignore[assignment]  # made into one when read
            self._state = _FINISHED
        return True

    def cancel(self) -> bool:
        """Ask Zeus to cancel the delegation; returns False: the future settles with its summary."""
        if self.on_cancel is not None and self.delegation_id is not None and not self.done():
            self.on_cancel(self.delegation_id)
        return False

    def done(self) -> bool:
        """Settled (a delegation's future is never cancelled). No lock: reading the state
        is one step, and taking the condition would make it for a future nobody waits on."""
        return self._state == _FINISHED

    def add_wake(self, wake: Callable[[], None]) -> None:
        """Call `wake()` once settled, in Zeus's thread (or at once, in this one, if it has):
        an awaiting task's way, without the future's condition (an RLock that the host's
        thread would otherwise build for every awaited handle). `wake` may be called twice
        if the future settles as it is added: it must not mind.

        No lock: the append and the copy are atomic under the GIL, and `set` copies the
        list after the state is finished, so a wake added too late for the copy sees the
        state finished here."""
        wakes: list[Callable[[], None]] | None = self.__dict__.get("_wakes")
        if wakes is None:
            with _MAKING_CONDITION:  # one list, whichever thread makes it first
                wakes = self.__dict__.setdefault("_wakes", [])
        wakes.append(wake)
        if self._state != _PENDING:
            wake()

    def add_callback(self, callback: Callable[[Summary], object]) -> None:
        """Run `callback(summary)` once settled (at once, in this thread, if already)."""
        self.add_done_callback(lambda future: _call(callback, future.result()))

    def result(self, timeout: float | None = None) -> Summary:
        """The summary, made here on the first read of a settled delegation. A settled
        one's is read without the future's condition (set before its state is: no lock
        needed), so an awaited handle's task makes none."""
        value: Summary | Settlement
        if self._state == _FINISHED and self._exception is None:
            value = self._result  # type: ignore[assignment]  # a summary, or what makes one
        else:
            if self._state == _PENDING and self.before_wait is not None:
                self.before_wait()
            value = super().result(timeout)
        if isinstance(value, Settlement):
            value = value.summary()
            self._result = value  # later reads take it as it is (the same one)
        return value

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._state == _PENDING and self.before_wait is not None:
            self.before_wait()
        return super().exception(timeout)

    def wait_done(self, timeout: float | None) -> bool:
        """Wait up to `timeout` seconds; True once settled."""
        if self._state == _PENDING and self.before_wait is not None:
            self.before_wait()
        done, _ = concurrent.futures.wait([self], timeout)
        return bool(done)

    @property
    def summary(self) -> Summary | None:
        return self.result() if self.done() else None


def _call_wake(wake: Callable[[], None]) -> None:
    try:
        wake()
    except Exception:  # noqa: BLE001 - a loop's wake never stops a settlement
        _log.exception("waking an awaiting task failed; Zeus goes on")


def _call(callback: Callable[[Summary], object], summary: Summary) -> None:
    """Run a done-callback; its failure is the host's bug, logged, never Zeus's end."""
    try:
        callback(summary)
    except Exception:  # noqa: BLE001 - any failure of host code, logged
        _log.exception("a done-callback of %s raised; Zeus goes on", summary.id)


# --------------------------------------------------------------------------------------
# The handles Zeus can give back by id: every open delegation the host dispatched,
# and the `keep` most recently settled ones (oldest dropped first). Thread-safe.
#
# A settled one is kept compactly: its summary and a weak reference to its handle.
# While the host holds that handle, the same one is given back; once it is gone, a
# new handle on the same summary. Every object kept is walked by each full garbage
# collection, so a kept handle (its future, the future's lock and condition, its
# callbacks) would cost every later delegation: about 30 objects each, against 15.
# --------------------------------------------------------------------------------------


class HandleBook:
    """Written by the host's threads (`add`, `get`) and Zeus's actor thread (a handle
    settling). `revive(id, summary)` makes a settled handle anew (any thread)."""

    def __init__(self, keep: int, revive: Callable[[str, Summary], Handle]) -> None:
        self.keep = keep
        self._revive = revive
        self._lock = threading.Lock()
        self._open: dict[str, Handle] = {}
        # A summary as decided (a `Settlement`) until a revived handle needs it made.
        self._settled: OrderedDict[str, tuple[weakref.ref[Handle], Summary | Settlement]] = (
            OrderedDict())
        self._hook = self._on_settled  # bound once: each future gets the same one

    def add(self, handle: Handle, settled: DelegationFuture) -> None:
        """Before Zeus hears of the delegation (`settled` is the handle's future)."""
        delegation_id = handle.id
        with self._lock:
            self._open[delegation_id] = handle
        # The future holds the id, not the handle: no cycle through the handle's future.
        settled.delegation_id = delegation_id
        settled.on_settled = self._hook

    def _on_settled(self, delegation_id: str, summary: Summary | Settlement) -> None:
        """Runs in Zeus's actor thread as the delegation settles (or at once if it had)."""
        with self._lock:
            handle = self._open.pop(delegation_id, None)
            if handle is None or self.keep == 0:
                return
            self._settled[delegation_id] = (weakref.ref(handle), summary)
            while len(self._settled) > self.keep:
                self._settled.popitem(last=False)

    def get(self, delegation_id: str) -> Handle | None:
        with self._lock:
            handle = self._open.get(delegation_id)
            kept = self._settled.get(delegation_id) if handle is None else None
            if kept is None:
                return handle
            ref, summary = kept
            handle = ref()
            if handle is None:  # the host let it go: a new one, kept in the same place
                if isinstance(summary, Settlement):
                    summary = summary.summary()
                handle = self._revive(delegation_id, summary)
                self._settled[delegation_id] = (weakref.ref(handle), summary)
            return handle

    def nearest(self, delegation_id: str, n: int = 3) -> list[str]:
        """The known ids closest to `delegation_id` (difflib), best first."""
        with self._lock:
            known = [*self._open, *self._settled]
        return difflib.get_close_matches(delegation_id, known, n=n, cutoff=0.5)

    def __len__(self) -> int:
        with self._lock:
            return len(self._open) + len(self._settled)
