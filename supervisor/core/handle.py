"""Handles the host holds: one per delegation (`Handle`) and per group (`GroupHandle`)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from actors import Summary

if TYPE_CHECKING:
    from supervisor.core.zeus import Zeus

__all__ = ["GroupHandle", "Handle", "Settled"]

_log = logging.getLogger("supervisor")


class Settled:
    """A one-shot box for a summary. `set` is called once, in Zeus's actor thread."""

    __slots__ = ("_callbacks", "_event", "_lock", "summary")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[Summary], None]] = []
        self.summary: Summary | None = None

    def set(self, summary: Summary) -> bool:
        """Store the summary and run callbacks; False (and nothing changes) if already set."""
        with self._lock:
            if self.summary is not None:
                return False
            self.summary = summary
            callbacks, self._callbacks = self._callbacks, []
        self._event.set()
        for callback in callbacks:
            _call(callback, summary)
        return True

    def add_callback(self, callback: Callable[[Summary], None]) -> None:
        """Run `callback(summary)` once settled (at once, in this thread, if already)."""
        with self._lock:
            if self.summary is None:
                self._callbacks.append(callback)
                return
            summary = self.summary
        _call(callback, summary)

    def wait(self, timeout: float | None) -> Summary:
        if not self._event.wait(timeout):
            raise TimeoutError(
                f"not settled within {timeout} s; the delegation goes on "
                "(call .result() again, or .cancel() it)"
            )
        assert self.summary is not None
        return self.summary

    def done(self) -> bool:
        return self._event.is_set()

    def wait_done(self, timeout: float | None) -> bool:
        """Wait up to `timeout` seconds; True once settled."""
        return self._event.wait(timeout)


def _call(callback: Callable[[Summary], None], summary: Summary) -> None:
    """Run a done-callback; its failure is the host's bug, logged, never Zeus's end."""
    try:
        callback(summary)
    except Exception:  # noqa: BLE001 - any failure of host code, logged
        _log.exception("a done-callback of %s raised; Zeus goes on", summary.id)


class Handle:
    """The host's handle on one delegation. Thread-safe; awaitable from asyncio."""

    def __init__(self, delegation_id: str, zeus: Zeus, settled: Settled) -> None:
        self.id = delegation_id
        self._zeus = zeus
        self._settled = settled

    def result(self, timeout: float | None = None) -> Summary:
        """Block until settled and return the summary (the same one every time).

        Raises the built-in `TimeoutError` when `timeout` runs out; the delegation goes on.
        """
        return self._settled.wait(timeout)

    def done(self) -> bool:
        return self._settled.done()

    def cancel(self, reason: str | None = None) -> None:
        """Ask Zeus to cancel this delegation (a no-op once settled)."""
        self._zeus.cancel(self.id, reason=reason)

    def add_done_callback(self, callback: Callable[[Summary], None]) -> None:
        """Call `callback(summary)` once settled, in Zeus's thread (or at once if settled).

        It runs inside Zeus's mailbox: keep it quick and hand real work to another
        thread. An exception it raises is logged and changes nothing.
        """
        self._settled.add_callback(callback)

    def __await__(self) -> Generator[Any, None, Summary]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Summary] = loop.create_future()

        def resolve(summary: Summary) -> None:
            if not future.done():
                future.set_result(summary)

        def hand_over(summary: Summary) -> None:  # runs in Zeus's thread
            loop.call_soon_threadsafe(resolve, summary)

        self._settled.add_callback(hand_over)
        return future.__await__()

    def __repr__(self) -> str:
        state = self._settled.summary.status if self._settled.summary else "open"
        return f"<Handle {self.id} {state}>"


class GroupHandle:
    """Handles of a group of delegations dispatched together, in brief order."""

    def __init__(self, group_id: str, handles: list[Handle], zeus: Zeus) -> None:
        self.id = group_id
        self.handles = handles
        self._zeus = zeus

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


def _monotonic() -> float:
    # The host's own waiting uses real time, whatever clock Zeus runs on.
    return time.monotonic()
