"""Routing files are code; `zeus validate --no-import` checks one without running any of it.

And the current directory only ever adds modules to what the CLI imports: it
goes last on `sys.path`, so it cannot shadow an installed one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from supervisor import Routing, RoutingError
from supervisor.cli.commands import EXIT_BAD_INPUT, EXIT_OK, importable
from supervisor.cli.main import main

TRAP = (
    "import pathlib\npathlib.Path({marker!r}).write_text('ran')\n"
    "def run(brief, ctx):\n    pass\n"
)


@pytest.fixture
def trap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A module whose import-time code leaves a marker file; the cwd is its folder."""
    marker = tmp_path / "imported"
    (tmp_path / "zeus_trust_trap.py").write_text(TRAP.format(marker=str(marker)))
    (tmp_path / "routing.yml").write_text(
        "agents:\n  trap: {entrypoint: 'zeus_trust_trap:run'}\n"
        "  typo: {entrypoint: 'not a spec'}\n", "utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "zeus_trust_trap", raising=False)
    return marker


def test_validate_no_import_checks_the_form_of_entrypoints_without_running_their_code(
    trap: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "--no-import"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "routing.yml:3: agents.typo.entrypoint: found 'not a spec'; allowed: " in err
    assert "agents.trap" not in err
    assert not trap.exists()
    assert "zeus_trust_trap" not in sys.modules


def test_validate_no_import_passes_a_well_formed_file_and_says_nothing_was_imported(
    trap: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("routing.yml").write_text("agents:\n  trap: {entrypoint: 'zeus_trust_trap:run'}\n")
    assert main(["validate", "--no-import"]) == EXIT_OK
    assert "entrypoints not imported (--no-import)" in capsys.readouterr().out
    assert not trap.exists()


def test_validate_without_no_import_runs_the_entrypoints_import_time_code(trap: Path) -> None:
    Path("routing.yml").write_text("agents:\n  trap: {entrypoint: 'zeus_trust_trap:run'}\n")
    assert main(["validate"]) == EXIT_OK
    assert trap.read_text() == "ran"  # what the Security section of the README warns about


def test_routing_load_without_imports_still_reports_every_other_problem(tmp_path: Path) -> None:
    path = tmp_path / "routing.yml"
    path.write_text("agents:\n  a: {entrypoint: 'no_such_module_zeus:run', timeout_s: -1}\n")
    with pytest.raises(RoutingError) as caught:
        Routing.load(path, import_entrypoints=False)
    assert "timeout_s" in str(caught.value) and "does not import" not in str(caught.value)
    assert Routing.from_dict({"agents": {"a": {"entrypoint": "no_such_module_zeus:run"}}},
                             import_entrypoints=False).agent("a").entrypoint


def test_the_current_directory_goes_last_on_sys_path_and_cannot_shadow_a_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed, cwd = tmp_path / "site", tmp_path / "project"
    installed.mkdir()
    cwd.mkdir()
    (installed / "zeus_shadow_probe.py").write_text("WHERE = 'installed'\n")
    (cwd / "zeus_shadow_probe.py").write_text("WHERE = 'cwd'\n")
    (cwd / "zeus_cwd_only_probe.py").write_text("WHERE = 'cwd'\n")
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "path", [str(installed), *(p for p in sys.path if p != "")])
    for name in ("zeus_shadow_probe", "zeus_cwd_only_probe"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with importable(str(cwd)):
        assert sys.path[-1] == str(cwd)
        import zeus_cwd_only_probe  # type: ignore[import-not-found]
        import zeus_shadow_probe  # type: ignore[import-not-found]
    assert zeus_shadow_probe.WHERE == "installed"
    assert zeus_cwd_only_probe.WHERE == "cwd"
    assert str(cwd) not in sys.path
