"""Recovery decisions (`supervisor.rules.recovery`): a table over every combination of
what a dead Zeus can leave, the replay of an orchestrator's calls in every order, the
brief comparison behind `KeyConflict`, and the OS check that a child is gone."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from typing import Any

import pytest

from actors import AttemptOutcome, Brief, Status, Usage
from actors.osproc import child_gone, group_empty, process_running, process_start_time
from supervisor.routing import AgentPolicy, BudgetPolicy, RetryPolicy
from supervisor.rules.recovery import (
    BLOCKED_REASON,
    STATEFUL_REASON,
    AttemptFacts,
    Plan,
    Replay,
    Rerun,
    Resume,
    Start,
    Wait,
    brief_differences,
    losses,
    recover,
    retries_made,
)
from supervisor.rules.settle import Fallback, Settle, decide_next

NOW = 1_000.0
ATTEMPTS = {
    "none": (),
    "ended": (AttemptFacts("d-a1", open=False, outcome=AttemptOutcome.transient),),
    "open_gone": (AttemptFacts("d-a1", open=True, gone=True),),
    "open_alive": (AttemptFacts("d-a1", open=True, gone=False),),
}
KINDS = {
    "read_only": {"read_only": True},
    "idempotent": {"idempotent": True},
    "writer": {},
    "stateful": {"stateful": True},
}
BOOLS = (False, True)
COMBINATIONS = list(itertools.product(ATTEMPTS, BOOLS, BOOLS, KINDS, BOOLS, BOOLS, BOOLS))


def policy_for(kind: str) -> AgentPolicy:
    return AgentPolicy(retry=RetryPolicy(max_retries=1), budget=BudgetPolicy(max_cost=1.0),
                       partial_ok=True, **KINDS[kind])


def expected(attempts: str, late: bool, over: bool, kind: str, retries_left: bool,
             pending: bool, partials: bool) -> Plan:
    """The module's order, row by row."""
    policy = policy_for(kind)
    used = 0 if retries_left else 1
    if attempts == "open_alive":
        return Plan((), Wait(("d-a1",)))
    lost = ("d-a1",) if attempts == "open_gone" else ()
    if lost and kind in ("writer", "stateful"):  # its outcome is unknown: always blocked
        reason = STATEFUL_REASON if kind == "stateful" else BLOCKED_REASON
        if late:
            reason += " (its deadline passed while no supervisor ran)"
        elif over:
            reason += " (spent before the restart: cost 2 over the cap of 1 (max_cost))"
        return Plan(lost, Settle(Status.blocked, None, reason))
    if late:
        return Plan(lost, Settle(Status.partial if partials else Status.timed_out,
                                 "deadline", "the deadline passed while no supervisor ran"))
    if over:
        return Plan(lost, Settle(Status.budget_exceeded, None,
                                 "spent before the restart: cost 2 over the cap of 1 (max_cost)"))
    if not lost:
        if pending:
            return Plan((), Resume())
        if attempts == "none":
            return Plan((), Start())
        return Plan((), decide_next(AttemptOutcome.transient, policy, retries_used=used,
                                    has_partials=partials, partial_ok=True, side_effects=False,
                                    visited=["apollo"], fenced_writer=False))
    return Plan(lost, Rerun(1))  # a host's crash uses up no retry, left or not


@pytest.mark.parametrize("combination", COMBINATIONS,
                         ids=["-".join(str(v) for v in c) for c in COMBINATIONS])
def test_every_combination_follows_the_order(combination: tuple[Any, ...]) -> None:
    attempts, late, over, kind, retries_left, pending, partials = combination
    plan = recover(
        ATTEMPTS[attempts], policy_for(kind), deadline=NOW - 1 if late else NOW + 60, now=NOW,
        spent=Usage(cost=2.0 if over else 0.5), has_partials=partials, partial_ok=True,
        retries_used=0 if retries_left else 1, visited=["apollo"], retry_pending=pending,
    )
    assert plan == expected(*combination)


def test_a_lost_attempt_is_rerun_on_lost_by_default_and_not_when_left_out() -> None:
    args: dict[str, Any] = dict(deadline=None, now=NOW, spent=Usage(), has_partials=False,
                                partial_ok=False, retries_used=0, visited=["apollo"],
                                retry_pending=False)
    lost = [AttemptFacts("d-a1", open=True)]
    rerun = AgentPolicy(read_only=True, retry=RetryPolicy(max_retries=2))
    assert recover(lost, rerun, **args) == Plan(("d-a1",), Rerun(1))
    narrow = AgentPolicy(read_only=True, retry=RetryPolicy(max_retries=2, on=("timeout",)),
                         fallback="athena")
    assert recover(lost, narrow, **args).step == Fallback("athena")


def _crashes(n: int, *, unstarted: int = 0) -> list[AttemptFacts]:
    """A delegation lost in `n` host crashes before this one, then open again now, and
    `unstarted` more lost attempts whose child never started (nothing ran in them)."""
    ended = [AttemptFacts(f"d-a{i}", open=False, outcome=AttemptOutcome.lost)
             for i in range(1, n + 1)]
    never = [AttemptFacts(f"d-u{i}", open=False, outcome=AttemptOutcome.lost, started=False)
             for i in range(unstarted)]
    return [*ended, *never, AttemptFacts("d-now", open=True)]


