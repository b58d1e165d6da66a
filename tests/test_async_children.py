"""The awaiting task's cancellation reaches real children: `async def` work functions are
cancelled at the `await` they are blocked in, in threads and processes; process children
stop cooperatively, or by SIGTERM when they ignore the request.

Real clock, real threads and processes, loose bounds.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from actors import Brief, Context, Status
from supervisor import Routing, Zeus
from supervisor.core.handle import AWAITER_CANCELLED
from supervisor.testing import held, sync, wait_queued
from tests._support import alive, eventually

pytestmark = pytest.mark.realtime

FAST_STOP = {"shutdown": {"grace_s": 0.3, "term_s": 0.5}}


def routing(isolation: str) -> Routing:
    policy = {"isolation": isolation, "timeout_s": 60, **FAST_STOP}
    return Routing.from_dict({
        "version": 1,
        "agents": {name: dict(policy) for name in ("async_wait", "cooperative", "deaf")},
    })


async def async_wait(brief: Brief, ctx: Context) -> str:
    """Blocks in an await; writes when and how it ended to the file its scope names."""
    ctx.heartbeat("started")
    Path(brief.scope + ".started").write_text("")
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        Path(brief.scope).write_text(f"CancelledError {time.time()!r}")
        raise
    return "slept"


def cooperative(brief: Brief, ctx: Context) -> str:
    Path(brief.scope + ".started").write_text("")
    try:
        while True:
            ctx.check()
            time.sleep(0.002)
    finally:
        Path(brief.scope).write_text(f"stopped {time.time()!r}")


def deaf(brief: Brief, ctx: Context) -> str:
    """Never looks at cancellation: only SIGTERM stops it (in a process)."""
    import os

    Path(brief.scope + ".started").write_text(str(os.getpid()))
    time.sleep(60)
    return "woke"


WORKS = {"async_wait": async_wait, "cooperative": cooperative, "deaf": deaf}


def cancel_while_awaiting(
    zeus: Zeus, agent: str, marker: Path
) -> tuple[Any, float]:
    """Await the delegation in a task, cancel the task once the child runs.

    Returns the settled summary and the wall time the task was cancelled at.
    """

    async def main() -> float:
        handle = zeus.dispatch(Brief(agent=agent, scope=str(marker)))
        task = asyncio.ensure_future(handle)
        started = Path(str(marker) + ".started")
        while not started.exists():  # a wait on the child's own mark, bounded by the test
            await asyncio.sleep(0.005)
        # The child runs its work now; a cancel that comes before it reaches its await
        # (or its next check) is raised there all the same.
        cancelled_at = time.time()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return cancelled_at

    cancelled_at = asyncio.run(main())
    handle = zeus.handle(f"{agent}-1")
    return handle.result(20), cancelled_at


PROCESS = pytest.param("process", marks=pytest.mark.process)


@pytest.mark.parametrize("isolation", ["thread", PROCESS])
def test_an_async_work_function_is_cancelled_at_its_await(
    tmp_path: Path, isolation: str
) -> None:
    marker = tmp_path / "ended"
    events: list[dict[str, Any]] = []
    with Zeus.start(routing(isolation), agents=WORKS, log=events.append) as zeus:
        summary, cancelled_at = cancel_while_awaiting(zeus, "async_wait", marker)
    assert summary.status is Status.cancelled
    assert summary.error == AWAITER_CANCELLED
    assert summary.attempts[-1].outcome == "cancelled"
    what, when = marker.read_text().split()
    assert what == "CancelledError"  # raised in the coroutine, at its await
    assert 0 <= float(when) - cancelled_at < 5.0  # loose: benchmarks/bench_async.py measures it
    killed = [e for e in events if e["event"] == "attempt.killed"]
    assert [e["how"] for e in killed] == ["cooperative"]  # no fencing, no signal


@pytest.mark.process
def test_a_cooperative_process_child_stops_when_the_awaiting_task_is_cancelled(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ended"
    events: list[dict[str, Any]] = []
    with Zeus.start(routing("process"), agents=WORKS, log=events.append) as zeus:
        summary, _ = cancel_while_awaiting(zeus, "cooperative", marker)
    assert summary.status is Status.cancelled
    assert marker.read_text().startswith("stopped")
    assert [e["how"] for e in events if e["event"] == "attempt.killed"] == ["cooperative"]


@pytest.mark.process
def test_a_process_child_deaf_to_the_request_is_terminated(tmp_path: Path) -> None:
    marker = tmp_path / "ended"
    events: list[dict[str, Any]] = []
    with Zeus.start(routing("process"), agents=WORKS, log=events.append) as zeus:
        summary, _ = cancel_while_awaiting(zeus, "deaf", marker)
        pid = int(Path(str(marker) + ".started").read_text())
        assert eventually(lambda: not alive(pid))
    assert summary.status is Status.cancelled
    assert summary.error == AWAITER_CANCELLED
    assert not marker.exists()  # it never got to return
    hows = [e["how"] for e in events if e["event"] == "attempt.killed"]
    assert hows in (["terminate"], ["kill"])


def test_a_thread_child_deaf_to_the_request_is_fenced(tmp_path: Path) -> None:
    marker = tmp_path / "ended"
    events: list[dict[str, Any]] = []
    with Zeus.start(routing("thread"), agents={"deaf": _deaf_briefly}, log=events.append) as zeus:
        summary, _ = cancel_while_awaiting(zeus, "deaf", marker)
    assert summary.status is Status.cancelled
    assert [e["event"] for e in events if e["event"] == "attempt.fenced"][:1] == ["attempt.fenced"]


def _deaf_briefly(brief: Brief, ctx: Context) -> str:
    Path(brief.scope + ".started").write_text("")
    time.sleep(1.0)  # ignores the request; fenced after grace_s
    return "late"


def wait_for_file(brief: Brief, ctx: Context) -> str:
    """Runs until the file its scope names exists (or it is cancelled)."""
    Path(brief.scope + ".started").write_text("")
    while not Path(brief.scope).exists():
        ctx.check()
        time.sleep(0.002)
    return "released"


@pytest.mark.process
@pytest.mark.parametrize("order", ["finished_first", "cancel_first", "after_settlement"])
def test_a_process_child_and_its_awaiting_task_cancelled_in_every_order(
    tmp_path: Path, order: str
) -> None:
    release = tmp_path / "release"
    quiet = {"isolation": "process", **FAST_STOP,
             "heartbeat": {"interval_s": 30, "stale_after_s": 60}}  # no beats in the mailbox
    r = Routing.from_dict({"version": 1, "agents": {"w": quiet}})
    events: list[dict[str, Any]] = []
    with Zeus.start(r, agents={"w": wait_for_file}, log=events.append) as zeus:
        async def main() -> None:
            handle = zeus.dispatch(Brief(agent="w", scope=str(release)))
            task = asyncio.ensure_future(handle)
            while not Path(str(release) + ".started").exists():
                await asyncio.sleep(0.005)
            sync(zeus)
            if order == "after_settlement":
                release.write_text("")
                handle.result(20)  # blocks this loop on purpose: settled before the task resumes
                task.cancel()
            else:
                with held(zeus):
                    if order == "finished_first":
                        release.write_text("")
                        wait_queued(zeus, 1, timeout=20)  # its Finished
                        task.cancel()
                        await asyncio.to_thread(wait_queued, zeus, 2)  # then the Cancel
                    else:
                        task.cancel()
                        await asyncio.to_thread(wait_queued, zeus, 1)  # the Cancel
                        release.write_text("")
            with pytest.raises(asyncio.CancelledError):
                await task
            await asyncio.wrap_future(handle.future)

        asyncio.run(main())
        sync(zeus)
    settled = [e for e in events if e["event"] == "delegation.settled"]
    assert len(settled) == 1
    expected = "cancelled" if order == "cancel_first" else "completed"
    assert settled[0]["status"] == expected
    requested = [e["reason"] for e in events if e["event"] == "delegation.cancel_requested"]
    assert requested == ([AWAITER_CANCELLED] if order == "cancel_first" else [])
