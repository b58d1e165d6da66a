"""Several hosts on one PostgreSQL store, as real processes (docs/design.md, "Several
hosts"): a host SIGKILLed mid-run is taken over by the others, a frozen one is fenced,
and keys are the store's."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from actors.osproc import process_running
from tests._crash import WAIT_S, Host, agent, brief, runs, settled, wait_for

pytestmark = [pytest.mark.process, pytest.mark.realtime]

LEASE_S = 3.0
FAST_LADDER = {"grace_s": 0.5, "term_s": 0.5}
# The ladder's bound for these agents (grace + term, a worker's look, a margin), and what
# a taker waits past it.
BOUND_S = 1.0 + 0.25 + 0.25 + 0.25


def _agents() -> dict[str, Any]:
    return {
        "boss": agent("tests._durable_agents:orchestrate", kind="orchestrator",
                      idempotent=True, isolation="thread", retry={"max_retries": 1}),
        "quick": agent("tests._durable_agents:quick", read_only=True),
        "slow": agent(read_only=True, isolation="process", shutdown=FAST_LADDER,
                      retry={"max_retries": 1}),
        "reader": agent(read_only=True, isolation="process", shutdown=FAST_LADDER,
                        retry={"max_retries": 1}),
        "writer": agent(isolation="process", shutdown=FAST_LADDER, retry={"max_retries": 1}),
    }


def _plan(briefs: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    return {"agents": _agents(), "defaults": {"shutdown": FAST_LADDER},
            "supervisor": {"store": {"lease_s": LEASE_S}}, "briefs": briefs, **more}


def _rows(url: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url) as con:
        return [tuple(r) for r in con.execute(query, args).fetchall()]


def _wait_until(check: Any, what: str, *hosts: Host) -> float:
    """Poll `check()` until true (real processes: a loose bound); the time it took."""
    start = time.monotonic()
    while not check():
        for host in hosts:
            if host.proc.poll() is not None:
                pytest.fail(f"a host exited first: {host.proc.communicate()[1]}")
        assert time.monotonic() - start < WAIT_S, f"{what} never happened"
        time.sleep(0.02)
    return time.monotonic() - start


def _summary(url: str, key: str) -> dict[str, Any]:
    ((text,),) = _rows(url, "SELECT summary FROM delegations WHERE key = %s", key)
    summary: dict[str, Any] = json.loads(text)
    return summary


def test_a_host_sigkilled_mid_run_is_taken_over_by_the_others_and_nothing_runs_twice(
    pg_url: str, tmp_path: Path
) -> None:
    names = ["r1", "r2", "w1", "w2"]
    first = Host(tmp_path, pg_url, _plan([brief("reader" if n[0] == "r" else "writer",
                                                tmp_path, n) for n in names]
                                         + [brief("boss", tmp_path, "boss")]))
    first.read_line()
    for name in [*names, "second"]:
        wait_for(tmp_path / f"{name}.started", first)
    takers = [Host(tmp_path, pg_url, _plan([], hold=True)) for _ in range(2)]
    for taker in takers:
        taker.read_line()
    first_pids = {name: runs(tmp_path, name)[0][0] for name in names}
    first.kill()
    try:
        waited = _wait_until(lambda: all(len(runs(tmp_path, n)) == 2 for n in names),
                             "every delegation running again on a taker", *takers)
        # Taken over no sooner than the lease's end (its last renewal came at most a third
        # of a lease before the kill) plus the ladder's bound; and within a few seconds.
        assert waited >= LEASE_S * 2 / 3 + BOUND_S - 0.1
        assert waited <= LEASE_S + BOUND_S + LEASE_S / 3 + 3.0
        for name in names:
            second = runs(tmp_path, name)[1]
            assert not second[2], f"{name}: its first run was still alive as it ran again"
            assert process_running(first_pids[name], runs(tmp_path, name)[0][1]) is False
        (tmp_path / "release").write_text("")
        _wait_until(lambda: all(settled(pg_url, n) for n in [*names, "boss"]),
                    "every key settling", *takers)
        boss = _summary(pg_url, "boss")  # the nested tree went over whole, and replayed
        assert boss["status"] == "completed", boss
        assert boss["output"] == ["completed", "completed", "first done", "second done"]
        assert len(runs(tmp_path, "boss")) == 2
        assert len(runs(tmp_path, "first")) == 1  # replayed from the store
        assert len(runs(tmp_path, "second")) == 2
        for name in names:
            summary = _summary(pg_url, name)
            assert summary["status"] == "completed", summary
            assert [a["outcome"] for a in summary["attempts"]] == ["lost", "completed"]
            assert summary["usage"]["calls"] == 2  # the dead host's charge carried over
        (count,) = _rows(pg_url, "SELECT count(*) FROM delegations")[0]
        assert count == len(names) + 3  # one per key (and the boss's two), wherever it ran
        # What was open went to the takers, its epoch bumped once.
        taken = _rows(pg_url, "SELECT owner, epoch FROM delegations WHERE key IS NOT NULL")
        assert {owner for owner, _ in taken} <= set(_host_ids(pg_url)[1:])
        assert {epoch for _, epoch in taken} == {2}
    finally:
        for taker in takers:
            taker.kill()


def _host_ids(url: str) -> list[str]:
    return [h for (h,) in _rows(url, "SELECT id FROM hosts ORDER BY n")]


def test_a_host_frozen_past_its_lease_is_fenced_its_children_stopped_before_the_lease_ended(
    pg_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "frozen.jsonl"
    frozen = Host(tmp_path, pg_url, _plan([brief("writer", tmp_path, "w")], log=str(log)))
    frozen.read_line()
    wait_for(tmp_path / "w.started", frozen)
    taker = Host(tmp_path, pg_url, _plan([], hold=True))
    taker.read_line()
    (worker_pid, worker_start, _), = runs(tmp_path, "w")
    frozen.proc.send_signal(signal.SIGSTOP)
    try:
        # The worker stops itself: no extension comes from its frozen host.
        gone = _wait_until(lambda: process_running(worker_pid, worker_start) is False,
                           "the frozen host's worker stopping itself", taker)
        assert gone < LEASE_S  # before its lease could expire
        _wait_until(lambda: len(runs(tmp_path, "w")) == 2, "the writer running on the taker",
                    taker)
        assert not runs(tmp_path, "w")[1][2]
        frozen.proc.send_signal(signal.SIGCONT)
        _wait_until(lambda: log.exists() and "host.lease_lost" in log.read_text(),
                    "the frozen host saying it lost its lease", taker)
        (tmp_path / "release").write_text("")
        _wait_until(lambda: settled(pg_url, "w"), "the writer settling", taker)
        summary = _summary(pg_url, "w")
        assert summary["status"] == "completed"
        assert [a["outcome"] for a in summary["attempts"]] == ["lost", "completed"]
        # The frozen host wrote nothing after it was fenced: every attempt row is the
        # taker's, under the epoch it took.
        ((owner, epoch),) = _rows(pg_url, "SELECT owner, epoch FROM delegations")
        assert owner == _host_ids(pg_url)[1] and epoch == 2
        # Its own handle resolved from the store, with the taker's summary.
        said = frozen.read_line()
        assert said["summary"]["status"] == "completed", said
        assert [a["outcome"] for a in said["summary"]["attempts"]] == ["lost", "completed"]
        events = [json.loads(line) for line in log.read_text().splitlines()]
        lost = [e for e in events if e["event"] == "host.lease_lost"]
        assert len(lost) == 1
        assert not [e for e in events if e["event"] == "delegation.settled"]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(frozen.proc.pid, signal.SIGCONT)
        frozen.kill()
        taker.kill()


def _frozen_spending(pg_url: str, tmp_path: Path, *, cap: float, pause_s: float,
                     taker: bool = False, **plan: Any) -> tuple[Host, Host | None]:
    """A host running one spender (a process child charging a cent each `pause_s` under a
    budget of `cap`), SIGSTOPped once a first charge is committed, its child not; and,
    with `taker`, a second host on the store from the start."""
    agents = {"spender": agent("tests._durable_agents:charger", isolation="process",
                               shutdown=FAST_LADDER, budget={"max_cost": cap})}
    frozen = Host(tmp_path, pg_url, {**_plan([brief("spender", tmp_path, "s",
                                                    pause_s=pause_s)], **plan),
                                     "agents": agents})
    frozen.read_line()
    other = Host(tmp_path, pg_url, {**_plan([], hold=True), "agents": agents}) if taker else None
    if other is not None:
        other.read_line()
    wait_for(tmp_path / "s.started", frozen)
    _wait_until(lambda: _rows(pg_url, "SELECT calls FROM attempts")[0][0] >= 1,
                "a first charge committed", frozen)
    frozen.proc.send_signal(signal.SIGSTOP)
    return frozen, other


def test_what_a_frozen_hosts_child_charged_counts_once_the_host_wakes_and_holds_its_budget(
    pg_url: str, tmp_path: Path
) -> None:
    """Spend is a fact (docs/design.md): a host frozen past its lease, its child not, loses
    the delegation; what it had counted and not committed, and what its child charged
    meanwhile (read from the pipe as it wakes), are written late, each once. Its next
    incarnation takes the delegation over and finds it over its budget: settled so, with
    no second run that would spend the cap again."""
    log = tmp_path / "frozen.jsonl"
    frozen, _ = _frozen_spending(pg_url, tmp_path, cap=0.3, pause_s=0.02, log=str(log))
    try:
        # Its child charges on, until its own budget stops it (the cap it was given).
        _wait_until(lambda: _rows(pg_url, "SELECT bool_and(lease_until < now()) FROM hosts")
                    == [(True,)], "the frozen host's lease running out")
        made = int((tmp_path / "s.charged").read_text())
        (committed,) = _rows(pg_url, "SELECT calls FROM attempts")[0]
        assert committed < made  # the scenario: most of its spend is in no commit yet
        frozen.proc.send_signal(signal.SIGCONT)
        _wait_until(lambda: settled(pg_url, "s"), "the delegation settling", frozen)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(frozen.proc.pid, signal.SIGCONT)
    said = frozen.read_line()  # its handle, resolved from the store
    frozen.kill()
    summary = _summary(pg_url, "s")
    assert summary["status"] == "budget_exceeded", summary
    assert [a["outcome"] for a in summary["attempts"]] == ["lost"]  # never run again
    assert said["summary"]["status"] == "budget_exceeded"
    ((calls, cost),) = _rows(pg_url, "SELECT sum(calls)::bigint, sum(cost) FROM attempts")
    # Every charge counted, once (the one its budget refused raises before the agent
    # counts it in its file, but was sent: money spent is always reported).
    assert made <= calls <= made + 1
    assert summary["usage"]["calls"] == calls
    assert cost == pytest.approx(calls * 0.01)
    events = [json.loads(line)["event"] for line in log.read_text().splitlines()]
    assert "host.lease_lost" in events and "host.rejoined" in events


def test_what_a_frozen_hosts_child_charged_after_the_takeover_counts_at_the_taker(
    pg_url: str, tmp_path: Path
) -> None:
    """The taker of a frozen host's delegation counts what that host writes late once it
    wakes (docs/design.md, "Spend is a fact, not a decision"): its summary's spend is the
    store's, and the budget stops its own run by the spend of both."""
    frozen, taker = _frozen_spending(pg_url, tmp_path, cap=1.0, pause_s=0.05, taker=True)
    assert taker is not None
    try:
        _wait_until(lambda: _rows(pg_url, "SELECT count(*) FROM attempts") == [(2,)],
                    "the taker running the delegation again", taker)
        # What the store had of the lost run when it was taken over: had its host never
        # come back, the rest of its spend would be what no host can know.
        (committed,) = _rows(pg_url, "SELECT calls FROM attempts WHERE number = 1")[0]
        frozen.proc.send_signal(signal.SIGCONT)  # it writes what its child charged late
        _wait_until(lambda: settled(pg_url, "s"), "the delegation settling", taker)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(frozen.proc.pid, signal.SIGCONT)
        frozen.kill()
        taker.kill()
    summary = _summary(pg_url, "s")
    assert summary["status"] == "budget_exceeded", summary
    assert [a["outcome"] for a in summary["attempts"]] == ["lost", "budget_exceeded"]
    ((calls, cost),) = _rows(pg_url, "SELECT sum(calls)::bigint, sum(cost) FROM attempts")
    lost_calls = _rows(pg_url, "SELECT calls FROM attempts ORDER BY number")[0][0]
    assert lost_calls > 5  # the frozen host's child charged on, and it was written
    # That unknown spend is bounded (docs/guide.md): its child stopped within a lease of
    # its host's last renewal and the ladder's bound, at 20 charges a second at most.
    assert lost_calls - committed <= 20 * (LEASE_S + BOUND_S)
    assert summary["usage"]["calls"] == calls  # the taker counted it: its spend is the store's
    # Stopped by the spend of both: over the cap by at most what the taker's run spends
    # between two looks at the store (half a lease, at 20 charges a second) and a margin.
    assert 1.0 <= cost <= 1.0 + 0.01 * 20 * (LEASE_S / 2 + 1.5)


