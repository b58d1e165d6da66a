"""Reattach across a real host crash: a whole Zeus host process is SIGKILLed while its process
children run; they wait for the next Zeus on the same store (a SQLite file, or a PostgreSQL
database), which picks them up as the same attempts (docs/design.md, "Reattach")."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from multiprocess.connection import Client

from actors.backends.process.reattach import ReattachPlace, children_dir, existing_place
from actors.osproc import process_running
from tests._crash import (
    WAIT_S,
    Host,
    agent,
    brief,
    outcomes,
    runs,
    store_rows,
    stored_calls,
    wait_charged,
    wait_for,
    wait_partials,
)
from tests._zygote import run

pytestmark = [pytest.mark.process, pytest.mark.realtime]

WRITER = "tests._durable_agents:writer"


# The store is where a killed host's successor finds what to pick up. On PostgreSQL a
# restart on the same machine takes its dead predecessor's delegations over at once
# (PostgresStore._adopt_local_dead) and picks its children up as on SQLite: the tests
# marked BOTH run on both stores, where the store takes part (takeover, a chain of them,
# a tree of delegations, charges and sessions read back, `zeus sweep URL`); the rest test
# the worker's side (grace, ladder, held results), the same on both, on SQLite alone.
BOTH = pytest.mark.parametrize("store", ["sqlite", "postgres"], indirect=True)


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The hosts' store: a SQLite file, or (BOTH) a fresh PostgreSQL database too."""
    if getattr(request, "param", "sqlite") == "sqlite":
        yield str(tmp_path / "zeus.db")
        return
    url = str(request.getfixturevalue("pg_url"))
    yield url
    shutil.rmtree(children_dir(url), ignore_errors=True)  # its place: the temporary directory


GRACE_S = 20.0  # long enough that no test waits it out, unless it means to


def plan_of(tmp: Path, agents: dict[str, Any], briefs: list[dict[str, Any]],
            grace_s: float = GRACE_S, **extra: Any) -> dict[str, Any]:
    return {"agents": agents, "briefs": briefs, "log": str(tmp / "events.jsonl"),
            "supervisor": {"orphan_grace_s": grace_s}, **extra}


def events(tmp: Path, name: str) -> list[dict[str, Any]]:
    lines = (tmp / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == name]


def gone_within(seconds: float, *processes: tuple[int, float | None]) -> bool:
    """Whether every (pid, start time) has ended within `seconds` (a bound, never asserted
    as a duration)."""
    give_up = time.monotonic() + seconds
    while any(process_running(pid, start) is not False for pid, start in processes):
        if time.monotonic() > give_up:
            return False
        time.sleep(0.02)
    return True


def writer_plan(tmp: Path, **extra: Any) -> dict[str, Any]:
    return plan_of(tmp, {"writer": agent(WRITER, isolation="process")},
                   [brief("writer", tmp, "writer")], **extra)


def orphaned(tmp: Path, store: str, plan: dict[str, Any]) -> tuple[int, float, ReattachPlace]:
    """A host that started the writer, SIGKILLed: the writer's pid and start time, and the
    place where it now waits, listening."""
    first = Host(tmp, store, plan)
    wait_for(tmp / "writer.started", first)
    [(pid, start, _)] = runs(tmp, "writer")
    first.kill()
    place = existing_place(store)
    assert place is not None
    wait_for(Path(place.address(pid)))
    return pid, start, place


