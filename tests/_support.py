"""Helpers the tests share: a collecting `send`, bounded waits on real processes, a terminal."""

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

from actors.protocol import Finished
from supervisor.testing import EventRecorder

WAIT_S = 20.0  # a safety bound on waits, never the thing asserted


class Inbox:
    """A collecting `send`: every message in order, and an event when `Finished` arrives."""

    def __init__(self) -> None:
        self.messages: list[object] = []
        self.finished_event = threading.Event()
        self._cond = threading.Condition()

    def __call__(self, message: object) -> None:
        with self._cond:
            self.messages.append(message)
            self._cond.notify_all()
        if isinstance(message, Finished):
            self.finished_event.set()

    def finished(self, timeout: float = WAIT_S) -> Finished:
        assert self.finished_event.wait(timeout), f"no Finished within {timeout}s: {self.messages}"
        return next(m for m in self.messages if isinstance(m, Finished))

    def wait_for(self, kind: type, timeout: float = WAIT_S, count: int = 1) -> Any:
        """The first message of `kind`, once `count` of them arrived."""
        with self._cond:
            ok = self._cond.wait_for(
                lambda: sum(isinstance(m, kind) for m in self.messages) >= count, timeout
            )
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
