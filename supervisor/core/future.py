"""The future of one delegation's summary, as Zeus's actor thread sets it.

A real `concurrent.futures.Future`, so every standard tool (`as_completed`,
`asyncio.wrap_future`) works on it; the host reaches it as `handle.future`.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable
from typing import Any

from actors import Summary
from supervisor.core.settlement import Settlement

__all__ = ["DelegationFuture"]

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
