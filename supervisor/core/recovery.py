"""Recovery: what a Zeus starting on a store does with what the last one left open
(docs/design.md, "The store"). Runs once, in Zeus's actor thread, before `Zeus.start`
returns; it rebuilds each open delegation and hands it to the supervisor's verbs (it
calls the supervisor, never the other way round).

In order: every open delegation is rebuilt in the open tree (parents first, with its
attempts, spend and partial results); every attempt whose worker waits for this Zeus
is reattached (`supervisor.core.reattach`); every other attempt that had not ended is
confirmed gone (its pid and pid start time, its process group; a survivor is killed first) and
ends `lost`; then each delegation's plan (`rules.recovery.recover`) is carried out:
settled (timed out, over budget, blocked writers), or run again per its policy. An
orchestrator run again replays its stored sub-delegations (`Supervisor.dispatch_nested`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from actors import AttemptOutcome, AttemptRecord, Status
from actors.backends import ProcessBackend
from actors.backends.left_behind import read_held, read_marks
from actors.backends.reattach import ReattachPlace
from actors.osproc import child_gone, process_running
from supervisor.core.future import DelegationFuture
from supervisor.core.reattach import Reattached, count_left, named_by_marks, reattach_children
from supervisor.core.state import Delegation
from supervisor.core.supervisor import Supervisor
from supervisor.errors import SupervisorError
from supervisor.routing import AgentPolicy
from supervisor.rules.recovery import (
    AttemptFacts,
    Replay,
    Rerun,
    Resume,
    Start,
    Wait,
    recover,
    retries_made,
    verbs_hint,
)
from supervisor.rules.settle import Fallback, Retry, Settle
from supervisor.store import OpenDelegation, Recovery, Store, StoredAttempt

__all__ = ["current_agent", "end_lost", "rebuild", "recover_store"]

LOST_ERROR = "its supervisor stopped while it ran; its child is confirmed gone"
# A lost attempt whose child had not started the work (its process never spawned): not
# counted against `supervisor.max_recoveries`, since nothing ran.
LOST_UNSTARTED = ("its supervisor stopped before its child started the work; nothing ran, "
                  "and no child is left")
UNCONFIRMED = (
    "its supervisor stopped while it ran, and its child could not be confirmed stopped "
    "(pid {pid}): nothing runs in its place; check that process"
)
# How long recovery waits for a surviving child it killed to be gone.
CONFIRM_WAIT_S = 5.0


@dataclass(slots=True)
class _Rebuilt:
    stored: OpenDelegation
    d: Delegation
    known: bool  # its agent is still in the routing
    unconfirmed: int | None = None  # the pid of a child that could not be confirmed gone
    unstarted: frozenset[str] = frozenset()  # open attempts whose child never started


def recover_store(sup: Supervisor, keep_handle: Callable[[str, DelegationFuture], object]) -> (
        Recovery):
    """Recover the store's open delegations; `keep_handle(id, future)` gives the host a
    handle on each of the host's own (a root)."""
    assert sup.durable is not None
    store = sup.durable.store
    sup.spending.tree_usage = store.total_spent()
    rebuilt = [rebuild(sup, stored) for stored in store.open_delegations()]
    for r in rebuilt:
        if r.d.parent_id is None:
            keep_handle(r.d.id, r.d.settled)
    _carry_spend(sup, store, rebuilt)
    for agent, session, session_id in store.agent_sessions():  # a CLI's, resumed by id
        sup.agent_sessions.bind(agent, session, session_id)
    place = _place(sup)
    if place is not None and any(a.open and a.pid is None
                                 for r in rebuilt for a in r.stored.attempts):
        marks = read_marks(place.directory)  # once: each worker that still runs
        for r in rebuilt:
            r.stored = named_by_marks(r.stored, marks)
    found = _reattach(sup, store, rebuilt)
    for r in rebuilt:
        count_left(sup, r.d, r.stored, found)
        end_lost(sup, r, found)
    rerun: list[str] = []
    blocked: list[str] = []
    ended: list[str] = []
    for r in rebuilt:
        if r.d.state == "settled" or r.d.current is not None:
            continue  # its parent settled first, and cancelled it; or it was reattached
        done = _carry_out(sup, r)
        if done == "rerun":
            rerun.append(r.d.id)
        elif done is Status.blocked:
            blocked.append(r.d.id)
        else:
            ended.append(r.d.id)  # settled here: a deadline passed, a bound was reached
    recovery = Recovery(rerun=tuple(rerun), blocked=tuple(blocked),
                        reattached=tuple(found.reattached), adopted=tuple(found.adopted),
                        settled=store.counts().settled, ended=tuple(ended))
    sup.durable.commit_now()
    for left in found.left.values():  # adopted and committed: the files have done their job
        with contextlib.suppress(OSError):
            os.unlink(left.path)
    sup.events.emit("zeus.recovered", **recovery.model_dump(mode="json"))
    return recovery


