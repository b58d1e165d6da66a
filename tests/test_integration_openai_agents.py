"""`delegate_tool` for the OpenAI Agents SDK, driven by its own offline `ScriptedModel`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip(
    "agents", reason="the openai-agents extra is not installed (pip install -e '.[openai-agents]')"
)

from agents import Agent, Runner, set_tracing_disabled
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from actors import Status
from supervisor.integrations._bridge import AWAITER_CANCELLED
from supervisor.integrations.openai_agents import delegate_tool
from tests._integration_agents import echo
from tests._support import cancel_once_running, wait_cancelled
from tests.conftest import Recorder, ZeusFactory

set_tracing_disabled(True)


def tool_output(call: ModelCall) -> str:
    """What the last tool call returned, as the model is shown it."""
    outputs = [item for item in call.input if isinstance(item, dict)
               and item.get("type") == "function_call_output"]
    return str(outputs[-1]["output"])


def calls_delegate(args: dict[str, Any]) -> ScriptedModel:
    """A model that calls `delegate(**args)` once, then answers with what came back."""
    return ScriptedModel([
        [function_call("delegate", args, call_id="call-1")],
        ModelStep.respond(lambda call: [assistant_message(tool_output(call))]),
    ])


def test_the_model_reads_the_agents_and_gets_the_summary_back(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus({"echo": {"role": "echoes", "timeout_s": 5}}, works={"echo": echo})
    tool = delegate_tool(zeus)
    assert "- echo (echoes): deadline 5 s" in tool.description
    agent = Agent(name="lead", model=calls_delegate({"agent": "echo", "scope": "say hi"}),
                  tools=[tool])
    answer = asyncio.run(Runner.run(agent, "delegate it")).final_output
    assert answer.startswith("<subtask_summary") and "completed" in answer
    assert "say hi" in answer


def test_an_unknown_agent_comes_back_to_the_model_as_the_tools_output(
    make_zeus: ZeusFactory,
) -> None:
    zeus = make_zeus({"echo": {}}, works={"echo": echo})
    agent = Agent(name="lead", model=calls_delegate({"agent": "nobody", "scope": "x"}),
                  tools=[delegate_tool(zeus)])
    answer = asyncio.run(Runner.run(agent, "delegate it")).final_output
    assert "no agent named 'nobody' to delegate to; use one of: echo" in answer


def test_cancelling_the_run_cancels_the_delegation(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    zeus = make_zeus({"w": {}}, works={"w": wait_cancelled})
    model = ScriptedModel([[function_call("delegate", json.dumps({"agent": "w", "scope": "x"}),
                                          call_id="call-1")]])
    agent = Agent(name="lead", model=model, tools=[delegate_tool(zeus)])

    cancel_once_running(lambda: Runner.run(agent, "delegate it"), recorder)
    (settled,) = recorder.wait_for("delegation.settled")
    assert settled["status"] == Status.cancelled
    assert recorder.named("delegation.cancel_requested")[0]["reason"] == AWAITER_CANCELLED
