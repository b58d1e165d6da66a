"""Children on a local Ray (`isolation: ray`): every supervision rule holds there.

One local Ray (2 CPUs) and one Zeus serve the whole module; each test registers
agents of its own. Real time, loose bounds: waits are safety bounds, never what
is asserted.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from actors import Brief, Context, TransientError
from supervisor import Routing, Status, Zeus
from supervisor.routing import AgentPolicy
from supervisor.testing import sync
from tests._support import alive
from tests.conftest import RAY_SKIP, Recorder

ray = pytest.importorskip("ray", reason=RAY_SKIP)
pytestmark = pytest.mark.ray

_names = itertools.count(1)


@pytest.fixture(scope="module")
def zeus_and_log() -> Iterator[tuple[Zeus, Recorder]]:
    """One Zeus for the module, on a local Ray (2 CPUs) that it starts itself (none runs)."""
    if ray.is_initialized():
        ray.shutdown()
    log = Recorder()
    routing = Routing.from_dict({
        "version": 1,
        "supervisor": {"ray": {"init": {"num_cpus": 2, "log_to_driver": False}}},
        "defaults": {"isolation": "ray"},
        "agents": {"warm-up": {}},
    })
    zeus = Zeus.start(routing, log=log)
    assert ray.is_initialized()
    yield zeus, log
    zeus.stop(timeout=10)
    assert not ray.is_initialized(), "Zeus left the Ray it started running"


@pytest.fixture
def zeus(zeus_and_log: tuple[Zeus, Recorder]) -> Zeus:
    return zeus_and_log[0]


@pytest.fixture
def log(zeus_and_log: tuple[Zeus, Recorder]) -> Recorder:
    return zeus_and_log[1]


def on_ray(zeus: Zeus, work: Callable[..., Any], **policy: Any) -> str:
    """Register `work` as a new Ray agent with `policy`; returns its name."""
    name = f"{work.__name__.strip('_')}-{next(_names)}"
    policy.setdefault("timeout_s", 20)
    zeus.register(name, work, AgentPolicy.model_validate({"isolation": "ray", **policy}))
    return name


def run(zeus: Zeus, agent: str, **brief: Any) -> Any:
    return zeus.dispatch(Brief(agent=agent, scope="test", **brief)).result(timeout=30)


# -- work functions (module level: a Ray worker imports them by name) ------------------


def reports_then_returns(brief: Brief, ctx: Context) -> dict[str, Any]:
    ctx.heartbeat("looking")
    for item in ("a.py", "b.py"):
        ctx.partial(item)
    ctx.charge(calls=1, input_tokens=10, output_tokens=2, cost=0.01)
    ctx.tool_call("grep", read_only=True)
    return {"pid": os.getpid()}


def thread_leaf(brief: Brief, ctx: Context) -> str:
    return f"leaf did {brief.scope}"


def delegates(brief: Brief, ctx: Context) -> str:
    summary = ctx.delegate(Brief(agent=brief.inputs["to"], scope="nested"))
    return f"{summary.status.value}: {summary.output}"


def ignores_cancel(brief: Brief, ctx: Context) -> None:
    ctx.partial(os.getpid())
    while True:
        time.sleep(0.05)


def cooperates(brief: Brief, ctx: Context) -> None:
    ctx.heartbeat("waiting")
    ctx.sleep(60)


def first_attempt_hangs(brief: Brief, ctx: Context) -> bool:
    if ctx.attempt == 1:
        ignores_cancel(brief, ctx)
    return alive(ctx.previous_partials[0])


def crashes_once(brief: Brief, ctx: Context) -> str:
    if ctx.attempt == 1:
        ctx.partial("before the crash")
        time.sleep(0.3)  # reported well before the crash: it must not be lost
        os._exit(7)
    return "survived"


def counts_in_session(brief: Brief, ctx: Context) -> tuple[int, int]:
    ctx.session["n"] = ctx.session.get("n", 0) + 1
    return ctx.session["n"], os.getpid()


def hangs_when_told(brief: Brief, ctx: Context) -> tuple[int, int]:
    ctx.session["seen"] = ctx.session.get("seen", 0) + 1
    if brief.inputs["hang"]:
        ignores_cancel(brief, ctx)
    return os.getpid(), ctx.session["seen"]


def returns_a_generator(brief: Brief, ctx: Context) -> Any:
    return (i for i in range(3))


def reports_a_generator(brief: Brief, ctx: Context) -> str:
    ctx.partial(i for i in range(3))
    return "unreachable"


def silent(brief: Brief, ctx: Context) -> None:
    time.sleep(60)


def chaos(brief: Brief, ctx: Context) -> str:
    fault = brief.inputs["fault"]
    if ctx.attempt == 1:
        if fault == "crash":
            os._exit(3)
        if fault == "transient":
            raise TransientError("flaky")
        if fault == "hang":
            while True:
                time.sleep(0.05)
        if fault == "error":
            raise ValueError("bad input")
    ctx.partial(fault)
    return fault


def fence_of(brief: Brief, ctx: Context) -> dict[str, Any]:
    return {"id": ctx.fence.delegation_id, "epoch": ctx.fence.epoch}


# -- the child protocol ------------------------------------------------------------------


def test_a_ray_child_reports_partials_charges_and_tool_calls_and_says_where_it_ran(
    zeus: Zeus, log: Recorder
) -> None:
    agent = on_ray(zeus, reports_then_returns)
    summary = run(zeus, agent)
    assert summary.status is Status.completed
    assert summary.partial_results == ["a.py", "b.py"]
    assert (summary.usage.calls, summary.usage.cost) == (1, 0.01)
    started = [e for e in log.named("attempt.started") if e["agent"] == agent]
    assert len(started) == 1
    assert started[0]["pid"] == summary.output["pid"] != os.getpid()
    node_ip = ray.util.get_node_ip_address()
    assert started[0]["node"].startswith(f"{node_ip}/")
    # What `zeus sweep` needs to ask Ray about it after a supervisor crash:
    assert started[0]["ray_job"] == ray.get_runtime_context().get_job_id()
    assert started[0]["ray_address"] == ray.get_runtime_context().gcs_address
    assert summary.attempts[0].pid == summary.output["pid"]


def told(brief: Brief, ctx: Context) -> Any:
    """Fails its first attempt; the retry says what its ctx was told, as every backend's."""
    if ctx.attempt == 1:
        raise TransientError("the first attempt fails")
    return {"previous_error": ctx.previous_error, "effort": ctx.reasoning_effort}


