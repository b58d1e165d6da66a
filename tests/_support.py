"""The helpers every test file shares: work functions a test steers (`Gate`, `Steps`,
`wait_cancelled`), a collecting `send` (`Outbox`), bounded waits on real processes, and a
fake terminal (`terminal`).

One set for the suite: a file needing another kind of helper adds it here.
"""

from __future__ import annotations

import asyncio
import io
import re
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psutil
import pytest

from actors import Brief, Context
from actors.protocol import Finished
from supervisor.testing import EventRecorder

WAIT_S = 20.0  # a safety bound on waits, never the thing asserted

# A sleep no test waits out, on the fake clock or the real one: the child sleeping
# it ends when it is cancelled (far past any `clock.advance` a test makes).
FOREVER_S = 10.0**9


def wait_cancelled(brief: Any, ctx: Any) -> None:
    """A work function that reports once, then waits until Zeus cancels it."""
    ctx.heartbeat("started")
    ctx.sleep(FOREVER_S)


class Gate:
    """A work function that reports it started, then waits until the test calls `open()`
    or Zeus cancels the attempt (woken by the cancel itself, no polling).

    `stopped` says how each attempt ended ("returned" or "cancelled"), written from
    the child's own thread; the value returned is the brief's scope.
    """

    def __init__(self) -> None:
        self.started = threading.Event()
        self.stopped: list[str] = []
        self._cond = threading.Condition()
        self._open = False

    def open(self) -> None:
        """Let every attempt waiting at the gate, and every later one, through (any thread)."""
        with self._cond:
            self._open = True
            self._cond.notify_all()

    def _wake(self) -> None:  # in the thread that cancels the attempt
        with self._cond:
            self._cond.notify_all()

    def __call__(self, brief: Brief, ctx: Context) -> str:
        ctx.heartbeat()  # sent before `started`: a test that syncs Zeus then has it handled
        self.started.set()
        forget = ctx.on_cancel(self._wake)
        try:
            with self._cond:
                self._cond.wait_for(lambda: self._open or ctx.cancelled, 3 * WAIT_S)
            ctx.check()
        except BaseException:
            self.stopped.append("cancelled")
            raise
        finally:
            forget()
        self.stopped.append("returned")
        return brief.scope


class Steps:
    """Lets a test walk a child through its steps: `step()` releases one, then waits
    until the child has reported it."""

    def __init__(self) -> None:
        self._go = threading.Semaphore(0)
        self._done = threading.Semaphore(0)

    def wait(self) -> None:  # the child's side
        assert self._go.acquire(timeout=WAIT_S)

    def did(self) -> None:  # the child's side
        self._done.release()

    def step(self) -> None:  # the test's side
        self._go.release()
        assert self._done.acquire(timeout=WAIT_S)

    def let_go(self) -> None:  # the test's side: one more step, not waited for
        self._go.release()


class Outbox:
    """A child's `send` that keeps every message in order, with an event when `Finished`
    arrives. `after(n, kind, fn)` runs `fn(message)` on the n-th message of `kind`, in
    the sender's thread; `cancel` is a plain event a `Context` may take as its signal."""

    def __init__(self) -> None:
        self.messages: list[object] = []
        self.finished_event = threading.Event()
        self.cancel = threading.Event()
        self._cond = threading.Condition()
        self._hooks: list[tuple[type, int, Callable[[Any], None]]] = []

    def __call__(self, message: object) -> None:
        with self._cond:
            self.messages.append(message)
            self._cond.notify_all()
            due = [fn for kind, n, fn in self._hooks
                   if isinstance(message, kind) and self._count(kind) == n]
        for fn in due:
            fn(message)
        if isinstance(message, Finished):
            self.finished_event.set()

    def after(self, n: int, kind: type, fn: Callable[[Any], None]) -> None:
        with self._cond:
            self._hooks.append((kind, n, fn))

    def _count(self, kind: type) -> int:
        return sum(isinstance(m, kind) for m in self.messages)

    def finished(self, timeout: float = WAIT_S) -> Finished:
        assert self.finished_event.wait(timeout), f"no Finished within {timeout}s: {self.messages}"
        return next(m for m in self.messages if isinstance(m, Finished))

    def wait_for(self, kind: type, timeout: float = WAIT_S, count: int = 1) -> Any:
        """The first message of `kind`, once `count` of them arrived."""
        with self._cond:
            ok = self._cond.wait_for(lambda: self._count(kind) >= count, timeout)
            assert ok, f"no {count} x {kind.__name__} within {timeout}s: {self.messages}"
            return next(m for m in self.messages if isinstance(m, kind))

    def of(self, kind: type) -> list[Any]:
        with self._cond:
            return [m for m in self.messages if isinstance(m, kind)]


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def eventually(condition: Callable[[], bool], timeout: float = WAIT_S) -> bool:
    """Poll `condition` until it holds (a bound, not a sleep asserted on)."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def cancel_once_running(
    start: Callable[[], Awaitable[Any]], recorder: EventRecorder, beats: int = 1
) -> None:
    """Run `start()` as an asyncio task, cancel it once `beats` heartbeats were heard (its
    delegations are running), and check that the task ends cancelled."""

    async def host() -> None:
        run = asyncio.ensure_future(start())
        await asyncio.to_thread(recorder.wait_for, "attempt.heartbeat", beats)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    asyncio.run(host())


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def terminal(monkeypatch: pytest.MonkeyPatch, width: int = 80, height: int = 24) -> Callable[
    [], list[str]
]:
    """Make standard output a terminal `width` columns wide; returns a reader of the lines
    written to it, without escape codes."""
    screen = _Terminal()
    monkeypatch.setattr(sys, "stdout", screen)
    monkeypatch.setenv("COLUMNS", str(width))
    monkeypatch.setenv("LINES", str(height))
    return lambda: _ESCAPE.sub("", screen.getvalue()).splitlines()


class NullSink:
    """A `StreamSink` that records what a `StreamReader` tells it."""

    def __init__(self) -> None:
        self.lines = 0
        self.said: list[tuple[Any, ...]] = []

    def progress(self, lines: int) -> None:
        self.lines += lines

    def partial(self, item: Any) -> None:
        self.said.append(("partial", item))

    def charge(self, usage: Any, *, cached_input_tokens: int = 0) -> None:
        self.said.append(("charge", usage))
        self.cached_input_tokens = getattr(self, "cached_input_tokens", 0) + cached_input_tokens

    def tool(self, name: str, *, read_only: bool, running: bool | None,
             call_id: str | None = None, detail: str | None = None) -> None:
        self.said.append(("tool", name, read_only, running, call_id))
        self.details = [*getattr(self, "details", []), (name, detail)]

    def session(self, session_id: str) -> None:
        self.said.append(("session", session_id))

    def note(self, text: str | None) -> None:
        self.said.append(("note", text))

    def ended(self) -> None:
        self.said.append(("ended",))