@pytest.mark.parametrize("max_recoveries", [0, 1, 3, 10])
def test_losses_have_their_own_bound_and_never_use_up_retries(max_recoveries: int) -> None:
    reader = AgentPolicy(read_only=True, retry=RetryPolicy(max_retries=0))  # no retry at all
    args: dict[str, Any] = dict(deadline=None, now=NOW, spent=Usage(), has_partials=False,
                                partial_ok=False, retries_used=0, visited=["apollo"],
                                retry_pending=False, max_recoveries=max_recoveries)
    for before in range(max_recoveries):  # lost in before + 1 crashes: still within the bound
        assert recover(_crashes(before), reader, **args).step == Rerun(before + 1)
    past = recover(_crashes(max_recoveries), reader, **args).step
    assert isinstance(past, Settle) and past.status is Status.failed
    assert past.reason is not None
    assert past.reason.startswith(f"lost in {max_recoveries + 1} host crashes")
    assert f"supervisor.max_recoveries: {max_recoveries}" in past.reason


def test_an_attempt_whose_child_never_started_is_not_counted_at_all() -> None:
    reader = AgentPolicy(read_only=True)
    args: dict[str, Any] = dict(deadline=None, now=NOW, spent=Usage(), has_partials=False,
                                partial_ok=False, retries_used=0, visited=["apollo"],
                                retry_pending=False, max_recoveries=3)
    # two counted crashes and five in which nothing ran: the third counted one is allowed
    assert recover(_crashes(2, unstarted=5), reader, **args).step == Rerun(3)
    # lost now before its child started: the count stays where it was
    never_now = [*_crashes(2)[:-1], AttemptFacts("d-now", open=True, started=False)]
    assert recover(never_now, reader, **args).step == Rerun(2)
    assert losses(never_now) == 2 and losses(_crashes(2, unstarted=5)) == 3
    args["max_recoveries"] = 2  # three counted crashes are past a bound of 2
    assert isinstance(recover(_crashes(2, unstarted=5), reader, **args).step, Settle)
    assert recover(never_now, reader, **args).step == Rerun(2)


def test_a_loss_whose_rerun_had_not_started_is_run_again_after_the_next_crash() -> None:
    # lost in the last recovery, its rerun still queued when that host died too
    queued = [AttemptFacts("d-a1", open=False, outcome=AttemptOutcome.lost)]
    plan = recover(queued, AgentPolicy(read_only=True), deadline=None, now=NOW,
                   spent=Usage(), has_partials=False, partial_ok=False, retries_used=0,
                   visited=["apollo"], retry_pending=False)
    assert plan == Plan((), Rerun(1))


def test_retries_made_skip_the_attempts_run_again_after_a_loss() -> None:
    assert retries_made([], "apollo") == 0
    assert retries_made([("apollo", "lost"), ("apollo", "lost"), ("apollo", None)],
                        "apollo") == 0
    assert retries_made([("apollo", "transient"), ("apollo", "lost"), ("apollo", "crash"),
                         ("apollo", None)], "apollo") == 2
    assert retries_made([("apollo", "transient"), ("athena", "timeout"), ("athena", None)],
                        "athena") == 1


@pytest.mark.parametrize("kind", ["writer", "stateful"])
def test_a_writer_whose_outcome_is_unknown_is_blocked_even_past_its_deadline(kind: str) -> None:
    policy = AgentPolicy(stateful=kind == "stateful")
    plan = recover([AttemptFacts("d-a1", open=True)], policy, deadline=NOW - 36, now=NOW,
                   spent=Usage(), has_partials=False, partial_ok=False, retries_used=0,
                   visited=["apollo"], retry_pending=False)
    assert isinstance(plan.step, Settle) and plan.step.status is Status.blocked
    assert plan.step.reason is not None and "deadline passed" in plan.step.reason
    assert "check its changes" in plan.step.reason


def test_a_delegation_with_a_live_child_and_a_passed_deadline_still_waits() -> None:
    plan = recover([AttemptFacts("d-a1", open=False, outcome=AttemptOutcome.transient),
                    AttemptFacts("d-a2", open=True, gone=False)], AgentPolicy(read_only=True),
                   deadline=0.0, now=NOW, spent=Usage(), has_partials=False, partial_ok=False,
                   retries_used=0, visited=[], retry_pending=False)
    assert plan == Plan((), Wait(("d-a2",)))


# -- replay ----------------------------------------------------------------------------------
A, B, C, D = (Brief(agent="apollo", scope=s) for s in "ABCD")
STORED = [("p.0", A), ("p.1", B), ("p.2", C)]
ASKS = [seq for n in range(5) for seq in itertools.product((A, B, C, D), repeat=n)]


