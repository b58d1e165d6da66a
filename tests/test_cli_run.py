"""`zeus dispatch` and `zeus run` through `main([...])`, and the live tree they draw.

The routing in tests/fixtures/plans runs the example agents in threads with
short deadlines, so these tests start no processes.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from actors import Brief, Status, Summary
from supervisor import Routing, Zeus
from supervisor import journal as jr
from supervisor.cli.commands import EXIT_BAD_INPUT, EXIT_INCOMPLETE, EXIT_OK
from supervisor.cli.live import LiveTree, bar
from supervisor.cli.main import build_parser, main
from supervisor.cli.render import describe

PLANS = Path(__file__).resolve().parent / "fixtures" / "plans"
ROUTING = PLANS / "routing.yml"
BOXES = set("─│┌┐└┘├┤┬┴┼━┃╭╮╰╯█░")


def summaries_in(text: str) -> list[Summary]:
    """Every `<subtask_summary>` block of `text`, in order."""
    blocks = text.split("</subtask_summary>")[:-1]
    return [Summary.parse(block + "</subtask_summary>") for block in blocks]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# -- the command list ----------------------------------------------------------------------
def test_demo_dispatch_and_run_are_zeus_commands() -> None:
    _, by_name = build_parser()
    assert {"demo", "dispatch", "run"} <= set(by_name)


# -- zeus dispatch ---------------------------------------------------------------------------
def test_dispatch_prints_the_subtask_summary_block_and_exits_0_when_it_completed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(
        [
            "dispatch",
            "flaky",
            "Fetch the release notes",
            "--routing",
            str(ROUTING),
            "--inputs",
            '{"fail_times": 1}',
        ]
    )
    out = capsys.readouterr().out
    assert code == EXIT_OK
    assert out.startswith("<subtask_summary>")
    assert out.rstrip().endswith("</subtask_summary>")
    summary = Summary.parse(out)
    assert summary.status is Status.completed
    assert [a.outcome.value for a in summary.attempts] == ["transient", "completed"]


def test_dispatch_json_is_the_whole_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["dispatch", "flaky", "Fetch the release notes", "--routing", str(ROUTING), "--json"]
    )
    summary = Summary.model_validate_json(capsys.readouterr().out)
    assert code == EXIT_OK
    assert (summary.id, summary.agent, summary.status) == ("flaky-1", "flaky", Status.completed)
    assert summary.output == {"attempt": 2}


def test_dispatch_exits_1_when_the_delegation_does_not_complete(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(
        [
            "dispatch",
            "spender",
            "Summarise every issue",
            "--routing",
            str(ROUTING),
            "--inputs",
            '{"interval_s": 0.01}',
        ]
    )
    assert code == EXIT_INCOMPLETE
    assert Summary.parse(capsys.readouterr().out).status is Status.budget_exceeded


def test_dispatch_partial_ok_keeps_what_was_found_when_the_deadline_passes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for n in range(40):
        write(tmp_path / f"f{n:02}.txt", "needle\n")
    inputs = json.dumps({"root": str(tmp_path), "delay_s": 0.05})
    routing = tmp_path / "routing.yml"  # scout without partial_ok: the flag turns it on
    write(routing, ROUTING.read_text().replace("partial_ok: true", "partial_ok: false"))
    code = main(
        [
            "dispatch",
            "scout",
            'Find "needle"',
            "--routing",
            str(routing),
            "--timeout",
            "0.6",
            "--partial-ok",
            "--inputs",
            inputs,
            "--json",
        ]
    )
    summary = Summary.model_validate_json(capsys.readouterr().out)
    assert code == EXIT_INCOMPLETE
    assert summary.status is Status.partial
    assert summary.timeout_kind == "deadline"
    assert summary.partial_results
    assert all("needle" in str(item) for item in summary.partial_results)


def test_dispatch_of_an_unknown_agent_exits_2_and_names_the_agents_routing_defines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["dispatch", "hephaestus", "Forge a shield", "--routing", str(ROUTING)])
    captured = capsys.readouterr()
    assert code == EXIT_BAD_INPUT
    assert captured.out == ""
    assert "unknown agent 'hephaestus'" in captured.err
    assert "scout, flaky, spender" in captured.err


def test_dispatch_with_a_bad_routing_file_exits_2_naming_the_file_and_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = write(tmp_path / "routing.yml", "version: 1\nagents:\n  scout:\n    timeout_s: -3\n")
    code = main(["dispatch", "scout", "x", "--routing", str(bad)])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT
    assert str(bad) in err
    assert "timeout_s" in err


def test_dispatch_with_a_missing_routing_file_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(["dispatch", "scout", "x", "--routing", str(tmp_path / "nope.yml")])
    assert code == EXIT_BAD_INPUT
    assert "nope.yml: cannot read it" in capsys.readouterr().err


@pytest.mark.parametrize("timeout", ["0", "-1"])
def test_dispatch_refuses_a_timeout_that_is_not_positive(
    capsys: pytest.CaptureFixture[str], timeout: str
) -> None:
    code = main(["dispatch", "scout", "x", "--routing", str(ROUTING), "--timeout", timeout])
    assert code == EXIT_BAD_INPUT
    assert "--timeout: input should be greater than 0" in capsys.readouterr().err


def test_dispatch_with_a_journal_that_cannot_be_written_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(
        [
            "dispatch",
            "flaky",
            "x",
            "--routing",
            str(ROUTING),
            "--log",
            str(tmp_path / "no" / "such" / "dir.jsonl"),
        ]
    )
    assert code == EXIT_BAD_INPUT
    assert "cannot write the journal" in capsys.readouterr().err


def test_dispatch_writes_a_journal_that_zeus_tree_reads(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = tmp_path / "events.jsonl"
    assert main(["dispatch", "flaky", "x", "--routing", str(ROUTING), "--log", str(log)]) == 0
    capsys.readouterr()
    journal = jr.load(log)
    assert journal.notes == []
    run = journal.run
    assert run.stopped
    assert run.delegations["flaky-1"].status == "completed"
    assert [a.outcome for a in run.delegations["flaky-1"].attempts] == ["transient", "completed"]
    assert main(["tree", str(log)]) == EXIT_OK
    assert "flaky-1 flaky: completed" in capsys.readouterr().out


def test_tree_follow_on_a_pipe_prints_each_event_in_the_live_views_one_line_format(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = tmp_path / "events.jsonl"
    assert main(["dispatch", "flaky", "x", "--routing", str(ROUTING), "--log", str(log)]) == 0
    capsys.readouterr()

    assert main(["tree", str(log), "--follow"]) == EXIT_OK
    out = capsys.readouterr().out

    lines = out.splitlines()
    assert lines[0].split()[:3] == ["0.00s", "zeus", "zeus"]
    assert any(line.split()[1:2] == ["flaky-1-a1"] and "retry in" in line for line in lines)
    assert not [line for line in lines if "=" in line]  # no key=value dumps
    assert not [line for line in lines if ":" in line.split(" ", 1)[0]]  # no clock times


def test_dispatch_prints_only_the_summary_when_stdout_is_not_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["dispatch", "flaky", "x", "--routing", str(ROUTING)])
    captured = capsys.readouterr()
    assert captured.out.startswith("<subtask_summary>")
    assert captured.err == ""


# -- zeus run --------------------------------------------------------------------------------
def test_run_prints_every_summary_in_plan_order_and_exits_1_when_one_did_not_complete(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["run", str(PLANS / "mixed.yml")])
    out = capsys.readouterr().out
    assert code == EXIT_INCOMPLETE
    summaries = summaries_in(out)
    assert [(s.agent, s.status.value) for s in summaries] == [
        ("flaky", "completed"),
        ("flaky", "completed"),
        ("scout", "completed"),
        ("spender", "budget_exceeded"),
    ]
    assert [s.scope for s in summaries][:2] == ["Fetch the release notes", "Fetch the changelog"]
    assert "3 of 4 delegation(s) completed" in out


def test_run_off_a_terminal_prints_a_plain_line_per_event_then_the_final_tree(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["run", str(PLANS / "mixed.yml")])
    out = capsys.readouterr().out
    assert "\x1b[" not in out
    assert not set(out) & BOXES
    lines = out.splitlines()
    assert any("flaky-1-a1" in line and "retry in 0.00s as flaky-1-a2" in line for line in lines)
    assert any("spender-1-a1" in line and "over budget" in line for line in lines)
    assert any("spender-1" in line and "settled BUDGET_EXCEEDED" in line for line in lines)
    assert any(line.startswith("zeus: 0 open, 4 settled") for line in lines)
    assert "  ✔ flaky-1 flaky: completed" in out
    assert "  ¤ spender-1 spender: budget_exceeded" in out


@pytest.mark.process
def test_a_program_that_is_not_there_is_said_to_start_with_its_own_deadline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "routing.yml").write_text(
        "version: 1\nagents:\n  ghost:\n    command: [/nonexistent/zeus-agent, '{scope}']\n"
        "    timeout_s: 300\n    spawn_timeout_s: 60\n")
    (tmp_path / "plan.yml").write_text("- {agent: ghost, scope: hi}\n")
    assert main(["run", str(tmp_path / "plan.yml"), "--routing",
                 str(tmp_path / "routing.yml")]) == 1
    [line] = [x for x in capsys.readouterr().out.splitlines() if "attempt 1 on ghost" in x]
    deadline = float(line.rsplit("deadline in ", 1)[1].rstrip("s"))
    assert 290 < deadline <= 300, line  # its timeout_s, not the bound on its start


def test_run_exits_0_when_every_brief_completed(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", str(PLANS / "all_ok.yml"), "--routing", str(ROUTING)])
    assert code == EXIT_OK
    assert "2 of 2 delegation(s) completed" in capsys.readouterr().out


def test_run_json_lists_the_summaries_in_plan_order_with_groups_flattened(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["run", str(PLANS / "mixed.yml"), "--json"])
    captured = capsys.readouterr()
    summaries = [Summary.model_validate(item) for item in json.loads(captured.out)]
    assert code == EXIT_INCOMPLETE
    assert [s.id for s in summaries] == ["flaky-1", "flaky-2", "scout-1", "spender-1"]
    assert captured.err == ""


def test_run_routing_flag_wins_over_the_plan_routing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    other = write(
        tmp_path / "other.yml",
        "version: 1\nagents:\n  flaky:\n    entrypoint: supervisor.examples.faulty:flaky\n",
    )
    plan = write(
        tmp_path / "plan.yml",
        f"routing: {ROUTING}\nbriefs:\n  - {{agent: flaky, scope: x, inputs: {{fail_times: 0}}}}\n",
    )
    assert (
        main(["run", str(plan), "--routing", str(other), "--log", str(tmp_path / "e.jsonl")])
        == EXIT_OK
    )
    capsys.readouterr()
    assert jr.load(tmp_path / "e.jsonl").run.routing == str(other)


def test_run_groups_take_the_strategy_the_plan_names(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    plan = write(
        tmp_path / "plan.yml",
        f"routing: {ROUTING}\nbriefs:\n"
        "  - group:\n"
        "      - {agent: flaky, scope: one, inputs: {fail_times: 0}}\n"
        "      - {agent: flaky, scope: two, inputs: {fail_times: 0}}\n"
        "    strategy: one_for_all\n",
    )
    assert main(["run", str(plan)]) == EXIT_OK
    assert len(summaries_in(capsys.readouterr().out)) == 2


def test_run_journal_is_read_back_by_zeus_timeouts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = tmp_path / "events.jsonl"
    assert main(["run", str(PLANS / "mixed.yml"), "--log", str(log)]) == EXIT_INCOMPLETE
    capsys.readouterr()
    assert main(["timeouts", str(log)]) == EXIT_OK  # it could read the journal; spender-1 failed
    out = capsys.readouterr().out
    assert "spender-1" in out
    assert "budget exceeded" in out


BAD_PLANS: list[tuple[str, str, list[str]]] = [
    ("bad_field.yml", "", ["entry 2", "timeout_s", "greater than 0", "-1"]),
    ("unknown_agent.yml", "", ["entry 2 (a group), brief 2", "agent", "'hephaestus'"]),
    ("", "{agent: scout}", ["a plan is a list of briefs"]),
    ("", "[]", ["has no briefs"]),
    ("", "- just a string\n", ["entry 1", "a brief is a mapping", "a str"]),
    ("", "- {agent: scout, scope: x, colour: red}\n",
     ["entry 1", "colour", "unknown key 'colour'; allowed: "]),
    ("", "- {agent: scout}\n", ["entry 1", "scope", "field required"]),
    (
        "",
        "- {group: [{agent: scout, scope: x}], strategy: all_at_once}\n",
        ["entry 1 (a group)", "strategy", "'all_at_once'", "one_for_one"],
    ),
    ("", "- {group: [], strategy: one_for_one}\n", ["entry 1 (a group)", "non-empty list"]),
    ("", "- {group: [x], strategy: one_for_one}\n", ["entry 1 (a group), brief 1", "mapping"]),
    ("", "- {agent: scout, scope: x\n", ["not valid YAML"]),
    ("", "routing: 3\nbriefs: []\n", ["routing:", "path"]),
    ("", "briefs: []\nextra: 1\n", ["unknown key(s) extra"]),
]


@pytest.mark.parametrize(("fixture", "text", "words"), BAD_PLANS)
def test_run_refuses_a_bad_plan_with_exit_2_naming_the_entry_and_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fixture: str, text: str, words: list[str]
) -> None:
    plan = PLANS / fixture if fixture else write(tmp_path / "plan.yml", text)
    code = main(
        ["run", str(plan), "--routing", str(ROUTING)]
        if not fixture.startswith("unknown")
        else ["run", str(plan)]
    )
    captured = capsys.readouterr()
    assert code == EXIT_BAD_INPUT
    assert captured.out == ""
    assert captured.err.startswith(f"zeus run: {plan}")
    for word in words:
        assert word in captured.err


def test_run_of_a_missing_plan_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["run", str(tmp_path / "nope.yml")]) == EXIT_BAD_INPUT
    assert "nope.yml: cannot read it" in capsys.readouterr().err


def test_run_with_a_bad_routing_exits_2_before_anything_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    routing = write(tmp_path / "r.yml", "version: 1\nagents:\n  flaky:\n    fallback: nobody\n")
    log = tmp_path / "e.jsonl"
    code = main(["run", str(PLANS / "all_ok.yml"), "--routing", str(routing), "--log", str(log)])
    assert code == EXIT_BAD_INPUT
    assert "fallback" in capsys.readouterr().err
    assert not log.exists()


# -- the live tree ---------------------------------------------------------------------------
def test_bar_fills_in_proportion_and_turns_red_near_the_deadline() -> None:
    half = bar(1.0, 2.0, width=10, plain=True)
    assert half.plain == "#####----- 1.0/2s"
    late = bar(1.9, 2.0, width=10)
    assert late.plain.startswith("█" * 10)  # 95 % rounds to full
    assert late.spans[0].style == "red"
    assert bar(5.0, 2.0, width=4, plain=True).plain == "#### 5.0/2s"  # past the deadline: full


def test_describe_says_what_each_pinned_event_means_in_words() -> None:
    base: dict[str, Any] = {
        "ts": 0.0,
        "delegation_id": "apollo-1",
        "attempt_id": "apollo-1-a1",
        "parent_id": None,
        "agent": "apollo",
    }
    assert (
        describe(
            {**base, "event": "retry.scheduled", "backoff_s": 0.5, "next_attempt_id": "apollo-1-a2"}
        )
        == "retry in 0.50s as apollo-1-a2"
    )
    assert (
        describe({**base, "event": "fallback.dispatched", "from": "apollo", "to": "athena"})
        == "fallback apollo -> athena"
    )
    assert (
        describe({**base, "event": "attempt.killed", "how": "terminate", "latency_s": 0.012})
        == "ignored the cancel; stopped by SIGTERM (in 0.01s)"
    )
    assert (
        describe(
            {
                **base,
                "event": "delegation.settled",
                "status": "timed_out",
                "timeout_kind": "deadline",
                "duration_s": 2.5,
                "attempts": 1,
            }
        )
        == "settled TIMED_OUT (deadline) after 2.50s, 1 attempt(s)"
    )
    assert describe({**base, "event": "message.dropped", "message": "Heartbeat"}) is None


def _slow_scan(tmp_path: Path) -> Brief:
    for n in range(30):
        write(tmp_path / f"f{n:02}.txt", "needle\n")
    return Brief(
        agent="scout",
        scope='Find "needle"',
        inputs={"root": str(tmp_path), "delay_s": 0.05},
        timeout_s=0.5,
    )


def test_live_tree_on_a_terminal_draws_bars_while_running_and_statuses_at_the_end(
    tmp_path: Path,
) -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=200, color_system="standard")
    live = LiveTree(console, refresh_per_second=20)
    with Zeus.start(Routing.load(ROUTING), log=live) as zeus:
        handle = zeus.dispatch(_slow_scan(tmp_path))
        handle.add_done_callback(live.add_summary)
        with live.show(zeus):
            running = ""
            while not handle.done() and "#" not in running:
                time.sleep(0.02)  # the refresh thread polls zeus.tree(); wait for a frame
                running = live.render_plain()
            summary = handle.result(10)
    assert "scout-1 scout: running" in running
    assert "/0.5s" in running
    assert summary.status is Status.partial
    assert "█" in screen.getvalue()
    assert "\x1b[" in screen.getvalue()
    final = live.render_plain()
    assert "◐ scout-1 scout: partial" in final
    assert f"{len(summary.partial_results)} partial result(s)" in final


def test_live_tree_off_a_terminal_prints_one_line_per_event_and_journals_each(
    tmp_path: Path,
) -> None:
    screen, journal = io.StringIO(), io.StringIO()
    live = LiveTree(Console(file=screen, width=10_000), journal=journal)
    with Zeus.start(Routing.load(ROUTING), log=live) as zeus, live.show(zeus):
        zeus.dispatch(Brief(agent="flaky", scope="x")).result(10)
    lines = screen.getvalue().splitlines()
    events = [json.loads(line) for line in journal.getvalue().splitlines()]
    assert (events[0]["event"], events[-1]["event"]) == ("zeus.started", "zeus.stopped")
    assert all(
        {"ts", "event", "delegation_id", "attempt_id", "parent_id", "agent"} <= set(e)
        for e in events
    )
    shown = [e for e in events if describe(e) is not None]
    assert len(lines) == len(shown)
    assert lines[0].split()[1:3] == ["zeus", "zeus"]
    assert "\x1b[" not in screen.getvalue()


def test_run_lists_every_problem_of_a_plan_at_once_each_on_its_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    routing = write(
        tmp_path / "routing.yml",
        "agents:\n  flaky: {entrypoint: 'supervisor.examples.faulty:flaky'}\n"
        "  idle: {timeout_s: 5}\n",
    )
    plan = write(
        tmp_path / "plan.yml",
        "- agent: flaky\n"           # 1
        "  scope: ok\n"              # 2
        "- agent: flakey\n"          # 3: a misspelt agent
        "  scope: x\n"               # 4
        "- agent: flaky\n"           # 5
        "  scope: y\n"               # 6
        "  timeout_s: -1\n"          # 7: a bad field
        "- group:\n"                 # 8
        "    - {agent: idle, scope: z}\n"  # 9: no work function
        "    - {agent: flaky}\n"     # 10: no scope
        "  strategy: one_for_one\n",
    )

    code = main(["run", str(plan), "--routing", str(routing), "--log", str(tmp_path / "e.jsonl")])

    err = capsys.readouterr().err.splitlines()
    assert code == EXIT_BAD_INPUT
    assert err[0] == f"zeus run: {plan}: 4 problems; fix and run `zeus run {plan}`"
    assert [line.split(": ", 2)[:2] for line in err[1:]] == [
        [f"{plan}:3", "entry 2"],
        [f"{plan}:7", "entry 3"],
        [f"{plan}:9", "entry 4 (a group), brief 1"],
        [f"{plan}:10", "entry 4 (a group), brief 2"],
    ]
    assert "unknown agent 'flakey' (did you mean 'flaky'?)" in err[1]
    assert "timeout_s: input should be greater than 0 (found -1)" in err[2]
    assert "agent: agent 'idle' has no work function" in err[3]
    assert "scope: field required" in err[4]
    assert not (tmp_path / "e.jsonl").exists()  # nothing ran


def test_a_misspelt_brief_key_is_named_with_the_key_it_is_closest_to_at_its_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    plan = write(
        tmp_path / "plan.yml",
        "- agent: apollo\n"            # 1
        "  scop: Scan for TODO\n"      # 2: scope misspelt (so no "scope: field required")
        "- group:\n"                   # 3
        "    - agent: apollo\n"        # 4
        "      scope: z\n"             # 5
        "      timout_s: 3\n",         # 6
    )
    assert main(["run", str(plan)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.splitlines()
    fields = ("agent, constraints, expected_output, inputs, key, mode, partial_ok, scope, "
              "session, timeout_s")
    assert err[1:] == [
        f"{plan}:2: entry 1: scop: unknown key 'scop' (did you mean 'scope'?); "
        f"allowed: {fields}",
        f"{plan}:6: entry 2 (a group), brief 1: timout_s: unknown key 'timout_s' "
        f"(did you mean 'timeout_s'?); allowed: {fields.replace(' key,', '')}",
    ]


def test_dispatch_of_an_agent_with_no_work_function_is_bad_input_not_a_failed_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    routing = write(tmp_path / "routing.yml", "agents:\n  idle: {timeout_s: 5}\n")

    code = main(["dispatch", "idle", "anything", "--routing", str(routing)])

    captured = capsys.readouterr()
    assert code == EXIT_BAD_INPUT
    assert captured.out == ""
    assert "agent 'idle' has no work function" in captured.err
    assert "entrypoint: pkg.module:function" in captured.err


def test_an_explorer_stopped_at_its_cap_settles_partial_saying_where_it_stopped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for n in range(5):
        write(tmp_path / f"f{n}.txt", "needle\n")
    inputs = json.dumps({"root": str(tmp_path), "max_hits": 2})

    code = main(["dispatch", "scout", 'Find "needle"', "--routing", str(ROUTING),
                 "--inputs", inputs, "--json"])

    summary = Summary.model_validate_json(capsys.readouterr().out)
    assert (code, summary.status) == (EXIT_INCOMPLETE, Status.partial)
    assert summary.error == (
        "stopped at 2 hits, after 2 of 5 files; narrow the search or raise inputs.max_hits"
    )
    assert len(summary.findings) == 2
