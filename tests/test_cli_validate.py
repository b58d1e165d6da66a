"""`zeus validate`, `zeus schema`, `zeus --version`: through `main([...])`, output captured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from supervisor import __version__
from supervisor.cli.commands import EXIT_BAD_INPUT, EXIT_OK
from supervisor.cli.main import COMMANDS, build_parser, main
from supervisor.routing import DEFAULT_ROUTING, Routing
from tests._agent_clis import install_fakes
from tests._support import terminal

ROOT = Path(__file__).resolve().parent.parent
PANTHEON = ROOT / "tests" / "fixtures" / "pantheon_routing.yml"


def rows(out: str) -> dict[str, list[str]]:
    """The agent table of plain output: agent name -> its cells."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["agent", "role"])
    table: dict[str, list[str]] = {}
    for line in lines[start + 1:]:
        if line.startswith("supervisor:"):
            break
        cells = [cell for cell in line.split("  ") if cell.strip()]
        table[cells[0].strip()] = [cell.strip() for cell in cells]
    return table


def test_validate_reads_routing_yml_in_the_current_directory_by_default(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["validate"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "routing.yml: valid, 9 agents, native dialect"
    table = rows(out)
    assert table["apollo"] == [
        "apollo", "explorer", "leaf", "60s", "2", "exponential", "athena", "yes", "low",
        "thread", "2",
    ]
    assert table["talos"][3:9] == ["30s", "1", "none", "hermes", "yes", "low"]
    assert table["themis"][6] == "zeus (owner)"
    assert "supervisor: max_depth 2, max_concurrent 64, at most 20 restarts within 60s, " \
           "tree budget: max_cost 5" in out


def test_validate_output_on_a_pipe_has_no_colours_or_boxes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["validate", str(ROOT / "routing.yml")]) == EXIT_OK
    out = capsys.readouterr().out
    assert "\x1b[" not in out
    assert not set(out) & set("─│┌┐└┘├┤┬┴┼━┃╭╮╰╯")
    assert all(len(line) < 200 for line in out.splitlines())


def test_validate_says_what_a_pantheon_file_mapped_and_ignored(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["validate", str(PANTHEON)]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.splitlines()[0].endswith("valid, 10 agents, Pantheon dialect")
    assert rows(out)["talos"][1:7] == ["Hotfix express lane", "leaf", "30s", "1", "fixed", "hermes"]
    assert rows(out)["athena"][1] == "Strategic planner and archi…"
    mapped = out.index("mapped:\n")
    ignored = out.index("ignored:\n")
    assert mapped < out.index("  - delegation.*[].timeout (ms) -> timeout_s") < ignored
    assert ignored < out.index("  - handoffs, platforms, artifacts, routing_matrix")


def test_validate_prints_names_with_brackets_as_they_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "routing.yml"
    path.write_text("agents:\n  scout:\n    role: '[bold]lead[/bold]'\n", "utf-8")
    assert main(["validate", str(path), "--registered", "scout"]) == EXIT_OK
    assert rows(capsys.readouterr().out)["scout"][1] == "[bold]lead[/bold]"


def test_validate_prints_every_problem_on_stderr_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "routing.yml"
    path.write_text("agents:\n  apollo:\n    timeout_s: -1\n    fallback: hades\n"
                    "  hermes:\n    timeout_s: 30\n", "utf-8")
    assert main(["validate", str(path), "--registered", "apollo"]) == EXIT_BAD_INPUT
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines()[1:] == [
        f"{path}:3: agents.apollo.timeout_s: found -1; allowed: a number of seconds > 0",
        f"{path}:4: agents.apollo.fallback: unknown agent 'hades'; allowed: apollo, hermes, or "
        "zeus (give the failure back to the owner)",
        f"{path}:5: agents.hermes: no work function; give it `entrypoint: pkg.module:function` "
        "or `command: [program, arg, ...]` (an agent the host registers in code, "
        "zeus.register, is named with --registered)",
    ]


def test_validate_without_a_routing_file_here_checks_the_shipped_pantheon(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["validate"]) == EXIT_OK
    first = capsys.readouterr().out.splitlines()[0]
    assert first == f"{DEFAULT_ROUTING}: valid, 9 agents, native dialect"


def test_validate_of_a_missing_file_says_it_cannot_read_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(tmp_path / "nope.yml")]) == EXIT_BAD_INPUT
    assert "cannot read it: No such file or directory" in capsys.readouterr().err


