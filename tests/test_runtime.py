"""The runtime on thread children with a fake clock: deadlines, stale, retry, fallback,
partials, budgets, cancellation, fencing, queueing, and the events that tell it."""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any

import pytest

from actors import Brief, Context, Report, Status, TransientError
from actors.clock import FakeClock
from supervisor import UnknownAgent
from supervisor.testing import held, mailbox, sync
from tests._support import wait_cancelled
from tests.conftest import Recorder, ZeusFactory

# Long enough that a quiet child is never stale in tests about deadlines.
NEVER_STALE = {"heartbeat": {"interval_s": 1, "stale_after_s": 1000}}


def ok(brief: Brief, ctx: Context) -> str:
    ctx.partial("p1")
    ctx.charge(calls=1, input_tokens=10, output_tokens=2, cost=0.01)
    return f"done: {brief.scope}"


def test_a_delegation_completes_with_its_output_partials_and_usage(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    zeus = make_zeus(works={"echo": ok})
    handle = zeus.dispatch(Brief(agent="echo", scope="hello"))
    summary = handle.result(10)
    assert handle.id == "echo-1"
    assert summary.status is Status.completed
    assert summary.output == "done: hello"
    assert summary.partial_results == ["p1"]
    assert summary.usage.calls == 1 and summary.usage.cost == pytest.approx(0.01)
    assert [a.id for a in summary.attempts] == ["echo-1-a1"]
    assert handle.result() is summary  # the same summary every time
    assert handle.done()


def test_zeus_mailbox_is_the_simple_queue_its_actor_asks_pykka_for(
    make_zeus: ZeusFactory,
) -> None:
    # The actor fills pykka's private `_create_actor_inbox` hook (pyproject pins pykka 4):
    # a pykka that stopped calling it would hand Zeus its own `queue.Queue` instead.
    zeus = make_zeus({"a": {}}, works={"a": ok})
    assert type(mailbox(zeus)) is queue.SimpleQueue
    assert zeus.dispatch(Brief(agent="a", scope="s")).result(10).status is Status.completed


def test_ids_count_per_agent_and_never_shift(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus(works={"a": ok, "b": ok})
    ids = [zeus.dispatch(Brief(agent=n, scope="s")).id for n in ("a", "b", "a", "a", "b")]
    assert ids == ["a-1", "b-1", "a-2", "a-3", "b-2"]


def test_a_report_fills_the_summary_sections(make_zeus: ZeusFactory) -> None:
    def reporter(brief: Brief, ctx: Context) -> Report:
        return Report(output={"n": 1}, findings=["f"], changes=["c"], validation=["v"], risks=["r"])

    summary = make_zeus(works={"r": reporter}).dispatch(Brief(agent="r", scope="s")).result(10)
    assert (summary.output, summary.findings, summary.changes) == ({"n": 1}, ["f"], ["c"])
    assert (summary.validation, summary.risks) == (["v"], ["r"])


def test_async_work_functions_run_too(make_zeus: ZeusFactory) -> None:
    async def fetch(brief: Brief, ctx: Context) -> str:
        await asyncio.sleep(0)
        ctx.partial("async")
        return "async ok"

    summary = make_zeus(works={"a": fetch}).dispatch(Brief(agent="a", scope="s")).result(10)
    assert (summary.status, summary.output) == (Status.completed, "async ok")


def test_a_handle_is_awaitable_without_blocking_the_loop(make_zeus: ZeusFactory) -> None:
    gate = threading.Event()

    def gated(brief: Brief, ctx: Context) -> str:
        gate.wait(10)
        return "awaited"

    zeus = make_zeus(works={"g": gated})

    async def main() -> tuple[str, bool]:
        handle = zeus.dispatch(Brief(agent="g", scope="s"))
        ticked = asyncio.Event()

        async def ticker() -> None:
            ticked.set()  # runs while the handle is pending: the loop is not blocked
            gate.set()

        task = asyncio.create_task(ticker())
        summary = await handle
        await task
        return summary.output, ticked.is_set()

    assert asyncio.run(main()) == ("awaited", True)


def test_unknown_agent_is_refused_at_dispatch_synchronously(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus(works={"echo": ok})
    with pytest.raises(UnknownAgent, match=r"'nobody'.*echo"):
        zeus.dispatch(Brief(agent="nobody", scope="s"))


def test_a_brief_that_fails_validation_names_the_field(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus(works={"echo": ok})
    with pytest.raises(ValueError, match="timeout_s"):
        zeus.dispatch({"agent": "echo", "scope": "s", "timeout_s": -1})


def test_result_timeout_raises_the_builtin_timeout_error_and_the_delegation_goes_on(
    make_zeus: ZeusFactory,
) -> None:
    gate = threading.Event()

    def gated(brief: Brief, ctx: Context) -> str:
        gate.wait(10)
        return "later"

    handle = make_zeus(works={"g": gated}).dispatch(Brief(agent="g", scope="s"))
    with pytest.raises(TimeoutError):
        handle.result(timeout=0.01)
    gate.set()
    assert handle.result(10).output == "later"


def test_a_permanent_error_fails_with_type_message_and_traceback_and_is_not_retried(
    make_zeus: ZeusFactory,
) -> None:
    def broken(brief: Brief, ctx: Context) -> None:
        raise ValueError("the map is not the territory")

    zeus = make_zeus({"b": {"retry": {"max_retries": 3}}}, works={"b": broken})
    summary = zeus.dispatch(Brief(agent="b", scope="s")).result(10)
    assert summary.status is Status.failed
    assert summary.error is not None
    assert summary.error.startswith("ValueError: the map is not the territory")
    assert "Traceback" in summary.error and "broken" in summary.error
    assert len(summary.attempts) == 1


@pytest.mark.parametrize("exc", [SystemExit(2), KeyboardInterrupt()])
def test_base_exceptions_in_agent_code_fail_that_attempt_and_nothing_else(
    make_zeus: ZeusFactory, exc: BaseException
) -> None:
    def rude(brief: Brief, ctx: Context) -> None:
        raise exc

    zeus = make_zeus(works={"rude": rude, "echo": ok})
    assert zeus.dispatch(Brief(agent="rude", scope="s")).result(10).status is Status.failed
    assert zeus.dispatch(Brief(agent="echo", scope="s")).result(10).status is Status.completed


def test_a_transient_error_is_retried_after_the_exact_backoff(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    def flaky(brief: Brief, ctx: Context) -> str:
        if ctx.attempt == 1:
            raise TransientError("503 from the model")
        return f"ok on attempt {ctx.attempt}"

    zeus = make_zeus(
        {"f": {"retry": {"max_retries": 2, "initial_s": 2, "jitter": 0}}}, works={"f": flaky}
    )
    handle = zeus.dispatch(Brief(agent="f", scope="s"))
    (scheduled,) = recorder.wait_for("retry.scheduled")
    assert scheduled["backoff_s"] == 2.0 and scheduled["next_attempt_id"] == "f-1-a2"
    clock.advance(1.999)
    sync(zeus)
    assert len(recorder.named("attempt.started")) == 1  # still backing off
    clock.advance(0.001)
    summary = handle.result(10)
    assert summary.output == "ok on attempt 2"
    assert [a.outcome for a in summary.attempts] == ["transient", "completed"]
    started = recorder.named("attempt.started")
    assert started[1]["ts"] - started[0]["ts"] == pytest.approx(2.0)


def test_a_cancel_cuts_the_backoff_short(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    def always_down(brief: Brief, ctx: Context) -> None:
        raise ConnectionResetError("peer reset")

    zeus = make_zeus({"d": {"retry": {"max_retries": 5, "initial_s": 30}}},
                     works={"d": always_down})
    handle = zeus.dispatch(Brief(agent="d", scope="s"))
    recorder.wait_for("retry.scheduled")
    handle.cancel("no longer needed")
    summary = handle.result(10)
    assert summary.status is Status.cancelled
    assert len(summary.attempts) == 1
    clock.advance(60)
    sync(zeus)
    assert len(recorder.named("attempt.started")) == 1  # nothing restarts after a cancel


def test_a_deadline_stops_the_child_cooperatively_and_settles_timed_out(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    zeus = make_zeus({"w": {"timeout_s": 60, **NEVER_STALE}}, works={"w": wait_cancelled})
    handle = zeus.dispatch(Brief(agent="w", scope="s"))
    recorder.wait_for("attempt.started")
    clock.advance(59.9)
    sync(zeus)
    assert not handle.done()
    clock.advance(0.1)
    summary = handle.result(10)
    assert (summary.status, summary.timeout_kind) == (Status.timed_out, "deadline")
    (killed,) = recorder.named("attempt.killed")
    assert killed["how"] == "cooperative"
    (timed_out,) = recorder.named("attempt.timed_out")
    assert timed_out["elapsed_s"] == 60.0


def test_the_briefs_timeout_overrides_the_policy(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    zeus = make_zeus({"w": {"timeout_s": 60, **NEVER_STALE}}, works={"w": wait_cancelled})
    handle = zeus.dispatch(Brief(agent="w", scope="s", timeout_s=5))
    recorder.wait_for("attempt.started")
    clock.advance(5)
    assert handle.result(10).status is Status.timed_out


def test_a_partial_ok_timeout_with_partials_settles_partial_at_once(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    def scanner(brief: Brief, ctx: Context) -> None:
        ctx.partial("auth.py")
        ctx.partial("login.py")
        ctx.sleep(600)

    zeus = make_zeus(
        {"apollo": {"timeout_s": 60, "partial_ok": True, **NEVER_STALE, "retry": {"max_retries": 2},
                    "fallback": "athena"}, "athena": {}},
        works={"apollo": scanner, "athena": ok},
    )
    handle = zeus.dispatch(Brief(agent="apollo", scope="scan"))
    recorder.wait_for("attempt.started")
    while len(zeus.tree()["delegations"][0]["attempts"]) == 0 or zeus.tree()[
        "delegations"
    ][0]["partials"] < 2:
        sync(zeus)
    clock.advance(60)
    summary = handle.result(10)
    assert summary.status is Status.partial
    assert summary.timeout_kind == "deadline"
    assert summary.partial_results == ["auth.py", "login.py"]
    assert len(summary.attempts) == 1  # no retry, no fallback
    assert recorder.named("fallback.dispatched") == []


def test_partials_travel_to_the_next_attempt(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    seen: list[list[Any]] = []

    def worker(brief: Brief, ctx: Context) -> str:
        seen.append(list(ctx.previous_partials))
        if ctx.attempt == 1:
            ctx.partial("half")
            raise TransientError("flaky")
        return "whole"

    zeus = make_zeus({"w": {"retry": {"max_retries": 1, "backoff": "none"}}},
                     works={"w": worker})
    summary = zeus.dispatch(Brief(agent="w", scope="s")).result(10)
    assert seen == [[], ["half"]]
    assert summary.partial_results == ["half"]


def test_stale_child_is_stopped_after_stale_after_s_without_progress(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    progressed = threading.Event()

    def stuck_after_one(brief: Brief, ctx: Context) -> None:
        ctx.partial("one")
        progressed.set()
        ctx.sleep(600)  # a hang with a live thread: no progress

    zeus = make_zeus(
        {"s": {"timeout_s": 300, "heartbeat": {"interval_s": 1, "stale_after_s": 10}}},
        works={"s": stuck_after_one},
    )
    handle = zeus.dispatch(Brief(agent="s", scope="s"))
    assert progressed.wait(10)
    sync(zeus)
    clock.advance(9.5)
    sync(zeus)
    assert not handle.done()
    clock.advance(0.5)
    summary = handle.result(10)
    assert (summary.status, summary.timeout_kind) == (Status.timed_out, "stale")
    assert summary.attempts[0].outcome == "stale"
    assert recorder.named("attempt.stale")[0]["elapsed_s"] == 10.0


def test_retry_then_fallback_then_settle_never_revisits_an_agent(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    def crashy(brief: Brief, ctx: Context) -> None:
        raise TransientError(f"{ctx.agent} down")

    zeus = make_zeus(
        {
            "hermes": {"retry": {"max_retries": 1, "backoff": "none"}, "fallback": "talos"},
            "talos": {"retry": {"max_retries": 1, "backoff": "none"}, "fallback": "hermes"},
        },
        works={"hermes": crashy, "talos": crashy},
    )
    summary = zeus.dispatch(Brief(agent="hermes", scope="fix")).result(10)
    assert summary.status is Status.failed
    assert [(a.id, a.agent) for a in summary.attempts] == [
        ("hermes-1-a1", "hermes"),
        ("hermes-1-a2", "hermes"),
        ("hermes-1-a3", "talos"),
        ("hermes-1-a4", "talos"),
    ]
    (fallback,) = recorder.named("fallback.dispatched")
    assert (fallback["from"], fallback["to"]) == ("hermes", "talos")


def test_a_fallback_gets_the_partials_so_far(make_zeus: ZeusFactory) -> None:
    got: list[Any] = []

    def first(brief: Brief, ctx: Context) -> None:
        ctx.partial("found a")
        raise TransientError("down")

    def second(brief: Brief, ctx: Context) -> str:
        got.extend(ctx.previous_partials)
        return "finished the rest"

    zeus = make_zeus({"a": {"fallback": "b"}, "b": {}}, works={"a": first, "b": second})
    summary = zeus.dispatch(Brief(agent="a", scope="s")).result(10)
    assert (summary.status, summary.agent, got) == (Status.completed, "b", ["found a"])


def test_side_effect_tool_calls_block_a_retry(make_zeus: ZeusFactory) -> None:
    def writer(brief: Brief, ctx: Context) -> None:
        ctx.tool_call("read_file", read_only=True)
        ctx.tool_call("write_file")
        raise TransientError("lost connection after writing")

    zeus = make_zeus({"w": {"retry": {"max_retries": 3}}}, works={"w": writer})
    summary = zeus.dispatch(Brief(agent="w", scope="s")).result(10)
    assert summary.status is Status.failed and len(summary.attempts) == 1
    assert summary.error is not None and "retry_after_tool_calls" in summary.error


def test_read_only_tool_calls_never_block_a_retry(make_zeus: ZeusFactory) -> None:
    def reader(brief: Brief, ctx: Context) -> str:
        ctx.tool_call("grep", read_only=True)
        if ctx.attempt == 1:
            raise TransientError("flaky")
        return "ok"

    zeus = make_zeus({"r": {"retry": {"max_retries": 1, "backoff": "none"}}},
                     works={"r": reader})
    assert zeus.dispatch(Brief(agent="r", scope="s")).result(10).status is Status.completed


def test_a_charge_over_the_delegation_budget_stops_it_across_attempts(
    make_zeus: ZeusFactory,
) -> None:
    def spender(brief: Brief, ctx: Context) -> None:
        ctx.charge(calls=1, cost=0.3)  # on attempt 2, over the budget: the next call raises
        if ctx.attempt == 1:
            raise TransientError("try again")
        ctx.heartbeat("never sent")
        raise AssertionError("the heartbeat after a charge over budget raises Cancelled")

    zeus = make_zeus(
        {"s": {"budget": {"max_cost": 0.5}, "retry": {"max_retries": 2, "backoff": "none"}}},
        works={"s": spender},
    )
    summary = zeus.dispatch(Brief(agent="s", scope="s")).result(10)
    assert summary.status is Status.budget_exceeded
    # 0.6 after attempt 2's first charge is over the one budget of 0.5 for all attempts,
    # and the attempt stops at its next Context call.
    assert summary.usage.cost == pytest.approx(0.6)
    assert [a.outcome for a in summary.attempts] == ["transient", "budget_exceeded"]


def test_the_tree_budget_stops_whoever_charges_over_it(make_zeus: ZeusFactory) -> None:
    def spender(brief: Brief, ctx: Context) -> str:
        ctx.charge(cost=0.4)
        ctx.sleep(0.0)
        return "spent"

    zeus = make_zeus(supervisor={"budget": {"max_cost": 1.0}}, works={"s": spender})
    first = [zeus.dispatch(Brief(agent="s", scope="s")).result(10) for _ in range(2)]
    assert [s.status for s in first] == [Status.completed, Status.completed]
    third = zeus.dispatch(Brief(agent="s", scope="s")).result(10)
    assert third.status is Status.budget_exceeded


def test_a_thread_that_ignores_cancel_is_fenced_and_a_writer_is_not_retried(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    release = threading.Event()

    def stubborn(brief: Brief, ctx: Context) -> str:
        release.wait(30)  # never looks at ctx.cancelled
        ctx.partial("late partial")
        return "late"

    zeus = make_zeus(
        {"s": {"timeout_s": 10, "shutdown": {"grace_s": 2}, "retry": {"max_retries": 2}}},
        works={"s": stubborn},
    )
    handle = zeus.dispatch(Brief(agent="s", scope="s"))
    recorder.wait_for("attempt.started")
    clock.advance(10)
    sync(zeus)
    clock.advance(2)
    summary = handle.result(10)
    assert summary.status is Status.blocked
    assert summary.error is not None and "second writer" in summary.error
    assert summary.attempts[0].fenced
    assert zeus.tree()["abandoned_threads"] == 1
    release.set()
    recorder.wait_for("attempt.fenced", count=2)  # the late ending is logged, then dropped
    assert zeus.tree()["abandoned_threads"] == 0
    # Its late `ctx.partial` is a cancellation point: it raised `Cancelled`, nothing was sent.
    assert "Partial" not in [e["message"] for e in recorder.named("message.dropped")]


def test_a_read_only_agent_is_retried_even_when_its_thread_was_fenced(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    release = threading.Event()

    def stubborn_reader(brief: Brief, ctx: Context) -> str:
        if ctx.attempt == 1:
            release.wait(30)
        return f"attempt {ctx.attempt}"

    zeus = make_zeus(
        {"r": {"timeout_s": 10, "read_only": True, "shutdown": {"grace_s": 1},
               "retry": {"max_retries": 1, "backoff": "none"}}},
        works={"r": stubborn_reader},
    )
    handle = zeus.dispatch(Brief(agent="r", scope="s"))
    recorder.wait_for("attempt.started")
    clock.advance(10)
    sync(zeus)
    clock.advance(1)
    summary = handle.result(10)
    release.set()
    assert (summary.status, summary.output) == (Status.completed, "attempt 2")


def test_max_concurrent_queues_instead_of_refusing_and_queued_ones_can_be_cancelled(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    gate = threading.Event()

    def gated(brief: Brief, ctx: Context) -> str:
        gate.wait(10)
        return brief.scope

    zeus = make_zeus(supervisor={"max_concurrent": 2}, works={"g": gated})
    handles = [zeus.dispatch(Brief(agent="g", scope=str(i))) for i in range(4)]
    sync(zeus)
    assert zeus.tree()["queued"] == 2
    handles[3].cancel()
    assert handles[3].result(10).status is Status.cancelled
    gate.set()
    assert [h.result(10).status for h in handles[:3]] == [Status.completed] * 3
    assert len(recorder.named("attempt.started")) == 3


def test_cancel_after_settlement_is_a_no_op(make_zeus: ZeusFactory, recorder: Recorder) -> None:
    zeus = make_zeus(works={"echo": ok})
    handle = zeus.dispatch(Brief(agent="echo", scope="s"))
    summary = handle.result(10)
    handle.cancel()
    sync(zeus)
    assert handle.result() is summary
    assert recorder.named("delegation.cancel_requested") == []


def test_the_tree_snapshot_shows_live_attempts(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    zeus = make_zeus({"w": {"timeout_s": 60, **NEVER_STALE}}, works={"w": wait_cancelled})
    zeus.dispatch(Brief(agent="w", scope="look at me"))
    recorder.wait_for("attempt.started")
    clock.advance(15)
    tree = zeus.tree()
    (node,) = tree["delegations"]
    assert (node["id"], node["state"], node["scope"]) == ("w-1", "running", "look at me")
    (attempt,) = node["attempts"]
    assert attempt["elapsed_s"] == 15.0 and attempt["deadline_in_s"] == 45.0
    assert tree["open"] == 1


def test_stop_cancels_and_settles_everything_open(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    zeus = make_zeus(works={"w": wait_cancelled})
    handles = [zeus.dispatch(Brief(agent="w", scope=str(i))) for i in range(3)]
    recorder.wait_for("attempt.started", count=3)
    zeus.stop(timeout=5)
    assert [h.result(0).status for h in handles] == [Status.cancelled] * 3
    assert recorder.names()[-1] == "zeus.stopped"
    assert len(recorder.named("delegation.settled")) == 3


def test_a_thread_session_keeps_its_state_across_briefs(make_zeus: ZeusFactory) -> None:
    def counter(brief: Brief, ctx: Context) -> int:
        ctx.session["n"] = ctx.session.get("n", 0) + 1
        return int(ctx.session["n"])

    zeus = make_zeus({"h": {"session_max": 1}}, works={"h": counter})
    same = [zeus.dispatch(Brief(agent="h", scope="s", session="h-1")).result(10).output
            for _ in range(3)]
    other = zeus.dispatch(Brief(agent="h", scope="s", session="h-2")).result(10).output
    again = zeus.dispatch(Brief(agent="h", scope="s", session="h-1")).result(10).output
    assert same == [1, 2, 3]
    assert other == 1
    assert again == 1  # session_max 1: h-2 evicted h-1 (least recently used)


def test_a_stateful_performer_gets_one_follow_up_then_settles_blocked(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    def unlucky(brief: Brief, ctx: Context) -> None:
        raise TransientError(f"lost the connection on attempt {ctx.attempt}")

    zeus = make_zeus(
        {"hermes": {"stateful": True, "retry": {"max_retries": 3, "backoff": "none"},
                    "fallback": "talos"}, "talos": {}},
        works={"hermes": unlucky, "talos": ok},
    )
    summary = zeus.dispatch(Brief(agent="hermes", scope="s", session="hermes-1")).result(10)
    assert summary.status is Status.blocked
    assert [a.agent for a in summary.attempts] == ["hermes", "hermes"]  # never replaced
    assert recorder.named("retry.scheduled")[0]["follow_up"] is True
    assert summary.error is not None and "follow-up" in summary.error


def test_fallback_zeus_gives_the_failure_back_to_the_owner(make_zeus: ZeusFactory) -> None:
    def down(brief: Brief, ctx: Context) -> None:
        raise TransientError("down")

    zeus = make_zeus({"themis": {"fallback": "zeus"}}, works={"themis": down})
    summary = zeus.dispatch(Brief(agent="themis", scope="review")).result(10)
    assert summary.status is Status.failed
    assert summary.error is not None and "returned to the owner" in summary.error


def test_a_done_callback_that_raises_changes_nothing_for_zeus(
    make_zeus: ZeusFactory, caplog: pytest.LogCaptureFixture
) -> None:
    zeus = make_zeus(supervisor={"max_concurrent": 1}, works={"echo": ok})

    def broken(summary: Any) -> None:
        raise RuntimeError("host bug")

    with held(zeus):  # the callback is in place before Zeus settles anything
        first = zeus.dispatch(Brief(agent="echo", scope="first"))
        queued = zeus.dispatch(Brief(agent="echo", scope="queued behind it"))
        first.add_done_callback(broken)
    assert first.result(10).status is Status.completed
    assert queued.result(10).status is Status.completed  # the queue still moved on
    assert "host bug" in caplog.text
