"""The journal and artifacts are created owner-only: files 0600, folders 0700."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors import Brief
from supervisor import Routing, Zeus
from supervisor.cli.live import open_journal
from supervisor.cli.main import main
from supervisor.core.settlement import shape_result
from supervisor.routing import ResultPolicy

PLANS = Path(__file__).resolve().parent / "fixtures" / "plans"


def mode(path: Path) -> int:
    return os.stat(path).st_mode & 0o777


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The most permissive umask: whatever is private is so because Zeus asked for it."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.usefixtures("open_umask")
def test_a_journal_file_zeus_creates_is_owner_only(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    with Zeus.start(Routing.from_dict({"agents": {}}), agents={"a": lambda b, c: "ok"},
                    log=log) as zeus:
        zeus.dispatch(Brief(agent="a", scope="s")).result(10)
    assert log.read_text()
    assert mode(log) == 0o600


@pytest.mark.usefixtures("open_umask")
def test_the_cli_journal_is_owner_only(tmp_path: Path) -> None:
    log = tmp_path / "journal.jsonl"
    assert main(["dispatch", "flaky", "x", "--routing", str(PLANS / "routing.yml"),
                 "--log", str(log)]) == 0
    assert mode(log) == 0o600
    open_journal(tmp_path / "other.jsonl").close()
    assert mode(tmp_path / "other.jsonl") == 0o600


@pytest.mark.usefixtures("open_umask")
def test_an_existing_journal_keeps_the_mode_its_owner_gave_it(tmp_path: Path) -> None:
    log = tmp_path / "shared.jsonl"
    log.write_text("")
    log.chmod(0o640)
    open_journal(log).close()
    assert mode(log) == 0o640


@pytest.mark.usefixtures("open_umask")
def test_artifacts_and_the_folders_made_for_them_are_owner_only(tmp_path: Path) -> None:
    folder = tmp_path / "made" / "artifacts"
    policy = ResultPolicy(max_chars=10, overflow="artifact", artifact_dir=str(folder))
    shaped = shape_result("x" * 100, policy, delegation_id="apollo-1")
    assert shaped.artifact == str(folder / "apollo-1.txt")
    assert mode(Path(shaped.artifact)) == 0o600
    assert (mode(folder), mode(folder.parent)) == (0o700, 0o700)