def test_validate_imports_entrypoints_from_the_current_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "zeus_cli_probe_agents.py").write_text("def run(brief, ctx):\n    return 1\n")
    (tmp_path / "routing.yml").write_text(
        "agents:\n  probe: {entrypoint: 'zeus_cli_probe_agents:run'}\n", "utf-8"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "zeus_cli_probe_agents", raising=False)
    assert main(["validate"]) == EXIT_OK
    assert str(tmp_path) not in sys.path
    assert "no entrypoint or command" not in capsys.readouterr().out


def test_validate_imports_entrypoints_from_the_routing_files_directory_after_all_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, elsewhere = tmp_path / "mine", tmp_path / "elsewhere"
    mine.mkdir()
    elsewhere.mkdir()
    (mine / "zeus_cli_beside_agents.py").write_text(
        "import sys\nPATH = list(sys.path)\ndef run(brief, ctx):\n    return 1\n")
    (mine / "routing.yml").write_text(
        "agents:\n  probe: {entrypoint: 'zeus_cli_beside_agents:run'}\n", "utf-8")
    monkeypatch.chdir(elsewhere)
    before = [p for p in sys.path if p not in ("", str(mine), str(elsewhere))]
    monkeypatch.setattr(sys, "path", list(before))
    monkeypatch.delitem(sys.modules, "zeus_cli_beside_agents", raising=False)
    assert main(["validate", "../mine/routing.yml"]) == EXIT_OK, capsys.readouterr().err
    assert sys.path == before  # taken off again when the command ended
    seen = sys.modules.pop("zeus_cli_beside_agents").PATH
    assert seen == [*before, str(elsewhere), str(mine)]  # the installed packages come first


@pytest.mark.process
def test_zeus_validate_of_a_routing_file_in_another_directory_imports_its_agents(
    tmp_path: Path,
) -> None:
    mine, elsewhere = tmp_path / "mine", tmp_path / "elsewhere"
    mine.mkdir()
    elsewhere.mkdir()
    (mine / "zeus_cli_beside_agents.py").write_text("def run(brief, ctx):\n    return 1\n")
    (mine / "routing.yml").write_text(
        "agents:\n  probe: {entrypoint: 'zeus_cli_beside_agents:run'}\n", "utf-8")
    done = subprocess.run([sys.executable, "-m", "supervisor.cli", "validate",
                           "../mine/routing.yml"], cwd=elsewhere, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == EXIT_OK, done.stderr
    assert "does not import" not in done.stderr


def test_schema_prints_a_json_schema_of_the_native_dialect(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["schema"]) == EXIT_OK
    schema = json.loads(capsys.readouterr().out)
    assert schema["$schema"].startswith("https://json-schema.org/")
    assert set(schema["properties"]) == {"version", "defaults", "supervisor", "agents"}
    assert "timeout_s" in schema["$defs"]["AgentPolicy"]["properties"]


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == EXIT_OK
    assert capsys.readouterr().out.strip() == f"zeus {__version__}"


def test_no_command_is_a_usage_error_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == EXIT_BAD_INPUT
    assert "usage: zeus" in capsys.readouterr().err


def test_an_unknown_command_is_a_usage_error_with_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["summon", "hades"]) == EXIT_BAD_INPUT
    assert "invalid choice: 'summon'" in capsys.readouterr().err


def test_every_listed_command_module_adds_a_command_with_help() -> None:
    parser, by_name = build_parser()
    assert {"validate", "schema"} <= set(by_name)
    assert set(by_name.values()) == set(COMMANDS)
    assert "validate" in parser.format_help()


