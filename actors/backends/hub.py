"""`Hub`: the process backend's one reader thread.

Every child's pipe, every process sentinel, every command's output and exit
fd are waited on together, in one thread for all children (not one per
child); the same thread runs the few timers the backend needs (the SIGTERM ->
SIGKILL step of the kill ladder, retiring idle workers, a command's liveness
beat). Handlers run in that thread, one at a time, so they never race each
other.

The waiting is `multiprocess.connection.wait`'s mechanism (a selector over
the fds and Connections) with the selector kept between wake-ups: `wait()`
builds a new one and registers every object on each call, a cost that grows
with the number of children and is paid for every heartbeat. Kept, it costs
one `epoll_wait` per wake-up, whatever the number of children.

Rule for handlers: the hub thread is the only one that closes a watched fd,
and only after `unwatch()`; a handler is told "maybe ready" and checks. One
wake-up can report several fds ready; a handler that unwatches another of them
(a command's exit handler closing its pipes) is never followed by that fd's
handler in the same wake-up, so no handler reads an fd closed under it.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import threading
import time
from collections.abc import Callable
from typing import Any

from actors.clock import MAX_WAIT_S, Timer, _TimerHeap, check_when, report_error

__all__ = ["Hub"]

Handler = Callable[[], None]


class Hub:
    """Waits on many fds in one daemon thread and calls a handler for each ready one.

    `watch`, `unwatch`, `call_at`, `call_later` and `close` may be called from
    any thread. Timers use the real clock: signals and reaping happen in real
    time whatever clock the supervisor uses for its own decisions.
    """

    def __init__(self, name: str = "zeus-process-hub") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._selector = selectors.DefaultSelector()
        self._timers = _TimerHeap()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._thread: threading.Thread | None = None
        self._closed = False

    # -- any thread ------------------------------------------------------------------
    def watch(self, obj: Any, handler: Handler) -> None:
        """Call `handler()` in the hub thread whenever `obj` (an fd or a Connection) is ready."""
        with self._lock:
            if self._closed:
                return
            self._selector.register(obj, selectors.EVENT_READ, handler)
            self._ensure_thread()
        self.wake()  # a poll()-based selector sees new fds on its next call only

    def unwatch(self, obj: Any) -> None:
        with self._lock, contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(obj)

    def call_at(self, when: float, callback: Handler) -> Timer:
        """Run `callback` in the hub thread at `time.monotonic() >= when` (`TimerError` if
        `when` is not a finite number)."""
        timer = Timer(check_when(when), callback)
        with self._lock:
            if self._closed:
                timer.cancel()
                return timer
            self._timers.push(timer)
            self._ensure_thread()
        if not self.in_hub_thread:  # the hub recomputes its timeout before waiting again
            self.wake()
        return timer

    def call_later(self, delay: float, callback: Handler) -> Timer:
        return self.call_at(time.monotonic() + delay, callback)

    def wake(self) -> None:
        # BlockingIOError: a wake-up is already pending; OSError: the hub is closed.
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"\0")

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_hub_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def close(self) -> None:
        """Stop the thread (pending timers never run) and release the selector."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        self.wake()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        self._selector.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    # -- the hub thread --------------------------------------------------------------
    def _ensure_thread(self) -> None:
        """Called with the lock held."""
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        """The hub thread: nothing but `close()` ends it (a fault is printed, then it goes on)."""
        while True:
            try:
                if self._step():
                    return
            except BaseException as exc:  # noqa: BLE001 - the reader of every child must not die
                report_error(exc, None)

    def _step(self) -> bool:
        """Wait for fds and timers once and handle them; True once the hub is closed."""
        with self._lock:
            if self._closed:
                return True
            when = self._timers.next_when()
        timeout = MAX_WAIT_S if when is None else min(max(0.0, when - time.monotonic()), MAX_WAIT_S)
        for key, _ in self._selector.select(timeout):
            if key.data is None:
                self._drain_wake()
            elif self._still_watched(key):  # not unwatched by a handler before it
                self._call(key.data)
        self._run_due_timers()
        return False

    def _still_watched(self, key: selectors.SelectorKey) -> bool:
        """Whether `key` is still the registration of its fd (not unwatched, not replaced)."""
        with self._lock:
            try:
                return self._selector.get_key(key.fileobj) is key
            except (KeyError, ValueError, OSError):  # unwatched, or a closed Connection
                return False

    def _run_due_timers(self) -> None:
        now = time.monotonic()
        while True:
            with self._lock:
                timer = self._timers.pop_due(now)
            if timer is None:
                return
            callback = timer.callback
            timer.callback = None
            if not timer.cancelled and callback is not None:
                self._call(callback)

    def _drain_wake(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 4096):
                pass

    @staticmethod
    def _call(handler: Handler) -> None:
        # A handler's bug must not stop the reader of every other child.
        try:
            handler()
        except BaseException as exc:  # noqa: BLE001 - even SystemExit from a handler
            report_error(exc, None)
