"""Chaos: mixed delegations with cancels racing everything, on thread and process
children; judged exactly (see benchmarks/chaos.py). `python -m benchmarks chaos` runs
1,000; these run a smaller one."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import chaos


def test_the_judge_finds_overlapping_attempts() -> None:
    events = [
        {"event": "attempt.started", "delegation_id": "d", "attempt_id": "d-a1"},
        {"event": "attempt.failed", "delegation_id": "d", "attempt_id": "d-a1"},
        {"event": "attempt.started", "delegation_id": "d", "attempt_id": "d-a2"},
        {"event": "attempt.started", "delegation_id": "d", "attempt_id": "d-a3"},
    ]
    assert chaos._overlaps(events) == ["overlap: d-a3 started while d-a2 ran"]


def test_the_hosts_judge_finds_attempts_that_overlap_across_hosts(tmp_path: Path) -> None:
    from benchmarks import chaos_hosts

    # d's second attempt stored as started before its first ended (a taker too soon), and
    # its work ran while the first's did (a killed host's child ran on).
    attempts = {"d": [("d-a1", 1, 10.0, 12.0), ("d-a2", 2, 11.5, 13.0)],
                "e": [("e-a1", 1, 10.0, 11.0), ("e-a2", 2, 11.0, 12.0)]}
    assert chaos_hosts._stored_overlaps(attempts) == [
        "overlap: d-a2 stored as started 0.500s before d-a1 ended"]
    events = [
        {"event": "attempt.started", "attempt_id": "d-a1", "ts": 10.0},
        {"event": "attempt.started", "attempt_id": "d-a2", "ts": 11.5},  # another host's
        {"event": "attempt.lost", "attempt_id": "d-a1", "ts": 12.0},
        {"event": "attempt.started", "attempt_id": "e-a1", "ts": 10.0},
        {"event": "attempt.lost", "attempt_id": "e-a1", "ts": 11.0},
        {"event": "attempt.started", "attempt_id": "e-a2", "ts": 11.0},
    ]
    assert chaos_hosts._logged_overlaps(events, attempts) == [
        "overlap: d-a2 logged started 0.500s before d-a1 logged its end"]
    for attempt_id, marks in {"d-a1": "10.0\n11.9\n", "d-a2": "11.8\n12.5\n",
                              "e-a1": "10.0\n10.9\n", "e-a2": "11.0\n11.9\n"}.items():
        (tmp_path / attempt_id).write_text(marks)
    spans = chaos_hosts._read_trail(tmp_path)
    assert chaos_hosts._trail_overlaps(attempts, spans) == [
        "overlap: d-a2's work ran 0.100s while d-a1's still did"]


def test_the_hosts_judge_finds_a_host_taken_over_before_its_lease_and_bound() -> None:
    from benchmarks import chaos_hosts

    events = [{"event": "host.taken_over", "host": "h1", "by": "h2", "ts": 0.0},
              {"event": "host.taken_over", "host": "h3", "by": "h2", "ts": 0.0}]
    hosts = [("h1", 1, 100.0, 1.0, 100.5, "h2"),  # lease ended at 100, bound 1 s
             ("h3", 3, 100.0, 1.0, 101.5, "h2"),
             ("h4", 4, 100.0, 1.0, 100.1, "h5")]  # a restart's at once: no host.taken_over
    assert chaos_hosts._early_takeovers(events, hosts) == [
        "early: host h1 taken over by h2 0.500s before its lease's end plus its bound"]


def test_a_plan_is_the_same_for_the_same_seed() -> None:
    assert chaos.plan(50, 7, ("thread", "process"), 0.25) == chaos.plan(
        50, 7, ("thread", "process"), 0.25)
    kinds = {p.kind for p in chaos.plan(400, 7, ("thread",), 0.25)}
    assert kinds == set(chaos.KINDS)


@pytest.mark.realtime
@pytest.mark.process
def test_chaos_loses_doubles_misjudges_and_leaks_nothing() -> None:
    report = chaos.run_chaos(150, seed=11, isolations=("thread", "process"))
    assert report.violations == []
    assert len(report.statuses) == 150
    assert report.cancels_won > 0  # cancels really raced
    assert {"completed", "failed", "timed_out", "budget_exceeded", "cancelled"} <= set(
        report.by_status)


@pytest.mark.realtime
def test_a_storm_that_opens_one_agents_circuit_changes_nothing_for_the_others() -> None:
    calm, stormy, differ = chaos.storm_check(100, seed=5)
    assert stormy.storm_trips == 1  # the circuit opened, on purpose
    assert calm.violations == [] and stormy.violations == []
    assert differ == []


@pytest.mark.realtime
@pytest.mark.process
def test_chaos_with_the_host_killed_twice_settles_each_delegation_once_and_leaks_nothing() -> None:
    from benchmarks.chaos_crash import run_crash_chaos

    report = run_crash_chaos(60, seed=3, isolations=("thread", "process"), host_crashes=2)
    assert report.violations == []
    assert sum(report.by_status.values()) == 60
    assert report.lost_attempts > 0  # the host really died with attempts running
    assert report.reattached_attempts > 0  # and process children waited for the next one


@pytest.mark.realtime
@pytest.mark.process
def test_chaos_with_three_hosts_on_postgres_two_killed_settles_each_key_once(
    pg_url: str,
) -> None:
    from benchmarks.chaos_hosts import run_hosts_chaos

    report = run_hosts_chaos(60, seed=3, isolations=("thread", "process"), host_crashes=2,
                             hosts=3, lease_s=2.0, url=pg_url)
    assert report.violations == []
    assert report.crashes == 2 and report.restarted == report.left_dead == 1  # one of each
    assert sum(report.by_status.values()) == 60
    assert len(report.by_host) == 3  # every host ran a share of its own
    assert report.lost_attempts > 0  # a host really died with attempts running
    # What the killed hosts left open was recovered at once by the one started again, or
    # taken over by the live hosts after the lease (what settled just before its kill, not).
    assert report.recovered_on_restart + report.taken_over > 0
    assert report.trailed_attempts >= 40  # the work's own marks were there to judge (not a
    # delegation cancelled before it ran)
