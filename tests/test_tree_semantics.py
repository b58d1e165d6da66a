"""The tree's semantics (docs/design.md) on thread children with a fake clock: waiting
orchestrators are working, restart intensity per agent, late spend, cancellation points,
side effects as a tree, kept output, writers never partial, and a handler failure raised
to the host."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from actors import Brief, Cancelled, Context, Status, TransientError
from actors.backends import ChildSpec, ThreadChild
from actors.clock import FakeClock
from supervisor import DelegationRefused
from supervisor.testing import sync
from tests._support import Steps, wait_cancelled
from tests.conftest import Recorder, ZeusFactory

WAIT = 10.0  # a safety bound on waits, never the thing asserted


# -- 1. an orchestrator waiting on its children is working --------------------------------


def test_a_parent_is_never_stale_while_its_child_makes_progress(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    steps = Steps()

    def apollo(brief: Brief, ctx: Context) -> str:
        for _ in range(5):
            steps.wait()
            ctx.heartbeat("reading files")  # progress, 6 s apart: never stale itself
            steps.did()
        return "found 7 files"

    def athena(brief: Brief, ctx: Context) -> Any:
        return ctx.delegate(Brief(agent="apollo", scope="find")).output

    beat = {"interval_s": 1, "stale_after_s": 10}
    zeus = make_zeus(
        {"athena": {"kind": "orchestrator", "timeout_s": 300, "heartbeat": beat},
         "apollo": {"timeout_s": 300, "heartbeat": beat}},
        works={"athena": athena, "apollo": apollo},
    )
    handle = zeus.dispatch(Brief(agent="athena", scope="plan"))
    recorder.wait_for("attempt.started", count=2)
    for _ in range(5):  # 30 s in all: three times athena's stale_after_s
        clock.advance(6)
        steps.step()
        sync(zeus)
    summary = handle.result(WAIT)
    assert summary.status is Status.completed, summary.error
    assert summary.output == "found 7 files"
    assert recorder.named("attempt.stale") == []


def test_a_waiting_parents_own_deadline_still_holds(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    steps = Steps()

    def apollo(brief: Brief, ctx: Context) -> None:
        while True:
            steps.wait()
            ctx.partial("one more file")
            steps.did()

    def athena(brief: Brief, ctx: Context) -> Any:
        return ctx.delegate(Brief(agent="apollo", scope="find")).output

    beat = {"interval_s": 1, "stale_after_s": 10}
    zeus = make_zeus(
        {"athena": {"kind": "orchestrator", "timeout_s": 20, "heartbeat": beat,
                    "shutdown": {"grace_s": 0}},
         "apollo": {"timeout_s": 300, "heartbeat": beat, "read_only": True}},
        works={"athena": athena, "apollo": apollo},
    )
    handle = zeus.dispatch(Brief(agent="athena", scope="plan"))
    recorder.wait_for("attempt.started", count=2)
    for _ in range(3):
        clock.advance(6)
        steps.step()
        sync(zeus)
    clock.advance(2)  # 20 s: athena's deadline
    summary = handle.result(WAIT)
    assert (summary.status, summary.timeout_kind) == (Status.timed_out, "deadline")
    steps.let_go()  # apollo was cancelled with its parent: its next partial raises


def test_the_stale_clock_starts_at_the_first_sign_of_life_not_at_dispatch(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    go, alive = threading.Event(), threading.Event()

    class LateThreads:
        """Thread children whose threads start only when the test says so (a loaded host)."""

        def start(self, spec: ChildSpec, send: Callable[[object], None]) -> ThreadChild:
            child = ThreadChild(spec, send)

            def run() -> None:
                go.wait(WAIT)
                child.report(child.run())

            threading.Thread(target=run, daemon=True).start()
            return child

        def close(self) -> None:
            go.set()

    def quiet_after_one(brief: Brief, ctx: Context) -> None:
        ctx.heartbeat("started")
        alive.set()
        ctx.sleep(60)

    zeus = make_zeus(
        {"s": {"timeout_s": 300, "heartbeat": {"interval_s": 0.1, "stale_after_s": 0.3}}},
        works={"s": quiet_after_one},
        backends={"thread": LateThreads()},
    )
    handle = zeus.dispatch(Brief(agent="s", scope="s"))
    recorder.wait_for("attempt.started")
    clock.advance(3.8)  # the thread has not started yet: slow, not stuck
    sync(zeus)
    assert not handle.done()
    go.set()
    assert alive.wait(WAIT)
    sync(zeus)
    clock.advance(0.29)
    sync(zeus)
    assert not handle.done()
    clock.advance(0.01)
    summary = handle.result(WAIT)
    assert (summary.status, summary.timeout_kind) == (Status.timed_out, "stale")
    assert recorder.named("attempt.stale")[0]["elapsed_s"] == pytest.approx(4.1)


# -- 2. restart intensity is a circuit per agent ---------------------------------------------


def always_flaky(brief: Brief, ctx: Context) -> None:
    raise TransientError("down again")


STORM = {"retry": {"max_retries": 100, "backoff": "none"}}


def test_a_storm_in_one_agent_leaves_other_agents_and_running_attempts_alone(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    zeus = make_zeus(
        {"f": STORM, "w": {"timeout_s": 1000, "heartbeat": {"stale_after_s": 1000}}},
        supervisor={"intensity": {"max_restarts": 5, "within_s": 60}},
        works={"f": always_flaky, "w": wait_cancelled},
    )
    bystander = zeus.dispatch(Brief(agent="w", scope="innocent"))
    recorder.wait_for("attempt.started")
    storm = zeus.dispatch(Brief(agent="f", scope="storm")).result(WAIT)
    assert storm.status is Status.failed
    assert storm.error is not None and "restart intensity exceeded for agent f" in storm.error
    assert len(storm.attempts) == 6  # five restarts allowed, the sixth is refused
    (event,) = recorder.named("supervisor.intensity_exceeded")
    assert (event["agent"], event["scope"]) == ("f", "agent")
    sync(zeus)
    assert not bystander.done()  # never touched
    # While the circuit is open, f's failures are not restarted; other agents' are.
    again = zeus.dispatch(Brief(agent="f", scope="again")).result(WAIT)
    assert len(again.attempts) == 1 and again.status is Status.failed
    assert len(recorder.named("supervisor.intensity_exceeded")) == 1  # still the same trip
    # Once the window has room, f is restarted again.
    clock.advance(60)
    later = zeus.dispatch(Brief(agent="f", scope="later")).result(WAIT)
    assert len(later.attempts) == 6
    zeus.cancel(bystander.id)
    assert bystander.result(WAIT).status is Status.cancelled


def test_an_open_circuit_still_allows_a_fallback_to_another_agent(
    make_zeus: ZeusFactory,
) -> None:
    zeus = make_zeus(
        {"f": {**STORM, "fallback": "g"}, "g": {}},
        supervisor={"intensity": {"max_restarts": 2, "within_s": 60}},
        works={"f": always_flaky, "g": lambda brief, ctx: "g did it"},
    )
    summary = zeus.dispatch(Brief(agent="f", scope="s")).result(WAIT)
    assert summary.status is Status.completed
    assert [a.agent for a in summary.attempts] == ["f", "f", "f", "g"]
    assert summary.output == "g did it"


def test_an_open_circuit_never_touches_an_attempt_of_the_same_agent_already_running(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    def flaky_or_wait(brief: Brief, ctx: Context) -> None:
        if brief.scope == "wait":
            wait_cancelled(brief, ctx)
        raise TransientError("down")

    zeus = make_zeus(
        {"f": STORM}, supervisor={"intensity": {"max_restarts": 3, "within_s": 60}},
        works={"f": flaky_or_wait},
    )
    waiting = zeus.dispatch(Brief(agent="f", scope="wait"))
    recorder.wait_for("attempt.started")
    assert zeus.dispatch(Brief(agent="f", scope="storm")).result(WAIT).status is Status.failed
    sync(zeus)
    assert not waiting.done()
    zeus.cancel(waiting.id)
    assert waiting.result(WAIT).status is Status.cancelled


# -- 3. late spend counts ---------------------------------------------------------------


def test_late_spend_of_a_fenced_child_counts_for_its_ancestors_and_the_tree(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    charged, release, child_settled = threading.Event(), threading.Event(), threading.Event()

    def stubborn(brief: Brief, ctx: Context) -> str:
        ctx.charge(cost=0.01)
        charged.set()
        release.wait(WAIT)  # deaf to cancellation: it will be fenced
        ctx.charge(cost=0.09)  # real money, spent late: counted, then it raises Cancelled
        return "late"

    def athena(brief: Brief, ctx: Context) -> str:
        summary = ctx.delegate(Brief(agent="apollo", scope="find"))
        child_settled.set()
        ctx.sleep(60)
        return summary.status.value

    zeus = make_zeus(
        {"athena": {"kind": "orchestrator", "timeout_s": 300, "budget": {"max_cost": 0.05},
                    "heartbeat": {"stale_after_s": 1000}},  # it waits in ctx.sleep
         "apollo": {"timeout_s": 10, "shutdown": {"grace_s": 2}, "read_only": True}},
        works={"athena": athena, "apollo": stubborn},
    )
    handle = zeus.dispatch(Brief(agent="athena", scope="plan"))
    assert charged.wait(WAIT)
    clock.advance(10)
    sync(zeus)
    clock.advance(2)  # apollo is fenced; athena gets its summary
    assert child_settled.wait(WAIT)
    assert zeus.tree()["usage"]["cost"] == pytest.approx(0.01)
    release.set()
    summary = handle.result(WAIT)
    assert summary.status is Status.budget_exceeded  # the late 0.09 tripped athena's budget
    assert summary.usage.cost == pytest.approx(0.10)
    assert zeus.tree()["usage"]["cost"] == pytest.approx(0.10)


def test_late_spend_can_trip_the_tree_budget(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    release = threading.Event()

    def stubborn(brief: Brief, ctx: Context) -> str:
        release.wait(WAIT)
        ctx.charge(cost=0.09)
        return "late"

    zeus = make_zeus(
        {"s": {"timeout_s": 10, "shutdown": {"grace_s": 0}, "read_only": True},
         "c": {"timeout_s": 300}},
        supervisor={"budget": {"max_cost": 0.1}},
        works={"s": stubborn, "c": lambda brief, ctx: ctx.charge(cost=0.02)},
    )
    first = zeus.dispatch(Brief(agent="s", scope="s"))
    recorder.wait_for("attempt.started")
    clock.advance(10)
    timed_out = first.result(WAIT)
    assert timed_out.status is Status.timed_out
    release.set()
    recorder.wait_for("attempt.fenced", count=2)  # the late ending, after its late charge
    assert zeus.tree()["usage"]["cost"] == pytest.approx(0.09)
    assert timed_out.output is None and timed_out.usage.cost == 0  # settled before it spent
    (late,) = [e for e in recorder.named("message.dropped") if e["message"] == "Charge"]
    assert late["usage_counted"] is True
    after = zeus.dispatch(Brief(agent="c", scope="c")).result(WAIT)
    assert after.status is Status.budget_exceeded  # 0.11 over the tree's 0.1


# -- 4. every Context call is a cancellation point ---------------------------------------


CALLS: dict[str, Callable[[Context], Any]] = {
    "heartbeat": lambda ctx: ctx.heartbeat("x"),
    "partial": lambda ctx: ctx.partial("x"),
    "charge": lambda ctx: ctx.charge(calls=1),
    "tool_call": lambda ctx: ctx.tool_call("grep", read_only=True),
    "tool": lambda ctx: ctx.tool("pytest").__enter__(),
    "delegate": lambda ctx: ctx.delegate(Brief(agent="s", scope="x")),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_every_context_call_raises_cancelled_once_zeus_asked_the_attempt_to_stop(
    make_zeus: ZeusFactory, recorder: Recorder, call: str
) -> None:
    started, release, raised = threading.Event(), threading.Event(), []

    def deaf(brief: Brief, ctx: Context) -> str:
        ctx.heartbeat("started")
        started.set()
        release.wait(WAIT)  # not ctx.sleep: it hears the cancel only through its next call
        try:
            CALLS[call](ctx)
        except Cancelled:
            raised.append(call)
            raise
        return "went on"

    zeus = make_zeus({"s": {"kind": "orchestrator"}}, works={"s": deaf})
    handle = zeus.dispatch(Brief(agent="s", scope="s"))
    assert started.wait(WAIT)
    zeus.cancel(handle.id)
    sync(zeus)  # Zeus has asked the attempt to stop
    release.set()
    summary = handle.result(WAIT)
    assert raised == [call]
    assert summary.status is Status.cancelled


def test_a_charge_over_budget_stops_the_child_at_its_next_context_call(
    make_zeus: ZeusFactory,
) -> None:
    charges: list[int] = []

    def spender(brief: Brief, ctx: Context) -> None:
        for n in range(100):
            ctx.charge(calls=1, cost=0.1)
            charges.append(n)

    zeus = make_zeus({"s": {"budget": {"max_cost": 0.35}}}, works={"s": spender})
    summary = zeus.dispatch(Brief(agent="s", scope="s")).result(WAIT)
    assert summary.status is Status.budget_exceeded
    # The fourth went over; the fifth reported what it had spent (real money), then raised.
    assert len(charges) == 4
    assert summary.usage.cost == pytest.approx(0.5)


# -- 5. side effects are a tree -----------------------------------------------------------


@pytest.mark.parametrize("depth", [2, 3])
def test_a_descendants_write_blocks_a_blind_retry_of_every_ancestor(
    make_zeus: ZeusFactory, depth: int
) -> None:
    writes: list[str] = []

    def writer(brief: Brief, ctx: Context) -> str:
        ctx.tool_call("write_file")  # side effects (read_only=False is the default)
        writes.append(brief.scope)
        return "written"

    def middle(brief: Brief, ctx: Context) -> Any:
        return ctx.delegate(Brief(agent="writer", scope="w")).output

    def top(brief: Brief, ctx: Context) -> None:
        ctx.delegate(Brief(agent="writer" if depth == 2 else "middle", scope="m"))
        raise TransientError("the planner's model call failed")

    retry = {"retry": {"max_retries": 2, "backoff": "none"}}
    zeus = make_zeus(
        {"top": {"kind": "orchestrator", **retry}, "middle": {"kind": "orchestrator"},
         "writer": {}},
        supervisor={"max_depth": 3},
        works={"top": top, "middle": middle, "writer": writer},
    )
    summary = zeus.dispatch(Brief(agent="top", scope="plan")).result(WAIT)
    assert summary.status is Status.failed
    assert len(summary.attempts) == 1 and len(writes) == 1  # the write ran once
    assert summary.error is not None and "side effects" in summary.error


# -- 6. a result that loses to a stop cause keeps its output --------------------------------


def test_a_result_that_loses_to_a_budget_overrun_keeps_its_output(
    make_zeus: ZeusFactory,
) -> None:
    def spender(brief: Brief, ctx: Context) -> str:
        ctx.charge(cost=1.0)
        return "found 7 files, and this sentence is long"

    zeus = make_zeus({"s": {"budget": {"max_cost": 0.5}, "result": {"max_chars": 30}}},
                     works={"s": spender})
    summary = zeus.dispatch(Brief(agent="s", scope="s")).result(WAIT)
    assert summary.status is Status.budget_exceeded
    assert isinstance(summary.output, str) and summary.output.startswith("found 7 f")
    assert len(summary.output) <= 30 and summary.truncated_chars > 0  # the result policy


def test_a_result_that_loses_to_a_cancel_keeps_its_output(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    started = threading.Event()

    def polite(brief: Brief, ctx: Context) -> str:
        ctx.heartbeat("started")
        started.set()
        try:
            ctx.sleep(60)
        except Cancelled:
            return "what I found before the cancel"
        return "done"

    zeus = make_zeus({"s": {}}, works={"s": polite})
    handle = zeus.dispatch(Brief(agent="s", scope="s"))
    assert started.wait(WAIT)
    zeus.cancel(handle.id)
    summary = handle.result(WAIT)
    assert summary.status is Status.cancelled
    assert summary.output == "what I found before the cancel"


# -- 7. writers never settle partial -------------------------------------------------------


def test_a_brief_cannot_make_a_writer_settle_partial(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus(
        {"hephaestus": {}, "apollo": {"read_only": True}, "gaia": {"partial_ok": True}},
        works={name: lambda brief, ctx: "ok" for name in ("hephaestus", "apollo", "gaia")},
    )
    with pytest.raises(DelegationRefused, match="partial_ok") as caught:
        zeus.dispatch(Brief(agent="hephaestus", scope="fix", partial_ok=True))
    assert "read_only: false" in str(caught.value) and "writer" in str(caught.value)
    assert zeus.dispatch(Brief(agent="apollo", scope="find", partial_ok=True)).result(WAIT).ok
    assert zeus.dispatch(Brief(agent="gaia", scope="read", partial_ok=True)).result(WAIT).ok
    assert zeus.dispatch(Brief(agent="hephaestus", scope="fix", partial_ok=False)).result(
        WAIT).ok  # narrowing is allowed


def test_a_nested_brief_cannot_make_a_writer_settle_partial(make_zeus: ZeusFactory) -> None:
    def athena(brief: Brief, ctx: Context) -> str:
        try:
            ctx.delegate(Brief(agent="hephaestus", scope="fix", partial_ok=True))
        except DelegationRefused as exc:
            return f"refused: {exc}"
        return "delegated"

    zeus = make_zeus({"athena": {"kind": "orchestrator"}, "hephaestus": {}},
                     works={"athena": athena, "hephaestus": lambda brief, ctx: "ok"})
    summary = zeus.dispatch(Brief(agent="athena", scope="plan")).result(WAIT)
    assert summary.output.startswith("refused:") and "writer" in summary.output


# -- 9. a handler failure is raised to the host ---------------------------------------------


def test_a_failing_handler_raises_in_the_host_instead_of_coming_back_as_a_value(
    make_zeus: ZeusFactory, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    import supervisor.core.tree_view

    def broken(d: Any, now: float) -> dict[str, Any]:
        raise RuntimeError("snapshot broke")

    zeus = make_zeus({"w": {}}, works={"w": wait_cancelled})
    handle = zeus.dispatch(Brief(agent="w", scope="s"))
    recorder.wait_for("attempt.started")
    monkeypatch.setattr(supervisor.core.tree_view, "snapshot_node", broken)
    with pytest.raises(RuntimeError, match="snapshot broke"):
        zeus.tree()
    monkeypatch.undo()
    assert zeus.tree()["open"] == 1  # Zeus survived its handler's failure
    zeus.cancel(handle.id)
    assert handle.result(WAIT).status is Status.cancelled


def test_an_open_circuit_refuses_a_group_restart_and_that_sibling_settles_failed(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    def member(brief: Brief, ctx: Context) -> str:
        if brief.scope == "fails":
            raise TransientError("down")
        ctx.heartbeat("working")
        ctx.sleep(60)
        return "never"

    zeus = make_zeus(
        {"f": STORM, "w": {}},
        supervisor={"intensity": {"max_restarts": 0, "within_s": 60}},
        works={"f": member, "w": member},
    )
    group = zeus.dispatch_group([Brief(agent="w", scope="slow"), Brief(agent="f", scope="fails")],
                                strategy="one_for_all")
    slow, fails = group.results(timeout=WAIT)
    assert fails.status is Status.failed and len(fails.attempts) == 1  # f's retry refused
    assert slow.status is Status.failed  # its group restart refused too (w's circuit)
    assert slow.error is not None and "restart intensity exceeded for agent w" in slow.error
    assert {e["agent"] for e in recorder.named("supervisor.intensity_exceeded")} == {"f", "w"}


def test_a_parent_waiting_on_a_quiet_child_is_not_stale_while_the_child_is_not(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    """The child reports less often than the parent's stale_after_s (or sits in a backoff):
    while the parent waits on it, the child's own stale clock is the one that counts."""
    started = threading.Event()

    def apollo(brief: Brief, ctx: Context) -> str:
        ctx.heartbeat("reading")
        started.set()
        ctx.sleep(600)
        return "never"

    def athena(brief: Brief, ctx: Context) -> Any:
        return ctx.delegate(Brief(agent="apollo", scope="find")).status.value

    zeus = make_zeus(
        {"athena": {"kind": "orchestrator", "timeout_s": 300,
                    "heartbeat": {"interval_s": 1, "stale_after_s": 10}},
         "apollo": {"timeout_s": 300, "heartbeat": {"interval_s": 20, "stale_after_s": 60}}},
        works={"athena": athena, "apollo": apollo},
    )
    handle = zeus.dispatch(Brief(agent="athena", scope="plan"))
    assert started.wait(WAIT)
    sync(zeus)
    for _ in range(5):
        clock.advance(11)
        sync(zeus)
    assert not handle.done()  # 55 s: athena waits, apollo is not stale yet
    clock.advance(5)  # apollo's own stale_after_s: it stops, and athena gets its answer
    summary = handle.result(WAIT)
    assert summary.status is Status.completed and summary.output == "timed_out"
