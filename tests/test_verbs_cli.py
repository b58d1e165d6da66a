"""`zeus blocked|resume|resolve STORE ...` through real subprocesses: the listing is
read-only, the verbs open the store as its owner and are refused while a live Zeus owns
it (docs/design.md, "The store")."""

from __future__ import annotations

import getpass
import os
import subprocess
from pathlib import Path

import pytest

from supervisor import Brief, Routing, Status, Zeus
from tests._crash import ROOT, WAIT_S
from tests._zygote import run

ROUTING = """\
version: 1
agents:
  hermes:
    entrypoint: tests._durable_agents:blocks_once
    isolation: thread
"""


def zeus_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run("supervisor.cli", list(args), cwd=cwd,  # forked: tests/_zygote.py
               env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=WAIT_S * 2)


@pytest.fixture
def blocked_store(tmp_path: Path) -> tuple[Path, list[str]]:
    """A store holding two blocked delegations (each agent's first run says so)."""
    (tmp_path / "routing.yml").write_text(ROUTING)
    store = tmp_path / "zeus.db"
    with Zeus.start(Routing.load(tmp_path / "routing.yml"), store=store) as zeus:
        ids = []
        for name in ("migrate", "deploy"):
            summary = zeus.dispatch(Brief(agent="hermes", scope=name, inputs={
                "dir": str(tmp_path), "name": name}), key=name).result()
            assert summary.status is Status.blocked
            ids.append(summary.id)
    return store, ids


def test_blocked_lists_what_waits_for_a_person_with_each_reason(
    tmp_path: Path, blocked_store: tuple[Path, list[str]]
) -> None:
    store, ids = blocked_store
    with Zeus.start(Routing.load(tmp_path / "routing.yml"), store=store):  # a live owner
        listed = zeus_cli(tmp_path, "blocked", str(store))  # read-only: it runs on
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    for d_id, name in zip(ids, ("migrate", "deploy"), strict=True):
        [row] = [line for line in lines if line.startswith(d_id)]
        assert name in row and f"{name} needs a person to look at it" in row
    assert f"zeus resume {store} ID" in listed.stdout


def test_resume_and_resolve_settle_what_was_blocked_and_are_refused_while_a_zeus_owns_it(
    tmp_path: Path, blocked_store: tuple[Path, list[str]]
) -> None:
    store, (migrate, deploy) = blocked_store
    with Zeus.start(Routing.load(tmp_path / "routing.yml"), store=store):  # a live owner
        busy = [zeus_cli(tmp_path, "resume", str(store), migrate),
                zeus_cli(tmp_path, "resolve", str(store), deploy, "--status", "completed",
                         "--note", "x")]
    for refused in busy:
        assert refused.returncode == 2
        assert f"the store is owned by a live Zeus (pid {os.getpid()} " in refused.stderr

    resumed = zeus_cli(tmp_path, "resume", str(store), migrate, "--note", "approved")
    assert resumed.returncode == 0, resumed.stderr
    assert f"{migrate} resumed: completed" in resumed.stdout and "migrate done" in resumed.stdout
    resolved = zeus_cli(tmp_path, "resolve", str(store), deploy, "--status", "failed",
                        "--note", "deployed by hand instead")
    assert resolved.returncode == 0, resolved.stderr
    assert f"{deploy} resolved: failed" in resolved.stdout
    again = zeus_cli(tmp_path, "resume", str(store), migrate)
    assert again.returncode == 2 and "settled completed, not blocked" in again.stderr
    listed = zeus_cli(tmp_path, "blocked", str(store))
    assert listed.returncode == 0 and "Nothing in" in listed.stdout

    with Zeus.start(Routing.load(tmp_path / "routing.yml"), store=store) as zeus:
        done = zeus.handle(migrate).result()
        by_hand = zeus.handle(deploy).result()
    assert done.status is Status.completed and len(done.attempts) == 2
    assert done.usage.calls == 2  # its first run's spend kept
    assert by_hand.status is Status.failed
    assert "deployed by hand instead" in by_hand.render()
    assert f"by {getpass.getuser()}" in by_hand.render()
    assert len((tmp_path / "deploy.runs").read_text().splitlines()) == 1  # never run again


def test_the_verbs_on_a_bad_store_or_an_unknown_id_say_why(tmp_path: Path,
                                                            blocked_store: tuple[Path, list[str]],
                                                            ) -> None:
    store, _ = blocked_store
    unknown = zeus_cli(tmp_path, "resolve", str(store), "hermes-99", "--status", "completed",
                       "--note", "x")
    assert unknown.returncode == 2 and "holds no delegation 'hermes-99'" in unknown.stderr
    (tmp_path / "text.db").write_text("not a store\n")
    bad = zeus_cli(tmp_path, "blocked", str(tmp_path / "text.db"))
    assert bad.returncode == 2 and "not a Zeus store" in bad.stderr
