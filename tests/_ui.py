"""Helpers the `zeus ui` tests share: a demo run's journal, a journal cut before some
lines, and `zeus ui` served by a real process on a free local port."""

from __future__ import annotations

import io
import json
import os
import select
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from supervisor.cli.main import main
from tests._zygote import forked

WAIT_S = 20.0  # a safety bound on waits, never the thing asserted
UI_SKIP = "the ui extra is not installed (pip install 'zeus-supervisor[ui]')"


def needs_ui_extra() -> None:
    for name in ("starlette", "uvicorn", "sse_starlette", "httpx"):
        pytest.importorskip(name, reason=UI_SKIP)


@dataclass(frozen=True)
class DemoRun:
    """One real `zeus demo` run: its exit status, how long it took, what it printed, its
    journal, and what it left in the temporary directory it was given (multiprocess's
    own pymp-* directory aside: it keeps it for the fork server until this process
    exits, and removes it then)."""

    code: int
    took: float
    out: str
    log: Path
    left: list[str]


def run_demo_once(folder: Path) -> DemoRun:
    """`zeus demo --log folder/demo.jsonl`, its temporary directory `folder/tmp`."""
    scratch = folder / "tmp"
    scratch.mkdir()
    log = folder / "demo.jsonl"
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, redirect_stdout(out):
        patch.setattr(tempfile, "tempdir", str(scratch))
        started = time.monotonic()
        code = main(["demo", "--log", str(log)])
        took = time.monotonic() - started
    left = [p.name for p in scratch.iterdir() if not p.name.startswith("pymp-")]
    return DemoRun(code, took, out.getvalue(), log, left)


def run_demo(log: Path) -> Path:
    """The demo, run for real, its journal at `log`.

    Its own test asserts that every scenario settles as designed; these tests need a
    journal of that shape, so a run that a loaded machine pushed off it is made again once.
    """
    for _ in range(2):
        log.unlink(missing_ok=True)
        code = main(["demo", "--log", str(log)])
        if code == 0:
            return log
    raise AssertionError(f"the demo did not settle as designed twice (exit {code})")


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def withhold_settlement(full: Path, out: Path, delegation_id: str) -> list[str]:
    """Write `full` to `out` up to `delegation_id`'s settlement; return the lines held back."""
    lines = lines_of(full)
    settles = [
        n for n, line in enumerate(lines)
        if (e := json.loads(line))["event"] == "delegation.settled"
        and e["delegation_id"] == delegation_id
    ]
    assert settles, f"{full} never settles {delegation_id}"
    n = settles[0]
    out.write_text("".join(lines[:n]), encoding="utf-8")
    out.chmod(0o600)
    return lines[n:]


def append(path: Path, lines: list[str]) -> None:
    with path.open("a", encoding="utf-8") as stream:
        stream.write("".join(lines))


def tool_journal(path: Path, *, now: float = 100.0, reads: int = 0) -> Path:
    """A journal of one running attempt, d1-a1: `reads` calls of `read` seen only once over,
    a `Bash` call (side effects) started and ended, and a `pytest` call still in flight."""
    base = {"parent_id": None, "agent": "apollo", "delegation_id": "d1", "attempt_id": "d1-a1"}
    t0 = now - 30

    def tool(t: float, phase: str, name: str, **fields: Any) -> dict[str, Any]:
        return {"ts": t0 + t, "event": "attempt.tool", "phase": phase, "tool": name, **base,
                **fields}

    events = [
        {"ts": t0, "event": "zeus.started", **base, "delegation_id": None, "attempt_id": None},
        {"ts": t0, "event": "delegation.dispatched", **base, "attempt_id": None, "scope": "s",
         "timeout_s": 60},
        {"ts": t0, "event": "attempt.started", **base, "attempt": 1, "deadline_s": 60},
        *(tool(1 + n / 1000, "end", "read", side_effects=False) for n in range(reads)),
        tool(2, "start", "Bash", side_effects=True, call_id="t1"),
        tool(10, "end", "Bash", side_effects=True, call_id="t1", duration_s=8.0),
        tool(12, "start", "pytest", side_effects=False, call_id="t2"),
        {"ts": now, "event": "attempt.heartbeat", **base, "progress": 4, "note": None},
    ]
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path


class Served:
    """`zeus ui` running in its own process; `url` is the page's address (token included)."""

    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process = process
        self.url = url
        self.base = url.split("?", 1)[0].rstrip("/")


@contextmanager
def serving(source: Path | str, *args: str) -> Iterator[Served]:
    """`zeus ui SOURCE --port 0 ARGS` until the block ends (then stopped and reaped)."""
    process = forked("supervisor.cli", ["ui", str(source), "--port", "0", *args],
                     env=os.environ | {"PYTHONUNBUFFERED": "1"})  # tests/_zygote.py
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


CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not path.exists():
            return f"no {path}: apt-get install {package} (.ci/run installs it)"
    return None


@contextmanager
def chromium(profile: Path, width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """A headless Chromium driven by selenium through the system's chromedriver (never one
    downloaded), on a fresh profile at `profile`."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@contextmanager
def shared_store(url: str) -> Iterator[dict[str, Any]]:
    """A PostgreSQL store at `url` of four hosts, each in a state the page names, by role:
    `live` (a minute's lease; it owns apollo-1, its child apollo-2, and apollo-4, taken
    over), `released` (it settled apollo-3 and stopped), `taken` (its lease ended and
    `live` took apollo-4 from it) and `expired` (its lease ended; apollo-5 is still its
    own). Every host is closed at the end."""
    import psycopg

    from actors import Brief, Status, Summary
    from supervisor.errors import StoreError
    from supervisor.routing import AgentPolicy
    from supervisor.store.postgres import PostgresStore

    brief, policy = Brief(agent="apollo", scope="scan the routes"), AgentPolicy(read_only=True)
    hosts = {role: PostgresStore.open(url, lease_s=60)
             for role in ("live", "released", "taken", "expired")}

    def record(role: str, d_id: str, parent: str | None = None) -> None:
        hosts[role].record_delegation(
            d_id, key=None, parent_id=parent, ordinal=0 if parent else None, agent="apollo",
            brief=brief, policy=policy, deadline=None, created=time.time())
        hosts[role].commit()

    def expire(role: str) -> None:
        with psycopg.connect(url, autocommit=True) as con:
            con.execute("UPDATE hosts SET lease_until = now() - interval '1 second'"
                        " WHERE id = %s", (hosts[role].host_id,))

    try:
        record("live", "apollo-1")
        hosts["live"].attempt_started("apollo-1-a1", delegation_id="apollo-1", number=1,
                                      agent="apollo", started=time.time(), deadline=None)
        record("live", "apollo-2", parent="apollo-1")
        record("released", "apollo-3")
        hosts["released"].settled("apollo-3", status=Status.completed, at=time.time(),
                                  summary=Summary(id="apollo-3", agent="apollo",
                                                  scope=brief.scope, status=Status.completed,
                                                  output="ok"))
        hosts["released"].close()
        record("taken", "apollo-4")
        expire("taken")
        assert hosts["live"].take_over(hosts["taken"].host_id, limit=8) == ["apollo-4"]
        record("expired", "apollo-5")
        expire("expired")
        yield hosts
    finally:
        for role, store in hosts.items():
            if role != "released":
                with suppress(StoreError):  # its sessions were ended by a taker
                    store.close()
