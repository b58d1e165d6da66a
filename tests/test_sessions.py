"""Warm workers and sessions: which idle worker takes a brief, and what it remembers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import psutil
import pytest

from actors import AttemptOutcome, Brief, Context
from actors.backends import ChildSpec, ProcessBackend
from actors.backends.pool import WarmPool
from actors.clock import SystemClock
from actors.protocol import Finished
from tests._support import WAIT_S, eventually

# -- the pool (no process) ---------------------------------------------------------------


def test_a_session_brief_gets_the_worker_holding_that_session() -> None:
    pool: WarmPool[str] = WarmPool()
    pool.put("apollo", "w1", "s1", limit=3)
    pool.put("apollo", "w2", None, limit=3)
    pool.put("apollo", "w3", "s3", limit=3)
    assert pool.take("apollo", "s1") == "w1"
    assert pool.take("apollo", "s1") == "w2"  # no worker holds s1 any more: a free one
    assert pool.take("apollo", "s1") is None  # w3 holds s3: never handed out for another


def test_a_brief_without_a_session_never_takes_a_session_holder() -> None:
    pool: WarmPool[str] = WarmPool()
    pool.put("apollo", "w1", "s1", limit=2)
    assert pool.take("apollo", None) is None
    pool.put("apollo", "w2", None, limit=2)
    assert pool.take("apollo", None) == "w2"


def test_workers_are_kept_per_agent() -> None:
    pool: WarmPool[str] = WarmPool()
    pool.put("apollo", "w1", None, limit=1)
    assert pool.take("hermes", None) is None
    assert pool.take("apollo", None) == "w1"


def test_the_least_recently_used_idle_workers_are_evicted_beyond_the_limit() -> None:
    pool: WarmPool[str] = WarmPool()
    assert pool.put("apollo", "w1", "s1", limit=2) == []
    assert pool.put("apollo", "w2", "s2", limit=2) == []
    assert pool.take("apollo", "s1") == "w1"
    assert pool.put("apollo", "w1", "s1", limit=2) == []  # w1 is now the most recent
    assert pool.put("apollo", "w3", None, limit=2) == ["w2"]
    assert pool.idle("apollo") == ["w1", "w3"]
    assert pool.put("hermes", "h1", None, limit=0) == ["h1"]  # 0: nothing kept
    assert pool.idle() == ["w1", "w3"]


def test_discard_forgets_a_worker() -> None:
    pool: WarmPool[str] = WarmPool()
    pool.put("apollo", "w1", None, limit=2)
    pool.discard("apollo", "w1")
    pool.discard("hermes", "w9")
    assert pool.take("apollo", None) is None


# -- sessions in real workers ------------------------------------------------------------


@pytest.fixture
def backend() -> Iterator[ProcessBackend]:
    backend = ProcessBackend(session_max=2)
    yield backend
    backend.close()


def run(backend: ProcessBackend, key: str | None = None, **overrides: Any) -> Finished:
    """Run `remember` (below) as one attempt of apollo and wait for its Finished."""
    clock = SystemClock()
    done = threading.Event()
    box: list[Finished] = []

    def send(message: object) -> None:
        if isinstance(message, Finished):
            box.append(message)
            done.set()

    fields: dict[str, Any] = {
        "agent": "apollo",
        "delegation_id": "apollo-1",
        "attempt": 1,
        "attempt_id": "apollo-1-a1",
        "brief": Brief(agent="apollo", scope="count", session=key),
        "deadline": clock.now() + 60.0,
        "clock": clock,
        "work": _remember,
        "session_key": key,
    }
    fields.update(overrides)
    backend.start(ChildSpec(**fields), send)
    assert done.wait(WAIT_S)
    return box[0]


def _make_remember() -> Callable[[Brief, Context], tuple[int, int]]:
    # Nested, so it travels by value: the worker never imports this test module.
    def remember(brief: Brief, ctx: Context) -> tuple[int, int]:
        import os

        ctx.session["n"] = ctx.session.get("n", 0) + 1
        return os.getpid(), ctx.session["n"]

    return remember


_remember = _make_remember()


@pytest.mark.process
def test_a_session_continues_in_the_same_process_with_its_state(
    backend: ProcessBackend,
) -> None:
    pid, n = run(backend, "s1").value
    assert n == 1
    assert run(backend, "s1").value == (pid, 2)
    assert run(backend, "s1").value == (pid, 3)


@pytest.mark.process
def test_two_sessions_keep_two_processes_and_separate_state(backend: ProcessBackend) -> None:
    one = run(backend, "s1").value
    two = run(backend, "s2").value
    assert one[0] != two[0] and one[1] == two[1] == 1
    assert run(backend, "s1").value == (one[0], 2)
    assert run(backend, "s2").value == (two[0], 2)


@pytest.mark.process
def test_a_third_session_evicts_the_least_recently_used_one(backend: ProcessBackend) -> None:
    s1, _ = run(backend, "s1").value
    s2, _ = run(backend, "s2").value
    run(backend, "s1")  # s2 is now the least recently used
    s3, _ = run(backend, "s3").value
    assert run(backend, "s1").value == (s1, 3)  # kept
    pid, n = run(backend, "s2").value  # evicted: a fresh process, fresh state
    assert n == 1 and pid not in {s1, s2, s3}
    assert eventually(lambda: not psutil.pid_exists(s2))  # the evicted worker exited


@pytest.mark.process
def test_a_briefs_session_dict_seeds_a_new_session(backend: ProcessBackend) -> None:
    assert run(backend, "s1", session={"n": 41}).value[1] == 42
    assert run(backend, "s1", session={"n": 0}).value[1] == 43  # the worker's state wins


@pytest.mark.process
def test_session_max_zero_keeps_no_warm_worker(backend: ProcessBackend) -> None:
    first, _ = run(backend, session_max=0).value
    second, _ = run(backend, session_max=0).value
    assert first != second


@pytest.mark.process
def test_a_failed_attempt_keeps_its_session_for_the_follow_up(backend: ProcessBackend) -> None:
    pid, _ = run(backend, "s1").value

    def fail(brief: Brief, ctx: Context) -> None:
        ctx.session["failed"] = True
        raise RuntimeError("flaky tool")

    assert run(backend, "s1", work=fail).outcome is AttemptOutcome.error
    assert run(backend, "s1").value == (pid, 2)
