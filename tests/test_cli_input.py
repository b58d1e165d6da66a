"""Bad input at the command line and in `register()`: one clear line that says what to fix."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from actors import Brief, Context, Status, Summary
from supervisor import Routing, SupervisorError, UnknownAgent, Zeus
from supervisor import journal as jr
from supervisor.cli.commands import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK
from supervisor.cli.live import LiveTree
from supervisor.cli.main import main
from supervisor.core.handle import Handle

PLANS = Path(__file__).resolve().parent / "fixtures" / "plans"
ROUTING = PLANS / "routing.yml"  # scout, flaky, spender


def test_dispatch_of_a_misspelt_agent_suggests_the_closest_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["dispatch", "flakey", "Fetch the notes", "--routing", str(ROUTING)])

    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT
    assert "unknown agent 'flakey' (did you mean 'flaky'?); " in err
    assert "defines: scout, flaky, spender" in err


def test_dispatch_of_an_agent_like_no_other_suggests_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["dispatch", "hephaestus", "x", "--routing", str(ROUTING)]) == EXIT_BAD_INPUT
    assert "did you mean" not in capsys.readouterr().err


def test_a_plan_with_a_misspelt_agent_names_the_entry_and_suggests_the_agent(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    plan = tmp_path / "plan.yml"
    plan.write_text(f"routing: {ROUTING}\nbriefs:\n  - {{agent: spendr, scope: x}}\n")

    assert main(["run", str(plan)]) == EXIT_BAD_INPUT

    err = capsys.readouterr().err
    assert f"{plan}:3: entry 1: agent: unknown agent 'spendr' (did you mean 'spender'?)" in err


def test_the_library_suggests_the_closest_agent_too() -> None:
    routing = Routing.model_validate({"agents": {"apollo": {}, "athena": {}}})
    with pytest.raises(UnknownAgent, match=r"unknown agent 'apolo' \(did you mean 'apollo'\?\)"):
        routing.agent("apolo")


def test_inputs_that_are_not_json_are_refused_saying_how_to_pass_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["dispatch", "flaky", "x", "--routing", str(ROUTING), "--inputs", "{fail: 1}"])

    captured = capsys.readouterr()
    assert code == EXIT_BAD_INPUT
    assert captured.out == ""
    assert "zeus dispatch: --inputs: '{fail: 1}' is not JSON (" in captured.err
    assert "pass plain text with --inputs-text" in captured.err


def test_inputs_text_passes_a_plain_string_as_it_is(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Any] = []

    def echo(brief: Brief, ctx: Context) -> str:
        seen.append(brief.inputs)
        return "ok"

    start = Zeus.start

    def start_with_echo(routing: Routing, **kw: Any) -> Zeus:
        zeus = start(routing, **kw)
        zeus.register("flaky", echo)
        return zeus

    monkeypatch.setattr(Zeus, "start", staticmethod(start_with_echo))
    code = main(["dispatch", "flaky", "x", "--routing", str(ROUTING), "--json",
                 "--inputs-text", "{fail: 1}"])

    assert code == EXIT_OK
    assert seen == ["{fail: 1}"]
    assert Summary.model_validate(json.loads(capsys.readouterr().out)).status is Status.completed


def test_inputs_and_inputs_text_together_are_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["dispatch", "flaky", "x", "--inputs", "1", "--inputs-text", "1"])
    assert code == EXIT_BAD_INPUT
    assert "not allowed with argument" in capsys.readouterr().err


def test_register_refuses_a_work_function_that_takes_one_argument_naming_it() -> None:
    def lonely(brief: Brief) -> str:
        return "never"

    with Zeus.start(Routing.model_validate({})) as zeus, pytest.raises(SupervisorError) as info:
        zeus.register("solo", lonely)

    message = str(info.value)
    assert message.startswith("register('solo', ...): ")
    assert "lonely(brief: 'Brief') -> 'str' cannot be called as work(brief, ctx)" in message
    assert "two positional arguments: the brief and the context" in message


@pytest.mark.parametrize(
    "work",
    [
        lambda brief, ctx: None,
        lambda brief, ctx, extra=1: None,
        lambda *args: None,
        print,  # a builtin: its signature is trusted
    ],
)
def test_register_accepts_whatever_can_be_called_with_a_brief_and_a_context(work: Any) -> None:
    with Zeus.start(Routing.model_validate({})) as zeus:
        zeus.register("ok", work)


def test_zeus_tree_on_a_file_without_zeus_events_says_so_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    notes = tmp_path / "README.md"
    notes.write_text("# A title\n\nSome prose.\n" * 25)

    assert main(["tree", str(notes)]) == EXIT_BAD_INPUT

    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"zeus tree: {notes}: is not a Zeus store (not an SQLite file) nor a journal (no Zeus "
        "events: 50 line(s) skipped); give the file a Zeus wrote, its store= or its log="
    ]


def _quick_and_slow(tmp_path: Path) -> Path:
    """A plan of a delegation that settles at once and one that takes seconds."""
    plan = tmp_path / "plan.yml"
    plan.write_text(
        f"routing: {ROUTING}\nbriefs:\n"
        "  - {agent: flaky, scope: quick, inputs: {fail_times: 0}}\n"
        "  - {agent: spender, scope: slow, inputs: {interval_s: 5}}\n"
    )
    return plan


def test_ctrl_c_during_zeus_run_prints_what_settled_the_tree_and_the_journal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plan = _quick_and_slow(tmp_path)
    log = tmp_path / "run.jsonl"

    def results(self: LiveTree, handles: Sequence[Handle]) -> list[Summary]:
        handles[0].result()  # the quick one settles
        raise KeyboardInterrupt  # the user presses Ctrl-C while waiting for the slow one

    monkeypatch.setattr(LiveTree, "results", results)

    code = main(["run", str(plan), "--log", str(log)])

    out = capsys.readouterr().out
    assert code == EXIT_INTERRUPTED
    assert "zeus run: interrupted; 1 delegation(s) had settled: flaky-1 completed" in out
    assert out.count("<subtask_summary>") == 1
    tree = out[out.index("zeus: 0 open, 2 settled"):]
    assert "flaky-1 flaky: completed" in tree
    assert "spender-1 spender: cancelled" in tree  # Zeus stopped, cancelling it
    assert out.rstrip().endswith(f"journal: {log.resolve()}")
    assert jr.load(log).run.stopped


def test_a_second_ctrl_c_while_zeus_stops_still_prints_what_settled_and_stops_at_once(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plan = _quick_and_slow(tmp_path)
    log = tmp_path / "run.jsonl"
    stops: list[float] = []
    real_stop = Zeus.stop

    def results(self: LiveTree, handles: Sequence[Handle]) -> list[Summary]:
        handles[0].result()
        raise KeyboardInterrupt  # the first Ctrl-C

    def stop(self: Zeus, timeout: float = 10.0) -> None:
        stops.append(timeout)
        if len(stops) == 1:
            raise KeyboardInterrupt  # the second, while it waits for what it cancelled
        real_stop(self, timeout)

    monkeypatch.setattr(LiveTree, "results", results)
    monkeypatch.setattr(Zeus, "stop", stop)

    code = main(["run", str(plan), "--log", str(log)])

    out = capsys.readouterr().out
    assert code == EXIT_INTERRUPTED
    assert stops == [10.0, 0]  # stopped again, at once
    assert "zeus run: interrupted; 1 delegation(s) had settled: flaky-1 completed" in out
    assert out.count("<subtask_summary>") == 1
    assert out.rstrip().endswith(f"journal: {log.resolve()}")
    assert jr.load(log).run.stopped


def test_zeus_tree_on_an_empty_file_says_it_is_empty(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    empty = tmp_path / "events.jsonl"
    empty.write_text("")

    assert main(["tree", str(empty)]) == EXIT_BAD_INPUT
    assert capsys.readouterr().err == (
        f"zeus tree: {empty}: is not a Zeus store (not an SQLite file) nor a journal (no Zeus "
        "events: it is empty); give the file a Zeus wrote, its store= or its log=\n"
    )