@pytest.mark.parametrize("asks", ASKS, ids=["".join(b.scope for b in s) or "none" for s in ASKS])
def test_replay_in_every_order_reuses_a_matching_prefix_and_cancels_the_rest(
    asks: tuple[Brief, ...],
) -> None:
    replay = Replay(STORED)
    answers = [replay.ask(b) for b in asks]
    reused = [a.reuse for a in answers if a.reuse is not None]
    cancelled = [d for a in answers for d in a.cancel] + list(replay.finish())
    # the matching prefix: the k-th call gets the k-th stored one while the briefs agree
    prefix = 0
    while prefix < min(len(asks), 3) and asks[prefix] == STORED[prefix][1]:
        prefix += 1
    assert reused == [d for d, _ in STORED[:prefix]]
    assert all(a.reuse is None for a in answers[prefix:])
    # every stored one is reused or cancelled, exactly once
    assert sorted(reused + cancelled) == ["p.0", "p.1", "p.2"]
    assert replay.finish() == () and not replay.matching


def test_the_first_call_that_differs_cancels_what_follows_at_once() -> None:
    replay = Replay(STORED)
    assert replay.ask(A).reuse == "p.0"
    answer = replay.ask(C)  # B was asked before the crash; C now: the matching ends
    assert answer.reuse is None and answer.cancel == ("p.1", "p.2")
    assert replay.ask(B).reuse is None and replay.ask(B).cancel == ()


# -- keys ---------------------------------------------------------------------------------------
def test_brief_differences_name_the_fields_in_field_order() -> None:
    a = Brief(agent="apollo", scope="x", timeout_s=5)
    assert brief_differences(a, a) == ()
    b = Brief(agent="athena", scope="x", partial_ok=True)
    assert brief_differences(a, b) == ("agent", "partial_ok", "timeout_s")


# -- confirmed gone ----------------------------------------------------------------------------
def test_this_process_is_running_and_not_gone() -> None:
    me = os.getpid()
    started = process_start_time(me)
    assert process_running(me, started) is True
    assert process_running(me, (started or 0) + 1) is True  # the boot time moved a second
    assert process_running(me, (started or 0) + 0.5) is False  # a reused pid: not ours
    assert process_running(me, (started or 0) + 2) is False
    assert process_running(me, None) is None  # nothing to check it against
    assert not child_gone(me, started, None)
    assert child_gone(None, None, None)  # a thread child: it lived in its dead supervisor


@pytest.mark.process
def test_a_child_is_gone_only_once_its_process_group_is_empty() -> None:
    # a group leader, and a member of its group that outlives it (both children of ours)
    wait = [sys.executable, "-c", "import sys; sys.stdin.read()"]
    leader = subprocess.Popen(wait, stdin=subprocess.PIPE, process_group=0)
    member = subprocess.Popen(wait, stdin=subprocess.PIPE, process_group=leader.pid)
    started = process_start_time(leader.pid)
    assert not child_gone(leader.pid, started, leader.pid)
    leader.communicate(timeout=30)  # the leader ends and is reaped
    try:
        assert process_running(leader.pid, started) is False
        assert group_empty(leader.pid) is False
        assert not child_gone(leader.pid, started, leader.pid)
    finally:
        member.communicate(timeout=30)
    assert group_empty(leader.pid) is True
    assert child_gone(leader.pid, started, leader.pid)


def test_a_writer_whose_child_never_started_runs_again_and_one_that_started_is_blocked() -> None:
    writer = AgentPolicy()  # neither read_only nor idempotent
    args: dict[str, Any] = dict(deadline=None, now=NOW, spent=Usage(), has_partials=False,
                                partial_ok=False, retries_used=0, visited=["apollo"],
                                retry_pending=False)
    never = [AttemptFacts("d-a1", open=True, started=False)]
    assert recover(never, writer, **args) == Plan(("d-a1",), Rerun(0))  # nothing of it ran
    started = [AttemptFacts("d-a1", open=True)]
    assert recover(started, writer, **args).step == Settle(Status.blocked, None, BLOCKED_REASON)
    # stopped by its host's lease (a takeover, or a restart that found it stopped so)
    assert recover(started, writer, **args, writers_stopped=True) == Plan(("d-a1",), Rerun(1))
    stateful = AgentPolicy(stateful=True)  # its session is gone with its child, started or not
    assert recover(never, stateful, **args).step == Settle(Status.blocked, None, STATEFUL_REASON)


# -- a charge counted once across a restart (docs/design.md, "Reattach") --------------------
@pytest.mark.parametrize("order", list(itertools.permutations([1, 2, 3])))
def test_an_attempt_counts_each_numbered_charge_once_in_any_order_and_every_unnumbered_one(
        order: tuple[int, ...]) -> None:
    from supervisor.core.state import Attempt
    from supervisor.rules.stale import ProgressWatch

    a = Attempt(id="t-1-a1", number=1, agent="t", policy=AgentPolicy(), started_at=0.0,
                deadline=10.0, watch=ProgressWatch.start(0.0))
    a.charged_progress = 2  # what its store committed before its host died
    new = [p for p in order if a.new_charge(p)]
    assert new == [3]  # those at or below 2 were counted before; 3 once, whenever it comes
    assert not a.new_charge(3) and a.charged_progress == 3
    assert a.new_charge(0) and a.new_charge(0)  # not numbered: always new
