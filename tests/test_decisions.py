"""The pure decision core, by tables: backoff, stale detection, budgets, intensity, outcomes."""

from __future__ import annotations

import random

import pytest

from actors import AttemptOutcome, Cancelled, TransientError, Usage
from actors.run import classify_exception
from supervisor.routing import BudgetPolicy, IntensityPolicy, RetryPolicy
from supervisor.rules.backoff import backoff_delay
from supervisor.rules.budget import budget_overrun
from supervisor.rules.intensity import RestartWindow
from supervisor.rules.stale import ProgressWatch

# -- backoff ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("backoff", "retry", "expected"),
    [
        ("exponential", 1, 1.0),
        ("exponential", 2, 2.0),
        ("exponential", 3, 4.0),
        ("exponential", 5, 16.0),
        ("exponential", 6, 30.0),  # capped at max_s
        ("exponential", 500, 30.0),  # no overflow for huge retry numbers
        ("fixed", 1, 1.0),
        ("fixed", 4, 1.0),
        ("none", 1, 0.0),
        ("none", 9, 0.0),
    ],
)
def test_backoff_schedule_without_jitter(backoff: str, retry: int, expected: float) -> None:
    policy = RetryPolicy(backoff=backoff, initial_s=1, factor=2, max_s=30, jitter=0)
    assert backoff_delay(policy, retry, random.Random(0)) == expected


def test_backoff_jitter_stays_within_its_band_and_the_cap() -> None:
    policy = RetryPolicy(initial_s=10, factor=2, max_s=30, jitter=0.2)
    rng = random.Random(1)
    first = [backoff_delay(policy, 1, rng) for _ in range(200)]
    assert all(8.0 <= d <= 12.0 for d in first)
    assert len({round(d, 6) for d in first}) > 100  # really jittered
    assert all(backoff_delay(policy, 3, rng) <= 30.0 for _ in range(200))


def test_backoff_is_reproducible_with_a_seeded_random() -> None:
    policy = RetryPolicy(initial_s=1, jitter=0.5)
    a = [backoff_delay(policy, n, random.Random(42)) for n in (1, 2, 3)]
    b = [backoff_delay(policy, n, random.Random(42)) for n in (1, 2, 3)]
    assert a == b


def test_backoff_refuses_retry_number_zero() -> None:
    with pytest.raises(ValueError, match="start at 1"):
        backoff_delay(RetryPolicy(), 0, random.Random())


# -- stale detection -------------------------------------------------------------------


def test_the_first_report_counts_as_progress_even_with_counter_zero() -> None:
    watch = ProgressWatch.start(100.0).observe(0, 105.0)
    assert watch.progressed_at == 105.0
    assert not watch.is_stale(114.9, 10)
    assert watch.is_stale(115.0, 10)


def test_a_slow_first_call_is_not_stale_before_stale_after_s() -> None:
    watch = ProgressWatch.start(100.0)
    assert not watch.is_stale(109.99, 10)
    assert watch.is_stale(110.0, 10)


def test_liveness_without_progress_does_not_reset_the_stale_clock() -> None:
    watch = ProgressWatch.start(0.0).observe(3, 1.0)
    for t in (2.0, 4.0, 8.0, 10.9):
        watch = watch.observe(3, t)  # heartbeats that prove life, not progress
    assert watch.seen_at == 10.9
    assert watch.stale_at(10) == 11.0
    assert watch.is_stale(11.0, 10)


def test_progress_moves_the_stale_deadline() -> None:
    watch = ProgressWatch.start(0.0).observe(1, 9.0).observe(2, 18.0)
    assert watch.stale_at(10) == 28.0


# -- budgets ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("usage", "budget", "named"),
    [
        (Usage(calls=3), BudgetPolicy(max_calls=3), None),
        (Usage(calls=4), BudgetPolicy(max_calls=3), "calls"),
        (Usage(input_tokens=10), BudgetPolicy(max_input_tokens=9), "input_tokens"),
        (Usage(output_tokens=10), BudgetPolicy(max_output_tokens=9), "output_tokens"),
        (Usage(cost=0.51), BudgetPolicy(max_cost=0.5), "cost"),
        (Usage(cost=99, calls=99), BudgetPolicy(), None),
    ],
)
def test_budget_overrun_names_the_cap_broken(
    usage: Usage, budget: BudgetPolicy, named: str | None
) -> None:
    overrun = budget_overrun(usage, budget)
    if named is None:
        assert overrun is None
    else:
        assert overrun is not None and overrun.startswith(named) and f"max_{named}" in overrun


# -- restart intensity -----------------------------------------------------------------


def test_intensity_counts_restarts_inside_the_window_only() -> None:
    policy = IntensityPolicy(max_restarts=2, within_s=10)
    window = RestartWindow()
    for t in (0.0, 1.0, 2.0):
        window = window.record(t, policy)
    assert window.exceeded(policy)
    slid = RestartWindow().record(0, policy).record(1, policy).record(10.5, policy)
    assert slid.restarts == (1, 10.5)
    assert not slid.exceeded(policy)


# -- classification --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "outcome"),
    [
        (TransientError("503"), AttemptOutcome.transient),
        (ConnectionResetError(), AttemptOutcome.transient),
        (TimeoutError(), AttemptOutcome.transient),
        (OSError("disk"), AttemptOutcome.error),
        (ValueError("bad"), AttemptOutcome.error),
        (KeyboardInterrupt(), AttemptOutcome.error),
        (SystemExit(3), AttemptOutcome.error),
        (Cancelled("a-1"), AttemptOutcome.cancelled),
    ],
)
def test_errors_are_classified_transient_or_permanent(
    exc: BaseException, outcome: AttemptOutcome
) -> None:
    assert classify_exception(exc) is outcome
