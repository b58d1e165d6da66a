"""Recovery: what a Zeus does with the open delegations a dead one left (docs/design.md,
"The store"). A part the supervisor owns (`Supervisor.recovery`), run in Zeus's actor
thread: at start on its store, before `Zeus.start` returns (`recover_store`), and again
whenever Zeus is handed open delegations to take back (`recover`). It rebuilds each one
and hands it back to the supervisor's normal path (`Supervisor.reattach`, `rerun`,
`settle`); it calls the supervisor and the backends, never the other way round.

In order: every open delegation is rebuilt in the open tree (parents first, with its
attempts, spend and partial results); each backend looks for its children that waited
for this Zeus, and each one found is reattached (`supervisor.core.reattach`); every other
attempt that had not ended is confirmed gone by its backend (`Backend.confirm_gone`: its
pid and pid start time, its process group, Ray's word; a survivor is stopped first) and
ends `lost`; then each delegation's plan (`rules.recovery.recover`) is carried out:
settled (timed out, over budget, blocked writers), or run again per its policy. An
orchestrator run again replays its stored sub-delegations (`Supervisor.dispatch_nested`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from actors import AttemptOutcome, AttemptRecord, Status
from actors.backends.base import Backend
from supervisor.core.handle import DelegationFuture
from supervisor.core.reattach import Reattached, count_left, named, reattach_found, stored_child
from supervisor.core.state import Answer, Attempt, Delegation, backend_name
from supervisor.errors import SupervisorError
from supervisor.routing import AgentPolicy
from supervisor.rules.recovery import (
    AttemptFacts,
    Replay,
    Rerun,
    Resume,
    Start,
    Step,
    Wait,
    recover,
    retries_made,
    verbs_hint,
)
from supervisor.rules.settle import Fallback, Retry, Settle
from supervisor.store import OpenDelegation, Recovery, Store

if TYPE_CHECKING:
    from supervisor.core.supervisor import Supervisor

__all__ = ["LOST_ERROR", "LOST_UNSTARTED", "UNCONFIRMED", "Rebuilt", "Recoverer",
           "current_agent"]

LOST_ERROR = "its supervisor stopped while it ran; its child is confirmed gone"
# A lost attempt whose child had not started the work (its process never spawned): not
# counted against `supervisor.max_recoveries`, since nothing ran.
LOST_UNSTARTED = ("its supervisor stopped before its child started the work; nothing ran, "
                  "and no child is left")
UNCONFIRMED = (
    "its supervisor stopped while it ran, and its child could not be confirmed stopped "
    "(pid {pid}): nothing runs in its place; check that process"
)

KeepHandle = Callable[[str, DelegationFuture], object]


@dataclass(slots=True)
class Rebuilt:
    """An open delegation of the store, rebuilt in the open tree (not yet running)."""

    stored: OpenDelegation
    d: Delegation
    known: bool  # its agent is still in the routing
    unconfirmed: int | None = None  # the pid of a child that could not be confirmed gone
    unstarted: frozenset[str] = frozenset()  # open attempts whose child never started


class Recoverer:
    """The supervisor's part that takes back open delegations of its store. It reads the
    supervisor's parts (the open tree, the routing, the clock, the journal, the store's
    writes) and changes the supervisor's state only through its verbs."""

    def __init__(self, sup: Supervisor) -> None:
        self._sup = sup
        self._tree = sup.tree
        self._registry = sup.registry
        self._clock = sup.clock
        self._events = sup.events
        self._durable = sup.durable

    def recover_store(self, keep_handle: KeepHandle) -> Recovery:
        """A start on the store: the spend it holds counts against the tree, the agent
        CLIs' sessions are known again, and every open delegation is recovered
        (`recover`); `zeus.recovered` says what was found and done."""
        store = self._durable.required("recover")
        self._sup.count_spent_before(store.total_spent())
        self._sup.resume_agent_sessions(store.agent_sessions())  # a CLI's, resumed by id
        recovery = self.recover(store.open_delegations(), keep_handle)
        self._events.emit("zeus.recovered", **recovery.model_dump(mode="json"))
        return recovery

    def recover(self, open_delegations: Sequence[OpenDelegation], keep_handle: KeepHandle,
                *, writers_stopped: bool = False) -> Recovery:
        """Recover `open_delegations` (parents first; Zeus's thread, at start or while it
        runs); `keep_handle(id, future)` gives the host a handle on each root.
        `writers_stopped`: a writer whose child its backend confirms gone may run again
        (its child was stopped by its own host's lease), instead of settling `blocked`."""
        store = self._durable.required("recover")
        rebuilt = [self.rebuild(stored) for stored in open_delegations]
        for r in rebuilt:
            if r.d.parent_id is None:
                keep_handle(r.d.id, r.d.settled)
        self._carry_spend(store, rebuilt)
        found = self._reattach(store, rebuilt)
        for r in rebuilt:
            count_left(self._sup, r.d, r.stored, found)
            self.end_lost(r, found)
        rerun: list[str] = []
        blocked: list[str] = []
        ended: list[str] = []
        for r in rebuilt:
            if r.d.state == "settled" or r.d.current is not None:
                continue  # its parent settled first, and cancelled it; or it was reattached
            done = self._carry_out(store, r, writers_stopped=writers_stopped)
            if done == "rerun":
                rerun.append(r.d.id)
            elif done is Status.blocked:
                blocked.append(r.d.id)
            else:
                ended.append(r.d.id)  # settled here: a deadline passed, a bound was reached
        recovery = Recovery(rerun=tuple(rerun), blocked=tuple(blocked),
                            reattached=tuple(found.reattached), adopted=tuple(found.adopted),
                            settled=store.counts().settled, ended=tuple(ended))
        self._durable.commit_now()
        for attempt_id, left in found.left.items():
            if attempt_id in found.adopted:  # done with once its adopted end is committed
                self._durable.release_once_ended(attempt_id, left.release)
            else:  # counted, and the attempt ended lost: committed just now
                left.release()
        self._sup.look_elsewhere_soon()
        return recovery

    def rebuild(self, stored: OpenDelegation) -> Rebuilt:
        """The open delegation as it was, back in the open tree (not yet running)."""
        sd = stored.delegation
        attempts = stored.attempts
        agent = current_agent(stored)
        known = True
        try:
            policy = self._registry.policy(agent)
        except SupervisorError:
            policy, known = AgentPolicy(), False
        parent = self._tree.get(sd.parent_id) if sd.parent_id else None
        now = self._clock.now()
        records = [a.record for a in attempts if a.record is not None]
        d = Delegation(
            id=sd.id, brief=sd.brief, parent_id=sd.parent_id,
            depth=parent.depth + 1 if parent else (2 if sd.parent_id else 1),
            settled=DelegationFuture(),
            dispatched_at=now - max(0.0, self._clock.wall() - sd.created),
            agent=agent, policy=policy, visited=_visited(stored),
            attempt_count=len(attempts), attempts=list(records),
            retries_used=retries_made([(a.agent, a.outcome) for a in attempts], agent),
            partials=list(stored.partials), usage=stored.spent,
            # a person answered it: its next attempt is told, again
            answer=None if sd.answer is None else Answer(
                sd.answer.get("blocker"), sd.answer.get("note"), after=len(attempts)),
            last_error=(records[-1].error or None) if records else None,
        )
        self._sup.take_back(d)
        return Rebuilt(stored, d, known)

    def _carry_spend(self, store: Store, rebuilt: list[Rebuilt]) -> None:
        """Spend counts across the crash: each delegation's own charges, its settled
        sub-delegations' summaries and its open ones' spend count against it and its
        ancestors, as they did before."""
        for r in rebuilt:
            if r.d.policy.kind == "orchestrator":
                for child in store.children(r.d.id):
                    summary = store.summary(child.id) if not child.open else None
                    if summary is not None:
                        r.d.add_usage(summary.usage)
        for r in reversed(rebuilt):  # children first: theirs is complete when it is passed up
            parent = self._tree.get(r.d.parent_id) if r.d.parent_id else None
            if parent is not None:
                parent.add_usage(r.d.usage)

    def _reattach(self, store: Store, rebuilt: list[Rebuilt]) -> Reattached:
        """Each backend's children that waited for this Zeus, supervised on (see
        `supervisor.core.reattach`); the sessions of agents whose backend looked for its
        children and did not find them are lost."""
        found = Reattached()
        looked: list[Backend] = []
        for name, backend in self._sup.backends():
            ours = [r for r in rebuilt if backend_name(r.d.policy) == name]
            children = [stored_child(a) for r in ours for a in r.stored.attempts if a.open]
            waiting = backend.find_waiting(children)
            if waiting.named:
                for r in ours:
                    r.stored = named(r.stored, waiting.named)
            if waiting.searched:
                looked.append(backend)
            candidates = [
                (r.d, a) for r in ours for a in r.stored.attempts
                if a.open and a.pid is not None and r.known
                and (r.d.parent_id is None or self._tree.get(r.d.parent_id) is not None)
            ]
            reattach_found(self._sup, store, backend, waiting, candidates, found)
        if looked:
            self._sup.lose_sessions({
                (agent, key) for agent, key in store.sessions()
                if self._holds_its_session(agent, looked)} - found.sessions)
        return found

    def _holds_its_session(self, agent: str, looked: list[Backend]) -> bool:
        """Whether the agent's session lives in its child on a backend that looked for
        its children (lost with it), not in an agent CLI that resumes it by its id."""
        try:
            policy = self._registry.policy(agent)
        except SupervisorError:
            return False
        return self._sup.backend_of(agent) in looked and not policy.speaks_cli

    def end_lost(self, r: Rebuilt, found: Reattached) -> None:
        """Every attempt that had not ended and was not reattached: confirmed gone by its
        backend (a survivor stopped first), then ended `lost`; one that cannot be
        confirmed gone is kept open in `r.unconfirmed`."""
        backend = self._sup.backend_for(r.d.policy)
        for a in r.stored.attempts:
            if not a.open or a.id in found:
                continue
            if backend.confirm_gone(stored_child(a)) is not True:
                r.unconfirmed = a.pid
                continue
            error = LOST_ERROR
            if not (a.pid is not None or backend.runs_in_host):
                # its child had not started the work when its host died: a thread starts
                # as its attempt is committed; another, not while the store has no pid
                # for it (its backend looked for it first)
                r.unstarted |= {a.id}
                error = LOST_UNSTARTED
            record = AttemptRecord(
                id=a.id, agent=a.agent, outcome=AttemptOutcome.lost,
                duration_s=round(max(0.0, self._clock.wall() - a.started), 6),
                error=error, pid=a.pid,
            )
            r.d.attempts.append(record)
            r.d.failed_with(error, r.d.last_traceback)
            self._durable.attempt_ended(record)
            if a.id not in found.left and self._durable.lease_s is not None:
                # its host may have lost it alive, its child charging on: written late
                r.d.may_charge_late(a.id, a.usage)
            self._events.emit("attempt.lost", delegation_id=r.d.id, attempt_id=a.id,
                              parent_id=r.d.parent_id, agent=a.agent, pid=a.pid, reason=error,
                              duration_s=record.duration_s)

    def _carry_out(self, store: Store, r: Rebuilt, *,
                   writers_stopped: bool) -> Status | Literal["rerun"]:
        """The delegation's plan carried out: "rerun" when it runs again, else the status
        it settled with."""
        d, stored = r.d, r.stored
        if not r.known:
            return self._settle(store, d, Settle(Status.failed, reason=(
                f"agent {d.agent!r} is no longer in the routing; the store's delegation "
                "cannot run again: add the agent back, or dispatch it to another")))
        if d.parent_id is not None and self._tree.get(d.parent_id) is None:
            return self._settle(store, d, Settle(Status.cancelled,
                                                 reason=f"its parent {d.parent_id} had settled"))
        if r.unconfirmed is not None:
            return self._settle(store, d, Settle(Status.blocked,
                                                 reason=UNCONFIRMED.format(pid=r.unconfirmed)))
        open_attempt = next((a for a in reversed(stored.attempts) if a.open), None)
        deadline = (open_attempt.deadline if open_attempt is not None
                    else stored.delegation.deadline)
        partial_ok = d.brief.partial_ok if d.brief.partial_ok is not None else d.policy.partial_ok
        plan = recover(
            [AttemptFacts(a.id, a.open, True, None if a.open else _outcome(a.outcome),
                          started=a.id not in r.unstarted and a.error != LOST_UNSTARTED,
                          in_tool=a.in_tool)
             for a in stored.attempts],
            d.policy, deadline=deadline, now=self._clock.wall(), spent=d.usage,
            has_partials=bool(d.partials), partial_ok=partial_ok, retries_used=d.retries_used,
            visited=d.visited, retry_pending=stored.retry is not None,
            max_recoveries=self._registry.routing.supervisor.max_recoveries,
            writers_stopped=writers_stopped,
        )
        step = plan.step
        if isinstance(step, Wait):  # (children were confirmed gone above: not reached)
            return self._settle(store, d, Settle(Status.blocked,
                                                 reason=UNCONFIRMED.format(pid="?")))
        replay = None
        if d.policy.kind == "orchestrator" and stored.attempts:
            last_start = stored.attempts[-1].started
            replay = Replay([(c.id, c.brief) for c in store.children(d.id)
                             if c.created >= last_start])
        return self._take(store, d, step, replay)

    def after_lease_ended(self, d: Delegation, a: Attempt) -> None:
        """An attempt a restarted host reattached whose worker had stopped it when the last
        host's lease ended (its record just ended `lost`; Zeus's thread): judged as a
        takeover judges an attempt whose child its lease stopped (docs/design.md, "Only a
        cancel settles cancelled"): a reader and a writer run again, a stateful performer
        settles blocked, a deadline or a budget that ran out settles for that."""
        store = self._durable.required("recover")
        partial_ok = d.brief.partial_ok if d.brief.partial_ok is not None else d.policy.partial_ok
        facts = [AttemptFacts(r.id, False, True, r.outcome, started=r.error != LOST_UNSTARTED)
                 for r in d.attempts if r.id != a.id]
        plan = recover(
            [*facts, AttemptFacts(a.id, True, True)],
            d.policy, deadline=a.deadline, now=self._clock.now(), spent=d.usage,
            has_partials=bool(d.partials), partial_ok=partial_ok, retries_used=d.retries_used,
            visited=d.visited, retry_pending=False,
            max_recoveries=self._registry.routing.supervisor.max_recoveries,
            writers_stopped=True,
        )
        assert not isinstance(plan.step, Wait)  # its one open attempt has ended
        self._take(store, d, plan.step, None)

    def _take(self, store: Store, d: Delegation, step: Step,
              replay: Replay | None) -> Status | Literal["rerun"]:
        """A recovered delegation's step carried out: "rerun" when it runs again, else the
        status it settled with."""
        if isinstance(step, Settle):
            return self._settle(store, d, step)
        if isinstance(step, Rerun):
            pass  # a host's crash is not the agent's failure: no retry used up
        elif isinstance(step, Retry):
            d.retried()
        elif isinstance(step, Fallback):
            d.fall_back(step.agent, self._registry.policy(step.agent))
        else:
            assert isinstance(step, Resume | Start)
        self._sup.rerun(d, replay)
        return "rerun"

    def _settle(self, store: Store, d: Delegation, step: Settle) -> Status:
        if step.status is Status.blocked:
            # what a person does next: the verbs (docs/design.md, "The store")
            hint = verbs_hint(store.path, d.id, self._registry.routing.source)
            step = Settle(step.status, step.timeout_kind, f"{step.reason}; {hint}")
        self._sup.settle(d, step)
        return Status.cancelled if d.cancel_requested else step.status


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


def _outcome(value: str | None) -> AttemptOutcome:
    try:
        return AttemptOutcome(value or "crash")
    except ValueError:
        return AttemptOutcome.crash


