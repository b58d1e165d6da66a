"""Helpers the `zeus ui` tests share: a demo run's journal, a journal cut before some
lines, and `zeus ui` served by a real process on a free local port."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from supervisor.cli.main import main

WAIT_S = 20.0  # a safety bound on waits, never the thing asserted
UI_SKIP = "the ui extra is not installed (pip install 'zeus-supervisor[ui]')"


def needs_ui_extra() -> None:
    for name in ("starlette", "uvicorn", "sse_starlette", "httpx"):
        pytest.importorskip(name, reason=UI_SKIP)


def run_demo(log: Path) -> Path:
    """The demo, run once for real, its journal at `log`."""
    code = main(["demo", "--log", str(log)])
    assert code == 0, f"the demo did not settle as designed (exit {code})"
    return log


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def withhold_settlement(full: Path, out: Path, delegation_id: str) -> list[str]:
    """Write `full` to `out` up to `delegation_id`'s settlement; return the lines held back."""
    lines = lines_of(full)
    for n, line in enumerate(lines):
        event = json.loads(line)
        if event["event"] == "delegation.settled" and event["delegation_id"] == delegation_id:
            break
    else:
        raise AssertionError(f"{full} never settles {delegation_id}")
    out.write_text("".join(lines[:n]), encoding="utf-8")
    out.chmod(0o600)
    return lines[n:]


def append(path: Path, lines: list[str]) -> None:
    with path.open("a", encoding="utf-8") as stream:
        stream.write("".join(lines))


class Served:
    """`zeus ui` running in its own process; `url` is the page's address (token included)."""

    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process = process
        self.url = url
        self.base = url.split("?", 1)[0].rstrip("/")


@contextmanager
def serving(source: Path, *args: str) -> Iterator[Served]:
    """`zeus ui SOURCE --port 0 ARGS` until the block ends (then stopped and reaped)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "supervisor.cli", "ui", str(source), "--port", "0", *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None and process.stderr is not None
    try:
        ready, _, _ = select.select([process.stdout], [], [], WAIT_S)
        line = process.stdout.readline() if ready else ""
        assert line.startswith("zeus ui: http://127.0.0.1:"), (
            f"no address from zeus ui: {line!r} {process.stderr.read() if not ready else ''}"
        )
        yield Served(process, line.split()[2])
    finally:
        process.terminate()
        process.wait(WAIT_S)
        process.stdout.close()
        process.stderr.close()
