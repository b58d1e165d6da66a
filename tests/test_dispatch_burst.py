"""Dispatches on an event loop's thread reach Zeus as one burst per step of the loop.

What the coalescing must not change: Zeus hears of each dispatch before anything
the host sends after it, handles them in the order of their ids, settles each
once, starts them even when the loop's step never ends (the host blocks), and a
stop settles what is still queued. Refusals stay in `dispatch()` itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time

import pytest

from actors import Brief, Context, Status
from supervisor import DelegationRefused, UnknownAgent, Zeus, ZeusStopped
from supervisor.core import zeus as zeus_module
from supervisor.core.messages import Burst
from tests.conftest import Recorder, ZeusFactory

WAIT_S = 10


def noop(brief: Brief, ctx: Context) -> str:
    return brief.scope


def test_a_step_of_dispatches_is_queued_until_the_step_ends(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus(works={"noop": noop})
    sent: list[object] = []
    put = zeus._outbox._put
    zeus._outbox._put = lambda message: (sent.append(message), put(message))  # type: ignore[method-assign]

    async def main() -> list[Status]:
        handles = [zeus.dispatch(Brief(agent="noop", scope=str(i))) for i in range(5)]
        assert sent == []  # nothing in Zeus's mailbox while the step runs
        assert zeus.handle(handles[0].id) is handles[0]  # known at once
        summaries = await asyncio.gather(*handles)
        return [s.status for s in summaries]

    assert asyncio.run(main()) == [Status.completed] * 5
    assert len(sent) == 1 and isinstance(sent[0], Burst) and len(sent[0].messages) == 5


def test_a_cancel_right_after_a_dispatch_in_the_same_step_wins(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus(works={"noop": noop})

    async def main() -> list[Status]:
        handles = [zeus.dispatch(Brief(agent="noop", scope=str(i))) for i in range(20)]
        assert zeus._outbox._pending  # still queued as the cancels are sent
        for handle in handles[::2]:
            handle.cancel("changed my mind")
        return [s.status for s in await asyncio.gather(*handles)]

    statuses = asyncio.run(main())
    assert statuses[::2] == [Status.cancelled] * 10
    assert statuses[1::2] == [Status.completed] * 10


def test_a_thousand_dispatches_in_one_step_settle_once_each_in_id_order(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    zeus = make_zeus(supervisor={"max_concurrent": 1000}, works={"noop": noop})

    async def main() -> list[str]:
        handles = [zeus.dispatch(Brief(agent="noop", scope=str(i))) for i in range(1000)]
        summaries = await asyncio.gather(*handles)
        assert [s.output for s in summaries] == [str(i) for i in range(1000)]
        return [h.id for h in handles]

    ids = asyncio.run(main())
    zeus._sync()
    dispatched = [e["delegation_id"] for e in recorder.named("delegation.dispatched")]
    assert dispatched == ids
    settled = [e["delegation_id"] for e in recorder.named("delegation.settled")]
    assert sorted(settled) == sorted(ids) and len(settled) == len(set(settled))


def test_a_host_blocking_on_the_handle_right_after_dispatching_is_answered(
    make_zeus: ZeusFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`result()` (and the future's) flush the burst: no backstop needed."""
    monkeypatch.setattr(zeus_module, "BACKSTOP_S", 60.0)
    zeus = make_zeus(works={"noop": noop})

    async def main() -> tuple[str | None, str | None, bool]:
        first = zeus.dispatch(Brief(agent="noop", scope="result"))
        one = first.result(WAIT_S).output  # blocks the loop's thread
        second = zeus.dispatch(Brief(agent="noop", scope="future"))
        two = second.future.result(WAIT_S).output
        third = zeus.dispatch(Brief(agent="noop", scope="wait_done"))
        return one, two, third.future.wait_done(WAIT_S)  # type: ignore[attr-defined]

    assert asyncio.run(main()) == ("result", "future", True)


