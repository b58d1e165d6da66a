"""`zeus init`: a routing.yml, an agents module and a host that validate and run at once,
from a checkout and from a wheel installed in a fresh virtual environment."""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from actors import Status, Summary
from supervisor.cli.commands import EXIT_BAD_INPUT, EXIT_OK
from supervisor.cli.commands.init import FILES, ROUTING, agent_routing
from supervisor.cli.main import main
from supervisor.routing import AgentPolicy, Routing, SupervisorPolicy
from supervisor.routing.policies import PricingPolicy
from supervisor.routing.table import CLI_HEARTBEAT
from tests._agent_clis import install_fakes

ROOT = Path(__file__).resolve().parent.parent
WAIT_S = 60.0  # a bound on each subprocess, never the thing asserted


def summaries_in(text: str) -> list[Summary]:
    blocks = text.split("</subtask_summary>")[:-1]
    return [Summary.parse(block + "</subtask_summary>") for block in blocks]


def test_the_project_has_the_mit_licence_its_metadata_names() -> None:
    assert 'license = "MIT"' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License\n")


def test_init_writes_a_routing_file_agents_and_a_host_that_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["init", str(tmp_path / "mine")]) == EXIT_OK
    out = capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == sorted(FILES)
    assert f"cd {tmp_path / 'mine'}" in out and "python host.py" in out

    monkeypatch.chdir(tmp_path / "mine")
    monkeypatch.delitem(sys.modules, "my_agents", raising=False)
    assert main(["validate"]) == EXIT_OK
    assert capsys.readouterr().out.startswith("routing.yml: valid, 2 agents")
    routing = Routing.load("routing.yml")
    assert routing.agent("counter").isolation == "process"
    assert routing.agent("finder").command == ("python", "-m", "my_agents", "{scope}")


def test_init_never_overwrites_and_then_writes_nothing_at_all(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "host.py").write_text("print('mine')\n")

    assert main(["init", str(tmp_path)]) == EXIT_BAD_INPUT

    assert "host.py is there already; nothing written" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["host.py"]
    assert (tmp_path / "host.py").read_text() == "print('mine')\n"


def test_init_into_a_path_that_is_a_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "taken").write_text("")
    assert main(["init", str(tmp_path / "taken")]) == EXIT_BAD_INPUT
    assert "cannot write in" in capsys.readouterr().err


def _keys(node: yaml.Node, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], int]]:
    """Every key of a YAML node tree whose value is not a mapping: (path, 1-based line)."""
    found = []
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            here = (*path, str(key.value))
            if isinstance(value, yaml.MappingNode):
                found += _keys(value, here)
            else:
                found.append((here, key.start_mark.line + 1))
    return found


def _default(path: tuple[str, ...]) -> Any:
    if path[0] == "supervisor":
        value: Any = SupervisorPolicy().model_dump(mode="json")
        rest = path[1:]
    else:  # defaults.<key...> or agents.<name>.<key...>
        value = AgentPolicy().model_dump(mode="json", by_alias=True)
        rest = path[1:] if path[0] == "defaults" else path[2:]
    for part in rest:
        value = value[part]
    return value


def test_every_key_init_writes_names_its_true_default() -> None:
    lines = ROUTING.splitlines()
    keys = [(path, line) for path, line in _keys(yaml.compose(ROUTING)) if path != ("version",)]
    assert len(keys) > 30
    for path, line in keys:  # on the key's line, or on a comment line just above it
        said = re.search(r"\(default: (\[[^\]]*\]|[^,)]+)", lines[line - 1]) or re.search(
            r"^\s*#.*\(default: (\[[^\]]*\]|[^,)]+)", lines[line - 2])
        assert said, f"routing.yml:{line}: {'.'.join(path)} does not say its default"
        assert yaml.safe_load(said.group(1)) == _default(path), f"routing.yml:{line}"


AGENT_CLIS = ("claude", "codex", "gemini", "opencode", "cursor")


@pytest.mark.parametrize("cli", AGENT_CLIS)
def test_init_agent_writes_a_routing_file_whose_agent_speaks_that_cli(
    cli: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert main(["init", "--agent", cli, str(tmp_path / "mine")]) == EXIT_OK
    assert f"agent {cli!r} (speaks {cli})" in capsys.readouterr().out
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["routing.yml"]

    routing = Routing.load(tmp_path / "mine" / "routing.yml")  # (it never looks at PATH)
    (policy,) = routing.agents.values()
    assert policy.speaks == cli and policy.speaks_cli and policy.command is None
    assert (policy.heartbeat.stale_after_s, policy.heartbeat.in_tool_s) == (120, 1800)
    assert policy.exit_grace_s == 10 and policy.require_summary is False
    # A cost cap holds on tokens priced by pricing: (Codex, Gemini and Cursor report no
    # cost, and OpenCode 0 for a model it has no price of); Claude's live cost too.
    assert policy.budget.max_cost is not None and policy.pricing is not None
    # What each needs headless: Gemini trusts the folder and offers its shell tool.
    assert policy.args == (("--skip-trust", "--approval-mode", "yolo") if cli == "gemini"
                           else ())

    install_fakes(tmp_path / "bin")  # the CLI on PATH: `zeus validate` passes on it
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path / "mine")
    assert main(["validate"]) == EXIT_OK


