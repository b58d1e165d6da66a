"""What follows the end of an attempt, in order. A pure function, tested by a table
over every combination of its inputs.

The order (first that applies wins, unless the owner asked to cancel):
1. the supervisor gave up on the delegation (restart intensity): it settles as forced;
2. a group restart stopped the attempt: it starts again (unless it completed anyway);
3. it completed: a task with a reviewer goes to review, anything else settles completed;
4. it failed (not cancelled) inside a group: the siblings the strategy names restart;
5. the next step: retry, fallback or settle (`settle.decide_next`, through the circuit).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

from actors import AttemptOutcome

__all__ = ["AfterAttempt", "Step", "after_attempt"]

Step = Literal[
    "settle_forced",  # settle with the supervisor's forced verdict
    "group_restart",  # start the delegation's next attempt (counted as a restart)
    "review",  # a task's second stage: dispatch its reviewer
    "settle_completed",  # settle completed, with the attempt's value
    "restart_siblings",  # one_for_all / rest_for_one: stop and restart the siblings
    "next_step",  # retry, fallback or settle, as `decide_next` and the circuit say
]


@dataclass(frozen=True, slots=True)
class AfterAttempt:
    steps: tuple[Step, ...]
    # The pending group restart was taken up (the delegation forgets it), whether it
    # restarts (the attempt failed) or not (it completed anyway).
    restart_consumed: bool = False


@functools.cache  # a pure function of a few flags: each answer is made once
def after_attempt(
    outcome: AttemptOutcome,
    *,
    forced: bool,
    cancel_requested: bool,
    restart_pending: bool,
    reviewed: bool,
    grouped: bool,
) -> AfterAttempt:
    """The steps that follow an attempt that ended with `outcome`, in order.

    `forced`: the supervisor gave up on the delegation; `restart_pending`: a group
    restart stopped the attempt; `reviewed`: a task whose policy names a reviewer;
    `grouped`: the delegation belongs to a group.
    """
    if forced and not cancel_requested:
        return AfterAttempt(("settle_forced",))
    consumed = restart_pending and not cancel_requested
    if consumed and outcome is not AttemptOutcome.completed:
        return AfterAttempt(("group_restart",), restart_consumed=True)
    if outcome is AttemptOutcome.completed:
        return AfterAttempt(("review" if reviewed else "settle_completed",), consumed)
    if grouped and outcome is not AttemptOutcome.cancelled:
        return AfterAttempt(("restart_siblings", "next_step"), consumed)
    return AfterAttempt(("next_step",), consumed)