def test_a_dispatch_starts_though_its_loop_then_blocks(make_zeus: ZeusFactory) -> None:
    """The loop's step never ends in time: the backstop sends the burst."""
    zeus = make_zeus(works={"noop": noop})

    async def main() -> tuple[bool, list[str]]:
        handles = [zeus.dispatch(Brief(agent="noop", scope=str(i))) for i in range(3)]
        done, _ = concurrent.futures.wait([h.future for h in handles], WAIT_S)
        time.sleep(0.05)  # a blocking call of the host's own
        return len(done) == 3, [h.result().output or "" for h in handles]

    assert asyncio.run(main()) == (True, ["0", "1", "2"])


def test_stopping_zeus_settles_what_a_loop_still_has_queued(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus(works={"noop": noop})

    async def main() -> list[bool]:
        handles = [zeus.dispatch(Brief(agent="noop", scope=str(i))) for i in range(50)]
        zeus.stop(timeout=5)  # in the same step: the burst was never flushed by the loop
        with pytest.raises(ZeusStopped):
            zeus.dispatch(Brief(agent="noop", scope="late"))
        return [h.done() for h in handles]

    assert all(asyncio.run(main()))


def test_a_dispatch_racing_stop_from_a_loop_is_settled_or_refused(
    make_zeus: ZeusFactory,
) -> None:
    zeus = make_zeus(works={"noop": noop})
    handles = []
    refused = []

    async def dispatching() -> None:
        while True:
            try:
                handles.append(zeus.dispatch(Brief(agent="noop", scope="race")))
            except ZeusStopped:
                refused.append(True)
                return
            await asyncio.sleep(0.001)  # a step of the loop per dispatch, Zeus keeping up

    loop_thread = threading.Thread(target=asyncio.run, args=(dispatching(),))
    loop_thread.start()
    time.sleep(0.05)
    zeus.stop(timeout=5)
    loop_thread.join(WAIT_S)
    assert refused and handles
    assert all(h.future.wait_done(WAIT_S) for h in handles)  # type: ignore[attr-defined]


def test_a_group_dispatched_on_a_loop_restarts_as_its_strategy_says(
    make_zeus: ZeusFactory,
) -> None:
    zeus = make_zeus(works={"noop": noop})

    async def main() -> list[str | None]:
        group = zeus.dispatch_group([Brief(agent="noop", scope=str(i)) for i in range(4)],
                                    "one_for_all")
        return [s.output for s in await group]

    assert asyncio.run(main()) == ["0", "1", "2", "3"]


def test_a_loop_closed_before_its_step_ended_is_not_held(make_zeus: ZeusFactory) -> None:
    """Its flush never runs: the backstop sends the burst and forgets the loop."""
    zeus = make_zeus(works={"noop": noop})
    loop = asyncio.new_event_loop()
    asyncio.events._set_running_loop(loop)  # as if in a step of it, which never ends
    try:
        handle = zeus.dispatch(Brief(agent="noop", scope="orphan"))
    finally:
        asyncio.events._set_running_loop(None)
    loop.close()  # its flush never ran
    deadline = time.monotonic() + WAIT_S
    while zeus._outbox._loops and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not zeus._outbox._loops
    assert handle.result(WAIT_S).output == "orphan"


def test_refusals_are_still_raised_by_dispatch_on_a_loop(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus({"writer": {}}, works={"noop": noop})

    async def main() -> None:
        with pytest.raises(UnknownAgent):
            zeus.dispatch(Brief(agent="nobody", scope="x"))
        with pytest.raises(DelegationRefused):
            zeus.dispatch(Brief(agent="writer", scope="x", partial_ok=True))

    asyncio.run(main())


def test_a_plain_thread_still_sends_at_once(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus(works={"noop": noop})
    handle = zeus.dispatch(Brief(agent="noop", scope="plain"))
    assert not zeus._outbox._pending
    assert handle.result(WAIT_S).output == "plain"


def test_no_outbox_thread_outlives_zeus() -> None:
    with Zeus.start(agents={"noop": noop}) as zeus:

        async def main() -> None:
            await zeus.dispatch(Brief(agent="noop", scope="x"))

        asyncio.run(main())
    assert not [t for t in threading.enumerate() if t.name == "zeus-outbox"]
