"""The child's own mailbox: what the owner sends (`handle.send`), the child reads
with `ctx.receive()`. Also the cancel signal that reaches an `async def` work
function's task.

A `Mail` is encoded once, when it is sent, for the kind of child it goes to:
a thread child gets the object itself, a process child its pickle, a command
one JSON line on its standard input.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from actors import wire as _wire
from actors.errors import Cancelled

__all__ = ["CancelSignal", "Inbox", "Mail"]


@dataclass(slots=True)
class Mail:
    """One message for a child. `encode` checks that it can cross, at the owner's call."""

    obj: object
    pickled: bytes | None = None
    line: bytes | None = None

    def encode(self, isolation: str) -> Mail:
        """Encode for `isolation` (thread, process, command); `TypeError` if it cannot cross."""
        if isolation == "process" and self.pickled is None:
            self.pickled = _wire.dumps(self.obj, f"the message (a {_wire.type_name(self.obj)})")
        elif isolation == "command" and self.line is None:
            try:
                self.line = json.dumps(self.obj).encode() + b"\n"
            except (TypeError, ValueError) as exc:
                raise TypeError(
                    f"a message for a command agent must be JSON-serializable "
                    f"(it becomes one line on the command's stdin): {exc}"
                ) from None
        return self


class Inbox:
    """The child side: a queue the owner's messages land in. Any thread may read it."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()

    def put(self, obj: object) -> None:
        self._queue.put(obj)

    def get(self, timeout: float | None, cancel: threading.Event, attempt_id: str) -> object | None:
        """The next message, waiting up to `timeout` s (None: until one comes); None if none.

        Raises `Cancelled` if the attempt is cancelled while it waits.
        """
        try:
            return self._queue.get_nowait()
        except queue.Empty:
            if timeout is not None and timeout <= 0:
                return None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if cancel.is_set():
                raise Cancelled(attempt_id)
            left = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
            if left <= 0:
                return None
            try:
                return self._queue.get(timeout=left)
            except queue.Empty:
                continue


class CancelSignal(threading.Event):
    """The attempt's cancel event, which also runs callbacks when set (any thread).

    An `async def` work function's runner registers one that cancels its task.
    One is made per attempt, so it is cheap to make: it sets `threading.Event`'s
    two fields itself, its condition over an RLock (which also guards the
    callbacks). `Event()` builds a `Condition` over a plain Lock, and that looks
    up three methods a Lock lacks, each an AttributeError raised and caught:
    twice the cost of this one.
    """

    def __init__(self) -> None:  # no super().__init__(): the fields it would set are here
        self._cond = threading.Condition(threading.RLock())
        self._flag = False
        self._callbacks: list[Callable[[], None]] = []

    def set(self) -> None:
        with self._cond:  # reentrant: Event.set takes it again
            first = not self.is_set()
            super().set()
            callbacks = list(self._callbacks) if first else []
        for callback in callbacks:
            callback()

    def on_set(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run `callback` once set (at once if it is); returns a function that unregisters it."""
        with self._cond:
            if not self.is_set():
                self._callbacks.append(callback)
                return lambda: self._forget(callback)
        callback()
        return lambda: None

    def _forget(self, callback: Callable[[], None]) -> None:
        with self._cond:
            if callback in self._callbacks:
                self._callbacks.remove(callback)
