"""Settlement precedence and the next step, as pure functions, in every order of racing causes."""

from __future__ import annotations

from itertools import permutations

import pytest

from actors import AttemptOutcome as O
from actors import Report, Status
from supervisor.routing import AgentPolicy, RetryPolicy
from supervisor.rules.settle import (
    COMPLETED,
    Fallback,
    Retry,
    Settle,
    completed_step,
    decide_next,
    resolve_outcome,
)

STOPS = [O.cancelled, O.budget_exceeded, O.timeout]
RANK = {O.cancelled: 3, O.budget_exceeded: 2, O.timeout: 1, O.stale: 1}


@pytest.mark.parametrize("order", list(permutations(STOPS)))
@pytest.mark.parametrize("child_exit", [None, O.completed, O.error, O.cancelled])
def test_stop_causes_resolve_by_rank_whatever_their_order(
    order: tuple[O, ...], child_exit: O | None
) -> None:
    assert resolve_outcome(child_exit, order, cancel_requested=False) is O.cancelled
    without_cancel = [c for c in order if c is not O.cancelled]
    assert resolve_outcome(child_exit, without_cancel, cancel_requested=False) is O.budget_exceeded


@pytest.mark.parametrize("cause", [O.budget_exceeded, O.timeout, O.stale])
@pytest.mark.parametrize("child_exit", [O.completed, O.error, O.transient, O.crash, None])
def test_an_owner_cancel_wins_over_every_racing_cause(cause: O, child_exit: O | None) -> None:
    assert resolve_outcome(child_exit, [cause], cancel_requested=True) is O.cancelled


def test_a_result_after_a_stop_cause_does_not_win() -> None:
    assert resolve_outcome(O.completed, [O.timeout], cancel_requested=False) is O.timeout


def test_deadline_and_stale_rank_equal_and_the_first_wins() -> None:
    assert resolve_outcome(None, [O.stale, O.timeout], cancel_requested=False) is O.stale
    assert resolve_outcome(None, [O.timeout, O.stale], cancel_requested=False) is O.timeout


def test_without_stop_causes_the_child_decides() -> None:
    for exit_outcome in (O.completed, O.error, O.transient, O.crash, O.cancelled):
        assert resolve_outcome(exit_outcome, [], cancel_requested=False) is exit_outcome
    assert resolve_outcome(None, [], cancel_requested=False) is O.crash


def _next(outcome: O, policy: AgentPolicy | None = None, **kw: object) -> object:
    args: dict[str, object] = {
        "retries_used": 0,
        "has_partials": False,
        "partial_ok": False,
        "side_effects": False,
        "visited": ["apollo"],
        "fenced_writer": False,
    }
    args.update(kw)
    return decide_next(outcome, policy or RETRY2, **args)  # type: ignore[arg-type]


RETRY2 = AgentPolicy(retry=RetryPolicy(max_retries=2), fallback="athena")


@pytest.mark.parametrize(
    ("outcome", "kw", "expected"),
    [
        (O.completed, {}, Settle(Status.completed)),
        (O.cancelled, {}, Settle(Status.cancelled)),
        (O.budget_exceeded, {}, Settle(Status.budget_exceeded)),
        (O.error, {}, Settle(Status.failed)),  # permanent: no retry, no fallback
        (O.transient, {}, Retry(1)),
        (O.crash, {"retries_used": 1}, Retry(2)),
        (O.timeout, {"retries_used": 2}, Fallback("athena")),
        (O.stale, {"retries_used": 2, "visited": ["apollo", "athena"]},
         Settle(Status.timed_out, "stale")),
        (O.timeout, {"has_partials": True, "partial_ok": True},
         Settle(Status.partial, "deadline")),
        (O.stale, {"has_partials": True, "partial_ok": True}, Settle(Status.partial, "stale")),
        (O.timeout, {"has_partials": True, "partial_ok": False}, Retry(1)),
        (O.timeout, {"has_partials": False, "partial_ok": True}, Retry(1)),
        # lost: its supervisor died and its child was confirmed gone on recovery
        (O.lost, {}, Retry(1)),
        (O.lost, {"retries_used": 2}, Fallback("athena")),
        (O.lost, {"retries_used": 2, "visited": ["apollo", "athena"]}, Settle(Status.failed)),
        (O.lost, {"has_partials": True, "partial_ok": True}, Retry(1)),  # not a timeout
        # unavailable: the agent cannot serve; no retry, straight to the fallback
        (O.unavailable, {}, Fallback("athena")),
        (O.unavailable, {"visited": ["apollo", "athena"]}, Settle(Status.failed)),
        (O.unavailable, {"side_effects": True, "fallback_told": True}, Fallback("athena")),
        # a CLI session that can be continued is retried by resuming it
        (O.timeout, {"resumable": True}, Retry(1, resume=True)),
        (O.stale, {"resumable": True, "side_effects": True}, Retry(1, resume=True)),
        (O.transient, {"resumable": True, "retries_used": 1}, Retry(2, resume=True)),
        (O.crash, {"resumable": True}, Retry(1, resume=True)),
        (O.lost, {"resumable": True}, Retry(1)),  # its host died: not a stopped session
        (O.timeout, {"resumable": True, "retries_used": 2, "side_effects": True,
                     "fallback_told": True}, Fallback("athena")),
    ],
)
def test_next_step_table(outcome: O, kw: dict[str, object], expected: object) -> None:
    assert _next(outcome, **kw) == expected


