"""Agent CLIs under Zeus, through the real subprocess path: the fake CLIs
(tests/fixtures/agent_clis/fake_cli.py) stand in for Claude Code, Codex, Gemini,
OpenCode and Cursor on `PATH`, check the arguments Zeus passes and replay each
CLI's real stream format (docs/agent-clis.md).

The scenario a fake replays is named in the brief's scope (`scenario: blocked`).
Tests marked `both` run twice: with the program read by the supervisor's process,
and by a worker process (a Zeus with a store and an orphan grace runs it so).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from supervisor import Brief, Routing, Status, Zeus
from tests._agent_clis import TRANSCRIPTS, FakeClis, fake_clis
from tests._support import alive, eventually

__all__ = ["fake_clis"]  # the fixture, imported for its use here

pytestmark = [pytest.mark.process, pytest.mark.realtime]

CLIS = ("claude", "codex", "gemini", "opencode", "cursor")
MakeZeus = Callable[..., Zeus]


@pytest.fixture(params=["supervisor", "worker"])
def where(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_zeus(tmp_path: Path, fake_clis: FakeClis) -> Iterator[MakeZeus]:
    """`make_zeus(agents, where="supervisor"|"worker")`: a real-clock Zeus whose agents'
    programs are the fake CLIs."""
    started: list[Zeus] = []

    def make(agents: dict[str, dict[str, Any]], where: str = "supervisor") -> Zeus:
        supervisor: dict[str, Any] = {}
        kwargs: dict[str, Any] = {"log": str(tmp_path / f"events-{len(started)}.jsonl")}
        if where == "worker":  # a store with a grace: commands run under workers
            kwargs["store"] = str(tmp_path / f"zeus-{len(started)}.db")
            supervisor["orphan_grace_s"] = 5
        routing = Routing.from_dict({"version": 1, "supervisor": supervisor, "agents": agents})
        zeus = Zeus.start(routing, **kwargs)
        started.append(zeus)
        return zeus

    yield make
    for zeus in started:
        zeus.stop(timeout=20)


def run(zeus: Zeus, agent: str, scenario: str, **brief: Any) -> Any:
    return zeus.dispatch(Brief(agent=agent, scope=f"Fix the failing test (scenario: {scenario})",
                               **brief)).result(timeout=60)


def cli(speaks: str, **policy: Any) -> dict[str, Any]:
    return {"speaks": speaks, "timeout_s": 30, "shutdown": {"grace_s": 0.5, "term_s": 0.5},
            **policy}


# -- a run that ends with its summary block --------------------------------------------------


@pytest.mark.parametrize("speaks", CLIS)
def test_a_completed_run_settles_completed_with_its_block(
        make_zeus: MakeZeus, fake_clis: FakeClis, speaks: str) -> None:
    zeus = make_zeus({"hermes": cli(speaks)})
    summary = run(zeus, "hermes", "completed")
    assert summary.status is Status.completed, summary.error
    assert summary.findings and summary.validation  # the block's sections
    assert summary.changes
    assert summary.partial_results == []  # its lines are progress, not results
    attempt = summary.attempts[0]
    assert attempt.session_id  # the CLI's own session id, kept with the attempt
    assert attempt.bad_lines == 0
    (call,) = fake_clis.calls()
    assert "SUBTASK BRIEF" in call["prompt"] and "<subtask_summary>" in call["prompt"]
    assert call["resume"] is None
    # Codex and OpenCode read an open pipe to its end before they start: /dev/null
    assert call["stdin"] == "devnull"
    if speaks != "cursor":  # Cursor reports no usage at all
        assert summary.usage.input_tokens > 0 and summary.usage.output_tokens > 0


def test_a_command_that_reports_blocked_settles_blocked_without_its_lines(
        make_zeus: MakeZeus, tmp_path: Path) -> None:
    """The new user's case: a plain `command:` printing a line of work, then its block."""
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\necho 'looked at the config'\ncat <<'EOF'\n<subtask_summary>\n"
                      "Status: blocked\nAgent: talos\nScope: deploy\n\nFindings:\n"
                      "- the staging credentials are missing\n\nRisks / Follow-up:\n"
                      "- needs STAGING_TOKEN from the owner\n</subtask_summary>\nEOF\n")
    script.chmod(0o755)
    zeus = make_zeus({"talos": {"command": [str(script)], "retry": {"max_retries": 2}}})
    summary = zeus.dispatch(Brief(agent="talos", scope="deploy")).result(timeout=30)
    assert summary.status is Status.blocked
    assert summary.findings == ["the staging credentials are missing"]
    assert "needs STAGING_TOKEN" in (summary.error or "")
    assert summary.partial_results == []
    assert len(summary.attempts) == 1  # blocked: the owner decides, nothing is retried