def test_a_ray_child_is_told_what_every_backends_child_is(zeus: Zeus) -> None:
    """How its last attempt ended and its reasoning effort (a person's answer, and what its
    budget leaves, travel the same way: `ChildSpec.previous_blocker`, `.note`,
    `.budget_left`)."""
    agent = on_ray(zeus, told, retry={"max_retries": 1, "backoff": "none"},
                   reasoning_effort="high")
    output = run(zeus, agent).output
    assert "the first attempt fails" in output["previous_error"]
    assert output["effort"] == "high"


def test_a_ray_child_sees_its_delegations_fence(zeus: Zeus) -> None:
    handle = zeus.dispatch(Brief(agent=on_ray(zeus, fence_of), scope="test"))
    assert handle.result(timeout=30).output == {"id": handle.id, "epoch": 1}  # in memory


@pytest.mark.parametrize("isolation", ["thread", "process", "ray"])
def test_a_ray_child_delegates_to_an_agent_of_any_isolation_and_gets_its_summary(
    zeus: Zeus, isolation: str
) -> None:
    leaf = f"leaf-{isolation}-{next(_names)}"
    zeus.register(leaf, thread_leaf, AgentPolicy(isolation=isolation))  # type: ignore[arg-type]
    agent = on_ray(zeus, delegates, kind="orchestrator")
    summary = run(zeus, agent, inputs={"to": leaf})
    assert summary.status is Status.completed
    assert summary.output == "completed: leaf did nested"


# -- the stop ladder -----------------------------------------------------------------------


def test_a_child_that_ignores_cancel_is_killed_through_ray_after_grace(
    zeus: Zeus, log: Recorder
) -> None:
    agent = on_ray(zeus, ignores_cancel, timeout_s=1.5, shutdown={"grace_s": 0.2},
                   retry={"max_retries": 0})
    summary = run(zeus, agent)
    assert summary.status is Status.timed_out
    killed = [e for e in log.named("attempt.killed") if e["agent"] == agent]
    assert [e["how"] for e in killed] == ["kill"]
    worker = summary.partial_results[0]
    assert not alive(worker), "the Finished came before Ray ended the worker"


