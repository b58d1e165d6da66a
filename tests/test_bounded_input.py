"""Files and JSON a user hands to Zeus cost a bounded amount to read.

Billion-laughs aliases, oversized files and deep nesting are refused fast, with
a message that names the bound (exit 2 from the CLI, never a RecursionError),
and loading routing stays linear in the number of agents.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from supervisor import Routing, RoutingError
from supervisor.cli.commands import EXIT_BAD_INPUT
from supervisor.cli.commands.run import PlanError, load_plan
from supervisor.cli.main import main
from supervisor.routing.bounded import (
    MAX_ALIAS_NODES,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    BoundExceeded,
    json_depth,
    loads_json_bounded,
)

PLANS = Path(__file__).resolve().parent / "fixtures" / "plans"


def laughs(levels: int) -> str:
    """A billion-laughs document: each level is ten aliases of the one below."""
    lines = ['a0: &a0 "lol"']
    for level in range(1, levels + 1):
        aliases = ", ".join([f"*a{level - 1}"] * 10)
        lines.append(f"a{level}: &a{level} [{aliases}]")
    return "\n".join(lines) + "\n"


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# -- aliases ---------------------------------------------------------------------------------


def test_a_billion_laughs_routing_file_under_1kb_is_refused_fast(tmp_path: Path) -> None:
    text = laughs(9)
    assert len(text.encode()) < 1024
    path = tmp_path / "routing.yml"
    path.write_text(text, encoding="utf-8")
    started = time.perf_counter()
    with pytest.raises(RoutingError, match=r"aliases \(\*name\) expand to more than 100,000"):
        Routing.load(path)
    assert time.perf_counter() - started < 5.0  # a safety bound; today it runs past 60 s


def test_zeus_validate_refuses_a_billion_laughs_file_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "routing.yml"
    path.write_text(laughs(9), encoding="utf-8")
    assert main(["validate", str(path)]) == EXIT_BAD_INPUT
    assert f"{path}:1: its aliases" in capsys.readouterr().err


def test_a_billion_laughs_plan_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plan.yml"
    path.write_text(laughs(9), encoding="utf-8")
    with pytest.raises(PlanError, match="aliases"):
        load_plan(path)


def test_aliases_that_repeat_a_few_values_are_still_read(tmp_path: Path) -> None:
    path = tmp_path / "routing.yml"
    path.write_text(
        "agents:\n  hermes: &impl {timeout_s: 180, stateful: true}\n  hestia: *impl\n"
        "  ares: {<<: *impl, role: war}\n",
        encoding="utf-8",
    )
    routing = Routing.load(path)
    assert routing.agent("hestia").timeout_s == routing.agent("ares").timeout_s == 180.0


def test_the_alias_cap_counts_the_expansion_not_the_anchors(tmp_path: Path) -> None:
    # Five levels of ten repeat 10**5 + 10**4 + ... values: just over the cap; four are under.
    assert sum(10**k for k in range(1, 6)) > MAX_ALIAS_NODES > sum(10**k for k in range(1, 5))
    path = tmp_path / "routing.yml"
    path.write_text("agents: {}\nversion: 1\n", encoding="utf-8")
    for levels, refused in ((4, False), (5, True)):
        path.write_text(f"agents: {{}}\n{laughs(levels).replace('a0:', 'x:')}", encoding="utf-8")
        with pytest.raises(RoutingError) as caught:
            Routing.load(path)
        assert ("aliases (*name) expand" in str(caught.value)) is refused, str(caught.value)


# -- size ------------------------------------------------------------------------------------


def test_a_routing_file_over_the_size_cap_is_refused_without_reading_it_all(
    tmp_path: Path,
) -> None:
    path = tmp_path / "routing.yml"
    path.write_text("# " + "x" * MAX_FILE_BYTES + "\nagents: {}\n", encoding="utf-8")
    with pytest.raises(RoutingError, match=r"larger than 4 MiB"):
        Routing.load(path)


def test_a_plan_over_the_size_cap_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "plan.yml"
    path.write_text("# " + "x" * MAX_FILE_BYTES + "\n- {agent: a, scope: b}\n", encoding="utf-8")
    assert main(["run", str(path), "--routing", str(PLANS / "routing.yml")]) == EXIT_BAD_INPUT
    assert "larger than 4 MiB" in capsys.readouterr().err


# -- depth -----------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 500, 5000])
def test_a_deeply_nested_routing_file_is_refused_with_its_line(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "routing.yml"
    path.write_text(f"agents: {{}}\nversion:\n  {nested(depth)}\n", encoding="utf-8")
    with pytest.raises(RoutingError, match=rf"{path}:3: nested deeper than {MAX_DEPTH} levels"):
        Routing.load(path)


def test_a_routing_file_nested_to_the_cap_is_read_as_usual(tmp_path: Path) -> None:
    path = tmp_path / "routing.yml"
    inner = nested(MAX_DEPTH - 4)  # the root, agents, a and metadata are four levels
    path.write_text(f"agents:\n  a:\n    metadata: {{deep: {inner}}}\n", encoding="utf-8")
    assert json_depth(Routing.load(path).agent("a").metadata) == MAX_DEPTH - 3


@pytest.mark.parametrize("depth", [500, 5000])
def test_zeus_run_refuses_a_deeply_nested_plan_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], depth: int
) -> None:
    path = tmp_path / "plan.yml"
    path.write_text(f"- agent: scout\n  scope: x\n  inputs: {nested(depth)}\n", encoding="utf-8")
    assert main(["run", str(path), "--routing", str(PLANS / "routing.yml")]) == EXIT_BAD_INPUT
    assert f"nested deeper than {MAX_DEPTH} levels" in capsys.readouterr().err


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5000, 100_000])
def test_zeus_dispatch_refuses_deeply_nested_inputs_json_with_exit_2(
    capsys: pytest.CaptureFixture[str], depth: int
) -> None:
    code = main(["dispatch", "scout", "x", "--routing", str(PLANS / "routing.yml"),
                 "--inputs", nested(depth)])
    assert code == EXIT_BAD_INPUT
    assert f"--inputs: nested deeper than {MAX_DEPTH} levels" in capsys.readouterr().err


def test_json_within_the_depth_cap_is_read() -> None:
    assert json_depth(loads_json_bounded(nested(MAX_DEPTH))) == MAX_DEPTH
    with pytest.raises(BoundExceeded):
        loads_json_bounded(nested(MAX_DEPTH + 1))
    with pytest.raises(ValueError, match="Expecting"):
        loads_json_bounded("[1,")


# -- many agents -----------------------------------------------------------------------------


def many_agents(count: int) -> str:
    lines = ["agents:"]
    lines += [f"  a{i}: {{fallback: a{(i + 1) % count}, timeout_s: 9}}" for i in range(count)]
    return "\n".join(lines) + "\n"


def test_checking_agents_sorts_the_names_once_per_file_not_once_per_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from supervisor.routing import table as routing_module

    calls: list[int] = []
    real = routing_module.allowed_list

    def counting(names: set[str]) -> str:
        calls.append(len(names))
        return real(names)

    monkeypatch.setattr(routing_module, "allowed_list", counting)
    path = tmp_path / "routing.yml"
    broken = "  broken: {fallback: nobody, review_by: none, can_delegate_to: [x]}\n"
    text = many_agents(300) + broken
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RoutingError, match="unknown agent 'nobody'"):
        Routing.load(path)
    assert len(calls) <= 1
    path.write_text(many_agents(300), encoding="utf-8")
    calls.clear()
    assert len(Routing.load(path).agents) == 300
    assert calls == []


def test_a_journal_line_nested_too_deeply_is_skipped_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from supervisor.journal import read_events

    path = tmp_path / "events.jsonl"
    path.write_text(nested(100_000) + '\n{"event": "zeus.started", "ts": 1}\n', encoding="utf-8")
    events, notes = read_events(path)
    assert [e["event"] for e in events] == ["zeus.started"]
    assert notes == ["line 1: skipped: JSON nested too deeply to be an event"]
    assert main(["tree", str(path)]) in (0, 2)  # read, not a RecursionError
    assert "nested too deeply" in capsys.readouterr().err
