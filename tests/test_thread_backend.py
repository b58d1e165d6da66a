"""Thread children run on pooled threads: one attempt per thread at a time, reused when done."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

import pytest

from actors import Brief, Context
from actors.backends import ThreadBackend
from actors.backends.base import ChildSpec
from actors.backends.thread import BACKLOG, STARTERS
from actors.clock import SystemClock
from actors.protocol import Finished
from tests._support import Outbox, eventually


def spec(work: Any, attempt_id: str) -> ChildSpec:
    return ChildSpec(agent="a", delegation_id="a-1", attempt=1, attempt_id=attempt_id,
                     brief=Brief(agent="a", scope="s"), deadline=1e12, clock=SystemClock(),
                     work=work)


def which_thread(brief: Brief, ctx: Context) -> int:
    return threading.get_ident()


def test_a_finished_attempts_thread_takes_the_next_attempt() -> None:
    backend, inbox = ThreadBackend(), Outbox()
    for n in range(3):
        backend.start(spec(which_thread, f"a-1-a{n}"), inbox)
        inbox.wait_for(Finished, count=n + 1)
    assert len({f.value for f in inbox.of(Finished)}) == 1
    backend.close()


def test_a_thread_still_running_is_never_handed_a_second_attempt() -> None:
    backend, inbox = ThreadBackend(), Outbox()
    release = threading.Event()

    def stuck(brief: Brief, ctx: Context) -> int:
        release.wait(10)
        return threading.get_ident()

    backend.start(spec(stuck, "a-1-a1"), inbox)
    backend.start(spec(which_thread, "a-1-a2"), inbox)
    inbox.wait_for(Finished, count=1)
    release.set()
    inbox.wait_for(Finished, count=2)
    assert inbox.of(Finished)[0].value != inbox.of(Finished)[1].value
    backend.close()


def test_an_idle_thread_retires_after_its_idle_wait() -> None:
    backend, inbox = ThreadBackend(idle_s=0.05), Outbox()
    backend.start(spec(which_thread, "a-1-a1"), inbox)
    inbox.wait_for(Finished, count=1)
    (thread,) = [t for t in threading.enumerate() if t.ident == inbox.of(Finished)[0].value]
    thread.join(5)
    assert not thread.is_alive()
    backend.start(spec(which_thread, "a-1-a2"), inbox)  # a new thread takes it
    inbox.wait_for(Finished, count=2)
    backend.close()


def test_starting_an_attempt_never_waits_for_a_new_thread_to_start(monkeypatch: Any) -> None:
    """Zeus's thread calls `start`: a thread start that hangs must not hold it up."""
    from actors.backends import thread as thread_module

    backend, inbox = ThreadBackend(), Outbox()
    gate = threading.Event()
    real = thread_module._PooledThread.__init__

    def slow_start(self: Any, pool: ThreadBackend, first: Any) -> None:
        assert threading.current_thread().name.startswith("zeus-thread-starter")
        gate.wait(10)
        real(self, pool, first)

    monkeypatch.setattr(thread_module._PooledThread, "__init__", slow_start)
    child = backend.start(spec(which_thread, "a-1-a1"), inbox)
    assert child.alive is False  # no thread took it yet: its own thread says when it lives
    assert inbox.of(Finished) == []
    gate.set()
    finished = inbox.wait_for(Finished, count=1)
    assert finished.value != threading.get_ident()
    backend.close()


def test_a_thread_that_cannot_start_fails_its_attempt_with_the_reason(monkeypatch: Any) -> None:
    from actors.backends import thread as thread_module

    def no_thread(self: Any, pool: ThreadBackend, first: Any) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(thread_module._PooledThread, "__init__", no_thread)
    backend, inbox = ThreadBackend(), Outbox()
    backend.start(spec(which_thread, "a-1-a1"), inbox)
    finished = inbox.wait_for(Finished, count=1)
    assert finished.outcome.value == "error"
    assert finished.error == "its thread could not start: RuntimeError: can't start new thread"
    backend.close()


def test_attempts_still_start_when_no_second_starter_can(monkeypatch: Any) -> None:
    """The first starter starts the others; a process out of threads keeps just the one."""
    backend, inbox = ThreadBackend(), Outbox()
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        if self.name.startswith("zeus-thread-starter-") and self.name != "zeus-thread-starter-1":
            raise RuntimeError("can't start new thread")
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    for n in range(3):
        backend.start(spec(which_thread, f"a-1-a{n}"), inbox)
    inbox.wait_for(Finished, count=3)
    assert len({f.value for f in inbox.of(Finished)}) >= 1  # they ran, in threads of their own
    backend.close()


def test_an_attempt_no_starter_can_take_fails_at_its_start_and_never_runs(
    monkeypatch: Any,
) -> None:
    backend, inbox = ThreadBackend(), Outbox()
    real_start = threading.Thread.start
    ran: list[str] = []

    def start(self: threading.Thread) -> None:
        if self.name.startswith("zeus-thread-starter-"):
            raise RuntimeError("can't start new thread")
        real_start(self)

    def work(brief: Brief, ctx: Context) -> None:
        ran.append(ctx.attempt_id)

    monkeypatch.setattr(threading.Thread, "start", start)
    try:
        backend.start(spec(work, "a-1-a1"), inbox)
    except RuntimeError as exc:  # Zeus fails the attempt with this
        assert "can't start new thread" in str(exc)
    else:
        raise AssertionError("start() should have refused the attempt")
    monkeypatch.setattr(threading.Thread, "start", real_start)
    backend.start(spec(work, "a-1-a2"), inbox)  # a starter can start now
    inbox.wait_for(Finished, count=1)
    assert ran == ["a-1-a2"]  # the refused attempt was never queued behind it
    backend.close()