def rebuild(sup: Supervisor, stored: OpenDelegation) -> _Rebuilt:
    """The open delegation as it was, back in the open tree (not yet running)."""
    sd = stored.delegation
    attempts = stored.attempts
    agent = current_agent(stored)
    known = True
    try:
        policy = sup.registry.policy(agent)
    except SupervisorError:
        policy, known = AgentPolicy(), False
    parent = sup.tree.get(sd.parent_id) if sd.parent_id else None
    now = sup.clock.now()
    d = Delegation(
        id=sd.id, brief=sd.brief, parent_id=sd.parent_id,
        depth=parent.depth + 1 if parent else (2 if sd.parent_id else 1),
        settled=DelegationFuture(),
        dispatched_at=now - max(0.0, sup.clock.wall() - sd.created),
        agent=agent, policy=policy, visited=_visited(stored),
    )
    d.attempt_count = len(attempts)
    d.attempts = [a.record for a in attempts if a.record is not None]
    d.retries_used = retries_made([(a.agent, a.outcome) for a in attempts], agent)
    d.partials = list(stored.partials)
    d.usage = stored.spent
    if d.attempts and d.attempts[-1].error:
        d.last_error = d.attempts[-1].error
    sup.tree.add(d)
    return _Rebuilt(stored, d, known)


def current_agent(stored: OpenDelegation) -> str:
    """The agent the delegation was on: a scheduled fallback's, else its last attempt's."""
    last = stored.attempts[-1] if stored.attempts else None
    if stored.retry is not None and (last is None or stored.retry.after_attempt == last.id):
        return stored.retry.agent
    return last.agent if last is not None else stored.delegation.agent


def _visited(stored: OpenDelegation) -> list[str]:
    seen = [stored.delegation.brief.agent]
    for agent in [a.agent for a in stored.attempts] + (
            [stored.retry.agent] if stored.retry else []):
        if agent not in seen:
            seen.append(agent)
    return seen


def _carry_spend(sup: Supervisor, store: Store, rebuilt: list[_Rebuilt]) -> None:
    """Spend counts across the crash: each delegation's own charges, its settled
    sub-delegations' summaries and its open ones' spend count against it and its
    ancestors, as they did before."""
    for r in rebuilt:
        if r.d.policy.kind == "orchestrator":
            for child in store.children(r.d.id):
                summary = store.summary(child.id) if not child.open else None
                if summary is not None:
                    r.d.usage = r.d.usage + summary.usage
    for r in reversed(rebuilt):  # children first: theirs is complete when it is passed up
        parent = sup.tree.get(r.d.parent_id) if r.d.parent_id else None
        if parent is not None:
            parent.usage = parent.usage + r.d.usage


def _place(sup: Supervisor) -> ReattachPlace | None:
    backend = sup.backend_named("process")
    return backend.reattach_place if isinstance(backend, ProcessBackend) else None


def _reattach(sup: Supervisor, store: Store, rebuilt: list[_Rebuilt]) -> Reattached:
    """The open process attempts whose workers wait for this Zeus, supervised on (see
    `supervisor.core.reattach`); the sessions whose workers were not found are lost."""
    backend = sup.backend_named("process")
    place = backend.reattach_place if isinstance(backend, ProcessBackend) else None
    if place is None:
        return Reattached()
    assert isinstance(backend, ProcessBackend)
    candidates = [
        (r.d, a) for r in rebuilt for a in r.stored.attempts
        if a.open and a.pid is not None and r.known and _runs_in_a_worker(r.d.policy)
        and (r.d.parent_id is None or sup.tree.get(r.d.parent_id) is not None)
    ]
    found = reattach_children(sup, candidates, backend, place, read_held(place.directory))
    sup.lost_sessions = {
        (agent, key) for agent, key in store.sessions()
        if _holds_its_session(_policy_or_none(sup, agent))} - found.sessions
    return found


