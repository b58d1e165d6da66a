"""The tree: nested delegation, roles and depth, deadline and budget trees, cancel
propagation, group strategies, restart intensity, and reviewed tasks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from actors import Brief, Context, Report, Status, TransientError
from actors.clock import FakeClock
from supervisor import DelegationRefused, SupervisorError
from supervisor.testing import sync
from tests._support import wait_cancelled
from tests.conftest import Recorder, ZeusFactory

ORCH = {"kind": "orchestrator"}
LEAF = {"kind": "leaf", "heartbeat": {"stale_after_s": 1000}}


def leaf_ok(brief: Brief, ctx: Context) -> str:
    ctx.charge(calls=1, cost=0.1)
    return f"leaf did {brief.scope}"


def delegating(brief: Brief, ctx: Context) -> Any:
    summary = ctx.delegate(Brief(agent=brief.scope, scope="sub"))
    return {"child": summary.id, "status": summary.status.value, "output": summary.output}


def test_an_orchestrator_gets_its_childs_summary_and_the_child_sits_below_it(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    zeus = make_zeus({"athena": ORCH, "apollo": LEAF},
                     works={"athena": delegating, "apollo": leaf_ok})
    summary = zeus.dispatch(Brief(agent="athena", scope="apollo")).result(10)
    assert summary.output == {"child": "apollo-1", "status": "completed",
                              "output": "leaf did sub"}
    child = [e for e in recorder.named("delegation.dispatched") if e["delegation_id"] == "apollo-1"]
    assert child[0]["parent_id"] == "athena-1" and child[0]["depth"] == 2
    assert summary.usage.cost == pytest.approx(0.1)  # a child's charges roll up


def test_a_leaf_that_delegates_is_refused_and_told_to_do_the_work_itself(
    make_zeus: ZeusFactory,
) -> None:
    caught: list[BaseException] = []

    def leafy(brief: Brief, ctx: Context) -> str:
        try:
            ctx.delegate(Brief(agent="apollo", scope="x"))
        except DelegationRefused as exc:
            caught.append(exc)
            return "did it myself"
        return "delegated"

    zeus = make_zeus({"hermes": LEAF, "apollo": LEAF}, works={"hermes": leafy, "apollo": leaf_ok})
    summary = zeus.dispatch(Brief(agent="hermes", scope="s")).result(10)
    assert summary.output == "did it myself"
    assert "leaf" in str(caught[0]) and "do the work yourself" in str(caught[0])
    assert isinstance(caught[0], SupervisorError)


def test_max_depth_is_enforced(make_zeus: ZeusFactory) -> None:
    def chain(brief: Brief, ctx: Context) -> Any:
        try:
            return ctx.delegate(Brief(agent="athena", scope="deeper")).output
        except DelegationRefused as exc:
            return f"refused at depth {ctx.depth}: {exc}"

    zeus = make_zeus({"athena": ORCH}, supervisor={"max_depth": 2}, works={"athena": chain})
    summary = zeus.dispatch(Brief(agent="athena", scope="top")).result(10)
    assert summary.output.startswith("refused at depth 2")
    assert "max_depth 2" in summary.output


def test_can_delegate_to_limits_the_targets(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus(
        {"athena": {**ORCH, "can_delegate_to": ["apollo"]}, "apollo": LEAF, "hermes": LEAF},
        works={"athena": delegating, "apollo": leaf_ok, "hermes": leaf_ok},
    )
    assert zeus.dispatch(Brief(agent="athena", scope="apollo")).result(10).ok
    refused = zeus.dispatch(Brief(agent="athena", scope="hermes")).result(10)
    assert refused.status is Status.failed
    assert refused.error is not None and "may delegate only to ['apollo']" in refused.error


def test_a_nested_deadline_is_capped_by_the_parents_remaining_time(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    gate = threading.Event()

    def late_delegator(brief: Brief, ctx: Context) -> Any:
        gate.wait(10)
        return delegating(brief, ctx)

    zeus = make_zeus({"athena": {**ORCH, "timeout_s": 10}, "apollo": {**LEAF, "timeout_s": 60}},
                     works={"athena": late_delegator, "apollo": wait_cancelled})
    handle = zeus.dispatch(Brief(agent="athena", scope="apollo"))
    recorder.wait_for("attempt.started", count=1)
    clock.advance(4)
    gate.set()
    recorder.wait_for("attempt.started", count=2)
    child_started = recorder.named("attempt.started")[1]
    assert child_started["delegation_id"] == "apollo-1"
    assert child_started["deadline_s"] == 6.0  # the parent's remaining time, not 60
    clock.advance(6)
    summary = handle.result(10)
    assert summary.status is Status.timed_out


def test_a_childs_timeout_leaves_its_parent_running(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    zeus = make_zeus({"athena": {**ORCH, "timeout_s": 100}, "apollo": {**LEAF, "timeout_s": 5}},
                     works={"athena": delegating, "apollo": wait_cancelled})
    handle = zeus.dispatch(Brief(agent="athena", scope="apollo"))
    recorder.wait_for("attempt.started", count=2)
    clock.advance(5)
    summary = handle.result(10)
    assert summary.status is Status.completed
    assert summary.output["status"] == "timed_out"


def test_cancelling_a_parent_cancels_its_whole_subtree(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    def fan_out(brief: Brief, ctx: Context) -> Any:
        if ctx.depth < 3:
            return ctx.delegate(Brief(agent="athena", scope=f"level {ctx.depth + 1}")).status
        ctx.sleep(60)
        return "bottom"

    zeus = make_zeus({"athena": ORCH}, supervisor={"max_depth": 3}, works={"athena": fan_out})
    handle = zeus.dispatch(Brief(agent="athena", scope="level 1"))
    recorder.wait_for("attempt.started", count=3)
    handle.cancel("the owner moved on")
    assert handle.result(10).status is Status.cancelled
    settled = recorder.wait_for("delegation.settled", count=3)
    assert {e["delegation_id"]: e["status"] for e in settled} == {
        "athena-1": "cancelled", "athena-2": "cancelled", "athena-3": "cancelled"}


def test_a_childs_charges_count_against_the_parents_budget(make_zeus: ZeusFactory) -> None:
    def spender(brief: Brief, ctx: Context) -> str:
        ctx.charge(cost=0.7)
        ctx.charge(cost=0.7)
        ctx.sleep(60)
        return "never"

    zeus = make_zeus({"athena": {**ORCH, "budget": {"max_cost": 1.0}}, "apollo": LEAF},
                     works={"athena": delegating, "apollo": spender})
    summary = zeus.dispatch(Brief(agent="athena", scope="apollo")).result(10)
    assert summary.status is Status.budget_exceeded
    assert summary.usage.cost == pytest.approx(1.4)


# -- groups -------------------------------------------------------------------------------


def group_worker(fail_first: set[str]) -> Any:
    def work(brief: Brief, ctx: Context) -> str:
        if brief.scope in fail_first and ctx.attempt == 1:
            ctx.heartbeat()
            raise TransientError(f"{brief.scope} failed")
        if brief.scope.startswith("slow"):
            ctx.sleep(60) if ctx.attempt == 1 else None
        return f"{brief.scope} ok on attempt {ctx.attempt}"

    return work


@pytest.mark.parametrize(
    ("strategy", "restarted"),
    [
        ("one_for_one", set()),
        ("one_for_all", {"slow-a", "slow-c"}),
        ("rest_for_one", {"slow-c"}),
    ],
)
def test_group_strategies_restart_exactly_the_right_siblings(
    make_zeus: ZeusFactory, recorder: Recorder, strategy: str, restarted: set[str]
) -> None:
    policy = {"retry": {"max_retries": 1, "backoff": "none"}, **LEAF}
    zeus = make_zeus({"w": policy}, works={"w": group_worker({"fails"})})
    group = zeus.dispatch_group(
        [Brief(agent="w", scope=s) for s in ("slow-a", "fails", "slow-c")],
        strategy=strategy,  # type: ignore[arg-type]
    )
    # "fails" retries and completes, and so does every restarted sibling; the others
    # would sleep on, so the owner cancels them.
    recorder.wait_for("delegation.settled", count=1 + len(restarted))
    sync(zeus)
    group.cancel("enough")
    summaries = group.results(timeout=10)
    assert [s.scope for s in summaries] == ["slow-a", "fails", "slow-c"]  # brief order
    got = {s.scope for s in summaries if any(a.outcome == "cancelled" for a in s.attempts)
           and s.status is Status.completed}
    assert got == restarted
    for s in summaries:
        if s.scope in restarted:
            assert s.output == f"{s.scope} ok on attempt 2"
            assert "sibling" in (s.attempts[0].error or "")


def test_an_unknown_strategy_is_refused_before_anything_is_dispatched(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    zeus = make_zeus({"w": LEAF}, works={"w": leaf_ok})
    with pytest.raises(SupervisorError, match="one_for_all"):
        zeus.dispatch_group([Brief(agent="w", scope="x")], strategy="all_for_one")  # type: ignore[arg-type]
    sync(zeus)
    assert recorder.named("delegation.dispatched") == []


# -- restart intensity ------------------------------------------------------------------


def test_a_restart_storm_with_scope_supervisor_escalates_as_in_otp(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    def always_flaky(brief: Brief, ctx: Context) -> None:
        raise TransientError("down again")

    zeus = make_zeus(
        {"f": {"retry": {"max_retries": 100, "backoff": "none"}, **LEAF}, "w": LEAF},
        supervisor={"intensity": {"max_restarts": 5, "within_s": 60, "scope": "supervisor"}},
        works={"f": always_flaky, "w": wait_cancelled},
    )
    bystander = zeus.dispatch(Brief(agent="w", scope="innocent"))
    recorder.wait_for("attempt.started")
    storm = zeus.dispatch(Brief(agent="f", scope="storm"))
    summary = storm.result(10)
    assert summary.status is Status.failed
    assert summary.error is not None and "restart intensity exceeded" in summary.error
    assert len(summary.attempts) == 6  # five restarts allowed, the sixth is refused
    (event,) = recorder.named("supervisor.intensity_exceeded")
    assert (event["restarts"], event["agent"], event["scope"]) == (6, "f", "supervisor")
    assert bystander.result(10).status is Status.failed  # its supervisor gave up on it too


# -- tasks: performer then review ----------------------------------------------------------


def reviewer(verdict: str) -> Any:
    def review(brief: Brief, ctx: Context) -> Report:
        assert brief.inputs["output"] == "patched auth.py"
        performer = brief.inputs["performer"]
        return Report(output={"verdict": verdict}, findings=[f"looked at {performer}"])

    return review


@pytest.mark.parametrize(("verdict", "status"), [("approve", Status.completed),
                                                 ("reject", Status.blocked)])
def test_a_task_is_reviewed_and_a_rejecting_review_blocks_it(
    make_zeus: ZeusFactory, recorder: Recorder, verdict: str, status: Status
) -> None:
    def implement(brief: Brief, ctx: Context) -> str:
        return "patched auth.py"

    zeus = make_zeus({"hermes": {**LEAF, "review_by": "themis"}, "themis": LEAF},
                     works={"hermes": implement, "themis": reviewer(verdict)})
    summary = zeus.dispatch(Brief(agent="hermes", scope="fix auth", mode="task")).result(10)
    assert summary.status is status
    assert summary.output == "patched auth.py"
    assert "review: looked at hermes" in summary.findings
    assert any(v.startswith("review themis-1") for v in summary.validation)
    review = [e for e in recorder.named("delegation.dispatched") if e["agent"] == "themis"]
    assert review[0]["parent_id"] == "hermes-1"


def test_a_subtask_skips_the_review(make_zeus: ZeusFactory, recorder: Recorder) -> None:
    zeus = make_zeus({"hermes": {**LEAF, "review_by": "themis"}, "themis": LEAF},
                     works={"hermes": leaf_ok, "themis": reviewer("reject")})
    assert zeus.dispatch(Brief(agent="hermes", scope="s")).result(10).ok
    assert [e["agent"] for e in recorder.named("delegation.dispatched")] == ["hermes"]


def framing_reader() -> tuple[list[str], Callable[[Brief, Context], str]]:
    """A work function that keeps each framing it is given, and the list it keeps."""
    framings: list[str] = []

    def look(brief: Brief, ctx: Context) -> str:
        framings.append(ctx.framing)
        return "ok"

    return framings, look


def test_the_role_framing_tells_a_child_its_role_depth_deadline_and_budget(
    make_zeus: ZeusFactory,
) -> None:
    framings, look = framing_reader()
    zeus = make_zeus({"athena": {**ORCH, "timeout_s": 30, "budget": {"max_cost": 2}},
                      "apollo": LEAF}, works={"athena": look, "apollo": look})
    zeus.dispatch(Brief(agent="athena", scope="s")).result(10)
    zeus.dispatch(Brief(agent="apollo", scope="s")).result(10)
    assert "orchestrator at depth 1 of 2" in framings[0] and "apollo" in framings[0]
    assert "Deadline: 30 s" in framings[0] and "cost 0/2" in framings[0]
    assert "leaf" in framings[1] and "do not delegate" in framings[1]


def test_an_agent_registered_later_shows_in_an_orchestrators_framing(
    make_zeus: ZeusFactory,
) -> None:
    framings, look = framing_reader()
    zeus = make_zeus({"athena": {**ORCH, "timeout_s": 30}, "apollo": LEAF},
                     works={"athena": look, "apollo": look})
    zeus.dispatch(Brief(agent="athena", scope="s")).result(10)
    zeus.register("hermes", look)
    zeus.dispatch(Brief(agent="athena", scope="s")).result(10)
    assert "delegate to: apollo." in framings[0]
    assert "delegate to: apollo, hermes." in framings[1]
    assert framings[0].split("\n")[2:] == framings[1].split("\n")[2:]  # the same time left


def test_stop_settles_the_whole_tree(make_zeus: ZeusFactory, recorder: Recorder) -> None:
    zeus = make_zeus({"athena": ORCH, "apollo": LEAF},
                     works={"athena": delegating, "apollo": wait_cancelled})
    handle = zeus.dispatch(Brief(agent="athena", scope="apollo"))
    recorder.wait_for("attempt.started", count=2)
    zeus.stop(timeout=5)
    assert handle.result(0).status is Status.cancelled
    assert {e["delegation_id"] for e in recorder.named("delegation.settled")} == {
        "athena-1", "apollo-1"}
