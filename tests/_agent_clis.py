"""The fake agent CLIs for tests: `install_fakes` puts a `claude`, `codex`, `gemini`,
`opencode` and `cursor-agent` that replay recorded transcripts
(tests/fixtures/agent_clis/fake_cli.py) into a directory, and the `fake_clis` fixture
puts them first on `PATH`, with a log of every call.

    from tests._agent_clis import fake_clis  # noqa: F401  (the fixture)

    def test_something(fake_clis):
        ...  # run `claude -p "... scenario: blocked" ...`
        assert fake_clis.calls()[0]["resume"] is None
"""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = ["FAKE_CLI", "PROGRAMS", "TRANSCRIPTS", "FakeClis", "fake_clis", "install_fakes"]

TRANSCRIPTS = Path(__file__).resolve().parent / "fixtures" / "agent_clis"
FAKE_CLI = TRANSCRIPTS / "fake_cli.py"
# The program each CLI is found as on PATH, and the transcripts it replays.
PROGRAMS = {
    "claude": "claude",
    "codex": "codex",
    "gemini": "gemini",
    "opencode": "opencode",
    "cursor-agent": "cursor",
}


def install_fakes(directory: Path) -> Path:
    """Write the five fake CLIs into `directory` (created if need be); returns it."""
    directory.mkdir(parents=True, exist_ok=True)
    for program, cli in PROGRAMS.items():
        path = directory / program
        path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_CLI}" {cli} "$@"\n',
                        encoding="utf-8")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return directory


@dataclass(frozen=True)
class FakeClis:
    """Where the fakes are, and the log they append one JSON line a call to."""

    dir: Path
    log: Path

    def calls(self) -> list[dict[str, Any]]:
        """Every line of the log, parsed (none before the first call)."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()
                if line.strip()]


@pytest.fixture
def fake_clis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeClis:
    """The fake CLIs first on PATH, logging to a file in `tmp_path`."""
    directory = install_fakes(tmp_path / "fake-clis")
    log = tmp_path / "fake-cli-calls.jsonl"
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("ZEUS_FAKE_CLI_LOG", str(log))
    monkeypatch.delenv("ZEUS_FAKE_CLI_SCENARIO", raising=False)
    monkeypatch.delenv("ZEUS_FAKE_CLI_TRANSCRIPT", raising=False)
    return FakeClis(dir=directory, log=log)
