"""Handles in an asyncio host: a real future, awaiting from any loop, structured cancellation.

Thread children under a fake clock: cooperative stops need no timer. The
awaiting task is cancelled before, during and after settlement.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from typing import Any

import pytest

from actors import Brief, Context, Status
from supervisor import Zeus
from supervisor.core.handle import AWAITER_CANCELLED
from supervisor.testing import held, sync, wait_queued
from tests._support import Gate
from tests.conftest import Recorder, ZeusFactory


def echo(brief: Brief, ctx: Context) -> str:
    return brief.scope


@pytest.fixture
def gate() -> Gate:
    return Gate()


def test_handle_future_is_a_concurrent_future(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus(works={"echo": echo})
    handles = [zeus.dispatch(Brief(agent="echo", scope=str(i))) for i in range(5)]
    assert all(isinstance(h.future, concurrent.futures.Future) for h in handles)
    done = list(concurrent.futures.as_completed([h.future for h in handles], timeout=10))
    assert sorted(f.result().output for f in done) == ["0", "1", "2", "3", "4"]
    assert handles[0].future.result() is handles[0].result()


def test_wrap_future_and_as_completed_work_on_handles(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus(works={"echo": echo})

    async def main() -> tuple[str, list[str]]:
        one = zeus.dispatch(Brief(agent="echo", scope="wrapped"))
        wrapped = await asyncio.wrap_future(one.future)
        handles = [zeus.dispatch(Brief(agent="echo", scope=str(i))) for i in range(4)]
        outputs = [(await next_done).output for next_done in asyncio.as_completed(handles)]
        return wrapped.output, outputs

    wrapped, outputs = asyncio.run(main())
    assert wrapped == "wrapped"
    assert sorted(outputs) == ["0", "1", "2", "3"]


def test_a_handle_is_awaited_from_several_loops_at_once(make_zeus: ZeusFactory, gate: Gate) -> None:
    zeus = make_zeus(works={"gate": gate})
    handle = zeus.dispatch(Brief(agent="gate", scope="shared"))
    results: list[str] = []
    waiting = threading.Barrier(4)

    def host() -> None:
        async def main() -> str:
            awaiting = asyncio.Event()
            task = asyncio.ensure_future(_await(handle, awaiting))
            await awaiting.wait()  # the task now awaits the handle in this loop
            waiting.wait(10)
            return (await task).output

        results.append(asyncio.run(main()))

    threads = [threading.Thread(target=host) for _ in range(3)]
    for t in threads:
        t.start()
    waiting.wait(10)  # three loops, each awaiting the same handle
    gate.open()
    for t in threads:
        t.join(10)
    assert results == ["shared"] * 3


def test_awaiting_never_blocks_the_loop(make_zeus: ZeusFactory, gate: Gate) -> None:
    zeus = make_zeus(works={"gate": gate})

    async def main() -> int:
        handle = zeus.dispatch(Brief(agent="gate", scope="x"))
        waiter = asyncio.ensure_future(handle)
        ticks = 0
        while not gate.started.is_set() or ticks < 20:  # the loop runs while the handle is open
            await asyncio.sleep(0)
            ticks += 1
        assert not waiter.done()
        gate.open()
        await waiter
        return ticks

    assert asyncio.run(main()) >= 20


def test_a_loop_closed_before_settlement_breaks_nothing_and_logs_nothing(
    make_zeus: ZeusFactory, gate: Gate, caplog: pytest.LogCaptureFixture
) -> None:
    zeus = make_zeus(works={"gate": gate})
    handle = zeus.dispatch(Brief(agent="gate", scope="x"))
    loop = asyncio.new_event_loop()
    awaiting = asyncio.Event()
    task = loop.create_task(_await(handle, awaiting))
    loop.run_until_complete(awaiting.wait())  # the task now waits on the handle
    assert not task.done()
    task._log_destroy_pending = False  # type: ignore[attr-defined]  # left pending on purpose
    loop.close()
    with caplog.at_level(logging.DEBUG):
        gate.open()
        summary = handle.result(10)
        sync(zeus)
    assert summary.status is Status.completed
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


async def _await(awaitable: Any, awaiting: asyncio.Event | None = None) -> Any:
    """Await `awaitable`; `awaiting` is set as the task starts to: a coroutine that waited
    on it resumes once the task's first step is over, that is, once it awaits."""
    if awaiting is not None:
        awaiting.set()
    return await awaitable


# -- structured cancellation -----------------------------------------------------------


