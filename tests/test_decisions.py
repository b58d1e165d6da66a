"""The pure decision core, by tables: backoff, stale detection, budgets, intensity, outcomes."""

from __future__ import annotations

import random

import pytest

from actors import AttemptOutcome, AttemptRecord, Brief, Cancelled, Status, TransientError, Usage
from actors.run import classify_exception
from supervisor.core.state import previous_error
from supervisor.routing import AgentPolicy, BudgetPolicy, IntensityPolicy, RetryPolicy
from supervisor.rules.backoff import backoff_delay
from supervisor.rules.budget import budget_left, budget_overrun
from supervisor.rules.circuit import admit_restart, when_circuit_open
from supervisor.rules.delegation import writer_partial_refusal
from supervisor.rules.intensity import RestartWindow
from supervisor.rules.settle import Fallback, Retry, Settle
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
    watch = ProgressWatch.start(100.0).observe(0, 100.0)  # alive at once, then a long call
    assert not watch.is_stale(109.99, 10)
    assert watch.is_stale(110.0, 10)


def test_the_stale_clock_starts_at_the_first_sign_of_life_not_at_dispatch() -> None:
    watch = ProgressWatch.start(100.0)  # dispatched; the thread has not started yet
    assert watch.stale_at(0.3) == float("inf")
    assert not watch.is_stale(103.8, 0.3)  # a slow start is not "no progress"
    alive = watch.observe(0, 103.8)
    assert not alive.is_stale(104.09, 0.3)
    assert alive.is_stale(104.1, 0.3)


def test_a_nudge_from_a_descendant_moves_the_stale_moment_but_not_the_counter() -> None:
    watch = ProgressWatch.start(0.0).observe(4, 1.0).nudge(9.0)
    assert (watch.progress, watch.stale_at(10)) == (4, 19.0)
    assert ProgressWatch.start(0.0).nudge(5.0).stale_at(10) == float("inf")


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


# -- restart intensity as a circuit per agent (docs/design.md) -------------------------

AGENT3 = IntensityPolicy(max_restarts=3, within_s=60)


@pytest.mark.parametrize(
    ("restarts", "now", "was_open", "allowed", "tripped", "kept"),
    [
        ((), 0.0, False, True, False, 1),
        ((1.0, 2.0), 3.0, False, True, False, 3),
        ((1.0, 2.0, 3.0), 4.0, False, False, True, 3),  # the fourth is refused, not recorded
        ((1.0, 2.0, 3.0), 5.0, True, False, False, 3),  # still open: no new trip
        ((1.0, 2.0, 3.0), 61.0, True, True, False, 3),  # the oldest slid out: room again
        ((1.0, 2.0, 3.0), 200.0, True, True, False, 1),
    ],
)
def test_an_agents_circuit_opens_past_max_restarts_and_closes_when_the_window_has_room(
    restarts: tuple[float, ...], now: float, was_open: bool, allowed: bool, tripped: bool,
    kept: int,
) -> None:
    admission = admit_restart(RestartWindow(restarts), now, AGENT3, was_open=was_open)
    assert (admission.allowed, admission.tripped) == (allowed, tripped)
    assert len(admission.window.restarts) == kept


@pytest.mark.parametrize(
    ("outcome", "policy", "visited", "expected"),
    [
        (AttemptOutcome.transient, AgentPolicy(), ["f"], Settle(Status.failed, reason="r")),
        (AttemptOutcome.crash, AgentPolicy(), ["f"], Settle(Status.failed, reason="r")),
        (AttemptOutcome.timeout, AgentPolicy(), ["f"],
         Settle(Status.timed_out, "deadline", "r")),
        (AttemptOutcome.stale, AgentPolicy(), ["f"], Settle(Status.timed_out, "stale", "r")),
        (AttemptOutcome.transient, AgentPolicy(fallback="g"), ["f"], Fallback("g")),
        (AttemptOutcome.transient, AgentPolicy(fallback="g"), ["g", "f"],
         Settle(Status.failed, reason="r")),
        (AttemptOutcome.transient, AgentPolicy(fallback="zeus"), ["f"],
         Settle(Status.failed, reason="r")),
    ],
)
def test_a_retry_refused_by_an_open_circuit_falls_back_or_settles_as_if_retries_were_spent(
    outcome: AttemptOutcome, policy: AgentPolicy, visited: list[str], expected: object
) -> None:
    assert when_circuit_open(Retry(1), outcome, policy, visited, "r") == expected


# -- what an attempt may still spend -------------------------------------------------------


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        ([], None),
        ([(Usage(cost=1), BudgetPolicy())], None),
        ([(Usage(cost=0.1), BudgetPolicy(max_cost=0.35))], {"cost": pytest.approx(0.25)}),
        ([(Usage(calls=2), BudgetPolicy(max_calls=5)),
          (Usage(calls=9), BudgetPolicy(max_calls=10))],
         {"calls": 1}),  # the tightest room wins: an ancestor's
        ([(Usage(), BudgetPolicy(max_calls=5)), (Usage(cost=2), BudgetPolicy(max_cost=3))],
         {"calls": 5, "cost": 1}),
    ],
)
def test_budget_left_is_the_least_room_under_each_cap(
    pairs: list[tuple[Usage, BudgetPolicy]], expected: dict[str, float] | None
) -> None:
    assert budget_left(pairs) == expected


# -- writers never settle partial ---------------------------------------------------------


@pytest.mark.parametrize(
    ("brief_partial", "policy", "refused"),
    [
        (True, AgentPolicy(), True),
        (True, AgentPolicy(read_only=True), False),
        (True, AgentPolicy(partial_ok=True), False),
        (False, AgentPolicy(), False),
        (None, AgentPolicy(), False),
        (False, AgentPolicy(partial_ok=True), False),  # a brief may narrow a policy
    ],
)
def test_a_brief_may_not_widen_a_writers_policy_to_partial(
    brief_partial: bool | None, policy: AgentPolicy, refused: bool
) -> None:
    why = writer_partial_refusal(Brief(agent="hephaestus", scope="s",
                                       partial_ok=brief_partial), policy)
    assert (why is not None) == refused
    if why is not None:
        assert "read_only: false" in why and "partial_ok: false" in why


@pytest.mark.parametrize(
    ("attempts", "told"),
    [
        ([], None),
        ([AttemptRecord(id="a", agent="f", outcome="stale", error="no progress for 10 s")],
         "stale: no progress for 10 s"),
        ([AttemptRecord(id="a", agent="f", outcome="crash", error="x"),
          AttemptRecord(id="b", agent="g", outcome="crash")], "crash"),
    ],
)
def test_previous_error_tells_how_the_last_attempt_ended(
    attempts: list[AttemptRecord], told: str | None
) -> None:
    assert previous_error(attempts) == told
