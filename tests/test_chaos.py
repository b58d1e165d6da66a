"""Chaos: mixed delegations with cancels racing everything, on thread and process
children; judged exactly (see benchmarks/chaos.py). `python -m benchmarks chaos` runs
1,000; these run a smaller one."""

from __future__ import annotations

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
    assert report.recovered_on_restart > 0  # a host started again recovered at once
    assert report.taken_over > 0  # and the live hosts took the one left dead over