def _cancel_while_awaiting(zeus: Zeus, gate: Gate, how: str) -> BaseException | None:
    """Await a handle in a task, cancel the task `how`, and return what the task raised."""

    async def main() -> BaseException | None:
        handle = zeus.dispatch(Brief(agent="gate", scope="x"))
        started = asyncio.get_running_loop().run_in_executor(None, gate.started.wait, 10)
        try:
            if how == "direct":
                task = asyncio.ensure_future(_await(handle))
                await started
                task.cancel()
                await task
            elif how == "wait_for":
                await started
                await asyncio.wait_for(_await(handle), 0.05)
            elif how == "timeout":
                await started
                async with asyncio.timeout(0.05):
                    await handle
            elif how == "taskgroup":
                async with asyncio.TaskGroup() as group:
                    group.create_task(_await(handle))
                    await started
                    group.create_task(_fail())
        except BaseException as exc:
            return exc
        return None

    return asyncio.run(main())


async def _fail() -> None:
    raise ValueError("a sibling task failed")


@pytest.mark.parametrize("how", ["direct", "wait_for", "timeout", "taskgroup"])
def test_cancelling_the_awaiting_task_cancels_the_delegation(
    make_zeus: ZeusFactory, recorder: Recorder, gate: Gate, how: str
) -> None:
    zeus = make_zeus(works={"gate": gate})
    raised = _cancel_while_awaiting(zeus, gate, how)
    expected = {"direct": asyncio.CancelledError, "wait_for": TimeoutError,
                "timeout": TimeoutError, "taskgroup": ExceptionGroup}[how]
    assert isinstance(raised, expected), raised
    (settled,) = recorder.wait_for("delegation.settled")
    assert settled["status"] == "cancelled"
    (requested,) = recorder.named("delegation.cancel_requested")
    assert requested["reason"] == AWAITER_CANCELLED
    assert gate.stopped == ["cancelled"]  # the child itself stopped, not just the wait


def test_shield_opts_out(make_zeus: ZeusFactory, recorder: Recorder, gate: Gate) -> None:
    zeus = make_zeus(works={"gate": gate})

    async def main() -> Any:
        handle = zeus.dispatch(Brief(agent="gate", scope="kept"))
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.shield(handle), 0.05)
        assert not handle.done()
        gate.open()
        return await handle

    assert asyncio.run(main()).status is Status.completed
    assert recorder.named("delegation.cancel_requested") == []
    assert gate.stopped == ["returned"]


def test_a_sync_wait_that_runs_out_cancels_nothing(
    make_zeus: ZeusFactory, recorder: Recorder, gate: Gate
) -> None:
    zeus = make_zeus(works={"gate": gate})
    handle = zeus.dispatch(Brief(agent="gate", scope="x"))
    with pytest.raises(TimeoutError, match="the delegation goes on"):
        handle.result(0.05)
    with pytest.raises(TimeoutError):
        handle.future.result(0.01)
    sync(zeus)
    assert not handle.done()
    gate.open()
    assert handle.result(10).status is Status.completed
    assert recorder.named("delegation.cancel_requested") == []


def test_cancelling_the_task_after_settlement_cancels_nothing(
    make_zeus: ZeusFactory, recorder: Recorder, gate: Gate
) -> None:
    zeus = make_zeus(works={"gate": gate})

    async def main() -> None:
        handle = zeus.dispatch(Brief(agent="gate", scope="x"))
        awaiting = asyncio.Event()
        task = asyncio.ensure_future(_await(handle, awaiting))
        await awaiting.wait()
        gate.open()
        handle.result(10)  # blocks this loop on purpose: settled before the task resumes
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    sync(zeus)
    assert recorder.named("delegation.settled")[0]["status"] == "completed"
    assert recorder.named("delegation.cancel_requested") == []


@pytest.mark.parametrize("first", ["finished", "cancel"])
def test_the_task_cancelled_as_the_child_finishes_settles_once_in_either_order(
    make_zeus: ZeusFactory, recorder: Recorder, gate: Gate, first: str
) -> None:
    zeus = make_zeus(works={"gate": gate})

    async def main() -> None:
        handle = zeus.dispatch(Brief(agent="gate", scope="x"))
        task = asyncio.ensure_future(_await(handle))
        await asyncio.get_running_loop().run_in_executor(None, gate.started.wait, 10)
        sync(zeus)
        with held(zeus):
            if first == "finished":
                gate.open()
                wait_queued(zeus, 1)  # the child's Finished is queued
                task.cancel()
                await asyncio.to_thread(wait_queued, zeus, 2)  # then the task's Cancel
            else:
                task.cancel()
                await asyncio.to_thread(wait_queued, zeus, 1)  # the Cancel is queued first
                gate.open()
                await asyncio.to_thread(wait_queued, zeus, 2)  # then the child's Finished
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wrap_future(handle.future)

    asyncio.run(main())
    sync(zeus)
    settled = recorder.named("delegation.settled")
    assert len(settled) == 1
    assert settled[0]["status"] == ("completed" if first == "finished" else "cancelled")


