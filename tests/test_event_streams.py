"""`handle.events()`: one delegation's events, sync and async, ending after settlement."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from actors import Brief, Context
from supervisor.testing import event_costs, sync
from tests.conftest import Recorder, ZeusFactory


class Reporter:
    """Waits for `go`, then reports three partials and returns."""

    def __init__(self) -> None:
        self.go = threading.Event()

    def __call__(self, brief: Brief, ctx: Context) -> str:
        self.go.wait(10)
        for word in ("alpha", "beta", "gamma"):
            ctx.partial({"word": word, "note": "x" * 500})
        ctx.charge(calls=1)
        return "done"


def names(events: list[dict[str, Any]]) -> list[str]:
    return [e["event"] for e in events]


def test_a_stream_sees_every_progress_change_and_partial_then_ends(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    reporter = Reporter()
    zeus = make_zeus(works={"r": reporter})
    handle = zeus.dispatch(Brief(agent="r", scope="x"))
    stream = handle.events()
    reporter.go.set()
    events = list(stream)  # ends by itself after delegation.settled
    assert names(events)[-1] == "delegation.settled"
    assert names(events).count("attempt.partial") == 3
    progress = [e["progress"] for e in events if e["event"] == "attempt.progress"]
    assert progress == [1, 2, 3, 4]  # every change: three partials and a charge
    assert all(e["delegation_id"] == handle.id for e in events)
    partial = next(e for e in events if e["event"] == "attempt.partial")
    assert "alpha" in partial["item"] and len(partial["item"]) <= 200  # the short text
    # The journal has the partials, never the progress events.
    assert recorder.names().count("attempt.partial") == 3
    assert "attempt.progress" not in recorder.names()


def test_many_subscribers_sync_and_async_each_see_everything(make_zeus: ZeusFactory) -> None:
    reporter = Reporter()
    zeus = make_zeus(works={"r": reporter})
    handle = zeus.dispatch(Brief(agent="r", scope="x"))
    streams = [handle.events() for _ in range(3)]
    seen: list[list[str]] = []

    def consume_sync() -> None:
        seen.append(names(list(streams[0])))

    async def consume_async(index: int, reading: asyncio.Event) -> list[str]:
        reading.set()
        return [e["event"] async for e in streams[index]]

    async def main() -> list[list[str]]:
        consumer = threading.Thread(target=consume_sync)
        consumer.start()
        reading = [asyncio.Event(), asyncio.Event()]
        tasks = [asyncio.ensure_future(consume_async(i, reading[i - 1])) for i in (1, 2)]
        for each in reading:
            await each.wait()  # both tasks read their streams while the child runs
        reporter.go.set()
        result = list(await asyncio.gather(*tasks))
        consumer.join(10)
        return result

    seen.extend(asyncio.run(main()))
    assert len(seen) == 3
    assert seen[0] == seen[1] == seen[2]
    assert seen[0][-1] == "delegation.settled"


def test_a_stream_of_a_settled_delegation_ends_at_once(make_zeus: ZeusFactory) -> None:
    reporter = Reporter()
    reporter.go.set()
    zeus = make_zeus(works={"r": reporter})
    handle = zeus.dispatch(Brief(agent="r", scope="x"))
    handle.result(10)
    assert list(handle.events()) == []
    assert event_costs(zeus).subscribed is False  # nothing left subscribed


def test_closing_a_stream_unsubscribes(make_zeus: ZeusFactory) -> None:
    reporter = Reporter()
    zeus = make_zeus(works={"r": reporter}, log=None)
    handle = zeus.dispatch(Brief(agent="r", scope="x"))
    stream = handle.events()
    assert event_costs(zeus).enabled
    stream.close()
    assert not event_costs(zeus).enabled  # no journal, no subscriber: events cost nothing again
    reporter.go.set()
    handle.result(10)
    assert list(stream) == []


def test_no_subscriber_costs_zeus_nothing(make_zeus: ZeusFactory) -> None:
    """Counted, not timed: without a subscriber the actor never builds an event for one."""
    reporter = Reporter()
    reporter.go.set()
    zeus = make_zeus(works={"r": reporter}, log=None)
    for i in range(20):
        zeus.dispatch(Brief(agent="r", scope=str(i))).result(10)
    assert event_costs(zeus).published == 0
    assert not event_costs(zeus).enabled


def test_a_subscriber_gets_only_its_own_delegation(make_zeus: ZeusFactory) -> None:
    watched, other = Reporter(), Reporter()
    zeus = make_zeus(works={"w": watched, "o": other}, log=None)
    handle = zeus.dispatch(Brief(agent="w", scope="x"))
    sync(zeus)  # the watched one has started: nothing more of it until `go`
    stream = handle.events()
    unwatched = zeus.dispatch(Brief(agent="o", scope="y"))
    other.go.set()
    unwatched.result(10)
    sync(zeus)
    published_meanwhile = event_costs(zeus).published
    watched.go.set()
    events = list(stream)
    assert published_meanwhile == 0  # the other delegation's events reached nobody
    assert {e["delegation_id"] for e in events} == {handle.id}


def test_a_watched_dispatch_streams_every_event_from_the_first(make_zeus: ZeusFactory) -> None:
    """Zeus may run the delegation to its end before the host asks for its events: a
    stream opened at the dispatch still holds them all, a later one none."""
    reporter = Reporter()
    reporter.go.set()
    zeus = make_zeus(works={"r": reporter})
    watched = zeus.dispatch(Brief(agent="r", scope="x"), watch=True)
    unwatched = zeus.dispatch(Brief(agent="r", scope="y"))
    watched.result(10)
    unwatched.result(10)
    seen = names(list(watched.events()))
    assert seen[0] == "delegation.dispatched" and seen[-1] == "delegation.settled"
    assert "attempt.started" in seen and seen.count("attempt.partial") == 3
    assert list(unwatched.events()) == []
    assert list(watched.events()) == []  # the stream opened at the dispatch is given once
    assert event_costs(zeus).subscribed is False
