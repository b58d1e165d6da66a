"""Durable delegations across a real host crash: a host process is SIGKILLed mid-run
and started again on the same store (docs/design.md, "The store"). The crash tests run
on both engines (a SQLite file, a PostgreSQL database: the restarted host takes over
what its dead predecessor on this machine left open); one owner per store and the
tests of a store's own file are SQLite's."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from actors.osproc import process_running
from supervisor import Brief, Status, StoreBusy, Zeus
from supervisor.core.recovery import LOST_UNSTARTED
from tests._crash import (
    ROOT,
    WAIT_S,
    Host,
    agent,
    brief,
    outcomes,
    runs,
    settled,
    store_row,
    store_rows,
    wait_charged,
    wait_for,
)
from tests._zygote import forked, run

pytestmark = [pytest.mark.process, pytest.mark.realtime]


def test_after_a_host_crash_readers_rerun_writers_settle_blocked_and_spend_carries_over(
    tmp_path: Path, store_url: str,
) -> None:
    store = store_url
    plan = {
        "agents": {
            "reader": agent(read_only=True, isolation="thread", retry={"max_retries": 1}),
            "preader": agent(read_only=True, isolation="process", retry={"max_retries": 1}),
            "writer": agent(isolation="process", retry={"max_retries": 3}),
        },
        "briefs": [brief("reader", tmp_path, "reader"), brief("preader", tmp_path, "preader"),
                   brief("writer", tmp_path, "writer")],
    }
    first = Host(tmp_path, store, plan)
    for name in ("reader", "preader", "writer"):
        wait_for(tmp_path / f"{name}.started", first)
    wait_charged(store, 3, first)
    first.kill()
    (tmp_path / "release").write_text("")
    recovered, summaries = Host(tmp_path, store, plan).results()

    assert sorted(recovered["rerun"]) == ["preader-1", "reader-1"]
    assert recovered["blocked"] == ["writer-1"]
    for name in ("reader", "preader"):
        assert summaries[name]["status"] == "completed"
        assert outcomes(summaries[name]) == ["lost", "completed"]
        assert summaries[name]["usage"]["calls"] == 2  # one before the crash, one after
        assert [overlap for _, _, overlap in runs(tmp_path, name)] == [False, False]
    writer = summaries["writer"]
    assert writer["status"] == "blocked"
    assert outcomes(writer) == ["lost"]
    assert "confirmed" in writer["error"] and "check its changes" in writer["error"]
    assert len(runs(tmp_path, "writer")) == 1  # never a second writer
    assert writer["usage"]["calls"] == 1
    for name in ("preader", "writer"):  # the first host's process children are gone
        pid, start, _ = runs(tmp_path, name)[0]
        assert process_running(pid, start) is False


def test_a_summary_settled_before_the_crash_is_served_again_without_a_second_run(
    tmp_path: Path, store_url: str,
) -> None:
    store = store_url
    (tmp_path / "release").write_text("")  # the first one completes at once
    plan = {"agents": {"quick": agent("tests._durable_agents:quick", isolation="process"),
                       "w": agent(isolation="process")},
            "briefs": [brief("quick", tmp_path, "once")]}
    _, before = Host(tmp_path, store, plan).results()
    (tmp_path / "release").unlink()
    plan["briefs"].append(brief("w", tmp_path, "held"))
    crashing = Host(tmp_path, store, plan)
    wait_for(tmp_path / "held.started", crashing)
    crashing.kill()
    (tmp_path / "release").write_text("")
    recovered, after = Host(tmp_path, store, plan).results()

    assert after["once"] == before["once"]  # the same summary, served from the store
    assert len(runs(tmp_path, "once")) == 1
    assert recovered["settled"] >= 1


def test_a_nested_orchestrator_replays_its_settled_sub_delegations_and_awaits_the_open_one(
    tmp_path: Path, store_url: str,
) -> None:
    store = store_url
    log = tmp_path / "events.jsonl"
    plan = {
        "agents": {
            "boss": agent("tests._durable_agents:orchestrate", kind="orchestrator",
                          idempotent=True, isolation="thread", retry={"max_retries": 1}),
            "quick": agent("tests._durable_agents:quick", read_only=True),
            "slow": agent(read_only=True, retry={"max_retries": 1}),
        },
        "briefs": [brief("boss", tmp_path, "boss")],
    }
    first = Host(tmp_path, store, plan)
    wait_for(tmp_path / "second.started", first)
    wait_charged(store, 2, first)
    first.kill()
    (tmp_path / "release").write_text("")
    _, summaries = Host(tmp_path, store, {**plan, "log": str(log)}).results()

    boss = summaries["boss"]
    assert boss["status"] == "completed"
    assert boss["output"] == ["completed", "completed", "first done", "second done"]
    assert len(runs(tmp_path, "boss")) == 2
    assert len(runs(tmp_path, "first")) == 1  # replayed from the store, never run again
    assert len(runs(tmp_path, "second")) == 2  # lost with the host, run again once
    events = [json.loads(line) for line in log.read_text().splitlines()]
    replayed = [e for e in events if e["event"] == "delegation.replayed"]
    assert [e["delegation_id"] for e in replayed] == ["quick-1", "slow-1"]
    # the spend of both sub-delegations counts against the orchestrator
    assert boss["usage"]["calls"] >= 3


def test_spend_before_the_crash_counts_so_the_budget_stops_the_rerun(
    tmp_path: Path, store_url: str
) -> None:
    store = store_url
    plan = {"agents": {"r": agent(read_only=True, retry={"max_retries": 2},
                                  budget={"max_calls": 3})},
            "briefs": [brief("r", tmp_path, "spender", calls=2)]}
    first = Host(tmp_path, store, plan)
    wait_for(tmp_path / "spender.started", first)
    wait_charged(store, 2, first)
    first.kill()
    (tmp_path / "release").write_text("")
    _, summaries = Host(tmp_path, store, plan).results()

    spender = summaries["spender"]
    assert spender["status"] == "budget_exceeded"
    assert spender["usage"]["calls"] > 3  # 2 before the crash, and the rerun's
    assert len(runs(tmp_path, "spender")) == 2


def test_a_deadline_that_passed_while_the_host_was_down_settles_timed_out(
    tmp_path: Path, store_url: str
) -> None:
    store = store_url
    plan = {"agents": {"r": agent(read_only=True, timeout_s=1.5, retry={"max_retries": 2},
                                  shutdown={"grace_s": 0.1})},
            "briefs": [brief("r", tmp_path, "late")]}
    first = Host(tmp_path, store, plan)
    wait_for(tmp_path / "late.started", first)
    first.kill()
    (deadline,) = store_row(store, "SELECT deadline FROM attempts") or (None,)
    while time.time() <= deadline:  # the host stays down past the attempt's deadline
        time.sleep(0.05)
    (tmp_path / "release").write_text("")
    recovered, summaries = Host(tmp_path, store, plan).results()

    assert recovered["ended"] == ["r-1"]  # said, though neither run again nor blocked
    late = summaries["late"]
    assert late["status"] == "timed_out"
    assert "deadline passed while no supervisor ran" in late["error"]
    assert len(runs(tmp_path, "late")) == 1


def test_a_writer_whose_deadline_passed_while_the_host_was_down_is_blocked_not_timed_out(
    tmp_path: Path, store_url: str,
) -> None:
    store = store_url
    plan = {"agents": {"w": agent(timeout_s=1.5, isolation="thread")},
            "briefs": [brief("w", tmp_path, "late-writer")]}
    first = Host(tmp_path, store, plan)
    wait_charged(store, 1, first)
    first.kill()
    (deadline,) = store_row(store, "SELECT deadline FROM attempts") or (None,)
    while time.time() <= deadline:  # the host stays down past the attempt's deadline
        time.sleep(0.05)
    recovered, summaries = Host(tmp_path, store, plan).results()

    late = summaries["late-writer"]
    assert late["status"] == "blocked"  # something may have been written: a person checks
    assert recovered["blocked"] == ["w-1"] and recovered["rerun"] == []
    assert "outcome is unknown" in late["error"] and "deadline passed" in late["error"]
    assert f"zeus resume {shlex.quote(store)} w-1" in late["error"]  # a URL is quoted
    assert f"zeus resolve {shlex.quote(store)} w-1 --routing " in late["error"]
    assert outcomes(late) == ["lost"] and len(runs(tmp_path, "late-writer")) == 1


def test_a_reader_lost_in_more_host_crashes_than_its_retries_runs_again_and_completes(
    tmp_path: Path, store_url: str,
) -> None:
    store = store_url
    plan = {"agents": {"r": agent(read_only=True, isolation="thread",
                                  retry={"max_retries": 3})},
            "briefs": [brief("r", tmp_path, "survivor")]}
    for crash in range(1, 5):  # four host crashes, each with the reader's run under way
        host = Host(tmp_path, store, plan)
        wait_charged(store, crash, host)
        host.kill()
    (tmp_path / "release").write_text("")
    recovered, summaries = Host(tmp_path, store, plan).results()

    survivor = summaries["survivor"]
    assert recovered["rerun"] == ["r-1"]
    assert survivor["status"] == "completed"
    assert outcomes(survivor) == ["lost"] * 4 + ["completed"]
    assert survivor["usage"]["calls"] == 5 and len(runs(tmp_path, "survivor")) == 5


def test_a_reader_lost_in_more_host_crashes_than_max_recoveries_settles_failed(
    tmp_path: Path, store_url: str,
) -> None:
    store = store_url
    plan = {"agents": {"r": agent(read_only=True, isolation="thread",
                                  retry={"max_retries": 5})},
            "supervisor": {"max_recoveries": 1},
            "briefs": [brief("r", tmp_path, "crasher")]}
    for crash in range(1, 3):
        host = Host(tmp_path, store, plan)
        wait_charged(store, crash, host)
        host.kill()
    recovered, summaries = Host(tmp_path, store, plan).results()

    crasher = summaries["crasher"]
    assert crasher["status"] == "failed" and recovered["rerun"] == []
    assert "lost in 2 host crashes (supervisor.max_recoveries: 1)" in crasher["error"]
    assert outcomes(crasher) == ["lost", "lost"] and len(runs(tmp_path, "crasher")) == 2


@pytest.mark.parametrize("read_only", [True, False], ids=["reader", "writer"])
def test_an_attempt_whose_process_never_started_is_not_counted_as_a_loss(
    tmp_path: Path, store_url: str, read_only: bool,
) -> None:
    """Nothing of it ran, so it runs again: a writer too (it wrote nothing), never blocked."""
    store = store_url
    (tmp_path / "release").write_text("")
    plan = {"agents": {"p": agent("tests._durable_agents:quick", read_only=read_only,
                                  isolation="process")},
            "supervisor": {"max_recoveries": 0},  # not one counted loss is allowed
            "briefs": [brief("p", tmp_path, "unstarted")]}
    # its host dies once the attempt is committed, before its process is asked for
    crashed = Host(tmp_path, store, plan, env={"ZEUS_STORE_CRASH_AFTER": "attempt_started"})
    _, err = crashed.proc.communicate(timeout=WAIT_S)
    assert crashed.proc.returncode == 86, err
    assert runs(tmp_path, "unstarted") == []
    recovered, summaries = Host(tmp_path, store, plan).results()

    unstarted = summaries["unstarted"]
    assert recovered["rerun"] == ["p-1"] and unstarted["status"] == "completed"
    assert outcomes(unstarted) == ["lost", "completed"]
    assert unstarted["attempts"][0]["error"] == LOST_UNSTARTED  # one sentence: nothing ran
    assert len(runs(tmp_path, "unstarted")) == 1


def test_a_second_live_host_on_the_same_store_is_refused_naming_the_first(
    tmp_path: Path,
) -> None:
    store = tmp_path / "zeus.db"
    plan = {"agents": {"r": agent(read_only=True)}, "briefs": [brief("r", tmp_path, "x")]}
    first = Host(tmp_path, store, plan)
    wait_for(tmp_path / "x.started", first)
    try:
        with pytest.raises(StoreBusy) as refused:
            Zeus.start(store=store)
        assert refused.value.pid == first.proc.pid
        assert str(first.proc.pid) in str(refused.value)
    finally:
        first.kill()


# On PostgreSQL, one kind of each shape of write (an insert of its own row, an insert
# conditioned on the delegation's epoch, an update of an attempt, a settlement): the
# others share those statements' shapes, and the suite's time is kept.
_PG_KINDS = ("recorded", "attempt_started", "charge", "settled")


_KINDS = ("recorded", "attempt_started", "charge", "partial", "attempt_ended",
          "retry_scheduled", "settled")


@pytest.mark.parametrize(("engine", "kind"), [("sqlite", k) for k in _KINDS]
                         + [("postgres", k) for k in _PG_KINDS])
def test_a_host_killed_right_after_each_kind_of_store_write_settles_exactly_once(
    tmp_path: Path, request: pytest.FixtureRequest, engine: str, kind: str
) -> None:
    store = (str(tmp_path / "zeus.db") if engine == "sqlite"
             else str(request.getfixturevalue("pg_url")))
    (tmp_path / "release").write_text("")
    plan = {"agents": {"flaky": agent("tests._durable_agents:flaky", read_only=True,
                                      retry={"max_retries": 3, "initial_s": 0.05})},
            "briefs": [brief("flaky", tmp_path, "once")]}
    crashed = Host(tmp_path, store, plan, env={"ZEUS_STORE_CRASH_AFTER": kind})
    _, err = crashed.proc.communicate(timeout=WAIT_S)
    assert crashed.proc.returncode == 86, err
    _, first = Host(tmp_path, store, plan).results()

    once = first["once"]
    assert once["status"] == "completed"
    stored = store_rows(store, "SELECT id, status, summary FROM delegations")
    assert [(d, s) for d, s, _ in stored] == [(once["id"], "completed")]  # settled once
    assert json.loads(stored[0][2]) == once
    started = runs(tmp_path, "once")
    assert not any(overlap for _, _, overlap in started)  # no two attempts overlapped
    assert len(started) <= 3
    assert once["usage"]["calls"] >= sum(1 for r in once["attempts"] if r["outcome"] in (
        "transient", "completed"))  # every attempt that charged and ended is paid for
    assert all(process_running(pid, start) is False for pid, start, _ in started)


def test_keys_without_a_store_give_the_same_delegation_and_a_different_brief_conflicts() -> None:
    from supervisor import KeyConflict

    with Zeus.start(agents={"a": lambda brief, ctx: brief.scope}) as zeus:
        first = zeus.dispatch(Brief(agent="a", scope="x"), key="k")
        assert zeus.dispatch(Brief(agent="a", scope="x"), key="k") is first
        with pytest.raises(KeyConflict) as conflict:
            zeus.dispatch(Brief(agent="a", scope="y"), key="k")
        assert conflict.value.fields == ("scope",)
        assert first.result().status is Status.completed


def test_a_store_that_cannot_be_written_refuses_new_work_and_loses_nothing_running(
    tmp_path: Path,
) -> None:
    import contextlib
    import threading

    from supervisor import StoreError
    from supervisor.testing import held, store_full, sync

    release = threading.Event()
    agents = {"waits": lambda brief, ctx: release.wait(WAIT_S) and "waited",
              "quick": lambda brief, ctx: "x" * 2000}  # each summary needs room
    with Zeus.start(agents=agents, store=tmp_path / "zeus.db") as zeus:
        running = zeus.dispatch(Brief(agent="waits", scope="runs on"))
        sync(zeus)
        with contextlib.ExitStack() as full:
            with held(zeus):  # entered and left while Zeus's thread waits
                full.enter_context(store_full(zeus))
            refused = None
            for i in range(500):  # until a commit needs a page the full disk does not have
                try:
                    zeus.dispatch(Brief(agent="quick", scope=f"q{i}")).result(WAIT_S)
                except StoreError as exc:
                    refused = exc
                    break
            assert refused is not None and "cannot be written" in str(refused)
            assert not running.done()
            release.set()
            assert running.result(WAIT_S).output == "waited"  # what ran goes on and settles
            with held(zeus):
                full.close()  # room again
        assert zeus.dispatch(Brief(agent="quick", scope="after")).result(WAIT_S).ok
    with sqlite3.connect(f"file:{tmp_path / 'zeus.db'}?mode=ro", uri=True) as con:
        (status,) = con.execute("SELECT status FROM delegations WHERE id = ?",
                                (running.id,)).fetchone()
    assert status == "completed"  # its summary reached the store once there was room


def test_zeus_run_with_a_store_run_again_after_a_crash_runs_only_what_had_not_settled(
    tmp_path: Path,
) -> None:
    (tmp_path / "routing.yml").write_text(json.dumps({"version": 1, "agents": {
        "quick": agent("tests._durable_agents:quick", read_only=True),
        "held": agent(read_only=True, retry={"max_retries": 1})}}))
    plan = tmp_path / "plan.yml"
    plan.write_text(json.dumps([
        {"agent": "quick", "scope": "a", "inputs": {"dir": str(tmp_path), "name": "a"}},
        {"key": "the-slow-one", "agent": "held", "scope": "b",
         "inputs": {"dir": str(tmp_path), "name": "b"}},
    ]))
    cmd = ["run", str(plan), "--routing", str(tmp_path / "routing.yml"), "--store",
           str(tmp_path / "zeus.db"), "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # `zeus` forked from a process that has imported it (tests/_zygote.py)
    first = forked("supervisor.cli", cmd, cwd=tmp_path, env=env)
    deadline = time.monotonic() + WAIT_S
    while not (tmp_path / "b.started").exists() or not settled(tmp_path / "zeus.db", "plan:1"):
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=WAIT_S)
    (tmp_path / "release").write_text("")

    again = run("supervisor.cli", cmd, cwd=tmp_path, env=env, timeout=WAIT_S * 2)
    assert again.returncode == 0, again.stderr
    summaries = json.loads(again.stdout)
    assert [s["status"] for s in summaries] == ["completed", "completed"]
    assert len(runs(tmp_path, "a")) == 1  # settled before the crash: not run again
    assert len(runs(tmp_path, "b")) == 2  # lost with the first run, run once more
    with sqlite3.connect(f"file:{tmp_path / 'zeus.db'}?mode=ro", uri=True) as con:
        keys = sorted(k for (k,) in con.execute("SELECT key FROM delegations"))
    assert keys == ["plan:1", "the-slow-one"]


def test_settlements_wait_for_a_shared_commit_only_while_the_mailbox_is_busy_and_never_long(
    tmp_path: Path,
) -> None:
    from actors import Summary
    from actors.clock import FakeClock
    from supervisor.core.durable import HOLD_AT_MOST, Durable
    from supervisor.journal.events import EventLog
    from supervisor.store import SqliteStore

    clock = FakeClock()  # it stands still: the hold is counted in turns, not time
    store = SqliteStore.open(tmp_path / "zeus.db")
    durable = Durable(store, clock, EventLog(None, clock.wall))
    resolved: list[int] = []

    def settle(n: int) -> None:
        d = type("D", (), {"id": f"d-{n}"})()
        summary = Summary(id=f"d-{n}", agent="a", scope="s", status=Status.completed)
        durable.settled(d, summary, lambda: resolved.append(n))  # type: ignore[arg-type]

    settle(1)
    durable.end_turn(waiting=3)  # more messages wait: the commit is shared with theirs
    assert resolved == []
    durable.end_turn(waiting=0)  # the mailbox is empty: committed, and made known
    assert resolved == [1]
    settle(2)
    for _ in range(HOLD_AT_MOST):
        durable.end_turn(waiting=1)  # a mailbox that never empties holds it this long
    assert resolved == [1]
    durable.end_turn(waiting=1)
    assert resolved == [1, 2]
    store.close()


def test_late_charges_the_database_refused_get_a_turn_of_their_own_soon() -> None:
    """A fenced host whose work was all taken over gets no more messages: a late write
    the database refused asks for a turn soon (one ask at a time, however busy the host),
    or its children's spend would never be written."""
    from unittest import mock

    from actors import Usage
    from actors.clock import FakeClock
    from supervisor.core.durable import Durable
    from supervisor.errors import StoreError
    from supervisor.journal.events import EventLog
    from supervisor.store.postgres import PostgresStore

    clock = FakeClock()
    store = mock.create_autospec(PostgresStore, instance=True)
    away = StoreError("the database does not answer")
    store.write_late.side_effect = [away, away, None]
    durable = Durable(store, clock, EventLog(None, clock.wall))
    asked: list[float] = []
    durable.retry_later = lambda: asked.append(clock.now())
    durable.charged_late("a-1", Usage(calls=1), 3)
    durable.end_turn(waiting=0)  # the database is away: a turn is asked for
    assert asked == [clock.now()]
    durable.end_turn(waiting=9)  # a busy turn in the meantime asks for no second one
    assert asked == [clock.now()]
    clock.advance(1.0)
    durable.end_turn(waiting=0)  # the asked-for turn: the database is back
    durable.end_turn(waiting=0)  # written: nothing waits, nothing is asked for
    assert store.write_late.call_count == 3
    assert len(asked) == 1


