"""The store across real processes: a live owner refuses a second opener, a dead owner's
store is claimed with what it had committed, two processes racing for one store get
one owner, and a host killed right after each kind of write leaves exactly the writes
committed before it."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from actors import Status, Usage
from supervisor.errors import StoreBusy
from supervisor.store import CRASH_ENV, CRASH_EXIT, CRASH_KINDS, SqliteStore

pytestmark = pytest.mark.process

# A host that opens the store, says what it became, and waits for a line on stdin (or
# for stdin to close) before doing the rest: `hold` (close cleanly at EOF), `die` (end
# without giving the store up), `life` (one delegation's whole life, a commit per step).
HOST = r"""
import os, sys, time
from actors import AttemptRecord, Brief, Status, Summary, Usage
from supervisor.errors import StoreBusy
from supervisor.store import SqliteStore
path, mode = sys.argv[1], sys.argv[2]
if mode == "race":
    sys.stdin.readline()  # the gate: every racer is started and waiting
try:
    store = SqliteStore.open(path)
except StoreBusy as exc:
    print("busy", exc.pid, flush=True)
    sys.exit(0)
print("owner", os.getpid(), flush=True)
if mode in ("hold", "race"):
    sys.stdin.read()
    store.close()
    sys.exit(0)
brief = Brief(agent="apollo", scope="scan")
T = time.time()  # wall-clock times: a store prunes what settled long ago
def step(write):
    write()
    store.commit()
step(lambda: store.record_delegation("d1", key="k", parent_id=None, ordinal=None,
     agent="apollo", brief=brief, policy={"read_only": True}, deadline=T + 100, created=T + 1))
if mode == "life":
    rec = lambda a, o: AttemptRecord(id=a, agent="apollo", outcome=o)
    step(lambda: store.attempt_started("d1-a1", delegation_id="d1", number=1,
         agent="apollo", started=T + 2, deadline=T + 32))
    step(lambda: store.attempt_identity("d1-a1", pid=os.getpid(), pid_start_time=None,
         pgid=None, node=None))
    step(lambda: store.charge("d1", "d1-a1", Usage(calls=1, cost=0.25)))
    step(lambda: store.partial("d1", "d1-a1", "a.py"))
    step(lambda: store.attempt_ended("d1-a1", outcome="transient", ended=T + 3, error="flaky",
         record=rec("d1-a1", "transient")))
    step(lambda: store.retry_scheduled("d1", after_attempt="d1-a1", due=T + 4, agent="apollo"))
    store.attempt_started("d1-a2", delegation_id="d1", number=2, agent="apollo", started=T + 4,
                          deadline=T + 34)
    store.attempt_ended("d1-a2", outcome="completed", ended=T + 5, error=None,
                        record=rec("d1-a2", "completed"))
    step(lambda: store.settled("d1", status=Status.completed, at=T + 5, summary=Summary(
        id="d1", agent="apollo", scope="scan", status="completed")))
    print("lived", flush=True)
    sys.exit(0)
store.attempt_started("d1-a1", delegation_id="d1", number=1, agent="apollo", started=2.0,
                      deadline=32.0)
