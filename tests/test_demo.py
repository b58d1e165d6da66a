"""`zeus demo`: every scenario settles as designed, for real, and its journal reads back."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from supervisor import Routing
from supervisor import journal as jr
from supervisor.cli.commands import EXIT_BAD_INPUT, EXIT_OK
from supervisor.cli.commands import demo as demo_cmd
from supervisor.cli.commands.demo import DEMO_AGENTS, demo_routing, scenarios
from supervisor.cli.live import open_journal
from supervisor.cli.main import main
from supervisor.routing import DEFAULT_ROUTING
from tests._ui import DemoRun

BOXES = set("─│┌┐└┘├┤┬┴┼━┃╭╮╰╯█░")


def table(out: str) -> dict[str, list[str]]:
    """The "What the demo showed" table: scenario -> delegation, settled, ok."""
    lines = out.splitlines()
    start = lines.index("What the demo showed") + 2
    rows: dict[str, list[str]] = {}
    for line in lines[start:]:
        if not line.strip():
            break
        cells = [cell.strip() for cell in line.split("  ") if cell.strip()]
        rows[cells[0]] = cells[1:4]
    return rows


@pytest.mark.process
def test_demo_settles_every_scenario_as_designed_and_its_journal_reads_back(
    capsys: pytest.CaptureFixture[str], demo_run: DemoRun
) -> None:
    # The session's run (tests/conftest.py): the `zeus ui` tests read its journal too.
    out, log = demo_run.out, demo_run.log
    assert demo_run.code == EXIT_OK, out
    assert demo_run.took < 20
    assert "\x1b[" not in out
    assert not set(out) & BOXES
    assert table(out) == {
        "retry": ["flaky-1", "completed", "yes"],
        "fallback": ["talos-1", "completed", "yes"],
        "kill": ["hang-1", "timed_out", "yes"],
        "partial": ["apollo-1", "partial", "yes"],
        "budget": ["spendthrift-1", "budget_exceeded", "yes"],
        "cancel race": ["spendthrift-2", "cancelled", "yes"],
        "tree": ["athena-1", "completed", "yes"],
    }
    assert out.count("<subtask_summary>") == len(scenarios(log.parent))
    assert f"journal: {log.resolve()}" in out
    assert demo_run.left == []  # the implementer's workdir is gone

    run = jr.load(log).run
    d = run.delegations
    assert run.stopped
    assert [a.outcome for a in d["flaky-1"].attempts] == ["transient", "completed"]
    assert d["talos-1"].agents == ["talos", "hermes"]
    assert [a.then for a in d["talos-1"].attempts][-2] == "fallback talos -> hermes"
    hung = d["hang-1"].attempts[0]
    assert (hung.outcome, hung.killed) == ("timeout", "terminate")
    assert hung.pid is not None
    assert d["apollo-1"].timeout_kind == "deadline"
    assert d["spendthrift-2"].attempts[0].budget_exceeded  # the race: both stops in flight
    assert d["spendthrift-2"].status == "cancelled"
    assert {c.id for c in d["athena-1"].children} and all(
        c.status == "completed" for c in d["athena-1"].children
    )

    assert main(["tree", str(log)]) == EXIT_OK  # it read the journal (some did not complete)
    tree_out = capsys.readouterr().out
    assert "hang-1 hang: timed_out" in tree_out
    assert "ignored the cancel; stopped by SIGTERM after" in tree_out
    assert main(["timeouts", str(log)]) == EXIT_OK
    timeouts_out = capsys.readouterr().out
    assert "Timeout log" in timeouts_out
    for attempt in ("talos-1-a1", "talos-1-a2", "hang-1-a1", "apollo-1-a1"):
        assert attempt in timeouts_out


def test_demo_routing_adds_the_faulty_agents_and_slows_talos_down() -> None:
    base = Routing.load(DEFAULT_ROUTING)
    routing = demo_routing(base)
    assert set(DEMO_AGENTS) <= set(routing.agents)
    assert routing.agent("hang").isolation == "process"
    assert routing.agent("spendthrift").budget.max_calls == 12
    assert routing.agent("flaky").heartbeat == base.agent("apollo").heartbeat  # defaults kept
    talos = routing.agent("talos")
    assert talos.command is not None and "--delay" in talos.command
    assert talos.fallback == base.agent("talos").fallback == "hermes"
    assert routing.agent("apollo") == base.agent("apollo")


def test_demo_refuses_a_routing_without_the_agents_it_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    routing = tmp_path / "routing.yml"
    routing.write_text(
        "version: 1\nagents:\n  apollo:\n    entrypoint: supervisor.examples.explorer:explore\n",
        encoding="utf-8",
    )
    code = main(["demo", "--routing", str(routing), "--log", str(tmp_path / "e.jsonl")])
    assert code == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "lacks athena, talos, hermes" in err


def test_demo_refuses_a_journal_it_cannot_write(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(["demo", "--log", str(tmp_path)])  # a directory
    assert code == EXIT_BAD_INPUT
    assert "cannot write the journal" in capsys.readouterr().err


def screen(text: str, width: int, height: int) -> list[str]:
    """The last `height` rows a terminal `width` columns wide shows of `text`."""
    rows: list[str] = []
    for line in text.splitlines():
        rows += [line[i:i + width] for i in range(0, max(len(line), 1), width)]
    return rows[-height:]


@pytest.mark.process
@pytest.mark.parametrize(("width", "height"), [(80, 24), (160, 50)])
def test_the_demo_ends_with_the_whole_tree_in_view_on_a_small_and_a_large_terminal(
    tmp_path: Path, width: int, height: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = Console(
        file=io.StringIO(), width=width, height=height, force_terminal=True, record=True,
        color_system=None,
    )
    monkeypatch.chdir(tmp_path)
    log = Path("demo.jsonl")
    journal = open_journal(log)
    try:
        code = demo_cmd._demo(
            demo_routing(Routing.load(DEFAULT_ROUTING)), journal, log, tmp_path, out
        )
    finally:
        journal.close()

    text = out.export_text()
    shown = screen(text, width, height)
    assert code == EXIT_OK
    intro = text[:text.index("\n\n")].splitlines()
    tail = text[text.index("What the demo showed"):].splitlines()
    assert ["scenario", "agent", "what", "it", "shows"] in [line.split() for line in intro]
    too_wide = [line for line in intro + tail if len(line) > width and " " in line.strip()]
    assert not too_wide  # no table, no tree row, no footer line is folded by the terminal
    if height < 50:  # the tail fills the small screen, which starts with a whole line
        assert len(tail) > height
        assert shown == tail[-height:]
    run = jr.load(log).run
    head = next(
        i for i, row in enumerate(shown)
        if row.startswith(f"zeus: 0 open, {len(run.delegations)} settled")
    )
    legend = next(i for i, row in enumerate(shown) if row.startswith("✔ completed  ◐ partial"))
    tree = shown[head + 1:legend]
    assert len(run.delegations) >= 8  # the scenarios and what athena delegated
    for d in run.delegations.values():  # every delegation, with its mark and status in view
        assert [row for row in tree if f" {d.id} " in row and d.status in row], d.id
    assert shown[-1].startswith("zeus demo took")
    assert all(len(row.rstrip()) <= width for row in tree)
    if height >= 50:  # room for every attempt too
        assert sum("-a1 " in row for row in tree) == len(run.delegations)