@BOTH
def test_a_writer_outlives_its_host_and_completes_as_one_attempt_in_the_same_process(
    tmp_path: Path, store: str,
) -> None:
    plan = writer_plan(tmp_path)
    first = Host(tmp_path, store, plan)
    wait_for(tmp_path / "writer.started", first)
    wait_charged(store, 1, first)
    wait_partials(store, 1, first)  # what it reported before the crash, committed
    first.kill()
    [(pid, start, _)] = runs(tmp_path, "writer")
    assert process_running(pid, start)  # it did not die with its host
    time.sleep(0.2)  # the host stays down a while (the scenario, not a synchronisation)
    second = Host(tmp_path, store, plan)
    recovered = second.read_line()["recovered"]
    (tmp_path / "release").write_text("")
    _, summaries = second.results()

    assert recovered["reattached"] == ["writer-1-a1"]
    assert recovered["rerun"] == [] and recovered["blocked"] == [] and recovered["adopted"] == []
    writer = summaries["writer"]
    assert writer["status"] == "completed"
    assert outcomes(writer) == ["completed"]  # no `lost`, no second attempt
    assert writer["output"] == {"pid": pid, "name": "writer"}
    assert writer["attempts"][0]["pid"] == pid
    assert writer["partial_results"] == ["writer under way", "writer released"]
    assert writer["usage"]["calls"] == 1  # charged once, before the crash
    assert len(runs(tmp_path, "writer")) == 1
    [event] = events(tmp_path, "attempt.reattached")
    assert (event["attempt_id"], event["pid"], event["adopted"]) == ("writer-1-a1", pid, False)
    assert not events(tmp_path, "attempt.lost")


def test_a_child_that_finished_while_no_host_ran_has_its_result_adopted(
    tmp_path: Path, store: str) -> None:
    plan = writer_plan(tmp_path)
    first = Host(tmp_path, store, plan)
    wait_for(tmp_path / "writer.started", first)
    wait_partials(store, 1, first)  # what it reported before the crash, committed
    first.kill()
    (tmp_path / "release").write_text("")
    wait_for(tmp_path / "writer.finished")  # it returned while no Zeus ran
    recovered, summaries = Host(tmp_path, store, plan).results()

    assert recovered["adopted"] == ["writer-1-a1"] and recovered["reattached"] == []
    writer = summaries["writer"]
    assert (writer["status"], outcomes(writer)) == ("completed", ["completed"])
    assert writer["partial_results"] == ["writer under way", "writer released"]
    assert len(runs(tmp_path, "writer")) == 1


def test_a_result_its_zeus_never_handled_is_adopted_from_the_idle_worker(
    tmp_path: Path, store: str) -> None:
    """The child returned and its worker wrote its result to the pipe, but its Zeus died
    before it handled it: the worker, idle, waits with that result all the same."""
    plan = writer_plan(tmp_path, stall_at_partial="writer released")
    first = Host(tmp_path, store, plan)
    wait_for(tmp_path / "writer.started", first)
    (tmp_path / "release").write_text("")
    first.read_line()  # recovered
    assert first.read_line() == {"stalled": "writer released"}  # Zeus's thread stops there
    wait_for(tmp_path / "writer.finished")
    first.kill()
    recovered, summaries = Host(tmp_path, store, writer_plan(tmp_path)).results()

    assert recovered["adopted"] == ["writer-1-a1"]
    writer = summaries["writer"]
    assert (writer["status"], outcomes(writer)) == ("completed", ["completed"])
    assert len(runs(tmp_path, "writer")) == 1


@pytest.mark.parametrize(("policy", "calls", "status"), [
    ({"timeout_s": 1.0}, 0, "timed_out"),
    ({"budget": {"max_calls": 2}}, 5, "budget_exceeded"),
])
def test_a_child_its_last_zeus_was_stopping_settles_as_that_zeus_decided(
    tmp_path: Path, store: str, policy: dict[str, Any], calls: int, status: str,
) -> None:
    """The cancel carries its cause: a child cancelled (past its deadline, over its
    budget) whose Zeus died before the child stopped reports that cause, and the next
    Zeus settles it as the last one would have, not `cancelled`, which nobody asked for."""
    plan = plan_of(tmp_path, {"writer": {**agent("tests._durable_agents:stopped",
                                                 isolation="process",
                                                 shutdown={"grace_s": 60}), **policy}},
                   [brief("writer", tmp_path, "writer", calls=calls)])
    first = Host(tmp_path, store, plan)
    wait_for(tmp_path / "writer.cancelled", first)  # it has its Zeus's cancel
    first.kill()
    (tmp_path / "proceed").write_text("")  # it stops while no Zeus runs
    recovered, summaries = Host(tmp_path, store, plan).results()
    assert recovered["adopted"] == ["writer-1-a1"]
    writer = summaries["writer"]
    assert writer["status"] == status
    assert len(outcomes(writer)) == 1
    assert len(runs(tmp_path, "writer")) == 1


