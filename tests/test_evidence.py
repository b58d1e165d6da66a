"""What a stopped attempt leaves behind (docs/design.md, "Stopping a child"), what a
retry knows, the reasoning effort, and long tool calls (thread children, fake clock)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from actors import Brief, Context, Status, Summary, TransientError
from actors.clock import FakeClock
from supervisor import Routing, RoutingError
from supervisor.cli.render import attempt_label, evidence
from supervisor.journal import runs as jr
from supervisor.testing import sync
from tests.conftest import Recorder, ZeusFactory

WAIT = 10.0


def test_a_stopped_attempt_keeps_its_tool_calls_last_tool_and_last_note(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    busy = threading.Event()

    def tester(brief: Brief, ctx: Context) -> None:
        for n in range(14):
            ctx.tool_call("grep" if n < 13 else "pytest", read_only=True)
        ctx.heartbeat("running the suite")
        busy.set()
        ctx.sleep(600)

    zeus = make_zeus({"t": {"timeout_s": 30, "heartbeat": {"stale_after_s": 1000}}},
                     works={"t": tester})
    handle = zeus.dispatch(Brief(agent="t", scope="s"))
    assert busy.wait(WAIT)
    sync(zeus)
    node = zeus.tree()["delegations"][0]["attempts"][0]
    assert (node["tool_calls"], node["last_tool"]) == (14, "pytest")
    clock.advance(30)
    summary = handle.result(WAIT)
    (record,) = summary.attempts
    assert (record.outcome, record.tool_calls, record.last_tool, record.last_note) == (
        "timeout", 14, "pytest", "running the suite")
    assert record.progress == 15
    text = summary.render()
    assert "pytest" in text and "running the suite" in text
    assert Summary.parse(text).attempts[0].tool_calls == 14
    (failed,) = recorder.named("attempt.failed")
    assert (failed["tool_calls"], failed["last_tool"]) == (14, "pytest")


def test_the_last_note_kept_is_the_last_one_said_not_the_first_of_a_burst(
    make_zeus: ZeusFactory, clock: FakeClock
) -> None:
    waiting = threading.Event()

    def chatty(brief: Brief, ctx: Context) -> str:
        for n in range(1, 6):  # within one heartbeat interval: one heartbeat is sent
            ctx.heartbeat(f"note {n} of 5")
        if brief.scope == "waits":
            waiting.set()
            ctx.sleep(600)
        return "done"

    zeus = make_zeus({"t": {"timeout_s": 30, "heartbeat": {"stale_after_s": 1000}}},
                     works={"t": chatty})
    (done,) = zeus.dispatch(Brief(agent="t", scope="s")).result(WAIT).attempts
    assert done.last_note == "note 5 of 5"
    handle = zeus.dispatch(Brief(agent="t", scope="waits"))
    assert waiting.wait(WAIT)
    sync(zeus)
    assert zeus.tree()["delegations"][0]["attempts"][0]["last_note"] == "note 5 of 5"
    clock.advance(30)
    (stopped,) = handle.result(WAIT).attempts
    assert (stopped.outcome, stopped.last_note) == ("timeout", "note 5 of 5")


@pytest.mark.parametrize(
    ("outcome", "calls", "tool", "told"),
    [
        ("timeout", 14, "pytest", "timed out after 14 tool calls, last: pytest"),
        ("stale", 1, "grep", "timed out after 1 tool call, last: grep"),
        ("crash", 3, None, "crashed after 3 tool calls"),
        ("budget_exceeded", 2, "llm", "over budget after 2 tool calls, last: llm"),
        ("completed", 14, "pytest", None),
        ("timeout", 0, None, None),
        (None, 3, "grep", None),
    ],
)
def test_the_tree_tells_a_stopped_attempts_evidence_in_words(
    outcome: str | None, calls: int, tool: str | None, told: str | None
) -> None:
    assert evidence(outcome, calls, tool) == told


def test_an_ended_attempt_label_in_the_tree_carries_its_evidence() -> None:
    a = jr.ReplayedAttempt(id="t-1-a1", delegation_id="t-1", agent="t", outcome="timeout",
                   duration_s=30.0, tool_calls=14, last_tool="pytest")
    assert "timed out after 14 tool calls, last: pytest" in attempt_label(a)


def test_a_retry_knows_how_the_previous_attempt_ended(make_zeus: ZeusFactory) -> None:
    seen: list[str | None] = []

    def flaky(brief: Brief, ctx: Context) -> str:
        seen.append(ctx.previous_error)
        if ctx.attempt == 1:
            raise TransientError("rate limited, retry in 2 s")
        return "ok"

    zeus = make_zeus({"f": {"retry": {"max_retries": 1, "backoff": "none"}}},
                     works={"f": flaky})
    assert zeus.dispatch(Brief(agent="f", scope="s")).result(WAIT).ok
    assert seen[0] is None
    assert seen[1] == "transient: TransientError: rate limited, retry in 2 s"


def test_the_policys_reasoning_effort_reaches_the_child_and_its_framing(
    make_zeus: ZeusFactory,
) -> None:
    def report(brief: Brief, ctx: Context) -> Any:
        return {"effort": ctx.reasoning_effort, "framing": ctx.framing}

    zeus = make_zeus({"high": {"reasoning_effort": "high"}, "plain": {}},
                     works={"high": report, "plain": report})
    high = zeus.dispatch(Brief(agent="high", scope="s")).result(WAIT).output
    plain = zeus.dispatch(Brief(agent="plain", scope="s")).result(WAIT).output
    assert high["effort"] == "high" and "Reasoning effort: high." in high["framing"]
    assert plain["effort"] is None and "Reasoning effort" not in plain["framing"]


# -- long tool calls -------------------------------------------------------------------


def test_inside_a_long_tool_call_staleness_uses_stale_in_tool_s(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    inside = threading.Event()

    def tester(brief: Brief, ctx: Context) -> None:
        with ctx.tool("pytest", read_only=True):
            inside.set()
            ctx.sleep(600)  # a test suite that runs for minutes and reports nothing

    zeus = make_zeus(
        {"t": {"timeout_s": 300, "heartbeat": {"interval_s": 1, "stale_after_s": 10}}},
        works={"t": tester},
    )
    handle = zeus.dispatch(Brief(agent="t", scope="s"))
    assert inside.wait(WAIT)
    sync(zeus)
    assert zeus.tree()["delegations"][0]["attempts"][0]["in_tool"] == "pytest"
    clock.advance(29.9)  # default stale_in_tool_s: 3 x stale_after_s
    sync(zeus)
    assert not handle.done()
    clock.advance(0.1)
    summary = handle.result(WAIT)
    assert (summary.status, summary.timeout_kind) == (Status.timed_out, "stale")
    assert (summary.attempts[0].error or "").startswith(
        "no progress for 30 s (stale; heartbeat.stale_in_tool_s) inside tool pytest")


def test_after_a_long_tool_call_the_usual_stale_threshold_applies_again(
    make_zeus: ZeusFactory, clock: FakeClock
) -> None:
    after = threading.Event()

    def tester(brief: Brief, ctx: Context) -> None:
        with ctx.tool("build", read_only=True):
            pass
        after.set()
        ctx.sleep(600)

    zeus = make_zeus(
        {"t": {"timeout_s": 300,
               "heartbeat": {"interval_s": 1, "stale_after_s": 10, "stale_in_tool_s": 100}}},
        works={"t": tester},
    )
    handle = zeus.dispatch(Brief(agent="t", scope="s"))
    assert after.wait(WAIT)
    sync(zeus)
    clock.advance(10)
    summary = handle.result(WAIT)
    assert (summary.status, summary.timeout_kind) == (Status.timed_out, "stale")
    assert summary.attempts[0].tool_calls == 1
    assert (summary.attempts[0].error or "").startswith(  # the key that set the threshold
        "no progress for 10 s (stale; heartbeat.stale_after_s)")


def test_a_long_tool_call_with_side_effects_blocks_a_blind_retry(
    make_zeus: ZeusFactory,
) -> None:
    runs: list[int] = []

    def deployer(brief: Brief, ctx: Context) -> None:
        runs.append(ctx.attempt)
        with ctx.tool("deploy"):  # read_only=False is the default
            pass
        raise TransientError("the deploy's status check timed out")

    zeus = make_zeus({"d": {"retry": {"max_retries": 2, "backoff": "none"}}},
                     works={"d": deployer})
    summary = zeus.dispatch(Brief(agent="d", scope="s")).result(WAIT)
    assert summary.status is Status.failed and runs == [1]


def test_stale_in_tool_s_below_stale_after_s_is_refused_naming_both() -> None:
    with pytest.raises(RoutingError, match=r"stale_in_tool_s 5 is below stale_after_s 10"):
        Routing.from_dict({"version": 1, "agents": {"t": {
            "heartbeat": {"stale_after_s": 10, "stale_in_tool_s": 5}}}})


def test_an_unknown_intensity_scope_is_refused_listing_the_two() -> None:
    with pytest.raises(RoutingError, match=r"'agent' or 'supervisor'"):
        Routing.from_dict({"version": 1, "supervisor": {"intensity": {"scope": "tree"}},
                           "agents": {"t": {}}})


def test_the_live_tree_row_shows_tool_calls_and_then_the_stopped_attempts_evidence(
    make_zeus: ZeusFactory, clock: FakeClock
) -> None:
    from supervisor.cli.live import LiveTree

    live = LiveTree(None)
    inside = threading.Event()

    def tester(brief: Brief, ctx: Context) -> None:
        for _ in range(13):
            ctx.tool_call("grep", read_only=True)
        with ctx.tool("pytest", read_only=True):
            inside.set()
            ctx.sleep(600)

    zeus = make_zeus({"t": {"timeout_s": 30, "heartbeat": {"stale_after_s": 1000}}},
                     works={"t": tester}, log=live)
    with live.show(zeus):
        handle = zeus.dispatch(Brief(agent="t", scope="s"))
        assert inside.wait(WAIT)
        sync(zeus)
        live._poll()
        assert "14 tool calls, in pytest" in live.render_plain()
        clock.advance(30)
        handle.result(WAIT)
        sync(zeus)
    assert "timed out after 14 tool calls, last: pytest" in live.render_plain()