def _runs_in_a_worker(policy: AgentPolicy | None) -> bool:
    return policy is not None and (policy.isolation == "process" or policy.runs_program)


def _holds_its_session(policy: AgentPolicy | None) -> bool:
    """Whether the agent's session lives in its worker (lost with it), not in an agent CLI
    that resumes it by its id."""
    return _runs_in_a_worker(policy) and policy is not None and not policy.speaks_cli


def _policy_or_none(sup: Supervisor, agent: str) -> AgentPolicy | None:
    try:
        return sup.registry.policy(agent)
    except SupervisorError:
        return None


def end_lost(sup: Supervisor, r: _Rebuilt, found: Reattached) -> None:
    """Every attempt that had not ended and was not reattached: confirmed gone (a
    survivor killed first), then ended `lost`; one that cannot be confirmed gone is kept
    open in `r.unconfirmed`."""
    assert sup.durable is not None
    for a in r.stored.attempts:
        if not a.open or a.id in found:
            continue
        if not _confirm_gone(sup, a, r.d.policy):
            r.unconfirmed = a.pid
            continue
        error = LOST_ERROR
        if not _started(a, r.d.policy):
            r.unstarted |= {a.id}
            error = LOST_UNSTARTED
        record = AttemptRecord(
            id=a.id, agent=a.agent, outcome=AttemptOutcome.lost,
            duration_s=round(max(0.0, sup.clock.wall() - a.started), 6),
            error=error, pid=a.pid,
        )
        r.d.attempts.append(record)
        r.d.last_error = record.error
        sup.durable.attempt_ended(record)
        sup.events.emit("attempt.lost", delegation_id=r.d.id, attempt_id=a.id,
                        parent_id=r.d.parent_id, agent=a.agent, pid=a.pid, reason=error)


def _started(a: StoredAttempt, policy: AgentPolicy) -> bool:
    """Whether the open attempt's child had started the work when its host died. A
    thread starts as its attempt is committed; a process, a program or a Ray task had
    not, while the store has no pid for it (recovery looked for its worker first)."""
    return a.pid is not None or (policy.isolation == "thread" and not policy.runs_program)


def _confirm_gone(sup: Supervisor, a: StoredAttempt, policy: AgentPolicy) -> bool:
    """Whether the attempt's child is confirmed gone, killing a survivor first.

    A thread child ran inside the dead Zeus's process, which is gone (its store was
    claimed). A process child is checked by pid, start time and process group."""
    if policy.isolation == "ray":
        return _ray_confirms_gone(sup, a)
    if a.pid is None:
        return True  # a thread, or a process not yet started when its Zeus died
    if child_gone(a.pid, a.pid_start_time, a.pgid):
        return True
    if process_running(a.pid, a.pid_start_time):
        _signal(lambda: os.kill(a.pid or 0, signal.SIGKILL))
    if a.pgid is not None and a.pgid == a.pid and a.pgid != os.getpgrp():
        _signal(lambda: os.killpg(a.pgid or 0, signal.SIGKILL))
    return _gone_within(a, CONFIRM_WAIT_S)


def _ray_confirms_gone(sup: Supervisor, a: StoredAttempt) -> bool:
    """A Ray attempt's worker is Ray's (it may run other tasks, on another node): never
    signalled here. Ray ends the tasks and workers of a driver that died, and its worker
    table says when it has (`actors.backends.ray_place.worker_alive`). Without a Ray backend to ask
    (no agent of this Zeus runs on Ray), its pid is checked on this host: a local Ray
    started by the dead Zeus ends with it."""
    if sup.backend_named("ray") is not None:  # connected to Ray: it can be asked
        from actors.backends.ray_place import dead_drivers_workers_alive, worker_alive

        pid, node = a.pid, a.node
        give_up = time.monotonic() + CONFIRM_WAIT_S
        # Its worker by pid and node; without a pid recorded, every worker of a driver
        # that died (the dead Zeus's among them).
        while (alive := worker_alive(pid, node) if pid is not None
               else dead_drivers_workers_alive()) and time.monotonic() < give_up:
            time.sleep(0.05)  # Zeus's thread, before Zeus.start returns
        if alive is not None:
            return not alive
    if a.pid is None:
        return True  # never placed, or placed on a Ray that ended with its Zeus
    return child_gone(a.pid, a.pid_start_time, a.pgid) or _gone_within(a, CONFIRM_WAIT_S)


