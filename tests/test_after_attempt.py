"""What follows the end of an attempt (`supervisor.rules.after_attempt`): a decision table
checked against every combination of the function's inputs.

Each row reads: forced, cancel requested, group restart pending, outcome, reviewed task,
in a group -> the steps, in order. `ANY` matches every value; the first row that matches
a combination is its answer, so the rows are in precedence order.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from actors import AttemptOutcome
from supervisor.rules.after_attempt import AfterAttempt, Step, after_attempt

ANY = object()
DONE = AttemptOutcome.completed
CANCELLED = AttemptOutcome.cancelled
FAILED = "failed"  # every outcome other than completed and cancelled

TABLE: list[tuple[tuple[Any, Any, Any, Any, Any, Any], tuple[Step, ...]]] = [
    # forced  cancel  restart  outcome    review  group
    ((True, False, ANY, ANY, ANY, ANY), ("settle_forced",)),
    ((ANY, False, True, CANCELLED, ANY, ANY), ("group_restart",)),
    ((ANY, False, True, FAILED, ANY, ANY), ("group_restart",)),
    ((ANY, ANY, ANY, DONE, True, ANY), ("review",)),
    ((ANY, ANY, ANY, DONE, False, ANY), ("settle_completed",)),
    ((ANY, ANY, ANY, CANCELLED, ANY, ANY), ("next_step",)),
    ((ANY, ANY, ANY, FAILED, ANY, True), ("restart_siblings", "next_step")),
    ((ANY, ANY, ANY, FAILED, ANY, False), ("next_step",)),
]

BOOLS = (False, True)
COMBINATIONS = list(itertools.product(BOOLS, BOOLS, BOOLS, list(AttemptOutcome), BOOLS, BOOLS))


def matches(pattern: Any, value: Any) -> bool:
    if pattern is ANY:
        return True
    if pattern == FAILED:
        return value not in (DONE, CANCELLED)
    return bool(pattern is value)


def expected(combination: tuple[Any, ...]) -> tuple[Step, ...]:
    for pattern, steps in TABLE:
        if all(matches(p, v) for p, v in zip(pattern, combination, strict=True)):
            return steps
    raise AssertionError(f"no row of the table covers {combination}")


@pytest.mark.parametrize(
    "combination", COMBINATIONS,
    ids=["-".join(str(getattr(v, "value", v)) for v in c) for c in COMBINATIONS],
)
def test_every_combination_follows_the_table(combination: tuple[Any, ...]) -> None:
    forced, cancel, restart, outcome, reviewed, grouped = combination
    after = after_attempt(outcome, forced=forced, cancel_requested=cancel,
                          restart_pending=restart, reviewed=reviewed, grouped=grouped)
    assert after.steps == expected(combination)
    # A pending group restart is taken up unless the owner cancelled or the supervisor
    # gave up first (the delegation settles then, and the restart is moot).
    assert after.restart_consumed == (restart and not cancel and not forced)


def test_the_table_covers_all_outcomes_and_every_row_is_reached() -> None:
    assert len(COMBINATIONS) == 2 * 2 * 2 * len(AttemptOutcome) * 2 * 2
    reached = set()
    for combination in COMBINATIONS:
        for i, (pattern, _steps) in enumerate(TABLE):
            if all(matches(p, v) for p, v in zip(pattern, combination, strict=True)):
                reached.add(i)
                break
    assert reached == set(range(len(TABLE)))


@pytest.mark.parametrize(
    ("words", "kwargs", "outcome", "steps"),
    [
        ("a cancel wins over the supervisor's forced verdict: the cancel settles it",
         {"forced": True, "cancel_requested": True}, CANCELLED, ("next_step",)),
        ("a group restart is not taken up once the owner cancelled",
         {"restart_pending": True, "cancel_requested": True}, CANCELLED, ("next_step",)),
        ("an attempt that completed before its group restart landed keeps its result",
         {"restart_pending": True, "reviewed": True}, DONE, ("review",)),
        ("a cancelled member of a group restarts no sibling",
         {"grouped": True}, CANCELLED, ("next_step",)),
        ("a crashed member of a group restarts its siblings before its own next step",
         {"grouped": True}, AttemptOutcome.crash, ("restart_siblings", "next_step")),
    ],
)
def test_the_cases_that_matter_in_words(
    words: str, kwargs: dict[str, bool], outcome: AttemptOutcome, steps: tuple[Step, ...]
) -> None:
    flags = {"forced": False, "cancel_requested": False, "restart_pending": False,
             "reviewed": False, "grouped": False} | kwargs
    assert after_attempt(outcome, **flags).steps == steps, words


def test_the_answer_is_a_value() -> None:
    assert after_attempt(DONE, forced=False, cancel_requested=False, restart_pending=False,
                         reviewed=False, grouped=False) == AfterAttempt(("settle_completed",))