def test_a_child_nobody_picks_up_stops_with_its_grandchildren_and_is_lost_after_that(
    tmp_path: Path, store: str,
) -> None:
    grace = 1.0
    plan = plan_of(tmp_path, {"writer": agent("tests._durable_agents:spawner",
                                              isolation="process", shutdown={"term_s": 0.5})},
                   [brief("writer", tmp_path, "writer")], grace_s=grace)
    first = Host(tmp_path, store, plan)
    wait_for(tmp_path / "writer.started", first)
    [(pid, start, _)] = runs(tmp_path, "writer")
    kids = [(int(p), float(s)) for p, s in (line.split() for line in
            (tmp_path / "writer.grandchildren").read_text().splitlines())]
    place = existing_place(store)
    assert place is not None
    first.kill()
    wait_for(Path(place.address(pid)))  # it waits, listening
    # gone by the grace and its ladder, with both grandchildren (one had left its group)
    assert gone_within(grace + 0.5 + 5.0, (pid, start), *kids)
    assert not Path(place.address(pid)).exists()
    recovered, summaries = Host(tmp_path, store, plan).results()
    assert recovered["blocked"] == ["writer-1"] and recovered["reattached"] == []
    assert outcomes(summaries["writer"]) == ["lost"]


def test_idle_workers_nobody_asks_for_are_stopped_before_the_next_host_starts(
    tmp_path: Path, store: str,
) -> None:
    """An idle worker without a session, and one holding a session of an agent the next
    routing no longer has: the next host finds both waiting, takes neither, and stops
    both before its recovery returns (on the code before the fix they waited on, through
    that host's whole run, and outlived it)."""
    counter = agent("tests._durable_agents:counter", isolation="process")
    held = brief("gone", tmp_path, "held")
    held["brief"]["session"] = "kept"
    first = Host(tmp_path, store, plan_of(
        tmp_path, {"counter": counter, "gone": counter},
        [brief("counter", tmp_path, "plain"), held], hold=True))
    for _ in range(3):  # recovered, then the two summaries
        first.read_line()
    assert first.read_line() == {"holding": True}  # both workers idle in its pool
    [plain] = runs(tmp_path, "plain")
    [kept] = runs(tmp_path, "held")
    first.kill()
    place = existing_place(store)
    assert place is not None
    for pid, _, _ in (plain, kept):
        wait_for(Path(place.address(pid)))  # each waits, listening
    second = Host(tmp_path, store, plan_of(tmp_path, {"counter": counter}, []))
    recovered = second.read_line()["recovered"]
    assert recovered["reattached"] == [] and recovered["adopted"] == []
    assert process_running(plain[0], plain[1]) is False  # stopped, and seen gone
    assert process_running(kept[0], kept[1]) is False
    second.results()


@BOTH
def test_a_host_killed_twice_during_one_attempt_still_ends_it_as_one_attempt(
    tmp_path: Path, store: str,
) -> None:
    """And between the two, a connection with the wrong key is refused, the child
    unaffected."""
    plan = writer_plan(tmp_path)
    pid, start, place = orphaned(tmp_path, store, plan)
    with pytest.raises(Exception) as refused:
        Client(place.address(pid), family="AF_UNIX", authkey=b"not the key" * 3)
    assert type(refused.value).__name__ in ("AuthenticationError", "EOFError",
                                            "ConnectionResetError", "BrokenPipeError")
    assert process_running(pid, start)
    second = Host(tmp_path, store, plan)
    assert second.read_line()["recovered"]["reattached"] == ["writer-1-a1"]
    second.kill()
    third = Host(tmp_path, store, plan)
    assert third.read_line()["recovered"]["reattached"] == ["writer-1-a1"]
    (tmp_path / "release").write_text("")
    _, summaries = third.results()
    writer = summaries["writer"]
    assert (writer["status"], outcomes(writer)) == ("completed", ["completed"])
    assert writer["output"]["pid"] == pid
    assert len(runs(tmp_path, "writer")) == 1