def _gone_within(a: StoredAttempt, seconds: float) -> bool:
    """Whether the child is confirmed gone within `seconds` of real time (it is dying)."""
    give_up = time.monotonic() + seconds
    while time.monotonic() < give_up:
        if child_gone(a.pid, a.pid_start_time, a.pgid):
            return True
        time.sleep(0.01)  # Zeus's thread, before Zeus.start returns: nothing else runs
    return False


def _signal(send: Callable[[], None]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        send()  # gone meanwhile, or not ours: confirmation decides


def _carry_out(sup: Supervisor, r: _Rebuilt) -> Status | Literal["rerun"]:
    """The delegation's plan carried out: "rerun" when it runs again, else the status it
    settled with."""
    d, stored = r.d, r.stored
    if not r.known:
        return _settle(sup, d, Settle(Status.failed, reason=(
            f"agent {d.agent!r} is no longer in the routing; the store's delegation cannot "
            "run again: add the agent back, or dispatch it to another")))
    if d.parent_id is not None and sup.tree.get(d.parent_id) is None:
        return _settle(sup, d, Settle(Status.cancelled,
                                      reason=f"its parent {d.parent_id} had settled"))
    if r.unconfirmed is not None:
        return _settle(sup, d, Settle(Status.blocked,
                                      reason=UNCONFIRMED.format(pid=r.unconfirmed)))
    open_attempt = next((a for a in reversed(stored.attempts) if a.open), None)
    deadline = open_attempt.deadline if open_attempt is not None else stored.delegation.deadline
    partial_ok = d.brief.partial_ok if d.brief.partial_ok is not None else d.policy.partial_ok
    plan = recover(
        [AttemptFacts(a.id, a.open, True, None if a.open else _outcome(a.outcome),
                      started=a.id not in r.unstarted and a.error != LOST_UNSTARTED)
         for a in stored.attempts],
        d.policy, deadline=deadline, now=sup.clock.wall(), spent=d.usage,
        has_partials=bool(d.partials), partial_ok=partial_ok, retries_used=d.retries_used,
        visited=d.visited, retry_pending=stored.retry is not None,
        max_recoveries=sup.registry.routing.supervisor.max_recoveries,
    )
    step = plan.step
    if isinstance(step, Settle):
        return _settle(sup, d, step)
    if isinstance(step, Wait):  # (children were confirmed gone above: not reached)
        return _settle(sup, d, Settle(Status.blocked, reason=UNCONFIRMED.format(pid="?")))
    if isinstance(step, Rerun):
        pass  # a host's crash is not the agent's failure: no retry used up
    elif isinstance(step, Retry):
        d.retries_used += 1
    elif isinstance(step, Fallback):
        d.agent = step.agent
        d.policy = sup.registry.policy(step.agent)
        d.visited.append(step.agent)
        d.retries_used = 0
    else:
        assert isinstance(step, Resume | Start)
    if d.policy.kind == "orchestrator" and stored.attempts:
        last_start = stored.attempts[-1].started
        sup.replays[d.id] = Replay([(c.id, c.brief) for c in sup.durable.store.children(d.id)
                                    if c.created >= last_start] if sup.durable else [])
    parent = sup.tree.get(d.parent_id) if d.parent_id else None
    if parent is not None and parent.current is not None:
        d.deadline_cap = parent.current.deadline
    sup.run_or_queue(d)
    return "rerun"


def _settle(sup: Supervisor, d: Delegation, step: Settle) -> Status:
    if step.status is Status.blocked and sup.durable is not None:
        # what a person does next: the verbs (docs/design.md, "The store")
        step = Settle(step.status, step.timeout_kind,
                      f"{step.reason}; {verbs_hint(sup.durable.store.path, d.id)}")
    sup.settle(d, step)
    return Status.cancelled if d.cancel_requested else step.status


def _outcome(value: str | None) -> AttemptOutcome:
    try:
        return AttemptOutcome(value or "crash")
    except ValueError:
        return AttemptOutcome.crash