def test_one_key_dispatched_on_two_hosts_at_once_is_one_delegation(
    pg_url: str, tmp_path: Path
) -> None:
    from supervisor import Brief, KeyConflict, Routing, Zeus

    routing = Routing.from_dict({"version": 1, "agents": {
        "quick": {"entrypoint": "tests._durable_agents:quick", "read_only": True}}})
    inputs = {"dir": str(tmp_path), "name": "once"}
    with Zeus.start(routing, store=pg_url) as one, Zeus.start(routing, store=pg_url) as two:
        assert one.host_id != two.host_id
        first = one.dispatch(Brief(agent="quick", scope="once", inputs=inputs), key="k")
        again = two.dispatch(Brief(agent="quick", scope="once", inputs=inputs), key="k")
        assert again.id == first.id
        assert again.result(timeout=WAIT_S).status.value == "completed"
        assert first.result(timeout=WAIT_S) == again.result()
        with pytest.raises(KeyConflict):
            two.dispatch(Brief(agent="quick", scope="other", inputs=inputs), key="k")
        # Ids of the two hosts never meet.
        a = one.dispatch(Brief(agent="quick", scope="a", inputs={**inputs, "name": "a"}))
        b = two.dispatch(Brief(agent="quick", scope="b", inputs={**inputs, "name": "b"}))
        assert a.id != b.id
        assert two.handle(a.id).result(timeout=WAIT_S).status.value == "completed"
    assert len(runs(tmp_path, "once")) == 1