@pytest.mark.parametrize("speaks", ["claude", "codex"])
def test_blocked_is_not_retried(make_zeus: MakeZeus, speaks: str) -> None:
    zeus = make_zeus({"hermes": cli(speaks, retry={"max_retries": 2})})
    summary = run(zeus, "hermes", "blocked")
    assert summary.status is Status.blocked
    assert len(summary.attempts) == 1
    assert "the agent reported Status: blocked" in (summary.error or "")


def test_timed_out_is_retried_then_falls_back_to_another_cli(
        make_zeus: MakeZeus, fake_clis: FakeClis) -> None:
    zeus = make_zeus({
        "hermes": cli("claude", retry={"max_retries": 1, "initial_s": 0.01}, fallback="talos",
                      retry_after_tool_calls=True),  # its transcript edits a file
        "talos": cli("codex"),
    })
    brief = Brief(agent="hermes", scope="Fix it (scenario: timed_out)")
    handle = zeus.dispatch(brief)
    summary = handle.result(timeout=60)
    # codex replays its own timed_out too: the whole chain, each step as a deadline is
    assert [a.outcome.value for a in summary.attempts] == ["timeout", "timeout", "timeout"]
    assert [a.agent for a in summary.attempts] == ["hermes", "hermes", "talos"]
    assert summary.status is Status.timed_out
    assert [c["cli"] for c in fake_clis.calls()] == ["claude", "claude", "codex"]


