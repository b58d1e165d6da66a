"""Races settled by rule, not timing: messages queued in Zeus's mailbox in every order.

Once the attempt runs, Zeus's mailbox is held (`held(zeus)`), the racing
messages are queued in a known order, then the hold ends: the mailbox handles
them one at a time, exactly in that order.
"""

from __future__ import annotations

import threading
from itertools import permutations
from typing import Any

import pytest

from actors import AttemptOutcome, Brief, Status, Usage
from actors.clock import FakeClock
from actors.protocol import Charge, Finished
from supervisor.testing import held, tell
from tests.conftest import Recorder, ZeusFactory

RACER = {"timeout_s": 10, "budget": {"max_cost": 1.0}, "shutdown": {"grace_s": 5}}


def expected_status(order: tuple[str, ...]) -> Status:
    """The oracle: the settlement precedence (docs/design.md), read off the order the
    mailbox sees."""
    seen: list[str] = []
    for message in order:
        if message == "result":
            break
        seen.append(message)
    if "cancel" in seen:
        return Status.cancelled
    if "budget" in seen:
        return Status.budget_exceeded
    if "deadline" in seen:
        return Status.timed_out
    if "result" in order:
        return Status.completed
    raise AssertionError("the order must stop the attempt somehow")


def run_race(
    make_zeus: ZeusFactory, clock: FakeClock, order: tuple[str, ...]
) -> tuple[Any, Recorder]:
    release = threading.Event()

    def racer(brief: Brief, ctx: Any) -> str:
        while not release.is_set():
            ctx.sleep(0.01)  # raises Cancelled once Zeus asks it to stop
        return "late"

    recorder = Recorder()
    zeus = make_zeus({"racer": RACER}, works={"racer": racer}, log=recorder)
    handle = zeus.dispatch(Brief(agent="racer", scope="race"))
    recorder.wait_for("attempt.started")
    attempt_id = f"{handle.id}-a1"
    send = {
        "cancel": lambda: zeus.cancel(handle.id, "owner changed their mind"),
        "budget": lambda: tell(zeus, Charge(attempt_id, 1, Usage(cost=2.0))),
        "deadline": lambda: clock.advance(10),  # the attempt's timer fires into the mailbox
        "result": lambda: tell(
            zeus, Finished(attempt_id, AttemptOutcome.completed, value="done", progress=2)
        ),
    }
    with held(zeus):
        for message in order:
            send[message]()
    summary = handle.result(10)
    release.set()
    return summary, recorder


ALL_FOUR = list(permutations(["cancel", "budget", "deadline", "result"]))


@pytest.mark.parametrize("order", ALL_FOUR, ids="-".join)
def test_racing_cancel_budget_deadline_and_result_settle_by_rule(
    make_zeus: ZeusFactory, clock: FakeClock, order: tuple[str, ...]
) -> None:
    summary, recorder = run_race(make_zeus, clock, order)
    assert summary.status is expected_status(order)
    assert len(recorder.named("delegation.settled")) == 1
    if summary.status is Status.completed:
        assert summary.output == "done"
    assert summary.output != "late"


STOP_ORDERS = [
    p for n in (2, 3) for p in permutations(["cancel", "budget", "deadline"], n)
]


@pytest.mark.parametrize("order", STOP_ORDERS, ids="-".join)
def test_stop_causes_without_a_result_settle_by_precedence(
    make_zeus: ZeusFactory, clock: FakeClock, order: tuple[str, ...]
) -> None:
    summary, _ = run_race(make_zeus, clock, order)
    assert summary.status is expected_status(order)
    attempt = summary.attempts[0]
    # The losing causes are kept in the attempt record, in arrival order.
    causes = [_cause(m) for m in order]
    expected = [c for c in causes if c != attempt.outcome.value]
    if attempt.outcome is not AttemptOutcome.cancelled:
        expected.append("child:cancelled")  # the child's own ending, after it was asked to stop
    assert attempt.losing_causes == expected


def _cause(message: str) -> str:
    return {"cancel": "cancelled", "budget": "budget_exceeded", "deadline": "timeout"}[message]


def test_a_result_processed_before_the_cancel_stays_completed(
    make_zeus: ZeusFactory, clock: FakeClock
) -> None:
    summary, recorder = run_race(make_zeus, clock, ("result", "cancel"))
    assert summary.status is Status.completed
    assert recorder.named("delegation.cancel_requested") == []
