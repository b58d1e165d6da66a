"""Thread children run on pooled threads: one attempt per thread at a time, reused when done."""

from __future__ import annotations

import threading
from typing import Any

from actors import Brief, Context
from actors.backends import ThreadBackend
from actors.backends.base import ChildSpec
from actors.clock import SystemClock
from actors.protocol import Finished
from tests._support import Outbox


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
