"""A settled delegation's summary is decided in Zeus's thread and made where it is first
read (supervisor/core/settlement.py): the host's thread for `handle.result()` and
`await`, Zeus's for a done-callback and a store's write; once, the same one to all."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from pathlib import Path
from typing import Any

import pytest

from actors import Status, Summary, Usage
from supervisor import Brief, Routing, Zeus
from supervisor.core.handle import DelegationFuture
from supervisor.core.settlement import Settlement
from supervisor.testing import EventRecorder

ROUTING = Routing.from_dict({"version": 1, "agents": {"echo": {}, "fails": {}}})


def echo(brief: Brief, ctx: Any) -> str:
    return f"did {brief.scope}"


def fails(brief: Brief, ctx: Any) -> str:
    raise RuntimeError("boom")


AGENTS = {"echo": echo, "fails": fails}


@pytest.fixture
def made_in(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of each thread that made a summary from its settlement."""
    threads: list[str] = []
    make = Settlement.summary

    def summary(self: Settlement) -> Summary:
        if self._made is None:
            threads.append(threading.current_thread().name)
        return make(self)

    monkeypatch.setattr(Settlement, "summary", summary)
    return threads


def fields(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "d-1", "agent": "echo", "scope": "s", "status": Status.completed, "output": 1,
        "findings": [], "changes": [], "validation": [], "risks": [], "partial_results": [],
        "attempts": [], "usage": Usage(), "error": None, "timeout_kind": None,
        "schema_error": None, "truncated_chars": 0, "artifact": None, "duration_s": 0.5,
        "session_alias": None,
    }
    return {**base, **changes}


def test_result_makes_the_summary_in_the_host_thread_once(made_in: list[str]) -> None:
    with Zeus.start(ROUTING, agents=AGENTS) as zeus:
        handle = zeus.dispatch(Brief(agent="echo", scope="x"))
        handle.future.exception(timeout=10)  # settled, not read: nothing is made yet
        assert made_in == []
        summary = handle.result(10)
        assert made_in == [threading.current_thread().name]
        assert handle.result() is summary and handle.future.result() is summary
        assert (summary.status, summary.output, summary.agent) == (
            Status.completed, "did x", "echo")
        assert zeus.handle(handle.id).result() is summary


def test_await_makes_it_in_the_loop_thread_and_the_journal_says_the_decided_fields(
    made_in: list[str],
) -> None:
    recorder = EventRecorder()
    with Zeus.start(ROUTING, agents=AGENTS, log=recorder) as zeus:

        async def main() -> Summary:
            return await zeus.dispatch(Brief(agent="fails", scope="y"))

        summary = asyncio.run(main())
        assert made_in == [threading.current_thread().name]
    settled = [e for e in recorder.events if e["event"] == "delegation.settled"]
    assert len(settled) == 1
    event = settled[0]
    assert summary.status is Status.failed
    assert event["status"] == "failed" and event["duration_s"] == summary.duration_s
    assert event["error"] == (summary.error or "").split("\n")[0]
    assert event["usage"] == summary.usage.model_dump()
    assert event["timeout_kind"] is None and event["attempts"] == len(summary.attempts)


def test_a_done_callback_reads_it_in_zeus_thread_and_the_host_gets_that_one(
    made_in: list[str],
) -> None:
    got: list[Summary] = []
    seen = threading.Event()
    with Zeus.start(ROUTING, agents=AGENTS) as zeus:
        handle = zeus.dispatch(Brief(agent="echo", scope="z"))
        handle.add_done_callback(lambda s: (got.append(s), seen.set()))
        assert seen.wait(10)
        assert handle.result(10) is got[0]
    assert len(made_in) == 1 and made_in[0] != threading.current_thread().name


def test_a_store_writes_the_summary_the_handle_gets(tmp_path: Path, made_in: list[str]) -> None:
    path = tmp_path / "zeus.db"
    with Zeus.start(ROUTING, agents=AGENTS, store=path) as zeus:
        handle = zeus.dispatch(Brief(agent="echo", scope="w"))
        summary = handle.result(10)
        assert len(made_in) == 1 and made_in[0] != threading.current_thread().name
    with Zeus.start(ROUTING, agents=AGENTS, store=path) as again:  # read back from the file
        assert again.handle(handle.id).result() == summary


def test_first_readers_at_once_all_get_one_summary() -> None:
    settlement = Settlement(fields())
    barrier = threading.Barrier(8)
    out: list[Summary] = []

    def read() -> None:
        barrier.wait()
        out.append(settlement.summary())

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == 8 and all(s is out[0] for s in out)
    assert out[0] == Summary(**fields())


def test_a_summary_that_fails_validation_keeps_its_decided_status_and_says_why() -> None:
    settlement = Settlement(fields(status=Status.partial, findings=[object()], error="cut"))
    summary = settlement.summary()
    assert summary.status is Status.partial
    assert summary.id == "d-1" and summary.usage == Usage()
    assert summary.error is not None
    assert summary.error.startswith("its summary could not be built: ValidationError")
    assert settlement.summary() is summary


def settle_as_threads_watch() -> None:
    """One race: a future settled just as three threads begin to wait on it, to add a
    done-callback to it and to `concurrent.futures.wait()` for it."""
    future = DelegationFuture()
    barrier = threading.Barrier(4)
    got: list[object] = []
    called = threading.Event()

    def waiter() -> None:
        barrier.wait()
        got.append(future.result(timeout=10))

    def watcher() -> None:
        barrier.wait()
        future.add_done_callback(lambda _f: called.set())

    def waits() -> None:
        barrier.wait()
        done, _ = concurrent.futures.wait([future], timeout=10)
        got.append(bool(done))

    threads = [threading.Thread(target=t) for t in (waiter, watcher, waits)]
    for t in threads:
        t.start()
    barrier.wait()
    summary = Summary(**fields())
    assert future.set(summary)
    assert not future.set(summary)  # settled once
    for t in threads:
        t.join(15)
    assert sorted(got, key=str) == sorted([summary, True], key=str)
    assert called.is_set()


def test_a_future_settled_as_threads_begin_to_wait_or_watch_it_wakes_them_all() -> None:
    """Settling without the future's condition (none made yet) races a thread that makes
    it: none of them is left waiting."""
    for _ in range(200):
        settle_as_threads_watch()
