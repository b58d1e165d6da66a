"""`fan_out` for LangGraph, in a graph of plain nodes (no model at all)."""

from __future__ import annotations

import asyncio
import operator
import threading
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip(
    "langgraph", reason="the langgraph extra is not installed (pip install -e '.[langgraph]')"
)

from langgraph.graph import END, START, StateGraph

from actors import Brief, Context, Status, Summary, TransientError
from supervisor import SupervisorError
from supervisor.integrations._bridge import AWAITER_CANCELLED
from supervisor.integrations.langgraph import fan_out
from tests._integration_agents import echo
from tests._support import cancel_once_running, wait_cancelled
from tests.conftest import Recorder, ZeusFactory


class State(TypedDict, total=False):
    topics: list[str]
    findings: list[Summary]
    report: str
    log: Annotated[list[str], operator.add]


def graph(node: Any) -> Any:
    """plan -> fan_out -> report."""
    builder = StateGraph(State)
    builder.add_node("plan", lambda state: {"log": ["plan"]})
    builder.add_node("research", node)
    builder.add_node("report", lambda state: {
        "report": " | ".join(str(s.output) for s in state["findings"]), "log": ["report"]
    })
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "research")
    builder.add_edge("research", "report")
    builder.add_edge("report", END)
    return builder.compile()


def briefs(state: State) -> list[Brief]:
    return [Brief(agent="echo", scope=topic) for topic in state["topics"]]


def test_the_node_writes_the_groups_summaries_in_brief_order(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus({"echo": {}}, works={"echo": echo})
    app = graph(fan_out(zeus, briefs, key="findings"))
    final = asyncio.run(app.ainvoke({"topics": ["b", "a", "c"]}))
    assert [s.status for s in final["findings"]] == [Status.completed] * 3
    assert final["report"] == "b | a | c" and final["log"] == ["plan", "report"]


def test_the_node_also_runs_in_a_synchronous_graph(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus({"echo": {}}, works={"echo": echo})
    final = graph(fan_out(zeus, briefs, key="findings")).invoke({"topics": ["x"]})
    assert final["report"] == "x"


def test_the_strategy_is_the_groups(make_zeus: ZeusFactory, recorder: Recorder) -> None:
    slow_started = threading.Event()

    def work(brief: Brief, ctx: Context) -> str:
        if brief.scope == "slow" and ctx.attempt == 1:
            slow_started.set()
            ctx.sleep(60)  # restarted by its sibling's failure long before
        if brief.scope == "bad" and ctx.attempt == 1:
            slow_started.wait(10)
            raise TransientError("flaky")
        return brief.scope

    zeus = make_zeus({"echo": {"retry": {"max_retries": 1, "initial_s": 0}}},
                     works={"echo": work})
    node = fan_out(zeus, briefs, key="findings", strategy="one_for_all")
    final = asyncio.run(graph(node).ainvoke({"topics": ["bad", "slow"]}))
    assert final["report"] == "bad | slow"
    assert [e["delegation_id"] for e in recorder.named("group.restarted")] == ["echo-2"]


def test_an_unknown_strategy_is_refused(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus({"echo": {}}, works={"echo": echo})
    node = fan_out(zeus, briefs, key="findings", strategy="all_at_once")  # type: ignore[arg-type]
    with pytest.raises(SupervisorError, match="unknown strategy 'all_at_once'"):
        asyncio.run(graph(node).ainvoke({"topics": ["x"]}))


def test_cancelling_the_graphs_task_cancels_the_group(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    zeus = make_zeus({"echo": {}}, works={"echo": wait_cancelled})
    app = graph(fan_out(zeus, briefs, key="findings"))

    cancel_once_running(lambda: app.ainvoke({"topics": ["a", "b"]}), recorder, 2)
    settled = recorder.wait_for("delegation.settled", 2)
    assert [e["status"] for e in settled] == ["cancelled", "cancelled"]
    reasons = {e["reason"] for e in recorder.named("delegation.cancel_requested")}
    assert reasons == {AWAITER_CANCELLED}
