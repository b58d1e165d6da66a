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
from typing import Protocol

from actors import wire as _wire
from actors.errors import Cancelled

__all__ = ["CancelSignal", "Flag", "Inbox", "Mail"]


@dataclass(slots=True)
class Mail:
    """One message for a child. `encode` checks that it can cross, at the owner's call."""

    obj: object
    pickled: bytes | None = None
    line: bytes | None = None

    def encode(self, isolation: str) -> Mail:
        """Encode for `isolation` (thread, process, ray, command); `TypeError` if it cannot
        cross."""
        if isolation in ("process", "ray") and self.pickled is None:
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

    def get(self, timeout: float | None, cancel: Flag, attempt_id: str) -> object | None:
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


class Flag(Protocol):
    """What a child's cancel signal offers: `CancelSignal`, or a `threading.Event`."""

    def is_set(self) -> bool: ...

    def set(self) -> None: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class CancelSignal:
    """The attempt's cancel signal: set once (any thread), never cleared; runs callbacks
    when set. An `async def` work function's runner registers one that cancels its task.

    Not a `threading.Event`: an attempt makes one as it starts, and an `Event` builds a
    `Condition` (a lock and a list of waiters) that most attempts never wait on, which
    was most of a thread attempt's start in Zeus's thread. Here a waiter waits on a gate
    lock made at the first `wait()` and held until the signal is set; each waiter lets
    the next one through.
    """

    __slots__ = ("_callbacks", "_gate", "_lock", "_set")

    def __init__(self) -> None:
        self._set = False
        self._lock = threading.Lock()
        self._gate: threading.Lock | None = None  # held while unset, once someone waits
        self._callbacks: list[Callable[[], None]] = []

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        with self._lock:
            if self._set:
                return
            self._set = True
            gate, callbacks, self._callbacks = self._gate, self._callbacks, []
        if gate is not None:
            gate.release()
        for callback in callbacks:
            callback()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait up to `timeout` s (None: until set); True once set."""
        if self._set:
            return True
        with self._lock:
            if self._set:
                return True
            gate = self._gate
            if gate is None:
                gate = self._gate = threading.Lock()
                gate.acquire()
        if timeout is None:
            gate.acquire()
        elif not gate.acquire(timeout=min(max(0.0, timeout), threading.TIMEOUT_MAX)):
            return self._set
        gate.release()  # the next waiter's turn: every waiter wakes once it is set
        return True

    def on_set(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run `callback` once set (at once if it is); returns a function that unregisters it."""
        with self._lock:
            if not self._set:
                self._callbacks.append(callback)
                return lambda: self._forget(callback)
        callback()
        return lambda: None

    def _forget(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)
