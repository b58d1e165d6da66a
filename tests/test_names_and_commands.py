"""Names that cannot escape, commands whose placeholders are known, and a warning for shells.

Agent names become delegation ids, artifact file names and log lines, so they
are refused unless they match `[A-Za-z0-9][A-Za-z0-9_.-]*`; artifacts are
written inside their folder under a safe name whatever the id; `zeus validate`
refuses a `{placeholder}` no brief can fill and warns when brief text would be
pasted into a shell script.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actors import Brief
from actors.backends import ChildSpec
from actors.backends.command.child import BRIEF_TEXT_PLACEHOLDERS, PLACEHOLDERS, command_argv
from actors.clock import SystemClock
from supervisor import Routing, RoutingError, Zeus
from supervisor.cli.commands import EXIT_BAD_INPUT, EXIT_OK
from supervisor.cli.main import main
from supervisor.core.settlement import shape_result
from supervisor.journal.private_files import safe_file_name, write_private
from supervisor.routing import ResultPolicy
from supervisor.routing.commands import agent_cli_in, shell_warning, unknown_placeholders
from supervisor.routing.policies import agent_name_problem

# Each bad name, and how a problem's key path shows it (quoted when it is not plain).
SHOWN = {"../../trav": '["../../trav"]', "/etc/passwd": '["/etc/passwd"]', "": '[""]',
         "a\x00b": '["a\\u0000b"]', ".hidden": "..hidden", "-flag": ".-flag", "a b": '["a b"]',
         "a/b": '["a/b"]', "ä": '["\\u00e4"]', "_lead": "._lead"}
BAD_NAMES = list(SHOWN)
GOOD_NAMES = ["apollo", "a", "A1", "hermes-2", "talos_v2.1", "9lives"]


# -- agent names ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_routing_file_refuses_an_agent_name_that_could_escape(tmp_path: Path, name: str) -> None:
    path = tmp_path / "routing.yml"
    path.write_text("agents:\n  ok: {}\n  " + json.dumps(name) + ": {}\n", encoding="utf-8")
    with pytest.raises(RoutingError) as caught:
        Routing.load(path)
    message = str(caught.value)
    assert f"{path}:3: agents{SHOWN[name]}: found " in message
    assert f"found {name!r}; allowed: an agent name of letters, digits" in message


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_ordinary_agent_names_are_accepted(name: str) -> None:
    assert agent_name_problem(name) is None
    assert name in Routing.from_dict({"agents": {name: {}}}).agents


@pytest.mark.parametrize("name", BAD_NAMES)
def test_register_refuses_an_agent_name_that_could_escape(name: str) -> None:
    with Zeus.start(Routing.from_dict({"agents": {}})) as zeus:
        with pytest.raises(RoutingError, match="allowed: an agent name"):
            zeus.register(name, lambda brief, ctx: None)
        assert name not in zeus.routing.agents


# -- artifacts --------------------------------------------------------------------------------


@pytest.mark.parametrize("delegation_id", ["../../trav-1", "/abs/olute-1", "a\x00b-1", "..", ""])
def test_an_artifact_is_written_inside_its_folder_under_a_safe_name(
    tmp_path: Path, delegation_id: str
) -> None:
    folder = tmp_path / "artifacts"
    policy = ResultPolicy(max_chars=10, overflow="artifact", artifact_dir=str(folder))
    shaped = shape_result("x" * 100, policy, delegation_id=delegation_id)
    assert shaped.artifact is not None, shaped.note
    written = Path(shaped.artifact)
    assert written.parent == folder
    assert written.read_text() == "x" * 100
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [written.name]


def test_safe_file_names_keep_ordinary_ids_as_they_are() -> None:
    assert safe_file_name("apollo-12", ".txt") == "apollo-12.txt"
    assert safe_file_name("../x") == "_x"
    assert len(safe_file_name("a" * 1000, ".txt")) <= 255


def test_an_artifact_never_follows_a_symbolic_link_out_of_its_folder(tmp_path: Path) -> None:
    folder, outside = tmp_path / "artifacts", tmp_path / "outside.txt"
    folder.mkdir()
    outside.write_text("keep")
    (folder / "apollo-1.txt").symlink_to(outside)
    with pytest.raises(OSError):
        write_private(folder, "apollo-1.txt", "overwritten")
    assert outside.read_text() == "keep"


# -- placeholders -----------------------------------------------------------------------------


def test_every_known_placeholder_is_one_command_argv_fills() -> None:
    clock = SystemClock()
    spec = ChildSpec(agent="talos", delegation_id="talos-1", attempt=1, attempt_id="talos-1-a1",
                     brief=Brief(agent="talos", scope="s"), deadline=clock.now() + 60,
                     clock=clock, command=tuple("{" + p + "}" for p in PLACEHOLDERS),
                     heartbeat_interval_s=1.0, term_s=0.5)
    assert len(command_argv(spec)) == len(PLACEHOLDERS)
    assert set(PLACEHOLDERS) >= BRIEF_TEXT_PLACEHOLDERS


def test_zeus_validate_refuses_an_unknown_placeholder_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "routing.yml"
    path.write_text("agents:\n  hotfix:\n    command: [prog, '{scope}', '--x={scop}']\n",
                    encoding="utf-8")
    assert main(["validate", str(path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert f"{path}:3: agents.hotfix.command[2]: unknown placeholder {{scop}}; allowed: " in err
    assert unknown_placeholders(["a", "{x}{scope}", '{"json": 1}']) == [(1, "x")]


SHELLY: list[tuple[list[str], str | None]] = [
    (["sh", "-c", "echo {scope}"], "sh -c"),
    (["/bin/bash", "-lc", "grep {inputs} file"], "bash -c"),
    (["env", "LANG=C", "zsh", "-c", "run {constraints}"], "zsh -c"),
    (["python3", "-c", "print('{scope}')"], "python3 -c"),
    (["{python}", "-c", "print('{scope}')"], "{python} -c"),
    (["node", "-e", "console.log('{expected_output}')"], "node -e"),
    (["busybox", "sh", "-c", "echo {session}"], "busybox -c"),
    (["sh", "-c", 'echo "$1"', "sh", "{scope}"], None),  # the safe form: an argument
    (["sh", "script.sh", "{scope}"], None),
    (["sh", "-c", "echo {agent} {attempt}"], None),  # Zeus's own values, not a brief's
    (["python", "-m", "tool", "{scope}"], None),
    (["prog", "-c", "{scope}"], None),
]


@pytest.mark.parametrize(("command", "says"), SHELLY)
def test_a_shell_or_interpreter_given_brief_text_in_its_script_is_warned_about(
    command: list[str], says: str | None
) -> None:
    warning = shell_warning(command)
    if says is None:
        assert warning is None
    else:
        assert warning is not None and warning.startswith(says), warning
        assert "a brief's text would run as code" in warning


def test_zeus_validate_warns_for_sh_c_with_a_placeholder_and_still_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "routing.yml"
    path.write_text("agents:\n  echo:\n    command: [sh, -c, 'echo {scope}']\n"
                    "  safe:\n    command: [sh, -c, 'echo \"$1\"', sh, '{scope}']\n",
                    encoding="utf-8")
    assert main(["validate", str(path)]) == EXIT_OK
    err = capsys.readouterr().err
    assert f"{path}: warning: agents.echo.command: sh -c runs its script" in err
    assert "agents.safe" not in err



@pytest.mark.parametrize(("command", "cli"), [
    (["claude", "-p", "{prompt}"], "claude"),
    (["/usr/local/bin/codex", "exec", "{prompt}"], "codex"),
    (["env", "GEMINI_CLI_TRUST_WORKSPACE=true", "gemini", "-p", "{prompt}"], "gemini"),
    (["cursor-agent", "-p", "{prompt}"], "cursor"),
    (["npx", "-y", "@openai/codex", "exec", "{prompt}"], "codex"),
    (["pnpm", "dlx", "@google/gemini-cli@0.61.0", "-p", "{prompt}"], "gemini"),
    (["bunx", "opencode-ai@1.18.33", "run", "{prompt}"], "opencode"),
    (["sh", "-c", 'exec claude -p "$1"', "sh", "{prompt}"], "claude"),
    (["npx", "-y", "prettier", "{scope}"], None),
    (["python", "-c", "print('claude')"], None),
    (["rg", "claude"], None),
    (["sh", "-c", 'echo "$1"', "sh", "{scope}"], None),
])
def test_the_agent_cli_a_command_runs(command: list[str], cli: str | None) -> None:
    assert agent_cli_in(command) == cli