COUNTER = {"counter": agent("tests._durable_agents:counter", isolation="process")}


def session_brief(tmp: Path, name: str, session: str) -> dict[str, Any]:
    b = brief("counter", tmp, name)
    b["brief"]["session"] = session
    return b


def test_a_stateful_session_continues_after_the_restart_in_the_same_worker(
    tmp_path: Path, store: str,
) -> None:
    first = Host(tmp_path, store, plan_of(
        tmp_path, COUNTER, [session_brief(tmp_path, "one", "kept"),
                            session_brief(tmp_path, "two", "kept")],
        hold=True, one_by_one=True))
    first.read_line()
    outputs = [first.read_line()["summary"]["output"] for _ in range(2)]
    assert [o["n"] for o in outputs] == [1, 2]
    first.read_line()  # holding: its session's worker idle
    first.kill()
    recovered, summaries = Host(tmp_path, store, plan_of(
        tmp_path, COUNTER, [session_brief(tmp_path, "three", "kept")])).results()
    assert recovered["reattached"] == []  # an idle worker is no attempt: it joins the pool
    three = summaries["three"]
    assert three["status"] == "completed"
    assert three["output"] == {"n": 3, "pid": outputs[0]["pid"]}  # the same worker, its state


@BOTH  # the store says which sessions ran before (PostgresStore.sessions: SQL of its own)
def test_a_session_whose_worker_is_gone_after_the_restart_is_blocked_never_replaced(
    tmp_path: Path, store: str,
) -> None:
    first = Host(tmp_path, store, plan_of(tmp_path, COUNTER,
                                          [session_brief(tmp_path, "four", "short")],
                                          grace_s=0.5, hold=True))
    first.read_line()
    pid = first.read_line()["summary"]["output"]["pid"]
    first.read_line()
    first.kill()
    assert gone_within(WAIT_S, (pid, runs(tmp_path, "four")[0][1]))  # the grace ran out
    _, summaries = Host(tmp_path, store, plan_of(
        tmp_path, COUNTER, [session_brief(tmp_path, "five", "short")])).results()
    five = summaries["five"]
    assert five["status"] == "blocked"
    assert "never replaced" in five["error"]
    assert runs(tmp_path, "five") == []


@BOTH
def test_a_reattached_orchestrator_keeps_waiting_and_its_calls_made_meanwhile_are_answered(
    tmp_path: Path, store: str,
) -> None:
    plan = plan_of(tmp_path, {
        "boss": agent("tests._durable_agents:boss", kind="orchestrator", isolation="process"),
        "quick": agent("tests._durable_agents:quick", read_only=True),
        "slow": agent(WRITER, isolation="process"),
    }, [brief("boss", tmp_path, "boss")])
    first = Host(tmp_path, store, plan)
    wait_for(tmp_path / "boss.waiting", first)
    first.kill()
    (tmp_path / "go").write_text("")  # its second call is made while no Zeus runs
    time.sleep(0.3)  # the host stays down a while (the scenario, not a synchronisation)
    second = Host(tmp_path, store, plan)
    assert second.read_line()["recovered"]["reattached"] == ["boss-1-a1"]
    wait_for(tmp_path / "second.started", second)
    second.kill()  # and once more, while its sub-delegation runs
    third = Host(tmp_path, store, plan)
    assert sorted(third.read_line()["recovered"]["reattached"]) == ["boss-1-a1", "slow-1-a1"]
    (tmp_path / "release").write_text("")
    _, summaries = third.results()
    boss = summaries["boss"]
    assert boss["status"] == "completed"
    assert boss["output"][:2] == ["completed", "completed"]
    assert outcomes(boss) == ["completed"]
    for name in ("boss", "first", "second"):
        assert len(runs(tmp_path, name)) == 1, name  # nothing ran twice