def test_a_child_that_checks_its_context_stops_cooperatively(zeus: Zeus, log: Recorder) -> None:
    agent = on_ray(zeus, cooperates, timeout_s=20, shutdown={"grace_s": 10})
    handle = zeus.dispatch(Brief(agent=agent, scope="wait"))
    log.wait_for("attempt.heartbeat", timeout=20)
    handle.cancel("enough")
    summary = handle.result(timeout=20)
    assert summary.status is Status.cancelled
    killed = [e for e in log.named("attempt.killed") if e["agent"] == agent]
    assert [e["how"] for e in killed] == ["cooperative"]


def test_a_retry_starts_only_once_ray_has_ended_the_previous_attempt(zeus: Zeus) -> None:
    # The first attempt goes stale; the deadline leaves room for Ray to start a fresh
    # worker for the retry (the first one was killed).
    agent = on_ray(zeus, first_attempt_hangs, timeout_s=15,
                   heartbeat={"interval_s": 0.2, "stale_after_s": 1.0}, shutdown={"grace_s": 0},
                   retry={"max_retries": 1, "initial_s": 0, "jitter": 0})
    summary = run(zeus, agent)
    assert [a.outcome.value for a in summary.attempts] == ["stale", "completed"]
    assert summary.output is False  # the first attempt's worker was gone when the retry ran


def test_a_child_that_reports_nothing_goes_stale(zeus: Zeus) -> None:
    agent = on_ray(zeus, silent, heartbeat={"interval_s": 0.2, "stale_after_s": 1.0},
                   shutdown={"grace_s": 0}, retry={"max_retries": 0})
    summary = run(zeus, agent)
    assert summary.status is Status.timed_out
    assert summary.timeout_kind == "stale"


# -- crashes -------------------------------------------------------------------------------


def test_a_worker_that_dies_is_a_crash_with_its_cause_and_is_retried(zeus: Zeus) -> None:
    agent = on_ray(zeus, crashes_once, retry={"max_retries": 1, "initial_s": 0, "jitter": 0})
    summary = run(zeus, agent)
    assert summary.status is Status.completed
    assert summary.output == "survived"
    first = summary.attempts[0]
    assert first.outcome.value == "crash"
    assert first.error is not None and first.error.startswith("worker died (WorkerCrashedError)")
    assert "before the crash" in summary.partial_results


# -- sessions ------------------------------------------------------------------------------


def test_a_follow_up_brief_reaches_the_same_session_actor_with_its_session(zeus: Zeus) -> None:
    agent = on_ray(zeus, counts_in_session, session_max=1)
    first = run(zeus, agent, session="s1")
    second = run(zeus, agent, session="s1")
    other = run(zeus, agent, session="s2")
    assert first.output[0] == 1 and second.output[0] == 2
    assert first.output[1] == second.output[1]  # the same warm actor
    assert other.output[0] == 1
    assert eventually_dead(first.output[1]), "the evicted session actor was not killed"


def test_a_hung_session_actor_is_killed_through_ray_and_the_next_brief_gets_a_fresh_one(
    zeus: Zeus, log: Recorder
) -> None:
    # 4 s: room for a loaded host to start the actor and reach the hang before the
    # deadline (a cancel that comes first ends it cooperatively at ctx.partial).
    agent = on_ray(zeus, hangs_when_told, session_max=1, timeout_s=4,
                   shutdown={"grace_s": 0.2}, retry={"max_retries": 0})
    hung = run(zeus, agent, session="s1", inputs={"hang": True})
    assert hung.status is Status.timed_out
    assert [e["how"] for e in log.named("attempt.killed") if e["agent"] == agent] == ["kill"]
    assert eventually_dead(hung.partial_results[0])
    # Room for Ray to start the new actor; the killed one's session went with it.
    fresh = run(zeus, agent, session="s1", inputs={"hang": False}, timeout_s=15)
    assert fresh.status is Status.completed
    assert fresh.output[0] != hung.partial_results[0] and fresh.output[1] == 1


def eventually_dead(pid: int) -> bool:
    end = time.monotonic() + 10
    while alive(pid):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


# -- the child's mailbox --------------------------------------------------------------------