def test_what_a_gone_worker_left_is_removed_only_once_its_adopted_end_is_committed(
    tmp_path: Path,
) -> None:
    """Recovery adopts the `Finished` a gone worker left and commits; the attempt ends in a
    later turn. A Zeus killed before that commit must find the file again."""
    from actors import AttemptOutcome, AttemptRecord
    from actors.clock import FakeClock
    from supervisor.core.durable import Durable
    from supervisor.journal.events import EventLog
    from supervisor.store import SqliteStore

    clock = FakeClock()
    store = SqliteStore.open(tmp_path / "zeus.db")
    durable = Durable(store, clock, EventLog(None, clock.wall))
    removed: list[str] = []
    durable.release_once_ended("a-1", lambda: removed.append("a-1"))
    durable.commit_now()  # recovery's own commit: the attempt has not ended yet
    assert removed == []
    durable.attempt_ended(AttemptRecord(id="a-1", agent="a", outcome=AttemptOutcome.lost,
                                        duration_s=1.0))
    assert removed == []  # its end is buffered, not yet committed
    durable.commit_now()
    assert removed == ["a-1"]
    store.close()


def test_a_summary_settled_in_this_turn_is_found_before_its_commit(tmp_path: Path) -> None:
    """A rerun orchestrator may ask again for a sub-delegation that settled in the same
    turn, before the commit: it gets that summary, and the sub-delegation never runs
    again because the store did not have it yet."""
    from actors import Summary
    from actors.clock import FakeClock
    from supervisor.core.durable import Durable
    from supervisor.journal.events import EventLog
    from supervisor.store import SqliteStore

    clock = FakeClock()
    store = SqliteStore.open(tmp_path / "zeus.db")
    durable = Durable(store, clock, EventLog(None, clock.wall))
    store.record_delegation("d-1", key=None, parent_id=None, ordinal=None, agent="a",
                            brief=Brief(agent="a", scope="s"), policy={}, deadline=None,
                            created=1.0)
    durable.commit_now()
    summary = Summary(id="d-1", agent="a", scope="s", status=Status.completed, output="ok")
    durable.settled(type("D", (), {"id": "d-1"})(), summary, lambda: None)  # type: ignore[arg-type]
    assert store.summary("d-1") is None  # not committed yet
    assert durable.summary("d-1") == summary
    durable.commit_now()
    assert durable.summary("d-1") == store.summary("d-1") == summary
    store.close()


def test_a_start_refused_after_its_store_opened_keeps_no_store_owned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from supervisor import Routing, RoutingError

    monkeypatch.setattr("supervisor.core.startup.ray_installed", lambda: False)
    ray_routing = {"version": 1, "agents": {"r": {"isolation": "ray"}}}
    with pytest.raises(RoutingError):
        Zeus.start(Routing.from_dict(ray_routing), store=tmp_path / "zeus.db")
    with Zeus.start(store=tmp_path / "zeus.db") as zeus:  # not StoreBusy: it was given up
        assert zeus.recovered.rerun == ()
