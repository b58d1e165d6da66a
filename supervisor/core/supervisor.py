"""The supervisor: the verbs of Zeus's actor that call each other. Dispatch, start an
attempt, ask it to stop, end it, decide what follows (retry, fallback, review, group
restart), settle, cancel and fill free slots.

It holds helpers that own their state and never call back: the open tree
(`OpenTree`), the timers (`Timers`), the restart governor (`RestartGovernor`, which
returns a verdict), the spending (`Spending`), the sessions and the owner's pending
mail. The decisions themselves are the pure functions of `supervisor.rules`.
Every method runs in the actor's thread, one message at a time; nothing blocks on a
child.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, assert_never

from actors import AttemptOutcome, Brief, Status, Summary, Usage
from actors.backends import Backend, ChildHandle, ChildSpec
from actors.clock import Clock, SystemClock, Timer
from actors.protocol import Finished
from actors.speaks import SessionTotals
from actors.speaks.invocation import refused_budget
from supervisor.core.durable import MemoryDurable
from supervisor.core.handle import DelegationFuture
from supervisor.core.messages import (
    AttemptDue,
    AttemptsDue,
    BackoffOver,
    Cancel,
    Dispatch,
    ForceSettle,
    GraceOver,
    LookElsewhere,
    OwnerMessage,
    ReviewDone,
    StopAll,
)
from supervisor.core.recovery import Recoverer
from supervisor.core.registry import Registry
from supervisor.core.settlement import AttemptEnd, Settlement, fallback_summary
from supervisor.core.state import (
    MAX_PARTIALS,
    AgentSessions,
    Attempt,
    BlockedKept,
    Delegation,
    OpenTree,
    PendingMail,
    RestartGovernor,
    RestartVerdict,
    Sessions,
    Spending,
    Timers,
    attempt_record,
    backend_name,
    child_spec,
    decide_summary,
    how_killed,
    isolation_of,
    work_of,
)
from supervisor.errors import StoreError, SupervisorError
from supervisor.journal.events import EventLog
from supervisor.routing import OWNER, AgentPolicy
from supervisor.rules.after_attempt import after_attempt
from supervisor.rules.backoff import backoff_delay
from supervisor.rules.circuit import when_circuit_open
from supervisor.rules.delegation import FramingHeads
from supervisor.rules.groups import review_brief, review_verdict, siblings_to_restart
from supervisor.rules.recovery import NOT_ASKED_AGAIN, Replay, ResumedCalls
from supervisor.rules.settle import (
    COMPLETED,
    Fallback,
    NextStep,
    Retry,
    Settle,
    completed_step,
    decide_next,
    read_claim,
    resolve_outcome,
)
from supervisor.rules.stale import ProgressWatch
from supervisor.store import StoredAttempt

__all__ = [
    "SESSION_LOST",
    "Supervisor",
]

SESSION_LOST = (
    "its session {session!r} lived in a worker of {agent!r} that did not survive the last "
    "restart of its supervisor; a session is never replaced by a fresh one: dispatch it "
    "with a new session to start over"
)

# The event that says why Zeus stops an attempt, for the causes that have one.
_STOP_EVENTS = {
    AttemptOutcome.timeout: "attempt.timed_out",
    AttemptOutcome.stale: "attempt.stale",
    AttemptOutcome.budget_exceeded: "attempt.budget_exceeded",
}


class Supervisor:
    """Zeus's decisions carried out. `tell` puts a message in Zeus's own mailbox (any
    thread; children report through it too); `queued` says how many wait there."""

    def __init__(
        self,
        *,
        registry: Registry,
        clock: Clock,
        events: EventLog,
        backends: dict[str, Backend],
        rng: random.Random,
        tell: Callable[[object], None],
        queued: Callable[[], int | None],
        durable: MemoryDurable,
    ) -> None:
        self.registry = registry
        self.clock = clock
        self.events = events
        self.tell = tell
        self._backends = backends
        self._rng = rng
        self.tree = OpenTree()
        self.timers = Timers(clock, tell, events, queued)
        self.restarts = RestartGovernor()
        self.spending = Spending(registry.routing.supervisor.budget)
        self._sessions = Sessions()
        self.agent_sessions = AgentSessions()
        self._mail = PendingMail()
        self._framing_heads = FramingHeads()
        self.accepting = True
        # The store's writes (a `Durable`), or none to make (a `MemoryDurable`).
        self.durable = durable
        self._stored_policy_of = self._stored_policy  # bound once: every dispatch's
        # Stored sub-delegations an orchestrator rerun after a restart may ask for again,
        # by its delegation id (docs/design.md, "The store": nested delegations replay).
        self._replays: dict[str, Replay] = {}
        # (agent, session) whose workers were not found again after a restart.
        self._lost_sessions: set[tuple[str, str]] = set()
        # A reattached orchestrator's stored sub-delegations, by its delegation id.
        self._resumed_calls: dict[str, ResumedCalls] = {}
        self._policies: dict[int, tuple[AgentPolicy, dict[str, Any]]] = {}
        self._look: Timer | None = None  # the next `look_elsewhere`, while one is due
        # What takes back a store's open delegations (at start, or handed to it later).
        self.recovery = Recoverer(self)
        # Without a store: the blocked root delegations kept for `zeus.resume`.
        self.blocked = BlockedKept(registry.routing.supervisor.keep_settled)

    def emit(self, event: str, d: Delegation, a: Attempt | None = None, **fields: Any) -> None:
        """A journal event about `d` (and its attempt `a`), with the fields every one has."""
        if self.events.enabled:
            self.events.emit(
                event,
                delegation_id=d.id,
                attempt_id=a.id if a else None,
                parent_id=d.parent_id,
                agent=a.agent if a else d.agent,
                **fields,
            )

    # -- dispatch and the start of an attempt -------------------------------------------

    def on_dispatch(self, msg: Dispatch) -> None:
        now = self.clock.now()
        policy = self.registry.policy(msg.brief.agent)
        parent = self.tree.get(msg.parent_id) if msg.parent_id else None
        d = Delegation(
            id=msg.delegation_id,
            brief=msg.brief,
            parent_id=msg.parent_id,
            depth=parent.depth + 1 if parent else 1,
            settled=msg.settled,
            dispatched_at=now,
            agent=msg.brief.agent,
            policy=policy,
            visited=[msg.brief.agent],
            group=msg.group,
        )
        d.nested_in(parent)
        self.tree.add(d)
        if d.group is not None:
            d.group.members.append(d.id)
        if self.events.enabled:
            self.emit("delegation.dispatched", d, scope=d.brief.scope, depth=d.depth,
                      timeout_s=_timeout_s(d), policy=_effective(policy, d.brief))
        self.durable.recorded(d, key=msg.key, policy=self._stored_policy_of,
                              ordinal=len(parent.children) - 1 if parent else None)
        if not self.accepting:
            self.settle(d, Settle(Status.cancelled, reason="zeus is stopping"))
        elif parent is not None and parent.cancel_requested:
            d.cancel(None)
            self.settle(d, Settle(Status.cancelled, reason="its parent was cancelled"))
        else:
            self.run_or_queue(d)

    def _stored_policy(self, d: Delegation) -> dict[str, Any]:
        """The effective policy as the store keeps it: one dict per agent policy when the
        brief overrides nothing (the store writes each distinct one once)."""
        policy, brief = d.policy, d.brief
        if brief.timeout_s is not None or brief.partial_ok is not None:
            return _effective(policy, brief)
        cached = self._policies.get(id(policy))
        if cached is None or cached[0] is not policy:
            cached = (policy, _effective(policy, brief))
            self._policies[id(policy)] = cached  # holding the policy keeps its id unique
        return cached[1]

    def dispatch_nested(self, parent: Delegation, brief: Brief, future: DelegationFuture,
                        ordinal: int | None = None) -> None:
        """A delegation of `parent`'s attempt (a child's `ctx.delegate`, its `ordinal`-th
        call, or a task's review).

        An orchestrator rerun after a restart gets its stored sub-delegation for the same
        call instead, when the brief is the same: a settled one's summary at once, an
        open one awaited (no sub-delegation runs twice because its parent did). So does
        one reattached, for the calls its worker asks again (`ResumedCalls`)."""
        resumed = self._resumed_calls.get(parent.id)
        if resumed is not None and ordinal:
            reuse = resumed.ask(ordinal, brief)
            if reuse is not None and self._reuse(parent, reuse, future):
                return
        replay = self._replays.get(parent.id)
        if replay is not None and self._replayed(parent, replay, brief, future):
            return
        child_id = self.registry.next_id(brief.agent)
        self.on_dispatch(Dispatch(child_id, brief, future, parent_id=parent.id))

    def _replayed(self, parent: Delegation, replay: Replay, brief: Brief,
                  future: DelegationFuture) -> bool:
        """Whether `brief` was answered from the store (see `dispatch_nested`)."""
        answer = replay.ask(brief)
        self._not_asked_again(answer.cancel)
        if answer.reuse is not None and self._reuse(parent, answer.reuse, future):
            return True
        del self._replays[parent.id]
        return False

    def _reuse(self, parent: Delegation, child_id: str, future: DelegationFuture) -> bool:
        """Answer a call of `parent` with its stored sub-delegation `child_id`: awaited if
        open, its stored summary if settled; False if the store no longer has it."""
        child = self.tree.get(child_id)
        if child is not None:  # open: recovered on its own, awaited as it settles
            child.settled.add_callback(future.set)
            self.emit("delegation.replayed", child, None, open=True, parent=parent.id)
            return True
        summary = self.durable.summary(child_id)
        if summary is None:  # pruned or never settled: run it again after all
            return False
        self.events.emit("delegation.replayed", delegation_id=child_id,
                         attempt_id=None, parent_id=parent.id, agent=summary.agent,
                         status=summary.status.value, open=False)
        future.set(summary)
        return True

    def _not_asked_again(self, delegation_ids: tuple[str, ...]) -> None:
        for delegation_id in delegation_ids:
            stale = self.tree.get(delegation_id)
            if stale is not None:
                self.cancel(stale, NOT_ASKED_AGAIN)

    def run_or_queue(self, d: Delegation) -> None:
        """`d` runs now, or waits in the queue for a slot: max_concurrent queues the host's
        delegations; a nested one never waits behind them (its parent holds a slot
        already, and would deadlock waiting for it). Also for one recovered from the
        store."""
        if (d.depth > 1
                or self.tree.running_roots < self.registry.routing.supervisor.max_concurrent):
            self._begin(d)
        else:
            self.tree.queue.append(d.id)

    def _begin(self, d: Delegation) -> None:
        self.tree.begin(d)
        if self._lost_sessions and self.session_lost(d):
            self.settle(d, Settle(Status.blocked, reason=SESSION_LOST.format(
                session=d.brief.session, agent=d.agent)))
            return
        self.start_attempt(d)

    def start_attempt(self, d: Delegation) -> None:
        now = self.clock.now()
        number = d.next_number()
        run_s = _timeout_s(d)
        deadline = now + run_s
        if d.deadline_cap is not None:
            deadline = min(deadline, d.deadline_cap)
        a = Attempt(
            id=f"{d.id}-a{number}",
            number=number,
            agent=d.agent,
            policy=d.policy,
            started_at=now,
            deadline=deadline,
            watch=ProgressWatch.start(now),
            run_s=run_s,
        )
        d.runs(a)
        self.tree.live[a.id] = (d, a)
        if not self.durable.attempt_started(d, a):
            self.end_attempt(d, a, Finished(a.id, AttemptOutcome.error, error=(
                "the attempt could not be recorded, so it did not start: "
                + self.durable.required("record").why_unwritable()),
                error_type="StoreError"))
            return
        try:
            work = work_of(a, self.registry)
            continued = d.takes_continued()
            resume = continued or self.agent_sessions.resume(
                d.agent, d.brief.session, stateful_follow_up=_own_session(d))
            spec = child_spec(d, a, registry=self.registry, clock=self.clock, now=now,
                              work=work,
                              session=self._sessions.get(d.agent, d.brief.session,
                                                         d.policy.session_max),
                              budget_left=self.spending.left(
                                  d, self.tree.ancestors(d) if d.parent_id else ()),
                              heads=self._framing_heads,
                              resume=resume, continued=continued is not None,
                              prior=self._session_totals(resume),
                              epoch=self.durable.epoch(d.id))
            refused = refused_budget(spec.invocation) if spec.invocation else None
            if refused is not None:  # too little left to start it with: the cap is reached
                self.announce(d, a)
                self.end_attempt(d, a, Finished(a.id, AttemptOutcome.budget_exceeded,
                                                error=refused, error_type="BudgetExceeded"))
                return
            self.timers.arm(a)  # before the child starts: a deadline no timer can keep fails it
            child = self._backend(isolation_of(a)).start(spec, self.tell)
            a.started_child(child)
            if a.pid is not None:
                self.durable.identity(a, a.pid, child.pid_start_time, child.node)
            if child.alive:  # alive as it starts: its first sign of life
                a.observe(0, now)
            starts_later = child.starts_later or child.placing
            if starts_later:
                self._wait_for_start(d, a, now)
        except Exception as exc:  # noqa: BLE001 - a child that cannot start is a failed attempt
            self.announce(d, a)
            self.end_attempt(d, a, Finished(a.id, AttemptOutcome.error,
                                            error=f"{type(exc).__name__}: {exc}",
                                            error_type=type(exc).__name__))
            return
        if d.parent_id is not None:  # an attempt starting is progress of its subtree
            self.tree.nudge_ancestors(d, now)
        if a.policy.speaks_cli:  # a fallback that reads no mail: what waited for it is lost
            if dropped := self._mail.drop(d.id):
                self.emit("delegation.mail_refused", d, a, reason=(
                    f"{dropped} message(s) sent before this attempt were dropped: its agent "
                    f"{d.agent!r} (speaks: {a.policy.speaks}) reads no mail"))
        else:
            self._mail.flush(d.id, child)
        if not starts_later:  # else once its child runs the work (`running`)
            self.announce(d, a)

    def _wait_for_start(self, d: Delegation, a: Attempt, now: float) -> None:
        """`a`'s child runs the work later than it was started (a worker's job, a command's
        program, a Ray task): until then its deadline is the bound on that wait,
        `spawn_timeout_s` (and its delegation's whole deadline); its own runs from its
        start (docs/design.md, "An attempt's clock")."""
        a.waits_to_start(now, d.deadline_cap)
        if a.deadline < a.due_at:
            self.timers.arm(a)  # (a later one: the timer armed comes first, and re-arms)

    def running(self, d: Delegation, a: Attempt, at: float | None = None) -> None:
        """`a`'s child began to run the work (`Started`, `Placed`, or any report first): its
        deadline, `run_s` from then (no later than its delegation's), and its stale clock
        start there, and `attempt.started` says so. `at`: when, on the host's monotonic
        clock (a worker's, before the mailbox), read only when Zeus runs on that clock."""
        if a.start_by is None:
            return  # running already: a reattached child's held `Started`, a late `Placed`
        now = self.clock.now()
        start = now
        if at is not None and isinstance(self.clock, SystemClock):
            start = min(now, max(a.started_at, at))
        a.runs_from(start, d.deadline_cap)
        if a.child is not None:
            self.durable.identity(a, a.pid, a.child.pid_start_time, a.child.node, running=True)
        if min(a.deadline, a.watch.stale_at(a.stale_after_s)) < a.due_at:
            try:
                self.timers.arm(a)
            except Exception as exc:  # noqa: BLE001 - no timer: stop it rather than lose it
                self.timers.refused(exc, "AttemptDue")
                self.request_stop(d, a, AttemptOutcome.timeout)
        if not a.announced:
            self.announce(d, a)

    def announce(self, d: Delegation, a: Attempt) -> None:
        """`attempt.started`, once per attempt: where it runs, when that is known."""
        a.announced_now()
        if not self.events.enabled:
            return
        child = a.child  # None for an attempt whose child could not start
        now = self.clock.now()
        deadline = a.deadline
        if a.start_by is not None and now < a.start_by:
            # still starting: its own deadline, not the start's bound (past the bound it is over)
            deadline = now + a.run_s
            deadline = deadline if d.deadline_cap is None else min(deadline, d.deadline_cap)
        self.emit("attempt.started", d, a, attempt=a.number, pid=a.pid,
                  pid_start_time=child.pid_start_time if child else None,
                  node=child.node if child else None,
                  **(child.journal_fields if child else {}),
                  deadline_s=round(deadline - now, 6))

    # -- what recovery hands back (`supervisor.core.recovery`, Zeus's thread) -----------

    def take_back(self, d: Delegation) -> None:
        """A delegation rebuilt from the store, back in the open tree (not yet running)."""
        self.tree.add(d)

    def rerun(self, d: Delegation, replay: Replay | None = None) -> None:
        """Run a delegation taken back from the store again, through the normal path (a
        slot now, or the queue). `replay`: the stored sub-delegations its orchestrator's
        last attempt made, which the rerun may ask for again (`dispatch_nested`)."""
        if replay is not None:
            self._replays[d.id] = replay
        d.nested_in(self.tree.get(d.parent_id) if d.parent_id else None)
        self.run_or_queue(d)

    def count_spent_before(self, usage: Usage) -> None:
        """Spend made before this Zeus (the store's) counts against the tree's budget."""
        self.spending.tree_usage = self.spending.tree_usage + usage

    def _session_totals(self, session_id: str | None) -> SessionTotals | None:
        """What the CLI session `session_id` was charged so far: the larger of what was
        counted here and what its store keeps (an earlier Zeus's turns, or another host's
        on a shared store; this host's charges not yet committed are counted here)."""
        if session_id is None:
            return None
        here = self.agent_sessions.totals(session_id)
        stored = self.durable.session_totals(session_id)
        totals = stored if here is None else here.most(stored)
        if totals is not None and totals != here:
            self.agent_sessions.known(session_id, totals)
        return totals

    def resume_agent_sessions(self, sessions: Iterable[tuple[str, str, str]]) -> None:
        """Each (agent, session, session id) an agent CLI can resume by its id."""
        for agent, session, session_id in sessions:
            self.agent_sessions.bind(agent, session, session_id)

    def lose_sessions(self, lost: set[tuple[str, str]]) -> None:
        """(agent, session) whose children were not found again: never replaced."""
        self._lost_sessions |= lost

    def keep_partial(self, d: Delegation, attempt_id: str, item: Any) -> None:
        """A partial result of `d`'s attempt that came without its child (what a child that
        is gone left)."""
        self.durable.partial(d, attempt_id, item)
        d.partials.append(item)

    def reattach(self, d: Delegation, stored: StoredAttempt,
                 attach: Callable[[ChildSpec], ChildHandle | None], *, adopted: bool,
                 resumed: ResumedCalls | None = None) -> bool:
        """Supervise on an attempt whose child outlived the last Zeus (recovery, Zeus's
        thread; docs/design.md, "Reattach"): the same attempt id and number, its stored
        start and deadline, on this clock. `attach(spec)` is the backend's: it delivers
        what the child buffered into the mailbox before it returns, so that those reports
        come before this attempt's timer. `resumed`: a reattached orchestrator's stored
        sub-delegations, for the calls its child asks again. False (nothing changed) when
        the child could not be attached."""
        now, wall = self.clock.now(), self.clock.wall()
        deadline = (now + (stored.deadline - wall) if stored.deadline is not None
                    else now + _timeout_s(d))
        a = Attempt(id=stored.id, number=stored.number, agent=d.agent, policy=d.policy,
                    started_at=now - max(0.0, wall - stored.started), deadline=deadline,
                    watch=ProgressWatch.start(now))
        try:
            work = work_of(a, self.registry)
        except SupervisorError:
            work = None  # the worker holds its work function already
        spec = child_spec(d, a, registry=self.registry, clock=self.clock, now=now, work=work,
                          session=None, budget_left=self.spending.left(d, self.tree.ancestors(d)),
                          heads=self._framing_heads)
        child = attach(spec)
        if child is None:
            return False
        a.reattached_to(child, stored.charged_progress)
        if stored.pid is None and a.pid is not None:
            # its Zeus died before it recorded the worker's pid: recorded now
            self.durable.identity(a, a.pid, child.pid_start_time, None)
        d.runs(a)
        self.tree.begin(d)
        self.tree.live[a.id] = (d, a)
        if resumed is not None:
            self._resumed_calls[d.id] = resumed
        self.emit("attempt.reattached", d, a, attempt=a.number, pid=a.pid,
                  pid_start_time=child.pid_start_time, adopted=adopted,
                  deadline_s=round(a.deadline - now, 6))
        self.spend(d, a, Usage())  # over its budget already: stopped as it would have been
        self.timers.arm(a)  # after its buffered reports: they are older than its deadline
        return True

    def session_lost(self, d: Delegation) -> bool:
        """Whether `d` names a session whose worker did not survive the last restart: it
        is never replaced by a fresh one (docs/design.md, "Reattach")."""
        return (d.brief.session is not None and bool(self._lost_sessions)
                and (d.agent, d.brief.session) in self._lost_sessions)

    def backends(self) -> Iterator[tuple[str, Backend]]:
        """Zeus's backends, by name (recovery asks each for its children)."""
        return iter(list(self._backends.items()))

    def backend_for(self, policy: AgentPolicy) -> Backend:
        """The backend an agent of `policy` runs on; one with every default (nothing
        waits, a child with a pid is confirmed gone by it) when Zeus has none by that
        name."""
        backend = self._backends.get(backend_name(policy))
        return backend if backend is not None else _MISSING

    def backend_of(self, agent: str) -> Backend | None:
        """The backend `agent` runs on, if it is in the routing and Zeus has that one."""
        try:
            return self._backends.get(backend_name(self.registry.policy(agent)))
        except SupervisorError:
            return None

    def _backend(self, isolation: str) -> Backend:
        try:
            return self._backends[isolation]
        except KeyError:
            raise SupervisorError(f"no {isolation!r} backend is available") from None

    # -- spend ------------------------------------------------------------------------------

    def spend(self, d: Delegation, a: Attempt | None, usage: Usage,
              attempt_id: str | None = None, *,
              session: tuple[str, SessionTotals] | None = None, progress: int = 0) -> None:
        """Count `usage` against `d` (while open), every open ancestor, and the whole tree;
        stop the attempts whose budget it breaks.

        `a` is the attempt that charged it, None for the late spend of a fenced one;
        `attempt_id` the charging attempt's id, for the store; `session` the agent CLI
        session it was charged in and what it adds there, and `progress` the charge's
        progress count (both stored with the charge)."""
        ancestors = list(self.tree.ancestors(d))
        chain = [d, *ancestors] if self.tree.get(d.id) is not None else ancestors
        if attempt_id is not None:
            self.durable.charged(d.id, attempt_id, usage, session, progress)
        overruns, tree_overrun = self.spending.charge(chain, usage)
        for node, overrun in overruns:
            assert node.current is not None
            self.request_stop(node, node.current, AttemptOutcome.budget_exceeded, detail=overrun)
        if tree_overrun is None:
            return
        payer = a if a is not None else next(
            (n.current for n in chain if n.current is not None), None)
        owner = self.tree.owner(payer.id) if payer is not None else None
        if owner is not None:
            self.request_stop(*owner, AttemptOutcome.budget_exceeded,
                              detail=f"tree budget: {tree_overrun}")

    def look_elsewhere(self, only: Sequence[Delegation] | None = None) -> None:
        """Count what the store holds as charged by the attempts of open delegations that
        another host lost (`Delegation.elsewhere`): a host that lost them alive writes what
        their children charged on late, and it counts here once, against the delegation,
        its ancestors and the tree, its budget stopping the attempt that runs
        (docs/design.md, "Spend is a fact, not a decision"). `only`: those delegations
        (one about to settle), else every one, looked at again every half lease while
        any is open (Zeus's thread)."""
        if only is None:
            self._look = None
        waiting = [d for d in (only if only is not None else self.tree.delegations.values())
                   if d.elsewhere]
        if waiting:
            try:
                stored = self.durable.usage_of([a for d in waiting for a in d.elsewhere or ()])
            except StoreError:
                stored = {}  # the database is away: looked at again
            for d in waiting:
                known = d.elsewhere or {}
                for attempt_id, before in list(known.items()):
                    now = stored.get(attempt_id)
                    if now is None or (added := _added(now, before)) is None:
                        continue
                    known[attempt_id] = now
                    self.spend(d, None, added)
        if only is None:
            self.look_elsewhere_soon()

    def look_elsewhere_soon(self) -> None:
        """`look_elsewhere` in half a lease, while an open delegation has attempts another
        host lost and none is due yet."""
        lease_s = self.durable.lease_s
        if self._look is None and lease_s is not None and any(
                d.elsewhere for d in self.tree.delegations.values()):
            self._look = self.timers.after(lease_s / 2, LookElsewhere())

    # -- stopping an attempt ---------------------------------------------------------

    def request_stop(
        self, d: Delegation, a: Attempt, cause: AttemptOutcome, *, detail: str | None = None
    ) -> None:
        """Record a stop cause; the first one asks the child to stop and starts the grace."""
        if self.tree.owner(a.id) is None:
            return
        now = self.clock.now()
        a.stop_causes.append(cause)
        event = _STOP_EVENTS.get(cause)
        if event is not None:
            extra: dict[str, Any] = {"elapsed_s": round(now - a.started_at, 6)}
            if cause is AttemptOutcome.budget_exceeded:
                extra.update(usage=d.usage.model_dump(), limit=detail)
            self.emit(event, d, a, **extra)
        if a.stopping_since is not None:
            return
        a.stopping(now)
        # What this attempt delegated has lost its purpose: cancel it now, so that a
        # parent blocked in `ctx.delegate()` gets its answer and can stop.
        self._cancel_children(d, f"the attempt that delegated it ({a.id}) is stopping")
        assert a.child is not None
        a.child.cancel_for(cause.value)
        grace = a.policy.shutdown.grace_s
        if grace <= 0:
            self.on_grace_over(GraceOver(a.id))
        else:
            a.grace_ends(self.timers.after(grace, GraceOver(a.id)))

    def on_attempts_due(self, msg: AttemptsDue) -> None:
        """The attempts' timers rang: each one that fell due, soonest first."""
        del msg
        for due in self.timers.due():
            self.on_attempt_due(due)

    def on_attempt_due(self, msg: AttemptDue) -> None:
        """The attempt's timer: its deadline passed, it went stale, or it moved on."""
        if msg.due_at is not None:
            self.timers.observe_lag(msg.due_at)
        owner = self.tree.owner(msg.attempt_id)
        if owner is None:
            return
        d, a = owner
        now = self.clock.now()
        if now >= a.deadline:
            # Still not running at its bound on that wait: a crash (its child did not
            # start); else its own deadline, or its delegation's, passed.
            cause = (AttemptOutcome.crash if a.start_by is not None and a.start_by <= a.deadline
                     else AttemptOutcome.timeout)
            if cause not in a.stop_causes:
                self.request_stop(d, a, cause)  # a losing cause if late
        elif a.stopping_since is not None:
            return
        elif not a.watch.is_stale(now, a.stale_after_s) or self.tree.waiting_on_children(d):
            if a.watch.is_stale(now, a.stale_after_s):
                # waiting in ctx.delegate(): the child it waits on has its own watch
                a.nudge(now)
            try:
                self.timers.arm(a)  # progress moved the stale moment on
            except Exception as exc:  # noqa: BLE001 - no timer: stop it rather than lose it
                self.timers.refused(exc, "AttemptDue")
                self.request_stop(d, a, AttemptOutcome.stale)
        else:
            self.request_stop(d, a, AttemptOutcome.stale)

    def on_grace_over(self, msg: GraceOver) -> None:
        owner = self.tree.owner(msg.attempt_id)
        if owner is None:
            return
        d, a = owner
        if not self._kill_or_fence(d, a):
            return  # its `Finished` follows once the process is reaped
        self.emit("attempt.fenced", d, a, reason="did not stop within grace_s",
                  grace_s=a.policy.shutdown.grace_s)
        self.end_attempt(d, a, None, fenced=True)

    def _kill_or_fence(self, d: Delegation, a: Attempt) -> bool:
        """Stop the attempt's child now: a process is killed (the ladder's last step; its
        `Finished` comes once it is reaped, and is dropped if the attempt has ended by
        then); a thread cannot be killed, so it is fenced off, its late messages dropped
        from now on. True when it was fenced (Zeus's thread)."""
        assert a.child is not None
        if a.child.killable:
            a.child.kill()
            return False
        self.tree.fenced[a.id] = d
        return True

    # -- an attempt's end, and what follows it ------------------------------------------

    # An attempt's end, step by step, in this order (tests/test_end_attempt.py holds it):
    # what reads the attempt's record (its events, the step that follows, a sibling
    # restarted by the group) finds it made and kept, and what follows it finds the
    # attempt no longer running.
    END_STEPS = ("let_go", "read_end", "record_end", "tell_end", "orphan_children",
                 "follow_end")

    def end_attempt(
        self, d: Delegation, a: Attempt, finished: Finished | None, *, fenced: bool = False
    ) -> None:
        """The attempt ended (Zeus's thread): `finished` as its child said (None: no word,
        e.g. a fenced host's), `fenced` when this host lost it with its lease. Each step
        below is one of `END_STEPS`, in their order."""
        now = self.clock.now()
        self._let_go(d, a)
        finished = self._read_end(d, a, finished)
        outcome = resolve_outcome(finished.outcome if finished else None, a.stop_causes,
                                  cancel_requested=d.cancel_requested)
        record = self._record_end(d, a, outcome, finished, now=now, fenced=fenced)
        self._tell_end(d, a, outcome, record)
        self._cancel_children(d, "the attempt that delegated it ended")  # orphan_children
        self._follow_end(d, a, outcome, finished, fenced=fenced)

    def _let_go(self, d: Delegation, a: Attempt) -> None:
        """It no longer runs: out of the live table, its timers off, no longer current
        (announced first, if its start was never told)."""
        self.tree.live.pop(a.id, None)
        if not a.announced:
            self.announce(d, a)
        self.timers.disarm(a)
        d.current_ended()

    def _read_end(self, d: Delegation, a: Attempt, finished: Finished | None) -> Finished | None:
        """The child's word as Zeus acts on it: its unsent partial results counted, a
        completed result read as the agent's own summary claims (`_as_claimed`), and a
        reattached child's stop cause (the last Zeus's) taken as this one's."""
        if finished is None:
            return None
        d.dropped_partials(finished.partials_dropped)
        if finished.outcome is AttemptOutcome.completed:
            finished = self._as_claimed(d, finished)
        if finished.stop_cause is not None and not a.stop_causes:
            a.stop_causes.extend(_stop_cause(finished.stop_cause))
        return finished

    def _record_end(self, d: Delegation, a: Attempt, outcome: AttemptOutcome,
                    finished: Finished | None, *, now: float, fenced: bool) -> AttemptEnd:
        """The attempt's record, made (with `attempt.killed` told, if it was stopped),
        kept by its delegation and given to the store; what the delegation keeps of it (a
        result that lost to a stop cause, its error) and what ends with it (a rerun's
        replay, the side-effect calls resumed)."""
        killed = how_killed(a, finished)
        if killed is not None and finished is not None:
            latency = finished.kill_latency_s
            if latency is None and a.stopping_since is not None:
                latency = now - a.stopping_since
            self.emit("attempt.killed", d, a, how=killed, pid=finished.pid or a.pid,
                      latency_s=None if latency is None else round(latency, 6))
        record = attempt_record(a, outcome, finished, now=now, killed=killed, fenced=fenced,
                                restart_pending=d.restart_pending)
        d.attempts.append(record)
        if self.durable.store is not None:  # (in memory, nothing is written: none is made)
            self.durable.attempt_ended(record.record())
        if self._replays and (replay := self._replays.pop(d.id, None)) is not None:
            self._not_asked_again(replay.finish())  # what the rerun attempt did not ask for
        if self._resumed_calls:
            self._resumed_calls.pop(d.id, None)
        if (finished is not None and finished.outcome is AttemptOutcome.completed
                and outcome is not AttemptOutcome.completed):
            d.keeps_lost_output(finished.value)
        if record.error is not None:
            d.failed_with(record.error, finished.traceback if finished is not None else None)
        return record

    def _tell_end(self, d: Delegation, a: Attempt, outcome: AttemptOutcome,
                  record: AttemptEnd) -> None:
        """`attempt.completed` or `attempt.failed`, for someone who listens."""
        if not self.events.enabled:  # its fields are read only for someone who listens
            return
        told = record.fields
        stream: dict[str, Any] = {"bad_lines": told["bad_lines"]} if told["bad_lines"] else {}
        if outcome is AttemptOutcome.completed:
            self.emit("attempt.completed", d, a, duration_s=told["duration_s"], **stream)
        else:
            self.emit("attempt.failed", d, a, outcome=outcome.value, error=record.error,
                      duration_s=told["duration_s"], progress=told["progress"],
                      tool_calls=told["tool_calls"], last_tool=told["last_tool"], **stream)

    def _follow_end(self, d: Delegation, a: Attempt, outcome: AttemptOutcome,
                    finished: Finished | None, *, fenced: bool) -> None:
        """What follows, in the steps `rules.after_attempt` orders."""
        after = after_attempt(
            outcome,
            forced=d.forced is not None,
            cancel_requested=d.cancel_requested,
            restart_pending=d.restart_pending is not None,
            reviewed=d.brief.mode == "task" and d.policy.review_by is not None,
            grouped=d.group is not None,
        )
        restart_reason = d.restart_reason(consumed=after.restart_consumed)
        value = finished.value if finished else None
        for step in after.steps:
            match step:
                case "settle_forced":
                    assert d.forced is not None
                    self.settle(d, d.forced)
                case "group_restart":
                    if self._group_restart(d):
                        self.emit("group.restarted", d, a, reason=restart_reason)
                        self.start_attempt(d)
                case "review":
                    assert d.policy.review_by is not None
                    self._start_review(d, d.policy.review_by, value)
                case "settle_completed":
                    self.settle(d, completed_step(value), value=value)
                case "restart_siblings":
                    self._restart_siblings(d, outcome)
                case "next_step" if (outcome is AttemptOutcome.lost and finished is not None
                                     and finished.stop_cause == AttemptOutcome.lost.value):
                    # its worker stopped it as its host's lease ended, and this host
                    # reattached it after a restart: judged as a takeover judges it
                    self.recovery.after_lease_ended(d, a)
                case "next_step":
                    self._next_step(d, a, outcome, fenced=fenced)
                case _:
                    assert_never(step)

    def _as_claimed(self, d: Delegation, finished: Finished) -> Finished:
        """A completed attempt as its agent's own `<subtask_summary>` block tells it (its
        status acted on: `rules.settle.read_claim`); its partial results join the delegation's."""
        claim = read_claim(finished.value, require_summary=d.policy.require_summary)
        if claim is None:
            return finished
        d.partials.extend(claim.partials[: max(0, MAX_PARTIALS - len(d.partials))])
        if claim.outcome is AttemptOutcome.completed:
            return dataclasses.replace(finished, value=claim.value)
        if claim.outcome is AttemptOutcome.timeout:
            d.keeps_lost_output(claim.value)
        return dataclasses.replace(finished, outcome=claim.outcome, value=None,
                                   error=claim.error, error_type="AgentReport")

    def _next_step(
        self, d: Delegation, a: Attempt, outcome: AttemptOutcome, *, fenced: bool
    ) -> None:
        """Retry, fall back or settle a delegation whose attempt did not complete."""
        partial_ok = d.brief.partial_ok if d.brief.partial_ok is not None else d.policy.partial_ok
        step = decide_next(
            outcome,
            d.policy,
            retries_used=d.retries_used,
            has_partials=bool(d.partials),
            partial_ok=partial_ok,
            side_effects=a.side_effects,
            visited=d.visited,
            fenced_writer=fenced and not a.policy.read_only,
            resumable=(a.agent_session is not None and a.policy.speaks_cli
                       and a.policy.retry.resume_session is not False),
            fallback_told=self._fallback_is_told(d.policy),
        )
        if not isinstance(step, Settle):
            allowed = self._through_circuit(d, step, outcome)
            if allowed is None:
                return  # the supervisor gave up (scope: supervisor) and settled it
            step = allowed
        if isinstance(step, Settle):
            self.settle(d, step)
        elif isinstance(step, Retry):
            delay = backoff_delay(d.policy.retry, step.number, self._rng)
            d.waits_to_retry(a.agent_session if step.resume else None)
            self.durable.retry_scheduled(d, a, delay, d.agent)
            self.emit("retry.scheduled", d, a, backoff_s=round(delay, 6),
                      next_attempt_id=f"{d.id}-a{d.attempt_count + 1}",
                      follow_up=step.follow_up,
                      **({"resume_session": a.agent_session} if step.resume else {}))
            if delay <= 0:
                self.on_backoff_over(BackoffOver(d.id))
            else:
                d.backs_off_until(self.timers.after(delay, BackoffOver(d.id)))
        elif isinstance(step, Fallback):
            self.emit("fallback.dispatched", d, a, **{"from": d.agent, "to": step.agent})
            self.durable.retry_scheduled(d, a, 0.0, step.agent)
            d.fall_back(step.agent, self.registry.policy(step.agent))
            self.start_attempt(d)

    def _fallback_is_told(self, policy: AgentPolicy) -> bool:
        """Whether `policy`'s fallback is an agent CLI, whose prompt names the tool calls
        earlier attempts made (so a fallback after side effects is not blind)."""
        name = policy.fallback
        if name is None or name == OWNER or name not in self.registry.routing.agents:
            return False
        return self.registry.policy(name).speaks_cli

    def on_backoff_over(self, msg: BackoffOver) -> None:
        d = self.tree.get(msg.delegation_id)
        if d is None or d.state != "backoff":
            return
        d.backoff_over()
        self.start_attempt(d)

    # -- restarts under supervision: intensity, groups, reviews -------------------------

    def _admit_restart(self, d: Delegation) -> RestartVerdict:
        """Ask the restart governor; a verdict that trips the limit is said in the journal."""
        intensity = self.registry.routing.supervisor.intensity
        verdict = self.restarts.admit(d.agent, d.parent_id, self.clock.now(), intensity)
        if verdict.tripped:
            self.events.emit("supervisor.intensity_exceeded",
                             delegation_id=d.parent_id if verdict.give_up else d.id,
                             agent=d.agent, scope=intensity.scope,
                             restarts=verdict.restarts, within_s=intensity.within_s)
        return verdict

    def _through_circuit(
        self, d: Delegation, step: Retry | Fallback, outcome: AttemptOutcome
    ) -> NextStep | None:
        """The restart `step` if intensity allows it, else what follows instead (None: the
        supervisor gave up and settled `d`)."""
        if isinstance(step, Fallback) and self.registry.routing.supervisor.intensity.scope \
                == "agent":
            return step  # a fallback to another agent is always allowed by its circuit
        verdict = self._admit_restart(d)
        if verdict.allowed:
            return step
        assert verdict.reason is not None
        if verdict.give_up:
            self._give_up(d, Settle(Status.failed, reason=verdict.reason))
            return None
        assert isinstance(step, Retry)
        return when_circuit_open(step, outcome, d.policy, d.visited, verdict.reason)

    def _group_restart(self, d: Delegation) -> bool:
        """Whether a group restart of `d` may start (it counts like any restart); refused,
        `d` settles `failed` with the reason."""
        verdict = self._admit_restart(d)
        if verdict.allowed:
            return True
        give_up = Settle(Status.failed, reason=verdict.reason)
        if verdict.give_up:
            self._give_up(d, give_up)
        else:
            self.settle(d, give_up)
        return False

    def _give_up(self, d: Delegation, give_up: Settle) -> None:
        """Scope supervisor, in a storm: `d` and every open sibling settle with `give_up`."""
        self.settle(d, give_up)
        for other in list(self.tree.delegations.values()):
            if other.parent_id == d.parent_id and other.state != "settled":
                other.gives_up(give_up)
                if other.current is not None:
                    self.request_stop(other, other.current, AttemptOutcome.cancelled)
                else:
                    self.settle(other, give_up)

    def _restart_siblings(self, d: Delegation, outcome: AttemptOutcome) -> None:
        """one_for_all / rest_for_one: stop the siblings still running, then restart them."""
        group = d.group
        assert group is not None
        open_ = self.tree.delegations
        running = {m for m in group.members if m in open_ and open_[m].current is not None}
        for sibling_id in siblings_to_restart(group.strategy, group.members, d.id, running):
            sibling = open_[sibling_id]
            assert sibling.current is not None
            sibling.restarts_for(f"{group.strategy}: sibling {d.id} failed ({outcome.value})")
            self.request_stop(sibling, sibling.current, AttemptOutcome.cancelled)

    def _start_review(self, d: Delegation, reviewer: str, value: Any) -> None:
        """A task's second stage: the reviewer gets the performer's summary."""
        d.in_review(value)
        brief = review_brief(reviewer, delegation_id=d.id, scope=d.brief.scope,
                             performer=d.agent, value=value, partials=d.partials)
        future = DelegationFuture()
        tell, delegation_id = self.tell, d.id
        future.add_callback(lambda summary: tell(ReviewDone(delegation_id, summary)))
        self.dispatch_nested(d, brief, future)

    def on_review_done(self, msg: ReviewDone) -> None:
        d = self.tree.get(msg.delegation_id)
        if d is None:
            return
        d.reviewed(msg.review)
        approved, why = review_verdict(msg.review)
        if approved:
            self.settle(d, COMPLETED, value=d.performed)
        else:
            self.settle(d, Settle(Status.blocked, reason=why), value=d.performed)

    # -- cancellation and settlement ----------------------------------------------------

    def on_cancel(self, msg: Cancel) -> None:
        d = self.tree.get(msg.delegation_id)
        if d is not None:  # unknown or already settled: a no-op
            self.cancel(d, msg.reason or "cancelled by its owner")

    def on_owner_message(self, msg: OwnerMessage) -> bool:
        """The owner's message: to the running child, or kept for the next attempt."""
        d = self.tree.get(msg.delegation_id)
        if d is None:
            return False
        # The agent the delegation was made for, as `Zeus.send` judges it (a fallback's
        # attempt does not change the answer the host gave).
        policy = d.policy if d.agent == d.brief.agent else self.registry.policy(d.brief.agent)
        if d.current is not None and d.current.policy.speaks_cli:
            policy = d.current.policy  # a fallback that reads none: the message is lost
        if policy.speaks_cli:
            self.emit("delegation.mail_refused", d, d.current, reason=(
                f"speaks: {policy.speaks} reads no mail: an agent CLI's standard input is "
                "/dev/null (docs/agent-clis.md)"))
            return False
        self._mail.post(d.id, d.current.child if d.current else None, msg.mail)
        return True

    def cancel(self, d: Delegation, reason: str) -> None:
        if d.cancel_requested or d.state == "settled":
            return
        d.cancel(reason)
        self.emit("delegation.cancel_requested", d, d.current, reason=reason)
        self._cancel_children(d, f"its parent {d.id} was cancelled")
        if d.current is not None:
            self.request_stop(d, d.current, AttemptOutcome.cancelled)
        else:
            self.settle(d, Settle(Status.cancelled, reason=reason))

    def _cancel_children(self, d: Delegation, reason: str) -> None:
        """Cancel whatever `d` delegated that is still open."""
        if not d.children:
            return  # most delegations delegate nothing
        for child in self.tree.open_children(d):
            self.cancel(child, reason)

    def settle(self, d: Delegation, step: Settle, *, value: Any = None) -> None:
        """The single, final decision of a delegation."""
        if d.state == "settled":
            return
        if d.backoff_timer is not None:
            d.backoff_timer.cancel()
        if d.elsewhere:
            self.look_elsewhere((d,))  # what a lost host wrote late counts in its summary
        self.tree.remove(d)
        if value is None:
            value = d.lost_output
        summary: Summary | Settlement
        try:  # decided here; the `Summary` itself is made where it is first read
            summary = decide_summary(d, step, value, self.clock.now())
        except Exception as exc:  # noqa: BLE001 - a delegation settles exactly once, whatever
            summary = fallback_summary({
                "id": d.id, "agent": d.agent, "scope": d.brief.scope,
                "status": Status.cancelled if d.cancel_requested else step.status,
                "attempts": list(d.attempts), "usage": d.usage}, exc)
        self.restarts.forget(d.id)  # its children's restart window goes with it
        self._mail.drop(d.id)
        if self.durable.store is None:  # (a store keeps it for `zeus.resume` itself)
            self.blocked.settled(d, summary.status)
        # said and resolved once the summary is committed (at once without a store)
        self.durable.settled(d, summary, functools.partial(self._settled, d, summary))
        self._cancel_children(d, f"its parent {d.id} settled")
        self._fill_slots()

    def _settled(self, d: Delegation, summary: Summary | Settlement) -> None:
        """`delegation.settled`, and the handle resolves: the settlement made known."""
        if self.events.enabled:  # its fields are built only for someone who listens
            self.emit("delegation.settled", d, None, status=summary.status.value,
                      duration_s=summary.duration_s, attempts=len(d.attempts),
                      timeout_kind=summary.timeout_kind,
                      error=(summary.error or "").split("\n")[0] or None,
                      usage=summary.usage.model_dump())
        d.settled.set(summary)

    def _fill_slots(self) -> None:
        if not self.accepting:
            return
        limit = self.registry.routing.supervisor.max_concurrent
        while (d := self.tree.next_queued(limit)) is not None:
            self._begin(d)

    # -- the stop of Zeus ---------------------------------------------------------------

    def on_stop_all(self, msg: StopAll) -> list[DelegationFuture]:
        """Accept nothing more and cancel everything open; the futures to wait for."""
        self.accepting = False
        pending = [d.settled for d in self.tree.delegations.values()]
        for d in list(self.tree.delegations.values()):
            self.cancel(d, msg.reason)
        return pending

    def on_force_settle(self, msg: ForceSettle) -> None:
        """Settle what is still open after the stop wait: kill processes, fence threads."""
        for d in list(self.tree.delegations.values()):
            a = d.current
            if a is not None and a.child is not None:
                self.end_attempt(d, a, None, fenced=self._kill_or_fence(d, a))
            if d.state != "settled":
                self.settle(d, Settle(Status.cancelled, reason=msg.reason))

    # -- a shared store's host (docs/design.md, "Several hosts") ---------------------------

    def free_slots(self) -> int:
        """How many more of the host's delegations could run now (a taker claims no more)."""
        limit = self.registry.routing.supervisor.max_concurrent
        return limit - self.tree.running_roots - len(self.tree.queue)

    def fence_all(self) -> None:
        """The lease is lost: kill every child now (a thread child is fenced off), and
        let go of every delegation unsettled; another host owns them from here on."""
        self.accepting = False
        for d in list(self.tree.delegations.values()):
            if d.backoff_timer is not None:
                d.backoff_timer.cancel()
            a = d.current
            if a is not None:
                self.timers.disarm(a)
                if a.child is not None:
                    self._kill_or_fence(d, a)
                    self.tree.lease_lost[a.id] = (d, a)  # what it charged yet counts
                self.tree.live.pop(a.id, None)
                d.current_ended()
        self.tree.delegations.clear()
        self.tree.queue.clear()
        self.tree.running_roots = 0


class _Missing(Backend):
    """What recovery asks for an attempt whose backend this Zeus does not have: every
    default of `Backend`."""

    def start(self, spec: ChildSpec, send: Callable[[object], None]) -> ChildHandle:
        raise SupervisorError(f"no backend is available for agent {spec.agent!r}")


_MISSING = _Missing()


def _added(now: Usage, before: Usage) -> Usage | None:
    """What `now` adds to `before` (an attempt's stored usage, which only grows); None
    when nothing."""
    if now == before:
        return None
    return Usage.model_construct(
        calls=max(0, now.calls - before.calls),
        input_tokens=max(0, now.input_tokens - before.input_tokens),
        output_tokens=max(0, now.output_tokens - before.output_tokens),
        cost=max(0.0, now.cost - before.cost))


def _own_session(d: Delegation) -> str | None:
    """A stateful performer's session from its last attempt, on the same agent (its one
    follow-up resumes it, §6); None otherwise."""
    last = d.attempts[-1] if d.attempts else None
    if not d.policy.stateful or last is None or last.agent != d.agent:
        return None
    return last.session_id


def _stop_cause(value: str) -> list[AttemptOutcome]:
    """The stop cause a child reported back (a value it was told), if it names one."""
    try:
        return [AttemptOutcome(value)]
    except ValueError:
        return []


def _timeout_s(d: Delegation) -> float:
    """The current attempt's timeout: the brief's for the agent it named, else the policy's."""
    if d.brief.timeout_s is not None and d.agent == d.brief.agent:
        return d.brief.timeout_s
    return d.policy.timeout_s


def _effective(policy: AgentPolicy, brief: Brief) -> dict[str, Any]:
    """The policy a delegation runs under: the agent's, with the brief's overrides applied."""
    overrides = {
        key: value
        for key, value in (("timeout_s", brief.timeout_s), ("partial_ok", brief.partial_ok))
        if value is not None
    }
    effective = policy.model_copy(update=overrides) if overrides else policy
    return effective.model_dump(mode="json", exclude={"metadata"}, by_alias=True)
