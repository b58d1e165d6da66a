"""A child that floods cannot fill Zeus's mailbox: partial results are bounded at the sender."""

from __future__ import annotations

import threading

import pytest

from actors import Brief, Context, Status
from actors.context import MAX_PARTIALS_SENT
from supervisor import Routing, Zeus
from tests.conftest import ZeusFactory

FLOOD = MAX_PARTIALS_SENT + 40_000


def test_a_thread_child_flooding_partials_puts_at_most_the_cap_in_the_mailbox(
    make_zeus: ZeusFactory,
) -> None:
    go, flooded = threading.Event(), threading.Event()

    def flood(brief: Brief, ctx: Context) -> str:
        go.wait(10)
        for i in range(FLOOD):
            ctx.partial(i)
        flooded.set()
        return "done"

    zeus = make_zeus({"f": {"timeout_s": 60}}, works={"f": flood})
    handle = zeus.dispatch(Brief(agent="f", scope="s"))
    zeus.sync()
    with zeus.held():
        go.set()
        assert flooded.wait(30)
        queued = zeus._ref.actor_inbox.qsize()
    assert queued <= MAX_PARTIALS_SENT + 10
    summary = handle.result(30)
    assert summary.status is Status.completed
    assert len(summary.partial_results) == MAX_PARTIALS_SENT
    assert any(f"{FLOOD - MAX_PARTIALS_SENT} partial results dropped" in r for r in summary.risks)


@pytest.mark.process
@pytest.mark.realtime
def test_a_process_child_flooding_partials_is_bounded_and_counted_alike() -> None:
    def flood(brief: Brief, ctx: Context) -> str:
        for i in range(FLOOD):
            ctx.partial(i)
        return "done"

    r = Routing.from_dict({"version": 1, "agents": {"p": {"isolation": "process",
                                                          "timeout_s": 60}}})
    with Zeus.start(r, agents={"p": flood}) as zeus:
        summary = zeus.dispatch(Brief(agent="p", scope="s")).result(30)
    assert summary.status is Status.completed
    assert len(summary.partial_results) == MAX_PARTIALS_SENT
    assert any(f"{FLOOD - MAX_PARTIALS_SENT} partial results dropped" in r for r in summary.risks)