# -- spend --------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["supervisor", "worker"])
def test_a_live_budget_stops_the_cli_mid_stream(
        make_zeus: MakeZeus, where: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the spend transcript with a model's pace: a pause after each tool result
    slow = tmp_path / "spend.jsonl"
    lines = (TRANSCRIPTS / "claude" / "spend.jsonl").read_text().splitlines()
    slow.write_text("\n".join(line + ("\n#! sleep 0.3" if '"tool_result"' in line else "")
                              for line in lines) + "\n")
    monkeypatch.setenv("ZEUS_FAKE_CLI_TRANSCRIPT", str(slow))
    zeus = make_zeus({"hermes": cli("claude", budget={"max_output_tokens": 300})}, where)
    summary = run(zeus, "hermes", "spend")
    assert summary.status is Status.budget_exceeded
    assert summary.usage.output_tokens > 300  # the charge that broke the cap counts
    assert summary.attempts[0].killed is not None  # stopped, not run to its end
    full = run(make_zeus({"hermes": cli("claude")}, where), "hermes", "spend")
    assert full.status is Status.completed
    assert summary.usage.output_tokens < full.usage.output_tokens


def test_claudes_repeated_message_ids_count_once_and_its_total_cost_is_kept(
        make_zeus: MakeZeus) -> None:
    zeus = make_zeus({"hermes": cli("claude")})
    summary = run(zeus, "hermes", "spend")
    events = _transcript("claude", "spend")
    by_id: dict[str, int] = {}
    for event in events:
        message = event.get("message") or {}
        if event.get("type") == "assistant" and message.get("usage"):
            by_id[message["id"]] = max(by_id.get(message["id"], 0),
                                       message["usage"]["output_tokens"])
    assert summary.usage.output_tokens == sum(by_id.values())
    result = next(e for e in events if e.get("type") == "result")
    assert summary.usage.cost == pytest.approx(result["total_cost_usd"])
    assert summary.usage.calls == len(by_id)


def test_a_cost_cap_is_passed_to_claude_as_its_own_backstop(
        make_zeus: MakeZeus, fake_clis: FakeClis) -> None:
    zeus = make_zeus({"hermes": cli("claude", budget={"max_cost": 2.5},
                                    pricing={"input_per_mtok": 3, "output_per_mtok": 15})})
    run(zeus, "hermes", "completed")
    assert float(fake_clis.calls()[0]["budget"]) == pytest.approx(2.5)


def test_a_cost_cap_with_less_left_than_claude_accepts_settles_without_starting_it(
        make_zeus: MakeZeus, fake_clis: FakeClis, where: str) -> None:
    # $0.00004 would be passed as --max-budget-usd 0, which Claude refuses to start with
    zeus = make_zeus({"hermes": cli("claude", budget={"max_cost": 0.00004},
                                    pricing={"input_per_mtok": 3, "output_per_mtok": 15},
                                    retry={"max_retries": 2, "initial_s": 0})}, where)
    summary = run(zeus, "hermes", "completed")
    assert summary.status is Status.budget_exceeded, summary.error
    assert "--max-budget-usd must be more than 0" in (summary.error or "")
    assert len(summary.attempts) == 1  # a cap reached is not retried
    assert fake_clis.calls() == []  # never started
    enough = make_zeus({"hermes": cli("claude", budget={"max_cost": 0.0001},
                                      pricing={"input_per_mtok": 3, "output_per_mtok": 15})})
    run(enough, "hermes", "completed")
    assert fake_clis.calls()[0]["budget"] == pytest.approx(0.0001)


# -- standard input and mail ----------------------------------------------------------------


@pytest.mark.parametrize("speaks", CLIS)
def test_mail_to_a_cli_is_refused_and_the_journal_says_why(
        make_zeus: MakeZeus, tmp_path: Path, speaks: str) -> None:
    zeus = make_zeus({"hermes": cli(speaks)})
    handle = zeus.dispatch(Brief(agent="hermes", scope="Fix it (scenario: hang)"))
    assert handle.send({"hint": "look in tests/"}) is False
    handle.cancel()
    handle.result(timeout=30)
    events = [json.loads(line) for line in (tmp_path / "events-0.jsonl").read_text().splitlines()]
    (refused,) = [e for e in events if e["event"] == "delegation.mail_refused"]
    assert refused["delegation_id"] == handle.id
    assert f"speaks: {speaks} reads no mail" in refused["reason"]


def test_mail_to_a_cli_delegation_is_refused_while_its_fallback_runs_too(
        make_zeus: MakeZeus, tmp_path: Path) -> None:
    # The host answers False for a delegation made for a CLI; Zeus gives its fallback's
    # attempt nothing either, so the answer is the truth whichever attempt runs.
    listen = ["python", "-c", "import select, sys; ready = select.select([0], [], [], 3)[0];"
              " print('got ' + sys.stdin.readline().strip() if ready else 'none')"]
    zeus = make_zeus({"hermes": cli("claude", fallback="echo", retry_after_tool_calls=True),
                      "echo": {"command": listen, "timeout_s": 30}})
    handle = zeus.dispatch(Brief(agent="hermes", scope="Fix it (scenario: timed_out)"))
    journal = tmp_path / "events-0.jsonl"
    assert eventually(lambda: '"fallback.dispatched"' in journal.read_text())
    assert handle.send("hello") is False
    summary = handle.result(timeout=30)
    assert [a.agent for a in summary.attempts] == ["hermes", "echo"]
    assert summary.output == "none\n"
    events = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [e["event"] for e in events].count("delegation.mail_refused") == 1


def test_mail_kept_for_a_cli_fallback_is_dropped_and_the_journal_says_so(
        make_zeus: MakeZeus, tmp_path: Path) -> None:
    # A command that reads mail, whose fallback is a CLI: Zeus.send says True (the
    # delegation's agent reads mail), and what reaches the fallback, or waits for its
    # next attempt, is said lost in the journal.
    quick = {"grace_s": 0.2, "term_s": 0.2}
    zeus = make_zeus({"echo": {"command": ["sleep", "30"], "timeout_s": 1, "shutdown": quick,
                               "fallback": "hermes"},
                      "hermes": cli("claude", timeout_s=1, shutdown=quick,
                                    retry={"max_retries": 1, "initial_s": 1.5, "jitter": 0})})
    handle = zeus.dispatch(Brief(agent="echo", scope="Fix it (scenario: hang)"))
    journal = tmp_path / "events-0.jsonl"
    assert eventually(lambda: '"fallback.dispatched"' in journal.read_text())
    assert handle.send("to the running fallback") is True
    assert eventually(lambda: '"retry.scheduled"' in journal.read_text())
    assert handle.send("for its next attempt") is True
    handle.result(timeout=30)
    refused = [json.loads(line) for line in journal.read_text().splitlines()
               if '"delegation.mail_refused"' in line]
    assert [r["attempt_id"] for r in refused] == [f"{handle.id}-a2", f"{handle.id}-a3"]
    assert "1 message(s) sent before this attempt were dropped" in refused[1]["reason"]


def test_a_lines_command_keeps_its_standard_input_for_mail(make_zeus: MakeZeus) -> None:
    echo = ["python", "-c", "import sys; print('got ' + sys.stdin.readline().strip())"]
    zeus = make_zeus({"echo": {"command": echo, "timeout_s": 30}})
    handle = zeus.dispatch(Brief(agent="echo", scope="x"))
    assert handle.send("hello") is True
    assert handle.result(timeout=30).output == 'got "hello"\n'


def test_an_agents_env_reaches_its_program_with_the_hosts_variables_read(
        make_zeus: MakeZeus, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZEUS_TEST_HOST_VALUE", "from-the-host")
    monkeypatch.delenv("ZEUS_TEST_UNSET", raising=False)
    show = ["python", "-c", "import os; print(os.environ['A'], '|', os.environ['B'], '|',"
            " os.environ['ZEUS_TEST_HOST_VALUE'])"]
    zeus = make_zeus({"show": {"command": show, "timeout_s": 30, "env": {
        "A": "${ZEUS_TEST_HOST_VALUE}/x", "B": "[${ZEUS_TEST_UNSET}]"}}}, where)
    summary = zeus.dispatch(Brief(agent="show", scope="x")).result(timeout=30)
    assert summary.output == "from-the-host/x | [] | from-the-host\n", summary.error


# -- staleness -----------------------------------------------------------------------------


def test_a_long_tool_call_is_not_stale_but_a_silent_cli_is(make_zeus: MakeZeus) -> None:
    beat = {"interval_s": 0.2, "stale_after_s": 1.0, "stale_in_tool_s": 20}
    zeus = make_zeus({"hermes": cli("claude", heartbeat=beat)})
    in_tool = run(zeus, "hermes", "long_tool")  # 3 s inside one tool call, silent
    assert in_tool.status is Status.completed, in_tool.error
    silent = run(zeus, "hermes", "silent")  # 60 s of silence outside any tool
    assert silent.status is Status.timed_out and silent.timeout_kind == "stale"
    assert silent.attempts[0].duration_s < 10


# -- sessions ------------------------------------------------------------------------------


@pytest.mark.parametrize("speaks", CLIS)
def test_a_follow_up_in_the_session_resumes_the_cli_session(
        make_zeus: MakeZeus, fake_clis: FakeClis, speaks: str) -> None:
    zeus = make_zeus({"hermes": cli(speaks)})
    first = run(zeus, "hermes", "completed", session="fix-auth")
    # claude's and codex's fakes refuse a resume scenario without the right id
    scenario = "resume" if speaks in ("claude", "codex") else "completed"
    follow_up = run(zeus, "hermes", scenario, session="fix-auth")
    assert follow_up.status is Status.completed, follow_up.error
    calls = fake_clis.calls()
    assert calls[0]["resume"] is None
    assert calls[1]["resume"] == first.attempts[0].session_id
    other = run(zeus, "hermes", "completed", session="another")  # a new session starts fresh
    assert other.status is Status.completed and fake_clis.calls()[2]["resume"] is None


def test_a_stateful_performers_follow_up_resumes_its_own_session(
        make_zeus: MakeZeus, fake_clis: FakeClis) -> None:
    zeus = make_zeus({"hermes": cli("claude", stateful=True, retry_after_tool_calls=True)})
    summary = run(zeus, "hermes", "side_effect")  # dies without its result: a crash
    assert [a.outcome.value for a in summary.attempts] == ["crash", "crash"]
    first, second = fake_clis.calls()
    assert first["resume"] is None
    assert second["resume"] == summary.attempts[0].session_id


def test_a_side_effect_tool_blocks_a_blind_retry(make_zeus: MakeZeus) -> None:
    retry = {"max_retries": 2, "initial_s": 0.01, "resume_session": False}
    zeus = make_zeus({"hermes": cli("claude", retry=retry)})
    summary = run(zeus, "hermes", "side_effect")
    assert summary.status is Status.failed
    assert len(summary.attempts) == 1 and summary.attempts[0].outcome.value == "crash"
    assert "side effects" in (summary.error or "")
    assert summary.attempts[0].tool_calls >= 1


def test_a_crashed_cli_is_retried_in_its_session_after_side_effects(
        make_zeus: MakeZeus, fake_clis: FakeClis) -> None:
    zeus = make_zeus({"hermes": cli("claude", retry={"max_retries": 1, "initial_s": 0.01})})
    summary = run(zeus, "hermes", "side_effect")  # an Edit, then it dies: a crash
    assert [a.outcome.value for a in summary.attempts] == ["crash", "crash"]
    first, second = fake_clis.calls()
    assert first["resume"] is None
    assert second["resume"] == summary.attempts[0].session_id is not None
    assert "was stopped (crash: claude exited 1" in second["prompt"]
    assert "Go on from where you stopped" in second["prompt"]


def test_a_cli_fallback_after_side_effects_is_told_what_ran(
        make_zeus: MakeZeus, fake_clis: FakeClis) -> None:
    zeus = make_zeus({"hermes": cli("claude", fallback="talos"), "talos": cli("codex")})
    summary = run(zeus, "hermes", "side_effect")
    assert [a.agent for a in summary.attempts] == ["hermes", "talos"]
    told = fake_clis.calls()[1]["prompt"]
    assert ("A previous attempt ran Bash(python -m pytest -q tests/test_app.py); "
            "Edit(/home/dev/app/src/app.py)") in told
    assert "check before you act" in told


def test_a_work_function_fallback_after_side_effects_is_not_started_blind(
        make_zeus: MakeZeus) -> None:
    zeus = make_zeus({"hermes": cli("claude", fallback="echo"),
                      "echo": {"command": ["echo", "done"]}})
    summary = run(zeus, "hermes", "side_effect")
    assert [a.agent for a in summary.attempts] == ["hermes"]
    assert "side effects" in (summary.error or "")


# -- stopping -------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["supervisor", "worker"])
def test_a_hung_cli_is_stopped_at_its_deadline_with_its_grandchildren(
        make_zeus: MakeZeus, fake_clis: FakeClis, where: str) -> None:
    zeus = make_zeus({"hermes": cli("claude", timeout_s=2)}, where)
    summary = run(zeus, "hermes", "hang")
    assert summary.status is Status.timed_out and summary.timeout_kind == "deadline"
    assert summary.attempts[0].killed is not None
    grandchildren = next(c["grandchildren"] for c in fake_clis.calls() if "grandchildren" in c)
    assert eventually(lambda: not any(alive(pid) for pid in grandchildren))
    assert not alive(fake_clis.calls()[0]["pid"])


@pytest.mark.parametrize("where", ["supervisor", "worker"])
def test_a_cli_alive_after_its_result_is_stopped_and_its_result_kept(
        make_zeus: MakeZeus, fake_clis: FakeClis, where: str) -> None:
    zeus = make_zeus({"hermes": cli("claude", exit_grace_s=0.5)}, where)
    summary = run(zeus, "hermes", "stays_alive")
    assert summary.status is Status.completed, summary.error
    assert summary.findings
    assert summary.duration_s < 10  # not its 60 s
    assert not alive(fake_clis.calls()[0]["pid"])


# -- bad streams ---------------------------------------------------------------------------


@pytest.mark.parametrize("speaks", CLIS)
def test_bad_lines_are_counted_and_the_run_goes_on(make_zeus: MakeZeus, speaks: str) -> None:
    zeus = make_zeus({"hermes": cli(speaks)})
    summary = run(zeus, "hermes", "bad_lines")
    assert summary.status is Status.completed, summary.error
    assert summary.attempts[0].bad_lines == 3  # not JSON, an unknown type, over 1 MB


@pytest.mark.parametrize("speaks", CLIS)
def test_a_stream_without_its_result_is_a_crash_not_completed(
        make_zeus: MakeZeus, speaks: str) -> None:
    zeus = make_zeus({"hermes": cli(speaks)})
    summary = run(zeus, "hermes", "no_result")
    assert summary.status is Status.failed
    assert summary.attempts[0].outcome.value == "crash"
    assert "without its result" in (summary.attempts[0].error or "")


# What each transcript's error says: the vendor overloaded, rate limiting, a dropped
# connection (transient); a quota spent (unavailable); a broken stream (the task's error).
ERROR_OUTCOMES = {("gemini", "error_result"): "unavailable", ("gemini", "error_exit0"): "error",
                  ("claude", "error_exit0"): "error"}


@pytest.mark.parametrize("speaks", CLIS)
@pytest.mark.parametrize("scenario", ["error_result", "error_exit0"])
def test_an_error_result_is_sorted_by_its_cause_whatever_the_exit_code(
        make_zeus: MakeZeus, speaks: str, scenario: str) -> None:
    zeus = make_zeus({"hermes": cli(speaks)})
    summary = run(zeus, "hermes", scenario)
    assert summary.status is Status.failed
    expected = ERROR_OUTCOMES.get((speaks, scenario), "transient")
    assert summary.attempts[0].outcome.value == expected, summary.attempts[0]


def test_a_cli_not_on_path_fails_naming_the_program_and_the_command_key(
        make_zeus: MakeZeus, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    zeus = make_zeus({"hermes": cli("claude")})
    summary = zeus.dispatch(Brief(agent="hermes", scope="x")).result(timeout=30)
    assert summary.status is Status.failed
    assert "'claude' is not on PATH" in (summary.error or "")
    assert "agents.hermes.command" in (summary.error or "")


def test_a_lines_command_stopped_keeps_its_last_lines_as_partial_results(
        make_zeus: MakeZeus) -> None:
    zeus = make_zeus({"talos": {"command": ["sh", "-c", "seq 1 80; exec sleep 60"],
                                "timeout_s": 1.5, "partial_ok": True,
                                "shutdown": {"grace_s": 0.2, "term_s": 0.2}}})
    summary = zeus.dispatch(Brief(agent="talos", scope="count")).result(timeout=30)
    assert summary.status is Status.partial
    assert summary.partial_results == [str(n) for n in range(31, 81)]


def _transcript(cli_name: str, scenario: str) -> list[dict[str, Any]]:
    path = Path(__file__).parent / "fixtures" / "agent_clis" / cli_name / f"{scenario}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def test_a_cli_session_is_resumed_by_a_follow_up_after_a_restart(
        tmp_path: Path, fake_clis: FakeClis) -> None:
    """The CLI's session id is stored with its attempt: the next Zeus on the store resumes
    it for a follow-up in the same session (it lives in the CLI, not in a worker: the
    follow-up is not blocked as a lost session)."""
    routing = Routing.from_dict({"version": 1, "supervisor": {"orphan_grace_s": 5},
                                 "agents": {"hermes": cli("claude")}})
    store = str(tmp_path / "zeus.db")
    with Zeus.start(routing, store=store) as zeus:
        first = run(zeus, "hermes", "completed", session="fix-auth")
    with Zeus.start(routing, store=store) as zeus:
        follow_up = run(zeus, "hermes", "resume", session="fix-auth")
    assert follow_up.status is Status.completed, follow_up.error
    assert fake_clis.calls()[1]["resume"] == first.attempts[0].session_id
