"""`delegate_tool` for pydantic-ai, driven by its own offline `FunctionModel`."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip(
    "pydantic_ai", reason="the pydantic-ai extra is not installed (pip install -e '.[pydantic-ai]')"
)

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from actors import Brief, Context, Status
from supervisor import UnknownAgent
from supervisor.integrations._bridge import AWAITER_CANCELLED
from supervisor.integrations.pydantic_ai import delegate_tool
from tests._integration_agents import echo
from tests._support import cancel_once_running, wait_cancelled
from tests.conftest import Recorder, ZeusFactory


def calls_delegate(args: dict[str, Any], seen: list[str]) -> FunctionModel:
    """A model that calls `delegate(**args)` once, then answers with what came back."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.extend(tool.description or "" for tool in info.function_tools)
        for part in messages[-1].parts:
            if isinstance(part, ToolReturnPart | RetryPromptPart):
                return ModelResponse(parts=[TextPart(str(part.content))])
        return ModelResponse(parts=[ToolCallPart("delegate", args)])

    return FunctionModel(respond)


def test_the_model_reads_the_agents_and_gets_the_summary_back(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus({"echo": {"role": "echoes", "timeout_s": 5}, "other": {}},
                     works={"echo": echo})
    seen: list[str] = []
    agent = Agent(calls_delegate({"agent": "echo", "scope": "say hi"}, seen),
                  tools=[delegate_tool(zeus, agents=["echo"])])
    answer = asyncio.run(agent.run("delegate it")).output
    assert answer.startswith("<subtask_summary") and "completed" in answer
    assert "say hi" in answer
    assert "- echo (echoes): deadline 5 s" in seen[0] and "other" not in seen[0]


def test_an_unknown_agent_goes_back_to_the_model_as_a_retry(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus({"echo": {}}, works={"echo": echo})
    agent = Agent(calls_delegate({"agent": "nobody", "scope": "x"}, []),
                  tools=[delegate_tool(zeus)])
    answer = asyncio.run(agent.run("delegate it")).output
    assert "no agent named 'nobody' to delegate to; use one of: echo" in answer


def test_a_tool_for_an_agent_nobody_defines_is_refused(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus({"echo": {}}, works={"echo": echo})
    with pytest.raises(UnknownAgent, match="no agent named 'ghost'"):
        delegate_tool(zeus, agents=["ghost"])


def test_cancelling_the_run_cancels_the_delegation(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    zeus = make_zeus({"w": {}}, works={"w": wait_cancelled})
    agent = Agent(calls_delegate({"agent": "w", "scope": "x"}, []), tools=[delegate_tool(zeus)])

    cancel_once_running(lambda: agent.run("delegate it"), recorder)
    (settled,) = recorder.wait_for("delegation.settled")
    assert settled["status"] == Status.cancelled
    assert recorder.named("delegation.cancel_requested")[0]["reason"] == AWAITER_CANCELLED


def test_a_child_charges_its_pydantic_ai_runs_usage(make_zeus: ZeusFactory) -> None:
    def runs_an_agent(brief: Brief, ctx: Context) -> str:
        result = asyncio.run(Agent(TestModel(custom_output_text="done")).run(brief.scope))
        ctx.charge_usage(result.usage)
        return result.output

    zeus = make_zeus({"a": {"pricing": {"input_per_mtok": 1e6}}}, works={"a": runs_an_agent})
    summary = zeus.dispatch(Brief(agent="a", scope="hello there")).result(10)
    assert summary.status is Status.completed
    assert summary.usage.calls == 1 and summary.usage.input_tokens > 0
    assert summary.usage.cost == pytest.approx(summary.usage.input_tokens)