@pytest.mark.parametrize("cli", AGENT_CLIS)
def test_every_key_init_agent_writes_names_its_true_default(cli: str) -> None:
    text = agent_routing(cli)
    lines = text.splitlines()
    for path, line in _keys(yaml.compose(text)):
        if path == ("version",):
            continue
        said = re.search(r"\(default: (\[[^\]]*\]|[^,)]+)", lines[line - 1]) or re.search(
            r"^\s*#.*\(default: (\[[^\]]*\]|[^,)]+)", lines[line - 2])
        assert said, f"routing.yml:{line}: {'.'.join(path)} does not say its default"
        if path[2] == "pricing":
            default = PricingPolicy().model_dump()[path[3]] if len(path) > 3 else None
        elif path[2] == "heartbeat" and path[3] in CLI_HEARTBEAT:  # an agent CLI's own
            default = CLI_HEARTBEAT[path[3]]
        else:
            default = _default(path)
        assert yaml.safe_load(said.group(1)) == default, f"{cli}: routing.yml:{line}"


def test_init_agent_never_overwrites_a_routing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "routing.yml").write_text("mine\n")

    assert main(["init", "--agent", "claude", str(tmp_path)]) == EXIT_BAD_INPUT

    assert "routing.yml is there already; nothing written" in capsys.readouterr().err
    assert (tmp_path / "routing.yml").read_text() == "mine\n"
    assert [p.name for p in tmp_path.iterdir()] == ["routing.yml"]


def test_init_agent_refuses_a_cli_zeus_does_not_speak(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["init", "--agent", "aider"]) == EXIT_BAD_INPUT
    assert "invalid choice: 'aider'" in capsys.readouterr().err


@pytest.mark.process
def test_the_host_init_writes_runs_at_once_and_both_agents_complete(tmp_path: Path) -> None:
    assert main(["init", str(tmp_path)]) == EXIT_OK
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    done = subprocess.run([sys.executable, "host.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=WAIT_S, check=False)

    assert done.returncode == 0, done.stderr
    counted, found = summaries_in(done.stdout)
    assert (counted.agent, counted.status, found.agent, found.status) == (
        "counter", Status.completed, "finder", Status.completed)
    assert counted.attempts[0].pid is not None  # it ran in a process of its own
    assert sorted(str(p).split(":")[0] for p in counted.partial_results) == sorted(FILES)
    assert "my_agents.py" in str(found.output) and "def main" in str(found.output)
    assert (tmp_path / "events.jsonl").is_file()


SOURCE = ("pyproject.toml", "README.md", "LICENSE", "supervisor", "actors")
JUNK = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")


def _site_packages() -> list[str]:
    """Where this interpreter finds Zeus's dependencies (its own copy of Zeus is not used)."""
    return [*site.getsitepackages(), sysconfig.get_paths()["purelib"]]


@pytest.mark.process
@pytest.mark.slow
def test_from_a_wheel_in_a_fresh_environment_init_validate_and_the_host_work(
    tmp_path: Path,
) -> None:
    def sh(*argv: str | Path, cwd: Path = tmp_path) -> str:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        done = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=WAIT_S, check=False)
        assert done.returncode == 0, f"{argv}: {done.stdout}\n{done.stderr}"
        return done.stdout

    source = tmp_path / "source"  # a copy: pip builds in the tree, and a checkout's stale
    source.mkdir()  # build/ would leak modules that no longer exist into the wheel
    for name in SOURCE:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=JUNK)
        elif (ROOT / name).exists():
            shutil.copy2(ROOT / name, source / name)
    sh(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", "dist", source)
    (wheel,) = (tmp_path / "dist").glob("zeus_supervisor-*.whl")
    with zipfile.ZipFile(wheel) as packed:  # the MIT licence pyproject.toml names ships too
        assert any(name.endswith("/LICENSE") for name in packed.namelist())
    sh(sys.executable, "-m", "venv", "--without-pip", "venv")
    python, zeus = tmp_path / "venv" / "bin" / "python", tmp_path / "venv" / "bin" / "zeus"
    sh(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps",
       "--no-index", wheel)
    own = sh(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    Path(own, "zeus-test-dependencies.pth").write_text("\n".join(_site_packages()) + "\n")
    where = sh(python, "-c", "import supervisor; print(supervisor.__file__)")
    assert where.startswith(str(tmp_path / "venv")), where  # the wheel's Zeus, not the checkout's

    sh(zeus, "init", "proj")
    assert "valid, 2 agents" in sh(zeus, "validate", cwd=tmp_path / "proj")
    counted, found = summaries_in(sh(python, "host.py", cwd=tmp_path / "proj"))
    assert (counted.status, found.status) == (Status.completed, Status.completed)
    (again,) = summaries_in(sh(zeus, "dispatch", "counter", "Count the words here",
                               cwd=tmp_path / "proj"))  # the step init prints last
    assert again.status is Status.completed and again.attempts[0].pid is not None