def test_an_agent_with_no_work_function_is_an_error_naming_its_line_and_the_fixes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "routing.yml"
    path.write_text("agents:\n  scout:\n    timeout_s: 5\n  helper: {timeout_s: 9}\n", "utf-8")

    assert main(["validate", str(path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{path}: 2 problems")
    assert err[1].startswith(f"{path}:2: agents.scout: no work function; give it `entrypoint:")
    assert err[2].startswith(f"{path}:4: agents.helper: no work function")
    assert main(["validate", str(path), "--registered", "scout,helper"]) == EXIT_OK
    assert "(the host registers them with zeus.register): scout, helper" in capsys.readouterr().out


@pytest.mark.parametrize("text", ["", "version: 1\n", "version: 1\nagents: {}\n"])
def test_a_routing_file_without_agents_is_an_error_not_valid_with_0_agents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    path = tmp_path / "routing.yml"
    path.write_text(text, "utf-8")

    assert main(["validate", str(path)]) == EXIT_BAD_INPUT
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "agents: no agents; add an `agents:` section" in captured.err
    assert "zeus init" in captured.err


def test_a_wrong_entrypoint_attribute_gets_a_did_you_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "routing.yml"
    path.write_text("agents:\n  apollo: {entrypoint: 'supervisor.examples.explorer:explor'}\n")

    assert main(["validate", str(path)]) == EXIT_BAD_INPUT
    assert "has no attribute 'explor' (did you mean 'explore'?)" in capsys.readouterr().err


def test_explain_makes_every_default_of_an_agent_visible(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "routing.yml"
    path.write_text(
        "agents:\n"
        "  quick:\n"
        "    entrypoint: supervisor.examples.explorer:explore\n"
        "    timeout_s: 2\n"
        "    retry: {max_retries: 2}\n"
        "    fallback: slow\n"
        "  slow:\n"
        "    command: [python, -m, supervisor.examples.hotfix, '{scope}']\n"
        "    timeout_s: 30\n",
        "utf-8",
    )

    assert main(["validate", str(path), "--explain", "quick"]) == EXIT_OK
    out = capsys.readouterr().out
    lines = {line[:14].strip(): line[14:] for line in out.splitlines()[1:]}
    assert out.splitlines()[0] == (
        "quick (a leaf): runs supervisor.examples.explorer:explore in a thread"
    )
    assert lines["deadline"].startswith("2s an attempt")
    assert "2s to stop, then its thread is fenced" in lines["deadline"]
    assert lines["deadline"].endswith("an attempt holds at most 4s")  # the unstated grace_s: 2
    assert lines["heartbeat"] == (
        "every 1s; stale after 10s without progress, 30s inside `with ctx.tool(...)`"
    )
    assert lines["retry"] == (
        "2 on transient, timeout, stale, crash, lost; waits 1s, 2s (exponential +/- 20%, at "
        "most 30s); not after a tool call with side effects"
    )
    assert lines["fallback"] == "quick (2s) -> slow (30s)"
    assert lines["at most"] == (  # 3 x 4s, the longest waits (1.2s, 2.4s), then slow's 32.5s
        "48.1s for the whole delegation, every attempt and wait included"
    )


def test_explain_of_an_unknown_agent_exits_2_with_the_closest_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["validate", str(ROOT / "routing.yml"), "--explain", "apolo"]) == EXIT_BAD_INPUT
    assert "unknown agent 'apolo' (did you mean 'apollo'?)" in capsys.readouterr().err


def test_explain_without_an_agent_explains_every_agent_and_the_supervisor(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["validate", "--explain"]) == EXIT_OK
    out = capsys.readouterr().out
    heads = [line.split()[0] for line in out.splitlines() if line and not line.startswith(" ")]
    assert heads == [*Routing.load(ROOT / "routing.yml").agents, "supervisor:"]
    assert "talos (30s) -> hermes (180s) -> talos: tried already, the chain ends" in out


@pytest.mark.parametrize("argv", [["validate"], ["validate", "--explain"]])
def test_validate_on_an_80_column_terminal_folds_no_line(
    monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    lines = terminal(monkeypatch, width=80)

    assert main([*argv, str(ROOT / "routing.yml")]) == EXIT_OK

    shown = lines()
    assert len(shown) > 10
    assert [line for line in shown if len(line) > 80] == []
    if argv == ["validate"]:  # too many columns for 80: one record per agent
        assert shown[1].startswith("apollo: role explorer; kind leaf; timeout 60s")
    else:
        assert shown[1].startswith("  deadline    60s an attempt")
        assert shown[2].startswith(" " * 14)  # the rest of the sentence, under itself


# -- agent CLIs: their program on PATH, and what --explain says they run -------------------------
HERMES = (
    "agents:\n"
    "  hermes:\n"
    "    speaks: claude\n"
    "    args: [--model, sonnet]\n"
    "    budget: {max_cost: 2.0}\n"
    "    pricing: {input_per_mtok: 3.0, output_per_mtok: 15.0}\n"
    "    fallback: talos\n"
    "  talos:\n"
    "    speaks: codex\n"
    "    command: [npx, -y, '@openai/codex']\n"
    "    timeout_s: 600\n"
)


def _only_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *programs: str) -> Path:
    """PATH holds just `programs` (each an executable that exits 0)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for program in programs:
        path = bin_dir / program
        path.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
        path.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


def test_an_agent_cli_on_path_validates_and_the_table_says_what_it_speaks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "routing.yml"
    path.write_text(HERMES, "utf-8")
    _only_on_path(tmp_path, monkeypatch, "claude", "npx")

    assert main(["validate", str(path)]) == EXIT_OK
    table = rows(capsys.readouterr().out)
    assert table["hermes"][9] == "process (claude)"
    assert table["talos"][9] == "process (codex)"


def test_an_agent_cli_not_on_path_is_an_error_naming_the_program_and_the_command_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "routing.yml"
    path.write_text(HERMES, "utf-8")
    _only_on_path(tmp_path, monkeypatch)  # neither claude nor npx

    assert Routing.load(path).agents["hermes"].speaks == "claude"  # load never looks at PATH
    assert main(["validate", str(path)]) == EXIT_BAD_INPUT
    assert capsys.readouterr().err.splitlines() == [
        f"{path}: agents.hermes: speaks claude, but its program 'claude' is not on PATH; "
        "install it, or set agents.hermes.command to where it is",
        f"{path}: agents.talos: speaks codex, but its program 'npx' is not on PATH; "
        "install it, or set agents.talos.command to where it is",
    ]


def test_a_command_not_on_path_is_an_error_and_python_is_zeus_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "routing.yml"
    path.write_text(
        "agents:\n"
        "  finder: {command: [rg, '{scope}']}\n"
        "  script: {command: [python, -m, tool, '{prompt}'], speaks: jsonl}\n",
        "utf-8",
    )
    bin_dir = _only_on_path(tmp_path, monkeypatch)

    assert main(["validate", str(path)]) == EXIT_BAD_INPUT
    assert capsys.readouterr().err == (
        f"{path}: agents.finder: its program 'rg' is not on PATH; install it, or set "
        "agents.finder.command to where it is\n"
    )
    _only_on_path(tmp_path, monkeypatch, "rg")
    assert bin_dir.is_dir() and main(["validate", str(path)]) == EXIT_OK


def test_the_fake_clis_of_the_tests_satisfy_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "routing.yml"
    path.write_text("agents:\n" + "".join(
        f"  {cli}: {{speaks: {cli}}}\n" for cli in ("claude", "codex", "gemini", "opencode",
                                                    "cursor")), "utf-8")
    monkeypatch.setenv("PATH", str(install_fakes(tmp_path / "fakes")))

    assert main(["validate", str(path)]) == EXIT_OK
    assert "valid, 5 agents" in capsys.readouterr().out


def test_explain_shows_what_an_agent_cli_speaks_and_the_argv_zeus_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "routing.yml"
    path.write_text(HERMES, "utf-8")
    _only_on_path(tmp_path, monkeypatch, "claude", "npx")

    assert main(["validate", str(path), "--explain"]) == EXIT_OK
    out = capsys.readouterr().out
    hermes, talos = out.split("\n\n")[:2]
    assert hermes.splitlines()[0] == "hermes (a leaf): runs claude (speaks claude, a process)"
    assert talos.splitlines()[0] == (
        "talos (a leaf): runs npx -y @openai/codex (speaks codex, a process)"
    )
    said = {line[:14].strip(): line[14:] for line in hermes.splitlines()[1:]}
    assert said["argv"].startswith(
        "claude -p PROMPT --output-format stream-json --verbose --include-partial-messages "
            "--model sonnet; "
        "with a cost cap, --max-budget-usd LEFT")
    assert said["follow-up"].startswith(
        "claude -p PROMPT --output-format stream-json --verbose --include-partial-messages "
        "--resume ID --model sonnet")
    assert said["speaks"].startswith("claude: ") and "total_cost_usd" in said["speaks"]
    assert said["exit grace"].startswith("10s: ")
    assert said["summary"].startswith("read if there: the last <subtask_summary> block")
    assert said["heartbeat"] == (  # a CLI runs no ctx.tool: its stream says what tool it is in
        "every 1s; stale after 120s without progress, 1800s inside a tool call its stream "
        "reports")
    told = {line[:14].strip(): line[14:] for line in talos.splitlines()[1:]}
    assert told["argv"] == "npx -y @openai/codex exec --json --skip-git-repo-check PROMPT"
    assert told["follow-up"].startswith(
        "npx -y @openai/codex exec --json --skip-git-repo-check resume ID PROMPT")


def test_explain_says_what_jsonl_and_lines_mean_and_shows_prompt_as_prompt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "routing.yml"
    path.write_text(
        "agents:\n"
        "  script:\n"
        "    command: [python, -m, tool, '{prompt}']\n"
        "    speaks: jsonl\n"
        "    require_summary: true\n"
        "    exit_grace_s: 3\n"
        "  plain: {command: [python, -m, tool, '{scope}']}\n",
        "utf-8",
    )
    monkeypatch.setenv("PATH", str(tmp_path))  # python is Zeus's own: never looked up

    assert main(["validate", str(path), "--explain"]) == EXIT_OK
    script, plain = capsys.readouterr().out.split("\n\n")[:2]
    assert script.splitlines()[0] == (
        "script (a leaf): runs the command python -m tool {prompt} (speaks jsonl, a process)")
    said = {line[:14].strip(): line[14:] for line in script.splitlines()[1:]}
    assert said["argv"] == "python -m tool PROMPT"
    assert said["speaks"].startswith("jsonl: Zeus's JSON lines (partial, charge, heartbeat")
    assert said["exit grace"].startswith("3s: ")
    assert said["summary"].startswith("required: a final text without a <subtask_summary>")
    told = {line[:14].strip(): line[14:] for line in plain.splitlines()[1:]}
    assert said["heartbeat"].endswith(" inside a tool call its stream reports")
    assert told["heartbeat"].endswith(" inside a tool call (lines report none)")
    assert told["speaks"].startswith("lines: each line progress, the output the result")
    assert "exit grace" not in told  # plain lines have no result event to wait after


def test_a_lines_command_that_runs_an_agent_cli_is_warned_to_speak_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = _only_on_path(tmp_path, monkeypatch, "npx", "bash", "env", "rg", "claude")
    path = tmp_path / "routing.yml"
    path.write_text(f"""\
agents:
  talos: {{command: [npx, -y, "@openai/codex@0.171.0", exec, "{{prompt}}"]}}
  hermes: {{command: [{bin_dir}/claude, -p, "{{prompt}}"], speaks: jsonl}}
  apollo: {{command: [bash, -c, 'exec gemini -p "$1"', bash, "{{prompt}}"]}}
  cursor: {{command: [env, A=1, cursor-agent, -p, "{{prompt}}"]}}
  finder: {{command: [rg, -n, "{{scope}}"]}}
  coder: {{command: [npx, -y, prettier, "{{scope}}"]}}
  claude: {{speaks: claude, command: [npx, -y, "@anthropic-ai/claude-code"]}}
""", "utf-8")

    assert main(["validate", str(path)]) == EXIT_OK
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert [line.split(": warning: ")[1].split(":")[0] for line in warnings] == [
        "agents.talos.speaks", "agents.hermes.speaks", "agents.apollo.speaks",
        "agents.cursor.speaks"]
    assert warnings[0].endswith("agents.talos.speaks: this runs codex as plain lines: set "
                                "speaks: codex, and Zeus reads its stream (its session, tool "
                                "calls and spend) and passes the arguments it speaks with; "
                                "command: then names only the program or its wrapper "
                                "(docs/agent-clis.md)")
    assert "this runs claude as plain JSON lines: set speaks: claude" in warnings[1]
    assert "runs gemini" in warnings[2] and "runs cursor as" in warnings[3]