def test_a_command_agent_outlives_its_host_and_its_output_is_whole(
    tmp_path: Path, store: str) -> None:
    script = (  # Zeus's own line protocol: its partial results and its result
        "import json, pathlib, sys, time\n"
        "d = pathlib.Path(sys.argv[1])\n"
        "print(json.dumps({'partial': 'line one'}), flush=True)\n"
        "(d / 'writer.started').write_text('')\n"
        "while not (d / 'release').exists(): time.sleep(0.02)\n"
        "print(json.dumps({'partial': 'line two'}), flush=True)\n"
        "print(json.dumps({'result': 'line one\\nline two\\n'}), flush=True)\n"
    )
    plan = plan_of(tmp_path, {"writer": {"command": [sys.executable, "-c", script, "{scope}"],
                                         "speaks": "jsonl", "timeout_s": 60}},
                   [{"key": "writer", "brief": {"agent": "writer", "scope": str(tmp_path)}}])
    first = Host(tmp_path, store, plan)
    wait_for(tmp_path / "writer.started", first)
    wait_partials(store, 1, first)  # its first line, committed before the crash
    first.kill()
    second = Host(tmp_path, store, plan)
    assert second.read_line()["recovered"]["reattached"] == ["writer-1-a1"]
    (tmp_path / "release").write_text("")
    _, summaries = second.results()
    [writer] = summaries.values()
    assert (writer["status"], outcomes(writer)) == ("completed", ["completed"])
    assert writer["output"] == "line one\nline two\n"
    assert writer["partial_results"] == ["line one", "line two"]