def test_a_host_cut_off_from_the_database_stops_its_children_within_its_lease(
    pg_server: Any, pg_url: str, tmp_path: Path
) -> None:
    from tests._proxy import Partition

    database = pg_url.split("/")[3].split("?")[0]
    partition = Partition(str(pg_server.socket_dir / ".s.PGSQL.5432"))
    log = tmp_path / "cut.jsonl"
    cut_off = Host(tmp_path, partition.url(database),
                   _plan([brief("writer", tmp_path, "w")], log=str(log)))
    taker: Host | None = None
    try:
        cut_off.read_line()
        wait_for(tmp_path / "w.started", cut_off)
        taker = Host(tmp_path, pg_url, _plan([], hold=True))
        taker.read_line()
        (worker_pid, worker_start, _), = runs(tmp_path, "w")
        partition.cut()
        gone = _wait_until(lambda: process_running(worker_pid, worker_start) is False,
                           "the cut-off host's worker stopping", taker)
        assert gone < LEASE_S  # its last extension was before the cut
        _wait_until(lambda: len(runs(tmp_path, "w")) == 2, "the writer running on the taker",
                    taker)
        assert not runs(tmp_path, "w")[1][2]  # never two at once
        (tmp_path / "release").write_text("")
        _wait_until(lambda: settled(pg_url, "w"), "the writer settling", taker)
        partition.heal()
        _wait_until(lambda: log.exists() and "host.lease_lost" in log.read_text(),
                    "the cut-off host saying it lost its lease", taker)
        summary = _summary(pg_url, "w")
        assert summary["status"] == "completed"
        assert [a["outcome"] for a in summary["attempts"]] == ["lost", "completed"]
        settled_events = [json.loads(line) for line in log.read_text().splitlines()
                          if '"delegation.settled"' in line]
        assert settled_events == []  # the cut-off host decided nothing for it
    finally:
        partition.close()
        cut_off.kill()
        if taker is not None:
            taker.kill()


