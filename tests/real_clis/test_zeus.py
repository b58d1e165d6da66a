"""The real agent CLIs under Zeus, as a user writes them: an agent whose `command:`, `args:`
and `env:` are the installed CLI's (clis.py), `Zeus.start` and `dispatch`, no wrapper.

Every CLI's scenarios run at once on one Zeus (the `every_run` fixture), each against a
model server and a HOME of its own, so that what is left of a scenario's processes can
be told apart from another's; each test then asserts one scenario of one CLI.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from supervisor import Brief, Routing, Status, Zeus
from tests.real_clis.clis import BLOCKED_TEXT, CLIS, CliSetup, agent, cli_setup, processes_of
from tests.real_clis.model_server import ModelServer, Turn, Usage, final, hang, tool_call

# every scenario runs in the first test's setup: 20 CLIs at once take over a minute on two cores
pytestmark = [pytest.mark.process, pytest.mark.realtime, pytest.mark.timeout(300)]

DEADLINE = 20.0  # the hang's and the long tool's timeout_s: time for 8 CLIs to start at once
SONNET = {"input_per_mtok": 3.0, "output_per_mtok": 15.0}  # pricing: for the cost caps
CAP = 0.01
LONG_TOOL = "echo waiting; sleep 300; echo done"  # Claude refuses a standalone sleep
COMPLETED = BLOCKED_TEXT.replace("Status: blocked", "Status: completed")


@dataclass
class Scenario:
    """One delegation of a scenario: its server, its CLI's setup, and how it ended."""

    server: ModelServer
    setup: CliSetup
    summaries: list[Any]
    left: list[psutil.Process]  # its processes still alive once it settled


@dataclass
class Ran:
    name: str
    scenarios: dict[str, Scenario]
    journal: Path

    def __getitem__(self, key: str) -> Scenario:
        return self.scenarios[key]

    def tool_events(self, delegation_id: str) -> list[dict[str, Any]]:
        events = [json.loads(line) for line in self.journal.read_text().splitlines()]
        return [e for e in events
                if e["event"] == "attempt.tool" and e["delegation_id"] == delegation_id]


def scripts(name: str) -> dict[str, list[Turn]]:
    """Each scenario's model turns."""
    spend = Usage(1000, 0, 2000)  # $0.033 at SONNET: over CAP in one reply
    return {
        # (a second long, so that its start and its end reach Zeus apart)
        "blocked": [tool_call("sleep 1; echo hi", usage=Usage(1200, 300, 40)),
                    final(BLOCKED_TEXT, usage=Usage(1337, 411, 53))],
        "hang": [hang()],
        "long_tool": [tool_call(LONG_TOOL), final(COMPLETED)],
        "follow_up": [final(COMPLETED, usage=Usage(1500, 0, 60)),
                      final(COMPLETED, usage=Usage(1500, 0, 60))],
        # Claude: the cap is crossed by the tool call's reply, while its tool still runs
        "cost_cap": [tool_call("sleep 5; echo hi" if name == "claude" else "echo hi",
                               usage=spend), final(COMPLETED, usage=spend)],
    }


POLICIES: dict[str, dict[str, Any]] = {
    "blocked": {},
    "hang": {"timeout_s": DEADLINE},
    "long_tool": {"timeout_s": DEADLINE,
                  "heartbeat": {"stale_after_s": 120, "stale_in_tool_s": 600}},
    "follow_up": {},
    "cost_cap": {"budget": {"max_cost": CAP}, "pricing": SONNET},
}
TIMED = ("hang", "long_tool")  # started first, so that each reaches its model in time


@pytest.fixture(scope="module")
def every_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Ran]]:
    """Every scenario of every CLI on one Zeus, all settled: the timed ones dispatched
    first, the others once each timed one's CLI has asked its model."""
    tmp = tmp_path_factory.mktemp("clis")
    keys = [(name, key) for name in CLIS for key in POLICIES]
    servers = {(name, key): ModelServer(scripts(name)[key]) for name, key in keys}
    for server in servers.values():
        server.__enter__()
    setups = {(name, key): cli_setup(name, tmp / name / key, server.url)
              for (name, key), server in servers.items()}
    agents = {f"{name}-{key}": agent(setups[name, key], **POLICIES[key]) for name, key in keys}
    journal = tmp / "journal.jsonl"
    work = tmp / "work"  # the CLIs' folder (OpenCode snapshots the one it starts in)
    work.mkdir()
    home = os.getcwd()
    os.chdir(work)
    zeus = Zeus.start(Routing.from_dict({"version": 1, "agents": agents}), log=str(journal))

    def dispatch(name: str, key: str, scope: str) -> Any:
        return zeus.dispatch(Brief(agent=f"{name}-{key}", scope=scope, session=f"{key}-1"))

    try:
        handles = {(name, key): dispatch(name, key, f"Run the {key} task, then report.")
                   for name, key in keys if key in TIMED}
        for name, key in handles:
            servers[name, key].wait_for(lambda requests: any(r.main for r in requests), 30)
        handles |= {(name, key): dispatch(name, key, f"Run the {key} task, then report.")
                    for name, key in keys if key not in TIMED}
        summaries = {k: [handle.result(timeout=120)] for k, handle in handles.items()}
        again = {name: dispatch(name, "follow_up", "Now the follow-up, then report.")
                 for name in CLIS}
        for name, handle in again.items():
            summaries[name, "follow_up"].append(handle.result(timeout=120))
        left = {k: processes_of(setup.home) for k, setup in setups.items()}
        yield {name: Ran(name, {key: Scenario(servers[name, key], setups[name, key],
                                              summaries[name, key], left[name, key])
                                for key in POLICIES}, journal)
               for name in CLIS}
    finally:
        zeus.stop(timeout=30)
        os.chdir(home)
        for server in servers.values():
            server.close()