def listens(brief: Brief, ctx: Context) -> list[Any]:
    """Collects the owner's messages until one says "stop" (or none comes in 20 s)."""
    ctx.heartbeat("listening")
    got: list[Any] = []
    while (message := ctx.receive(timeout=20)) not in ("stop", None):
        got.append(message)
    return got


@pytest.mark.parametrize("session", [None, "inbox"], ids=["task", "session actor"])
def test_a_ray_child_receives_what_its_owner_sends_in_order(
    zeus: Zeus, session: str | None
) -> None:
    agent = on_ray(zeus, listens, session_max=1)
    handle = zeus.dispatch(Brief(agent=agent, scope="x", session=session))
    # Sent at once: a message may come before the child runs, or before its task watches.
    assert handle.send({"steer": "left"}) is True
    assert handle.send(("two", 2.5)) is True
    assert handle.send("stop") is True
    summary = handle.result(timeout=30)
    assert summary.status is Status.completed, summary.error
    assert summary.output == [{"steer": "left"}, ("two", 2.5)]
    assert handle.send("late") is False  # settled


# -- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize("work", [returns_a_generator, reports_a_generator])
def test_a_result_or_partial_that_cannot_be_serialized_fails_the_attempt(
    zeus: Zeus, work: Callable[..., Any]
) -> None:
    agent = on_ray(zeus, work)
    summary = run(zeus, agent)
    assert summary.status is Status.failed
    assert summary.error is not None and "generator" in summary.error
    assert "cannot cross the process boundary" in summary.error
    assert run(zeus, on_ray(zeus, thread_leaf)).status is Status.completed  # Zeus is unaffected


def test_resources_no_node_can_grant_end_at_the_start_bound_saying_so(
    zeus: Zeus, log: Recorder
) -> None:
    # Waiting for a node is not the agent's time: the wait is bounded by spawn_timeout_s
    # (docs/design.md, "An attempt's clock"), and past it the attempt is a crash.
    agent = on_ray(zeus, thread_leaf, timeout_s=1.0, spawn_timeout_s=1.0,
                   resources={"num_cpus": 64},
                   heartbeat={"interval_s": 0.1, "stale_after_s": 0.3},
                   shutdown={"grace_s": 0}, retry={"max_retries": 0})
    summary = run(zeus, agent)
    assert summary.status is Status.failed
    assert summary.attempts[0].outcome.value == "crash"  # not stale: waiting is no hang
    assert "its child did not start within 1s" in (summary.error or "")
    assert "resources it asks for (num_cpus=64) were never granted" in (summary.error or "")
    assert "no node of the cluster has them" in (summary.error or "")
    started = [e for e in log.named("attempt.started") if e["agent"] == agent]
    assert [(e["pid"], e["node"]) for e in started] == [(None, None)]


# -- mixed faults ----------------------------------------------------------------------------


def test_a_mixed_fault_run_on_ray_settles_every_delegation_exactly_once(
    zeus: Zeus, log: Recorder
) -> None:
    # A hang is found stale; the deadline leaves room for queueing on 2 CPUs (waiting for
    # a node is not a hang) and for Ray to start workers in place of those that died.
    agent = on_ray(zeus, chaos, timeout_s=20.0, shutdown={"grace_s": 0.1},
                   heartbeat={"interval_s": 0.2, "stale_after_s": 1.5},
                   retry={"max_retries": 1, "initial_s": 0, "jitter": 0})
    faults = ["ok", "crash", "transient", "hang", "error", "ok", "transient", "crash"]
    handles = [zeus.dispatch(Brief(agent=agent, scope=f, inputs={"fault": f})) for f in faults]
    summaries = [h.result(timeout=60) for h in handles]
    expected = {"ok": "completed", "crash": "completed", "transient": "completed",
                "hang": "completed", "error": "failed"}
    assert [s.status.value for s in summaries] == [expected[f] for f in faults]
    first = {"ok": "completed", "crash": "crash", "transient": "transient", "hang": "stale",
             "error": "error"}
    assert [s.attempts[0].outcome.value for s in summaries] == [first[f] for f in faults]
    sync(zeus)
    settled = [e["delegation_id"] for e in log.named("delegation.settled")
               if e["agent"] == agent]
    assert sorted(settled) == sorted(h.id for h in handles)  # each exactly once
    assert zeus.tree()["open"] == 0