def test_a_host_killed_and_started_again_on_its_machine_settles_nothing_cancelled(
    pg_url: str, tmp_path: Path
) -> None:
    """Started again once its workers stopped themselves at the lease's end (each one
    left its cancelled attempt behind): each runs again, the writer too. A restart 0.2-1 s
    after the kill, while they wait for it or stop: tests/test_hosts_workload.py."""
    names = ["r", "w"]  # a reader and a writer, both process children
    plan = _plan([brief("reader" if n == "r" else "writer", tmp_path, n) for n in names],
                 supervisor={"store": {"lease_s": LEASE_S}, "orphan_grace_s": 30})
    first = Host(tmp_path, pg_url, plan)
    first.read_line()
    for name in names:
        wait_for(tmp_path / f"{name}.started", first)
    first_runs = {name: runs(tmp_path, name)[0] for name in names}
    first.kill()
    _wait_until(lambda: all(process_running(pid, start) is False
                            for pid, start, _ in first_runs.values()),
                "the workers stopping themselves at their host's lease's end")
    again = Host(tmp_path, pg_url, plan)
    again.read_line()
    (tmp_path / "release").write_text("")
    _recovered, summaries = again.results()
    for name in names:
        summary = summaries[name]
        assert summary["status"] == "completed", summary
        assert [a["outcome"] for a in summary["attempts"]] == ["lost", "completed"]
        assert not any(overlap for _, _, overlap in runs(tmp_path, name))  # never two at once
    assert [len(runs(tmp_path, name)) for name in names] == [2, 2]