store.commit()
os._exit(0)  # "die": the store is not given up
"""


def host(path: Path, mode: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", HOST, str(path), mode], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})},
    )


def finish(p: subprocess.Popen[str]) -> tuple[int, str]:
    """Close its stdin (the signal to go on), wait for it, and close its pipes."""
    _out, err = p.communicate(timeout=30)
    return p.returncode, err


def test_a_live_owner_process_refuses_a_second_opener_by_name(tmp_path: Path) -> None:
    path = tmp_path / "zeus.db"
    owner = host(path, "hold")
    assert owner.stdout is not None and owner.stdin is not None
    assert owner.stdout.readline().split() == ["owner", str(owner.pid)]
    try:
        with pytest.raises(StoreBusy) as err:
            SqliteStore.open(path)
        assert err.value.pid == owner.pid and f"pid {owner.pid}" in str(err.value)
        assert err.value.host and "since" in str(err.value)
    finally:
        assert finish(owner)[0] == 0
    SqliteStore.open(path).close()  # given up cleanly: free


def test_a_dead_owners_store_is_claimed_with_what_it_had_committed(tmp_path: Path) -> None:
    path = tmp_path / "zeus.db"
    dead = host(path, "die")
    _out, err = dead.communicate(timeout=30)
    assert dead.returncode == 0, err
    store = SqliteStore.open(path)
    try:
        assert store.previous_owner is not None and store.previous_owner.pid == dead.pid
        [found] = store.open_delegations()
        assert found.delegation.id == "d1" and [a.id for a in found.attempts] == ["d1-a1"]
        assert found.attempts[0].open
    finally:
        store.close()


def test_an_owner_whose_pid_was_reused_is_dead(tmp_path: Path) -> None:
    path = tmp_path / "zeus.db"
    SqliteStore.open(path).close()
    con = sqlite3.connect(path)  # an owner row naming this live pid, started at another time
    con.execute("UPDATE owner SET pid = ?, pid_start_time = 1.0, released = NULL",
                (os.getpid(),))
    con.commit()
    con.close()
    store = SqliteStore.open(path)
    assert store.previous_owner is not None and store.previous_owner.pid_start_time == 1.0
    store.close()


@pytest.mark.parametrize("existing", ["new", "dead-owner"])
def test_two_processes_racing_for_one_store_get_one_owner(tmp_path: Path, existing: str) -> None:
    path = tmp_path / "zeus.db"
    if existing == "dead-owner":
        dead = host(path, "die")
        dead.communicate(timeout=30)
    racers = [host(path, "race") for _ in range(2)]
    for r in racers:  # open the gate for both at once
        assert r.stdin is not None
        r.stdin.write("go\n")
        r.stdin.flush()
    answers = []
    for r in racers:
        assert r.stdout is not None
        answers.append(r.stdout.readline().split())
    for r in racers:
        code, err = finish(r)
        assert code == 0, err
    owners = [a for a in answers if a[0] == "owner"]
    busy = [a for a in answers if a[0] == "busy"]
    assert len(owners) == 1 and len(busy) == 1, answers
    assert busy[0][1] == owners[0][1]  # the loser names the winner


# -- a host killed right after each kind of write ------------------------------------------
# What is durable after the crash, for the kind the host died after (its life's steps,
# one commit each: recorded, a1 started, identity, charge, partial, a1 ended transient,
# retry, then a2 started + ended + settled in one last commit).
STEPS = list(CRASH_KINDS)


@pytest.mark.parametrize("kind", CRASH_KINDS)
def test_a_host_killed_right_after_a_commit_leaves_exactly_what_it_committed(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "zeus.db"
    crashed = host(path, "life", {CRASH_ENV: kind})
    out, err = crashed.communicate(timeout=30)
    assert crashed.returncode == CRASH_EXIT, (out, err)
    assert "lived" not in out
    done = STEPS.index(kind)

    def reached(step: str) -> bool:
        return STEPS.index(step) <= done

    store = SqliteStore.open(path)
    try:
        assert store.previous_owner is not None and store.previous_owner.pid == crashed.pid
        if reached("settled"):
            assert store.open_delegations() == []
            summary = store.summary_by_key("k")
            assert summary is not None and summary.status is Status.completed
            assert store.counts().attempts == 2
            return
        [found] = store.open_delegations()
        attempts = {a.id: a for a in found.attempts}
        assert ("d1-a1" in attempts) == reached("attempt_started")
        assert "d1-a2" not in attempts
        if reached("attempt_started"):
            a1 = attempts["d1-a1"]
            assert (a1.pid == crashed.pid) == reached("attempt_identity")
            assert a1.open != reached("attempt_ended")
        assert found.spent == (Usage(calls=1, cost=0.25) if reached("charge") else Usage())
        assert found.partials == (("a.py",) if reached("partial") else ())
        assert (found.retry is not None) == reached("retry_scheduled")
    finally:
        store.close()


def test_the_crash_hook_counts_commits_of_its_kind(tmp_path: Path) -> None:
    # the second commit holding a charge does not exist in this life: it runs to the end
    path = tmp_path / "zeus.db"
    lived = host(path, "life", {CRASH_ENV: "charge:2"})
    out, err = lived.communicate(timeout=30)
    assert lived.returncode == 0 and "lived" in out, err