@BOTH
def test_zeus_sweep_stops_the_children_that_wait_and_names_them(
    tmp_path: Path, store: str) -> None:
    pid, start, _ = orphaned(tmp_path, store, writer_plan(tmp_path))
    done = run("supervisor.cli", ["sweep", str(store)], timeout=WAIT_S,
               env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    assert str(pid) in done.stdout and "picked up" in done.stdout
    assert gone_within(5.0, (pid, start))


def test_a_worker_whose_pid_was_never_recorded_is_found_by_its_mark(
    tmp_path: Path, store: str) -> None:
    """A cold start sends the job before Zeus's thread records the worker's pid: a host
    killed in that window (held there on purpose) leaves an attempt the store knows by id
    alone. Its worker left a mark before the job ran: the next host finds it and picks it
    up, and nothing runs twice (on the old code it was taken as gone and run again beside
    the old run)."""
    plan = plan_of(tmp_path, {"writer": agent(WRITER, isolation="process", read_only=True)},
                   [brief("writer", tmp_path, "w")])
    first = Host(tmp_path, store, {**plan, "stall_at_event": "attempt.spawned"})
    wait_for(tmp_path / "w.started", first)
    assert "recovered" in first.read_line()
    assert first.read_line() == {"stalled": "attempt.spawned"}
    assert store_rows(store, "SELECT pid FROM attempts") == [(None,)]
    first.kill()
    second = Host(tmp_path, store, plan)
    recovered = second.read_line()["recovered"]
    assert (recovered["reattached"], recovered["rerun"]) == (["writer-1-a1"], [])
    (tmp_path / "release").write_text("")
    _, summaries = second.results()
    assert outcomes(summaries["w"]) == ["completed"]
    assert [overlap for _, _, overlap in runs(tmp_path, "w")] == [False]  # one run only


def test_a_result_finished_after_the_grace_ran_out_is_adopted_all_the_same(
        tmp_path: Path, store: str) -> None:
    """The next host comes back after the grace: the worker that waited with its result
    has exited, but wrote what it held first, and that result is adopted (on the old code
    the writer settled blocked, or timed out, though it had finished)."""
    plan = writer_plan(tmp_path, grace_s=1.0)
    pid, start, place = orphaned(tmp_path, store, plan)
    (tmp_path / "release").write_text("")  # it finishes while no host runs
    wait_for(tmp_path / "writer.finished")
    assert gone_within(WAIT_S, (pid, start))  # its grace ran out: it exited
    recovered, summaries = Host(tmp_path, store, plan).results()
    assert recovered["adopted"] == ["writer-1-a1"] and recovered["blocked"] == []
    assert outcomes(summaries["writer"]) == ["completed"]
    assert summaries["writer"]["output"]["pid"] == pid
    assert not list(Path(place.directory).glob("*.held"))  # adopted, then removed


# A charge the worker sent just before its host was SIGKILLed, which that host had read
# but not committed (or not read), is kept by the worker and sent again (docs/design.md,
# "Spend is a fact, not a decision"): in its held file when its grace ran out, to the next
# host when one picks it up; that host counts only those above what its store committed.
@BOTH
def test_charges_made_while_no_host_ran_count_after_the_grace_ran_out(
        tmp_path: Path, store: str) -> None:
    plan = plan_of(tmp_path, {"charger": agent("tests._durable_agents:charger",
                                               isolation="process")},
                   [brief("charger", tmp_path, "c")], grace_s=0.5)
    first = Host(tmp_path, store, plan)
    wait_for(tmp_path / "c.started", first)
    wait_charged(store, 1, first)
    pid = int(_only_pid(store))
    first.kill()
    assert gone_within(WAIT_S, (pid, None))  # charging on until its grace ran out
    made = int((tmp_path / "c.charged").read_text())
    recovered, summaries = Host(tmp_path, store, plan).results()
    assert recovered["blocked"] == ["charger-1"]  # a writer whose run was cut short
    calls = summaries["c"]["usage"]["calls"]
    # Every charge counted once: the ladder's cancel may come inside the last charge,
    # which is sent, then raises before the worker counts it in its file.
    assert made <= calls <= made + 1
    assert summaries["c"]["usage"]["cost"] == pytest.approx(calls * 0.01)


KILLS = 20  # (50 a store, once: none lost either; each restart here takes 0.1-0.3 s)


@BOTH
def test_the_charges_in_flight_when_its_host_was_killed_count_once_after_the_restart(
        tmp_path: Path, store: str) -> None:
    """A worker charging every 2 ms while its host is SIGKILLed, started again and
    SIGKILLed again, `KILLS` times, each time once the new host has committed a charge:
    every kill leaves charges read and not committed, and some in the pipe. (The worker
    keeps every charge it sent until its next job, each resent to each new host: a
    quicker pace makes each restart slower than the last.)"""
    plan = plan_of(tmp_path, {"charger": agent("tests._durable_agents:charger",
                                               isolation="process")},
                   [brief("charger", tmp_path, "c", pause_s=0.002)])
    host = Host(tmp_path, store, plan)
    wait_for(tmp_path / "c.started", host)
    for _ in range(KILLS):
        wait_charged(store, stored_calls(store) + 1, host)
        host.kill()  # charges read and not committed, and some still in the pipe
        host = Host(tmp_path, store, plan)
        recovered = host.read_line()["recovered"]
        assert recovered["reattached"] == ["charger-1-a1"]
    (tmp_path / "release").write_text("")
    _, summaries = host.results()
    charger = summaries["c"]
    assert charger["status"] == "completed"
    made = charger["output"]  # how many charges the worker made, all told
    assert charger["usage"]["calls"] == made  # each counted once: none lost, none twice
    assert charger["usage"]["cost"] == pytest.approx(made * 0.01)


def _only_pid(store: str) -> int:
    deadline = time.monotonic() + WAIT_S
    while True:
        rows = store_rows(store, "SELECT pid FROM attempts WHERE pid IS NOT NULL")
        if rows:
            return int(rows[0][0])
        assert time.monotonic() < deadline, "the attempt's pid was never recorded"
        time.sleep(0.01)
