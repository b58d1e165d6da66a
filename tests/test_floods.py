"""A supervisor that cannot be starved: floods are bounded at the sender, and how late the
mailbox runs is measured, reported in `tree()` and, past a threshold, as an event."""

from __future__ import annotations

import threading

import pytest

from actors import Brief, Context, Status
from actors.clock import FakeClock
from actors.context import MAX_PARTIALS_SENT
from supervisor import Routing, Zeus
from supervisor.rules.lag import WARN_EVERY_S, MailboxLag
from supervisor.rules.lag import WARN_S as LAG_WARN_S
from supervisor.testing import held, queued, sync
from tests._support import wait_cancelled
from tests.conftest import Recorder, ZeusFactory

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
    sync(zeus)
    with held(zeus):
        go.set()
        assert flooded.wait(30)
        in_mailbox = queued(zeus)
    assert in_mailbox <= MAX_PARTIALS_SENT + 10
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


def test_a_deadline_handled_late_is_measured_as_mailbox_lag_and_reported(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    zeus = make_zeus({"h": {"timeout_s": 1, "heartbeat": {"stale_after_s": 600}}},
                     works={"h": wait_cancelled})
    handle = zeus.dispatch(Brief(agent="h", scope="s"))
    sync(zeus)
    with held(zeus):
        clock.advance(3.0)  # the deadline falls due at +1 s; Zeus gets to it at +3 s
    assert handle.result(10).status is Status.timed_out
    lag = recorder.named("supervisor.mailbox_lag")
    assert [(e["lag_s"], e["threshold_s"]) for e in lag] == [(2.0, LAG_WARN_S)]
    assert zeus.tree()["mailbox_lag"] == {"last_s": 2.0, "max_s": 2.0, "samples": 1}


def test_a_prompt_deadline_is_no_lag_and_emits_nothing(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    zeus = make_zeus({"h": {"timeout_s": 1, "heartbeat": {"stale_after_s": 600}}},
                     works={"h": wait_cancelled})
    handle = zeus.dispatch(Brief(agent="h", scope="s"))
    sync(zeus)
    clock.advance(1.0)
    assert handle.result(10).status is Status.timed_out
    assert recorder.named("supervisor.mailbox_lag") == []
    assert zeus.tree()["mailbox_lag"]["max_s"] == 0.0


@pytest.mark.parametrize(
    ("lag", "now", "warned_at", "warn"),
    [
        (0.1, 10.0, float("-inf"), False),  # under the threshold
        (LAG_WARN_S, 10.0, float("-inf"), True),  # at the threshold
        (2.0, 10.0, 9.0, False),  # warned a second ago
        (2.0, 10.0, 10.0 - WARN_EVERY_S, True),  # warned long enough ago
    ],
)
def test_mailbox_lag_warns_past_its_threshold_at_most_once_per_period(
    lag: float, now: float, warned_at: float, warn: bool
) -> None:
    record, emit = MailboxLag(warned_at=warned_at).observe(now - lag, now)
    assert emit is warn
    assert record.last_s == pytest.approx(lag)
    assert record.warned_at == (now if warn else warned_at)
