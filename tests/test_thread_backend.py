"""Thread children run on pooled threads: one attempt per thread at a time, reused when done."""

from __future__ import annotations

import threading
from typing import Any

from actors import Brief, Context, Finished, SystemClock, ThreadBackend
from actors._backend import ChildSpec


def spec(work: Any, attempt_id: str) -> ChildSpec:
    return ChildSpec(agent="a", delegation_id="a-1", attempt=1, attempt_id=attempt_id,
                     brief=Brief(agent="a", scope="s"), deadline=1e12, clock=SystemClock(),
                     work=work)


class Inbox:
    def __init__(self) -> None:
        self.finished: list[Finished] = []
        self._cond = threading.Condition()

    def __call__(self, message: object) -> None:
        if isinstance(message, Finished):
            with self._cond:
                self.finished.append(message)
                self._cond.notify_all()

    def wait(self, count: int) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.finished) >= count, 10)


def which_thread(brief: Brief, ctx: Context) -> int:
    return threading.get_ident()


def test_a_finished_attempts_thread_takes_the_next_attempt() -> None:
    backend, inbox = ThreadBackend(), Inbox()
    for n in range(3):
        backend.start(spec(which_thread, f"a-1-a{n}"), inbox)
        inbox.wait(n + 1)
    assert len({f.value for f in inbox.finished}) == 1
    backend.close()


def test_a_thread_still_running_is_never_handed_a_second_attempt() -> None:
    backend, inbox = ThreadBackend(), Inbox()
    release = threading.Event()

    def stuck(brief: Brief, ctx: Context) -> int:
        release.wait(10)
        return threading.get_ident()

    backend.start(spec(stuck, "a-1-a1"), inbox)
    backend.start(spec(which_thread, "a-1-a2"), inbox)
    inbox.wait(1)
    release.set()
    inbox.wait(2)
    assert inbox.finished[0].value != inbox.finished[1].value
    backend.close()


def test_an_idle_thread_retires_after_its_idle_wait() -> None:
    backend, inbox = ThreadBackend(idle_s=0.05), Inbox()
    backend.start(spec(which_thread, "a-1-a1"), inbox)
    inbox.wait(1)
    (thread,) = [t for t in threading.enumerate() if t.ident == inbox.finished[0].value]
    thread.join(5)
    assert not thread.is_alive()
    backend.start(spec(which_thread, "a-1-a2"), inbox)  # a new thread takes it
    inbox.wait(2)
    backend.close()