def test_awaiting_a_group_gives_summaries_in_brief_order(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus(works={"echo": echo})

    async def main() -> list[str]:
        group = zeus.dispatch_group([Brief(agent="echo", scope=str(i)) for i in range(6)])
        return [s.output for s in await group]

    assert asyncio.run(main()) == ["0", "1", "2", "3", "4", "5"]


def test_cancelling_a_task_awaiting_a_group_cancels_every_open_member(
    make_zeus: ZeusFactory, recorder: Recorder, gate: Gate
) -> None:
    zeus = make_zeus(works={"gate": gate, "echo": echo})

    async def main() -> None:
        group = zeus.dispatch_group(
            [Brief(agent="echo", scope="quick"), *[Brief(agent="gate", scope="g")] * 3]
        )
        group.handles[0].result(10)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(_await(group), 0.1)

    asyncio.run(main())
    recorder.wait_for("delegation.settled", count=4)
    statuses = sorted(e["status"] for e in recorder.named("delegation.settled"))
    assert statuses == ["cancelled", "cancelled", "cancelled", "completed"]
    reasons = {e["reason"] for e in recorder.named("delegation.cancel_requested")}
    assert reasons == {AWAITER_CANCELLED}
    assert gate.stopped == ["cancelled"] * 3


def test_cancelling_the_wrapped_future_cancels_the_delegation(
    make_zeus: ZeusFactory, recorder: Recorder, gate: Gate
) -> None:
    zeus = make_zeus(works={"gate": gate})
    handle = zeus.dispatch(Brief(agent="gate", scope="x"))

    async def main() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.wrap_future(handle.future), 0.05)

    asyncio.run(main())
    assert handle.result(10).status is Status.cancelled
    assert handle.result().error == AWAITER_CANCELLED
    assert handle.future.cancel() is False  # a settled future stays settled
    assert not handle.future.cancelled()


def test_the_task_cancelled_before_its_delegation_started_cancels_it_unstarted(
    make_zeus: ZeusFactory, recorder: Recorder, gate: Gate
) -> None:
    zeus = make_zeus(supervisor={"max_concurrent": 1}, works={"gate": gate, "echo": echo})

    async def main() -> None:
        busy = zeus.dispatch(Brief(agent="gate", scope="holds the only slot"))
        queued = zeus.dispatch(Brief(agent="echo", scope="waits for a slot"))
        awaiting = asyncio.Event()
        task = asyncio.ensure_future(_await(queued, awaiting))
        await awaiting.wait()
        assert zeus.tree()["queued"] == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (await asyncio.wrap_future(queued.future)).status is Status.cancelled
        gate.open()
        assert (await busy).status is Status.completed

    asyncio.run(main())
    started = {e["delegation_id"] for e in recorder.named("attempt.started")}
    assert started == {"gate-1"}  # the queued one never ran


def test_a_burst_of_settlements_wakes_the_loop_once(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus(works={"echo": echo})
    wakeups: list[object] = []

    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        call_soon_threadsafe = loop.call_soon_threadsafe

        def counting(callback: Any, *args: Any) -> Any:
            wakeups.append(callback)
            return call_soon_threadsafe(callback, *args)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
        with held(zeus):
            handles = [zeus.dispatch(Brief(agent="echo", scope=str(i))) for i in range(50)]
            awaiting = [asyncio.Event() for _ in handles]
            tasks = [asyncio.ensure_future(_await(h, a))
                     for h, a in zip(handles, awaiting, strict=True)]
            for each in awaiting:
                await each.wait()  # every task now waits on its open handle
        for handle in handles:
            handle.result(10)  # blocks the loop on purpose: all 50 settle meanwhile
        return [s.output for s in await asyncio.gather(*tasks)]

    assert asyncio.run(main()) == [str(i) for i in range(50)]
    assert len(wakeups) == 1  # one wake-up of the loop for the 50 settlements