@pytest.fixture(params=CLIS)
def ran(request: pytest.FixtureRequest, every_run: dict[str, Ran]) -> Ran:
    return every_run[request.param]


def by_cli(**values: Any) -> Callable[[str], Any]:
    return lambda name: values.get(name, values.get("others"))


def test_a_tool_call_then_blocked_settles_blocked_with_the_servers_tokens(ran: Ran) -> None:
    scenario = ran["blocked"]
    (summary,) = scenario.summaries
    assert summary.status is Status.blocked, summary.error
    assert summary.findings == ["echo hi printed hi"]
    assert summary.risks == ["blocker: the deploy key is missing; a person must provide it"]
    (attempt,) = summary.attempts
    assert attempt.tool_calls == 1 and attempt.session_id
    # nothing waited for a standard input until the deadline; 20 CLIs starting at once on
    # two cores have taken 36 s here
    assert summary.duration_s < 120
    sent = scenario.server.usage_sent()
    assert summary.usage.input_tokens == sent.input + sent.cached
    assert summary.usage.output_tokens == sent.output


def test_the_tool_call_is_in_the_journal(ran: Ran) -> None:
    (summary,) = ran["blocked"].summaries
    events = ran.tool_events(summary.id)
    # OpenCode reports a tool only once it is over: one end event
    phases = by_cli(opencode=["end"], others=["start", "end"])(ran.name)
    assert [e["phase"] for e in events] == phases
    assert all(e["side_effects"] for e in events)
    assert events[-1]["attempt_id"] == summary.attempts[0].id
    if "start" in phases:
        assert events[-1]["duration_s"] > 0.5  # a `sleep 1`, timed from its start message


def test_a_hung_model_server_is_stopped_at_the_deadline_and_nothing_is_left(ran: Ran) -> None:
    scenario = ran["hang"]
    (summary,) = scenario.summaries
    assert summary.status is Status.timed_out and summary.timeout_kind == "deadline"
    (attempt,) = summary.attempts
    assert DEADLINE - 0.5 < attempt.duration_s < DEADLINE + 5
    assert attempt.killed is not None
    assert scenario.left == []
    assert scenario.server.main_requests(), [(r.path, r.body) for r in scenario.server.requests]
    if ran.name != "opencode":  # OpenCode names its session only with its first event
        assert attempt.session_id


def test_a_long_tool_is_stopped_at_the_deadline_with_its_command(ran: Ran) -> None:
    scenario = ran["long_tool"]
    (summary,) = scenario.summaries
    assert scenario.left == []  # no `sleep 300` either
    if ran.name == "codex":  # hands a long command back to the model after about 10 s
        assert summary.status in (Status.completed, Status.timed_out), summary.error
        return
    assert summary.status is Status.timed_out, summary.error
    (attempt,) = summary.attempts
    assert attempt.duration_s < DEADLINE + 5
    assert [turn.kind for turn in scenario.server.answered()] == ["tool"]  # it ran


def test_a_follow_up_resumes_the_session_and_is_charged_only_its_turn(ran: Ran) -> None:
    scenario = ran["follow_up"]
    first, follow_up = scenario.summaries
    assert first.status is Status.completed and follow_up.status is Status.completed
    assert follow_up.attempts[0].session_id == first.attempts[0].session_id
    last = scenario.server.main_requests()[-1]
    assert "Run the follow_up task" in json.dumps(last.body)  # the server sees the history
    assert follow_up.usage.input_tokens == 1500 and follow_up.usage.output_tokens == 60
    assert first.usage.input_tokens == 1500 and first.usage.output_tokens == 60
    if ran.name == "claude":  # its own cost of the turn, not the session's total
        assert first.usage.cost > 0
        assert follow_up.usage.cost == pytest.approx(first.usage.cost, rel=0.2)


def test_a_cost_cap_settles_budget_exceeded_with_the_spend_kept(ran: Ran) -> None:
    scenario = ran["cost_cap"]
    (summary,) = scenario.summaries
    assert summary.status is Status.budget_exceeded, summary.error
    assert summary.usage.cost > CAP  # the charge that crossed it counts
    assert scenario.left == []
    if ran.name == "claude":  # crossed within the tool call's reply: its turn never ended
        assert summary.attempts[0].killed is not None
        assert len(scenario.server.main_requests()) == 1


def test_no_scenario_leaves_a_process(ran: Ran) -> None:
    assert {key: s.left for key, s in ran.scenarios.items() if s.left} == {}
    assert os.environ.get("ZEUS_OFFLINE_NETNS") == "1"
