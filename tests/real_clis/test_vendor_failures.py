"""When a real agent CLI cannot serve, is stopped, or its vendor fails: Zeus falls back to
another vendor's CLI or continues the stopped session (docs/agent-clis.md, "When the agent
cannot serve"). Every scenario runs at once on one Zeus (the `ran` fixture), each agent
against a model server and a HOME of its own; each test asserts one scenario.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from supervisor import Brief, Routing, Status, Zeus
from tests.real_clis.clis import BLOCKED_TEXT, agent, cli_setup, processes_of
from tests.real_clis.model_server import (
    ModelServer,
    Turn,
    Usage,
    api_error,
    final,
    hang,
    tool_call,
)

pytestmark = [pytest.mark.process, pytest.mark.realtime]

COMPLETED = BLOCKED_TEXT.replace("Status: blocked", "Status: completed")
FEW_RETRIES = {"CLAUDE_CODE_MAX_RETRIES": "1"}  # Claude's own API retries, shortened


@dataclass
class Scenario:
    """One delegation: its agents' servers (by agent name) and its summary."""

    servers: dict[str, ModelServer]
    summary: Any
    left: list[Any]


# Each scenario: its agents (name -> (cli, script, policy)), the first one dispatched.
def scenarios(tmp: Path) -> dict[str, dict[str, tuple[str, list[Turn], dict[str, Any]]]]:
    codex_completes = ("codex", [final(COMPLETED, usage=Usage(900, 0, 30))], {})
    stalls = dataclasses.replace(hang(), times=1)  # one request left unanswered, then on
    return {
        "overloaded": {
            "claude": ("claude", [api_error(529)],
                       {"env": FEW_RETRIES, "fallback": "codex"}),
            "codex": codex_completes},
        "bash_then_overloaded": {
            "claude": ("claude", [tool_call("echo hi"), api_error(529)],
                       {"env": FEW_RETRIES, "fallback": "codex",
                        "retry": {"max_retries": 1, "initial_s": 0}}),
            "codex": codex_completes},
        "not_installed": {
            "claude": ("claude", [], {"command": [str(tmp / "nowhere" / "claude")],
                                      "fallback": "codex"}),
            "codex": codex_completes},
        "untrusted": {
            "gemini": ("gemini", [final(COMPLETED)], {"args": ["--approval-mode", "yolo"],
                                                       "fallback": "codex"}),
            "codex": codex_completes},
        "stale": {
            "claude": ("claude", [tool_call("echo hi", usage=Usage(1200, 300, 40)), stalls,
                                  final(COMPLETED, usage=Usage(1500, 0, 60))],
                       {"heartbeat": {"stale_after_s": 4, "stale_in_tool_s": 60},
                        "retry": {"max_retries": 1, "initial_s": 0}})},
    }


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Scenario]]:
    tmp = tmp_path_factory.mktemp("vendor")
    plan = scenarios(tmp)
    servers = {(key, name): ModelServer(script)
               for key, agents in plan.items() for name, (_, script, _) in agents.items()}
    for server in servers.values():
        server.__enter__()
    agents: dict[str, dict[str, Any]] = {}
    homes = {}
    for key, members in plan.items():
        for name, (cli, _, policy) in members.items():
            setup = cli_setup(cli, tmp / key / name, servers[key, name].url)
            homes[key, name] = setup.home
            policy = dict(policy)
            if "fallback" in policy:
                policy["fallback"] = f"{key}-{policy['fallback']}"
            policy["env"] = {**setup.env, **policy.get("env", {})}
            agents[f"{key}-{name}"] = agent(setup, **policy)
    work = tmp / "work"
    work.mkdir()
    home = os.getcwd()
    os.chdir(work)
    zeus = Zeus.start(Routing.from_dict({"version": 1, "agents": agents}),
                      log=str(tmp / "journal.jsonl"))
    try:
        handles = {key: zeus.dispatch(Brief(agent=f"{key}-{next(iter(members))}",
                                            scope=f"Run the {key} task, then report."))
                   for key, members in plan.items()}
        summaries = {key: handle.result(timeout=150) for key, handle in handles.items()}
        yield {key: Scenario({name: servers[key, name] for name in members}, summaries[key],
                             [p for name in members for p in processes_of(homes[key, name])])
               for key, members in plan.items()}
    finally:
        zeus.stop(timeout=30)
        os.chdir(home)
        for server in servers.values():
            server.close()


def outcomes(summary: Any) -> list[tuple[str, str]]:
    return [(a.agent.split("-", 1)[1], a.outcome.value) for a in summary.attempts]


def test_claude_overloaded_on_every_try_falls_back_to_codex(ran: dict[str, Scenario]) -> None:
    scenario = ran["overloaded"]
    summary = scenario.summary
    assert summary.status is Status.completed, summary.error
    assert outcomes(summary) == [("claude", "transient"), ("codex", "completed")]
    assert "529" in (summary.attempts[0].error or "")
    assert scenario.left == []


def test_claude_after_a_bash_call_is_resumed_then_falls_back_told_of_the_call(
        ran: dict[str, Scenario]) -> None:
    scenario = ran["bash_then_overloaded"]
    summary = scenario.summary
    assert summary.status is Status.completed, summary.error
    assert outcomes(summary) == [("claude", "transient"), ("claude", "transient"),
                                 ("codex", "completed")]
    first, again = summary.attempts[:2]
    assert again.session_id == first.session_id is not None  # its session, not a new one
    told = json.dumps(scenario.servers["codex"].main_requests()[0].body)
    assert "A previous attempt ran Bash(echo hi)" in told


def test_claude_not_installed_falls_back_at_once(ran: dict[str, Scenario]) -> None:
    summary = ran["not_installed"].summary
    assert summary.status is Status.completed, summary.error
    assert outcomes(summary) == [("claude", "unavailable"), ("codex", "completed")]
    assert "install it" in (summary.attempts[0].error or "")


def test_gemini_in_an_untrusted_folder_falls_back_with_the_fix_named(
        ran: dict[str, Scenario]) -> None:
    summary = ran["untrusted"].summary
    assert summary.status is Status.completed, summary.error
    assert outcomes(summary) == [("gemini", "unavailable"), ("codex", "completed")]
    assert "--skip-trust" in (summary.attempts[0].error or "")


def test_a_stale_claude_turn_is_retried_by_resuming_its_session_and_charged_its_own_turn(
        ran: dict[str, Scenario]) -> None:
    scenario = ran["stale"]
    summary = scenario.summary
    assert summary.status is Status.completed, summary.error
    assert outcomes(summary) == [("claude", "stale"), ("claude", "completed")]
    first, again = summary.attempts
    assert again.session_id == first.session_id is not None
    server = scenario.servers["claude"]
    last = server.main_requests()[-1]
    assert "echo hi" in json.dumps(last.body)  # the server sees the stopped turn's history
    assert "was stopped" in json.dumps(last.body)
    # the tool call's reply (counted live before the stop), then the resumed turn's own
    assert summary.usage.input_tokens == (1200 + 300) + 1500
    assert summary.usage.output_tokens == 40 + 60
    assert scenario.left == []
