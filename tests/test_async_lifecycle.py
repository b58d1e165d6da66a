"""An async lifecycle (`async with`, `astop`) that never blocks the loop, and lookup by id."""

from __future__ import annotations

import asyncio
import time

import pytest

from actors import Brief, Context, Status
from supervisor import Routing, SupervisorError, UnknownDelegation, Zeus, ZeusStopped
from supervisor.testing import kept, sync, wait_stopped
from tests._support import Gate
from tests.conftest import Recorder, ZeusFactory


def echo(brief: Brief, ctx: Context) -> str:
    return brief.scope


def deaf(brief: Brief, ctx: Context) -> str:
    time.sleep(0.6)  # ignores the stop request: Zeus's stop waits out grace_s
    return "late"


def orchestrate(brief: Brief, ctx: Context) -> str:
    return ctx.delegate(Brief(agent="echo", scope="nested")).output or ""


class Ticker:
    """Counts how often the loop got to run a 1 ms ticker, and its longest gap."""

    def __init__(self) -> None:
        self.ticks = 0
        self.longest_gap = 0.0

    async def run(self, stop: asyncio.Event) -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            self.longest_gap = max(self.longest_gap, now - last)
            last = now
            self.ticks += 1


@pytest.mark.realtime
def test_async_with_stops_zeus_without_blocking_the_loop() -> None:
    routing = Routing.from_dict({
        "version": 1,
        "agents": {"deaf": {"shutdown": {"grace_s": 0.4}}},
    })
    ticker = Ticker()

    async def main() -> Zeus:
        stop = asyncio.Event()
        ticking = asyncio.ensure_future(ticker.run(stop))
        recorder = Recorder()
        async with Zeus.start(routing, agents={"deaf": deaf}, log=recorder) as zeus:
            handle = zeus.dispatch(Brief(agent="deaf", scope="x"))
            await asyncio.to_thread(recorder.wait_for, "attempt.started")  # its stop waits
            ticks_before = ticker.ticks
        # `stop()` held the thread for grace_s; `astop()` held the loop for none of it.
        assert ticker.ticks - ticks_before >= 20
        assert handle.done() and (await handle).status is Status.cancelled
        stop.set()
        await ticking
        return zeus

    zeus = asyncio.run(main())
    with pytest.raises(ZeusStopped):
        zeus.dispatch(Brief(agent="deaf", scope="after"))


def test_astop_takes_a_timeout_and_is_idempotent(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus(works={"echo": echo})

    async def main() -> None:
        assert (await zeus.dispatch(Brief(agent="echo", scope="x"))).output == "x"
        await zeus.astop(timeout=1.0)
        await zeus.astop()

    asyncio.run(main())
    assert zeus.tree()["stopped"] is True


def test_cancelling_the_task_awaiting_astop_does_not_cancel_the_stop(
    make_zeus: ZeusFactory,
) -> None:
    zeus = make_zeus(works={"echo": echo})

    async def main() -> None:
        stopping = asyncio.Event()

        async def astop() -> None:
            stopping.set()
            await zeus.astop()

        task = asyncio.ensure_future(astop())
        await stopping.wait()  # the task's first step is over: astop() has begun
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert wait_stopped(zeus, 10)


# -- lookup by id -------------------------------------------------------------------------


def test_handle_finds_open_and_settled_delegations(make_zeus: ZeusFactory) -> None:
    gate = Gate()
    zeus = make_zeus(works={"echo": echo, "wait": gate})
    open_one = zeus.dispatch(Brief(agent="wait", scope="x"))
    settled = zeus.dispatch(Brief(agent="echo", scope="y"))
    settled.result(10)
    assert zeus.handle(open_one.id) is open_one
    assert zeus.handle(settled.id) is settled
    assert zeus.handle(settled.id).result().output == "y"
    gate.open()


def test_keep_settled_drops_the_oldest_first(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus(supervisor={"keep_settled": 2}, works={"echo": echo})
    handles = []
    for i in range(4):  # settled one after another: the oldest settled is the first
        handles.append(zeus.dispatch(Brief(agent="echo", scope=str(i))))
        handles[-1].result(10)
        sync(zeus)
    assert zeus.handle(handles[3].id) is handles[3]
    assert zeus.handle(handles[2].id) is handles[2]
    with pytest.raises(UnknownDelegation, match="keep_settled"):
        zeus.handle(handles[0].id)
    zeus.cancel(handles[0].id)  # an id it had: a no-op, not an error
    assert zeus.send(handles[0].id, "late") is False
    assert kept(zeus) == 2


def test_an_id_zeus_never_had_is_an_unknown_delegation_naming_the_nearest(
    make_zeus: ZeusFactory,
) -> None:
    zeus = make_zeus(works={"echo": echo})
    handle = zeus.dispatch(Brief(agent="echo", scope="x"))
    handle.result(10)
    for call in (zeus.handle, zeus.cancel, lambda i: zeus.send(i, "hi")):
        with pytest.raises(UnknownDelegation) as caught:
            call("echoo-1")
        assert "'echoo-1'" in str(caught.value)
        assert "did you mean 'echo-1'" in str(caught.value)
        assert isinstance(caught.value, SupervisorError)
    with pytest.raises(UnknownDelegation, match="never had"):
        zeus.handle("echo-2")  # the next id, not given out yet


def test_a_childs_delegation_is_known_but_has_no_handle(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    zeus = make_zeus(
        agents={"boss": {"kind": "orchestrator"}},
        works={"boss": orchestrate, "echo": echo},
    )
    assert zeus.dispatch(Brief(agent="boss", scope="x")).result(10).output == "nested"
    nested = recorder.named("delegation.dispatched")[1]["delegation_id"]
    with pytest.raises(UnknownDelegation, match="delegated by a child"):
        zeus.handle(nested)
    zeus.cancel(nested)  # known: a no-op once settled
    assert zeus.send(nested, "late") is False


def test_keep_settled_must_not_be_negative() -> None:
    from supervisor import RoutingError

    with pytest.raises(RoutingError, match="keep_settled"):
        Routing.from_dict({"version": 1, "supervisor": {"keep_settled": -1}, "agents": {}})
    assert Routing.from_dict({"version": 1, "agents": {}}).supervisor.keep_settled == 10_000
