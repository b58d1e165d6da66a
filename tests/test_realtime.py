"""A few runs on the real clock, with loose bounds: thread children that really hang."""

from __future__ import annotations

import threading
import time

import pytest

from actors import Brief, Context, Status
from supervisor import Routing, Zeus

pytestmark = pytest.mark.realtime


def test_a_thread_that_stops_reporting_goes_stale_on_the_real_clock() -> None:
    def quiet(brief: Brief, ctx: Context) -> None:
        ctx.partial("one")
        ctx.sleep(60)

    r = Routing.from_dict({"version": 1, "agents": {"q": {
        "timeout_s": 30, "heartbeat": {"interval_s": 0.05, "stale_after_s": 0.3}}}})
    with Zeus.start(r, agents={"q": quiet}) as zeus:
        started = time.monotonic()
        summary = zeus.dispatch(Brief(agent="q", scope="s")).result(10)
        elapsed = time.monotonic() - started
    assert (summary.status, summary.timeout_kind) == (Status.timed_out, "stale")
    assert 0.3 <= elapsed < 10.0


def test_a_thread_deaf_to_cancel_is_fenced_after_grace_and_zeus_stops_anyway() -> None:
    release = threading.Event()

    def deaf(brief: Brief, ctx: Context) -> str:
        release.wait(30)
        return "too late"

    r = Routing.from_dict({"version": 1, "agents": {"d": {
        "timeout_s": 0.2, "read_only": False, "shutdown": {"grace_s": 0.2}}}})
    zeus = Zeus.start(r, agents={"d": deaf})
    try:
        started = time.monotonic()
        summary = zeus.dispatch(Brief(agent="d", scope="s")).result(10)
        elapsed = time.monotonic() - started
        assert summary.status is Status.timed_out
        assert summary.attempts[0].fenced
        assert 0.4 <= elapsed < 10.0
        assert zeus.tree()["abandoned_threads"] == 1
        stop_started = time.monotonic()
        zeus.stop(timeout=2)
        assert time.monotonic() - stop_started < 5.0
    finally:
        release.set()
        zeus.stop(timeout=2)