def test_unavailable_settles_failed_without_a_fallback_and_is_never_retried() -> None:
    no_fallback = AgentPolicy(retry=RetryPolicy(max_retries=5))
    assert _next(O.unavailable, no_fallback) == Settle(Status.failed)
    to_owner = AgentPolicy(retry=RetryPolicy(max_retries=5), fallback="zeus")
    step = _next(O.unavailable, to_owner)
    assert isinstance(step, Settle) and step.status is Status.failed and "owner" in str(step.reason)


def test_side_effects_forbid_only_a_blind_restart() -> None:
    fresh = _next(O.timeout, side_effects=True, resumable=False)
    assert isinstance(fresh, Settle) and "retry_after_tool_calls" in str(fresh.reason)
    assert _next(O.timeout, side_effects=True, resumable=True) == Retry(1, resume=True)
    untold = _next(O.timeout, side_effects=True, retries_used=2, fallback_told=False)
    assert isinstance(untold, Settle) and "side effects" in str(untold.reason)
    told = _next(O.timeout, side_effects=True, retries_used=2, fallback_told=True)
    assert told == Fallback("athena")
    # `retry.resume_session: false` and no fallback: nothing runs again after side effects
    owner_keeps_old_rule = AgentPolicy(retry=RetryPolicy(max_retries=2, resume_session=False))
    step = _next(O.stale, owner_keeps_old_rule, side_effects=True, resumable=False)
    assert isinstance(step, Settle) and step.status is Status.timed_out


def test_side_effects_block_retry_and_fallback_unless_allowed() -> None:
    step = _next(O.transient, side_effects=True)
    assert isinstance(step, Settle) and step.status is Status.failed
    assert step.reason is not None and "retry_after_tool_calls" in step.reason
    allowed = RETRY2.model_copy(update={"retry_after_tool_calls": True})
    assert _next(O.transient, allowed, side_effects=True) == Retry(1)


def test_a_fenced_writer_blocks_instead_of_starting_a_second_writer() -> None:
    step = _next(O.timeout, fenced_writer=True)
    assert isinstance(step, Settle) and step.status is Status.blocked
    assert step.reason is not None and "second writer" in step.reason


def test_retry_on_limits_which_outcomes_retry() -> None:
    only_timeouts = AgentPolicy(retry=RetryPolicy(max_retries=3, on=("timeout",)))
    assert _next(O.timeout, only_timeouts) == Retry(1)
    assert _next(O.crash, only_timeouts) == Settle(Status.failed)
    assert _next(O.lost, only_timeouts) == Settle(Status.failed)


def test_retry_on_defaults_to_every_retryable_outcome_lost_included() -> None:
    assert [str(w) for w in RetryPolicy().on] == ["transient", "timeout", "stale", "crash",
                                                  "lost"]


def test_fallback_zeus_returns_the_failure_to_the_owner() -> None:
    policy = AgentPolicy(fallback="zeus")
    step = _next(O.timeout, policy)
    assert isinstance(step, Settle) and step.status is Status.timed_out
    assert step.reason is not None and "owner" in step.reason


def test_a_fallback_never_revisits_an_agent() -> None:
    policy = AgentPolicy(fallback="hermes")
    assert _next(O.crash, policy, visited=["hermes", "talos"]) == Settle(Status.failed)


def test_a_stateful_performer_gets_one_follow_up_then_blocks() -> None:
    policy = AgentPolicy(stateful=True, retry=RetryPolicy(max_retries=3), fallback="talos")
    assert _next(O.crash, policy) == Retry(1, follow_up=True)
    step = _next(O.crash, policy, retries_used=1)
    assert isinstance(step, Settle) and step.status is Status.blocked


def test_a_fenced_writer_with_nothing_to_restart_settles_by_its_outcome() -> None:
    no_restart = AgentPolicy()  # no retries, no fallback
    assert _next(O.timeout, no_restart, fenced_writer=True) == Settle(Status.timed_out, "deadline")


def test_side_effects_name_no_reason_when_no_restart_was_due() -> None:
    assert _next(O.crash, AgentPolicy(), side_effects=True) == Settle(Status.failed)


@pytest.mark.parametrize(
    ("value", "step"),
    [
        ("plain output", COMPLETED),
        (None, COMPLETED),
        (Report(findings=["a"]), COMPLETED),
        (Report(findings=["a"], incomplete=""), COMPLETED),
        (Report(incomplete="stopped at 200 hits"),
         Settle(Status.partial, reason="stopped at 200 hits")),
    ],
)
def test_a_completed_attempt_settles_partial_when_its_report_says_it_stopped_short(
    value: object, step: Settle
) -> None:
    assert completed_step(value) == step