def behind(n: int, work: Any, first: int) -> list[ChildSpec]:
    """`n` attempts numbered from `first`: enough waiting for a thread to be a backlog."""
    return [spec(work, f"a-1-a{k}") for k in range(first, first + n)]


class HeldQueue(queue.SimpleQueue[Any]):
    """The starters' queue, whose `get` returns only while `open` is set, and which counts
    the starters waiting in it: a starter that took an attempt looks at what waits behind
    it only once the test has queued it all."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.open.set()
        self.waiting = 0
        self._count = threading.Lock()

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        with self._count:
            self.waiting += 1
        try:
            item = super().get(block, timeout)
        finally:
            with self._count:
                self.waiting -= 1
        self.open.wait(10)
        return item


def backlogged(backend: ThreadBackend, inbox: Outbox, specs: list[ChildSpec]) -> None:
    """Start `specs` once every starter waits for work, each starter then seeing what is
    left of them behind the one it took."""
    held = backend._unstarted
    assert isinstance(held, HeldQueue)
    assert eventually(lambda: held.waiting == backend._starters)
    held.open.clear()
    for each in specs:
        backend.start(each, inbox)
    held.open.set()


def occupied(backend: ThreadBackend, inbox: Outbox) -> threading.Event:
    """Attempt a1 running on a thread of its own until the returned event is set (its
    value: that thread's id)."""
    running, release = threading.Event(), threading.Event()

    def busy(brief: Brief, ctx: Context) -> int:
        running.set()
        release.wait(10)
        return threading.get_ident()

    backend.start(spec(busy, "a-1-a1"), inbox)
    assert running.wait(10)
    return release


def held_backend(linger_s: float) -> ThreadBackend:
    backend = ThreadBackend(linger_s=linger_s)
    backend._unstarted = HeldQueue()
    return backend


def test_a_starter_hands_an_attempt_to_a_thread_that_comes_back_instead_of_making_one(
) -> None:
    """No thread idle and a backlog behind: the starter waits (up to `linger_s`) for the
    busy thread, which takes the attempt when its own ends; no second thread is made for
    it. With no backlog it would not wait (a test below)."""
    backend, inbox = held_backend(60), Outbox()
    release = occupied(backend, inbox)
    backlogged(backend, inbox, behind(1 + BACKLOG, which_thread, 2))  # a2, a backlog behind
    assert not inbox.finished_event.wait(0.05)  # a new thread would have run a2 by now
    release.set()
    inbox.wait_for(Finished, count=2 + BACKLOG)
    by_id = {f.attempt_id: f.value for f in inbox.of(Finished)}
    assert by_id["a-1-a2"] == by_id["a-1-a1"]
    backend.close()


def test_with_no_backlog_a_starter_makes_a_thread_at_once() -> None:
    """One attempt waiting is a host running a few at a time: the pool grows to cover
    them, rather than a starter taking each thread that comes back."""
    backend, inbox = ThreadBackend(linger_s=60), Outbox()
    release = occupied(backend, inbox)
    backend.start(spec(which_thread, "a-1-a2"), inbox)
    inbox.wait_for(Finished, count=1)
    assert [f.attempt_id for f in inbox.of(Finished)] == ["a-1-a2"]
    release.set()
    backend.close()


@pytest.mark.realtime
def test_once_a_wait_finds_no_thread_come_back_new_threads_are_made_at_once() -> None:
    """Long attempts hold every thread: the first wait runs out, and a later backlog gets
    new threads without waiting, until some thread comes back."""
    backend, inbox = held_backend(1.0), Outbox()
    release = threading.Event()
    started: dict[str, float] = {}

    def hold(brief: Brief, ctx: Context) -> None:
        started[ctx.attempt_id] = time.monotonic()
        release.wait(20)

    def wait_started(n: int) -> None:
        assert eventually(lambda: len(started) >= n), started

    try:
        t0 = time.monotonic()
        backend.start(spec(hold, "a-1-a1"), inbox)  # a new thread: none to wait for
        wait_started(1)
        backlogged(backend, inbox, behind(1 + BACKLOG, hold, 2))  # a2 waits for a1's thread
        wait_started(2 + BACKLOG)
        assert started["a-1-a2"] - t0 >= 0.9
        t1 = time.monotonic()
        # Enough that every starter sees a backlog behind what it takes; none came back
        # since the wait that found none: no starter waits.
        later = behind(2 * STARTERS + 1, hold, 3 + BACKLOG)
        backlogged(backend, inbox, later)
        wait_started(2 + BACKLOG + len(later))
        assert max(started[s.attempt_id] for s in later) - t1 < 0.8
    finally:
        release.set()
        backend.close()


def test_closing_ends_a_starter_that_waits_for_a_thread_to_come_back() -> None:
    others = set(threading.enumerate())
    backend, inbox = held_backend(60), Outbox()
    release = occupied(backend, inbox)
    backlogged(backend, inbox, behind(1 + BACKLOG, which_thread, 2))  # it waits for a1's
    (starter,) = [t for t in threading.enumerate()
                  if t.name == "zeus-thread-starter-1" and t not in others]
    assert eventually(lambda: backend._lingering == 1)
    backend.close()
    starter.join(5)
    release.set()
    assert not starter.is_alive()
    inbox.wait_for(Finished, count=1)
    assert [f.attempt_id for f in inbox.of(Finished)] == ["a-1-a1"]  # none waiting started
