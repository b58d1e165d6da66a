"""What the crash tests share (`tests/test_durable.py`, `tests/test_reattach.py`): a real
host process (`tests._durable_host`) on a store, killed or waited for by the test, and
readers of what its agents (`tests._durable_agents`) and its store leave behind."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from tests._zygote import forked

ROOT = Path(__file__).resolve().parent.parent
WAIT_S = 30.0  # a safety bound on waits, never the thing asserted
HELD = "tests._durable_agents:held"


def agent(entrypoint: str = HELD, **policy: Any) -> dict[str, Any]:
    return {"entrypoint": entrypoint, "timeout_s": 60, **policy}


def brief(agent_name: str, folder: Path, name: str, **inputs: Any) -> dict[str, Any]:
    return {"key": name, "brief": {"agent": agent_name, "scope": name,
                                   "inputs": {"dir": str(folder), "name": name, **inputs}}}


class Host:
    """A host process on `store` running `plan`; killed or waited for by the test."""

    def __init__(self, tmp: Path, store: Path | str, plan: dict[str, Any],
                 env: dict[str, str] | None = None) -> None:
        # Without a grace of its own a plan's process children die with their host, as
        # they did before children could wait to be picked up (docs/design.md, "Reattach").
        supervisor = plan.get("supervisor", {})
        plan = {**plan, "supervisor": {"orphan_grace_s": 0, **supervisor}}
        plan_path = tmp / f"plan-{time.monotonic_ns()}.json"
        plan_path.write_text(json.dumps(plan))
        # A process of its own, forked from one that has imported Zeus already
        # (tests/_zygote.py): only the imports are shared.
        self.proc = forked("tests._durable_host", [str(store), str(plan_path)], cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
        self._read: list[dict[str, Any]] = []

    def read_line(self) -> dict[str, Any]:
        """The next JSON line the host prints (`{"recovered": ...}` first), kept for
        `results`; fails if the host exits first."""
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                pytest.fail(f"the host exited first: {self.proc.communicate()[1]}")
            if line.startswith("{"):
                self._read.append(json.loads(line))
                return self._read[-1]

    def kill(self) -> None:
        """SIGKILL, then reaped. Its pipes are closed here, not drained: children that
        outlive it hold their copies of them open."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=WAIT_S)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()

    def results(self) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """What the host printed once it finished: its recovery, and each summary by key
        (the scope: every brief here has its name as its scope)."""
        out, err = self.proc.communicate(timeout=WAIT_S * 2)
        assert self.proc.returncode == 0, err
        lines = self._read + [json.loads(line) for line in out.splitlines()
                              if line.startswith("{")]
        summaries = {s["summary"]["scope"]: s["summary"] for s in lines if "summary" in s}
        return lines[0]["recovered"], summaries


def wait_for(path: Path, host: Host | None = None) -> None:
    """Until `path` exists (the agent got there); fails fast if the host died first."""
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        if host is not None and host.proc.poll() is not None:
            pytest.fail(f"the host exited first: {host.proc.communicate()[1]}")
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.01)


def wait_charged(store: Path | str, calls: int, host: Host) -> None:
    """Until the store holds `calls` charged calls: Zeus had them and committed them."""
    deadline = time.monotonic() + WAIT_S
    while stored_calls(store) < calls:
        if host.proc.poll() is not None:
            pytest.fail(f"the host exited first: {host.proc.communicate()[1]}")
        assert time.monotonic() < deadline, f"the store never held {calls} calls"
        time.sleep(0.01)


def wait_partials(store: Path | str, count: int, host: Host) -> None:
    """Until the store holds `count` partial results: Zeus had them and committed them."""
    deadline = time.monotonic() + WAIT_S
    while _count(store, "SELECT count(*) FROM partials") < count:
        if host.proc.poll() is not None:
            pytest.fail(f"the host exited first: {host.proc.communicate()[1]}")
        assert time.monotonic() < deadline, f"the store never held {count} partial results"
        time.sleep(0.01)


def store_rows(store: Path | str, query: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The rows of `query` (`?` placeholders) on the store, a SQLite file (read-only) or a
    PostgreSQL URL; none when the store holds no such table yet."""
    if str(store).startswith("postgresql://"):
        import psycopg

        try:
            with psycopg.connect(str(store)) as pg:
                return [tuple(r) for r in pg.execute(query.replace("?", "%s"), args)]
        except psycopg.Error:
            return []  # not created yet
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as con:
            return [tuple(r) for r in con.execute(query, args).fetchall()]
    except sqlite3.Error:
        return []  # not created yet


def store_row(store: Path | str, query: str, args: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
    """The first row of `query` on the store (`store_rows`), or None."""
    rows = store_rows(store, query, args)
    return rows[0] if rows else None


def _count(store: Path | str, query: str) -> int:
    row = store_row(store, query)
    return 0 if row is None else int(row[0])


def stored_calls(store: Path | str) -> int:
    return _count(store, "SELECT coalesce(sum(calls), 0) FROM attempts")


def settled(store: Path | str, key: str) -> bool:
    """Whether the store holds the delegation of `key` settled (committed)."""
    row = store_row(store, "SELECT status FROM delegations WHERE key = ?", (key,))
    return row is not None and row[0] is not None


def runs(folder: Path, name: str) -> list[tuple[int, float, bool]]:
    path = folder / f"{name}.runs"
    if not path.exists():
        return []
    return [(int(p), float(s), o == "1") for p, s, o in
            (line.split() for line in path.read_text().splitlines() if line.strip())]


def outcomes(summary: dict[str, Any]) -> list[str]:
    return [a["outcome"] for a in summary["attempts"]]
