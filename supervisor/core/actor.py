"""The root actor. Every decision is taken here, in the actor's thread, one message at a time.

The actor is a thin shell: it keeps the state of open delegations, feeds
messages to the pure decisions (`_settle`, `_stale`, `_backoff`, `_budget`,
`_intensity`) and carries out what they decide through the backends and the
clock's timers. Nothing here blocks on a child.
"""

from __future__ import annotations

import contextlib
import random
import traceback
from collections import deque
from collections.abc import Callable
from typing import Any

import pykka

from actors import AttemptOutcome, AttemptRecord, Brief, Report, Status, Summary, Usage
from actors.backends import Backend
from actors.clock import Clock, Timer
from actors.protocol import (
    Charge,
    DelegateRequest,
    Finished,
    Heartbeat,
    Partial,
    Placed,
    Spawned,
    ToolCall,
)
from supervisor.core.handle import Settled
from supervisor.core.mail import PendingMail
from supervisor.core.messages import (
    AttemptDue,
    BackoffOver,
    Cancel,
    Deliver,
    Dispatch,
    ForceSettle,
    GraceOver,
    Hold,
    Ping,
    ReviewDone,
    Snapshot,
    StopAll,
)
from supervisor.core.registry import Registry
from supervisor.core.sessions import Sessions
from supervisor.core.snapshot import tree_snapshot
from supervisor.core.spec import child_spec, isolation_of, work_of
from supervisor.core.state import (
    MAX_PARTIALS,
    Attempt,
    Delegation,
    attempt_error,
    build_summary,
)
from supervisor.core.tree import ancestors, budget_left, waiting_on_children
from supervisor.errors import DelegationRefused, SupervisorError
from supervisor.journal.events import EventLog
from supervisor.journal.streams import short_text
from supervisor.routing import AgentPolicy
from supervisor.rules.after_attempt import after_attempt
from supervisor.rules.backoff import backoff_delay
from supervisor.rules.budget import budget_overrun, priced
from supervisor.rules.circuit import admit_restart, circuit_reason, when_circuit_open
from supervisor.rules.delegation import delegation_refusal
from supervisor.rules.groups import review_verdict, siblings_to_restart
from supervisor.rules.intensity import RestartWindow
from supervisor.rules.lag import WARN_S as LAG_WARN_S
from supervisor.rules.lag import MailboxLag
from supervisor.rules.settle import Fallback, NextStep, Retry, Settle, decide_next, resolve_outcome
from supervisor.rules.stale import ProgressWatch

__all__ = ["ZeusActor"]



class ZeusActor(pykka.ThreadingActor):
    """The root supervisor. All methods run in the actor's own thread."""

    # A host that forgets `zeus.stop()` must still be able to exit.
    use_daemon_thread = True

    def __init__(
        self,
        *,
        registry: Registry,
        clock: Clock,
        events: EventLog,
        backends: dict[str, Backend],
        rng: random.Random,
    ) -> None:
        super().__init__()
        self._registry = registry
        self._clock = clock
        self._events = events
        self._backends = backends
        self._rng = rng
        self._open: dict[str, Delegation] = {}
        self._live: dict[str, tuple[Delegation, Attempt]] = {}  # attempt id -> owner
        self._queue: deque[str] = deque()
        self._running_roots = 0
        self._tree_usage = Usage()
        self._windows: dict[str | None, RestartWindow] = {}  # by agent, or by supervisor
        self._open_circuits: set[str] = set()  # agents whose restarts are refused for now
        # attempt id -> its delegation, threads still running
        self._fenced: dict[str, Delegation] = {}
        self._sessions = Sessions()
        self._settled_count = 0
        self._dropped = 0
        self._lag = MailboxLag()
        self._accepting = True
        self._mail = PendingMail()
        self._handlers: dict[type, Callable[[Any], Any]] = {
            Heartbeat: self._on_heartbeat,
            Placed: self._on_placed,
            Partial: self._on_partial,
            Charge: self._on_charge,
            ToolCall: self._on_tool_call,
            Finished: self._on_finished,
            Spawned: self._on_spawned,
            DelegateRequest: self._on_delegate_request,
            Dispatch: self._on_dispatch,
            Cancel: self._on_cancel,
            Deliver: self._on_deliver,
            AttemptDue: self._on_attempt_due,
            GraceOver: self._on_grace_over,
            BackoffOver: self._on_backoff_over,
            ReviewDone: self._on_review_done,
            Snapshot: self._on_snapshot,
            Ping: lambda _msg: None,
            Hold: self._on_hold,
            StopAll: self._on_stop_all,
            ForceSettle: self._on_force_settle,
        }

    # -- the mailbox ------------------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        """Runs in the actor thread. Nothing may escape: pykka would stop every actor."""
        handler = self._handlers.get(type(message))
        if handler is None:
            self._events.emit("zeus.unknown_message", type=type(message).__name__)
            return None
        try:
            return handler(message)
        except BaseException as exc:  # noqa: BLE001 - Zeus survives everything
            self._events.emit(
                "zeus.internal_error",
                message=type(message).__name__,
                error=f"{type(exc).__name__}: {exc}",
                traceback=traceback.format_exc(),
            )
            return exc if isinstance(exc, Exception) else None

    def send(self, message: object) -> None:
        """What children call (from their own threads) to report; dropped once Zeus is gone."""
        try:  # noqa: SIM105 - not contextlib.suppress: the hot path of every child message
            self.actor_ref.tell(message)
        except pykka.ActorDeadError:
            pass

    def _after(self, delay: float, message: object) -> Timer | None:
        """`message` to the mailbox in `delay` s; at once (and an error event) if no timer
        can be set for that delay, so a wait that cannot be kept never stops a delegation."""
        try:
            return self._clock.call_at(self._clock.now() + delay, lambda: self.send(message))
        except Exception as exc:  # noqa: BLE001 - e.g. TimerError for a delay of inf or nan
            self._timer_refused(exc, type(message).__name__)
            self.send(message)
            return None

    def _timer_refused(self, exc: BaseException, what: str) -> None:
        self._events.emit("zeus.internal_error", message=what,
                          error=f"a timer could not be set: {type(exc).__name__}: {exc}")

    # -- dispatch -----------------------------------------------------------------------

    def _on_dispatch(self, msg: Dispatch) -> None:
        now = self._clock.now()
        policy = self._registry.policy(msg.brief.agent)
        parent = self._open.get(msg.parent_id) if msg.parent_id else None
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
        if parent is not None:
            parent.children.append(d.id)
            if parent.current is not None:
                d.deadline_cap = parent.current.deadline
        self._open[d.id] = d
        if d.group is not None:
            d.group.members.append(d.id)
        if self._events.enabled:
            self._emit(
                "delegation.dispatched",
                d,
                scope=d.brief.scope,
                depth=d.depth,
                timeout_s=self._timeout_s(d),
                policy=_effective(policy, d.brief),
            )
        if not self._accepting:
            self._settle(d, Settle(Status.cancelled, reason="zeus is stopping"))
        elif parent is not None and parent.cancel_requested:
            d.cancel_requested = True
            self._settle(d, Settle(Status.cancelled, reason="its parent was cancelled"))
        # max_concurrent queues the host's delegations; a nested one never waits behind
        # them (its parent holds a slot already, and would deadlock waiting for it).
        elif d.depth > 1 or self._running_roots < self._registry.routing.supervisor.max_concurrent:
            self._start(d)
        else:
            self._queue.append(d.id)

    def _start(self, d: Delegation) -> None:
        if d.depth == 1 and d.state == "queued":
            self._running_roots += 1
        d.state = "running"
        self._start_attempt(d)

    def _timeout_s(self, d: Delegation) -> float:
        if d.brief.timeout_s is not None and d.agent == d.brief.agent:
            return d.brief.timeout_s
        return d.policy.timeout_s

    def _start_attempt(self, d: Delegation) -> None:
        now = self._clock.now()
        d.attempt_count += 1
        policy = d.policy
        deadline = now + self._timeout_s(d)
        if d.deadline_cap is not None:
            deadline = min(deadline, d.deadline_cap)
        a = Attempt(
            id=f"{d.id}-a{d.attempt_count}",
            number=d.attempt_count,
            agent=d.agent,
            policy=policy,
            started_at=now,
            deadline=deadline,
            watch=ProgressWatch.start(now),
        )
        d.current = a
        self._live[a.id] = (d, a)
        try:
            work = work_of(a, self._registry)
            spec = child_spec(d, a, registry=self._registry, clock=self._clock, now=now,
                              work=work,
                              session=self._sessions.get(d.agent, d.brief.session,
                                                         d.policy.session_max),
                              budget_left=self._budget_left(d))
            self._arm(a)  # before the child starts: a deadline no timer can keep fails it here
            a.child = self._backend(isolation_of(a)).start(spec, self.send)
            a.pid = a.child.pid
        except Exception as exc:  # noqa: BLE001 - a child that cannot start is a failed attempt
            self._announce(d, a)
            self._end_attempt(d, a, Finished(a.id, AttemptOutcome.error,
                                             error=f"{type(exc).__name__}: {exc}",
                                             error_type=type(exc).__name__))
            return
        self._nudge_ancestors(d, now)  # an attempt starting is progress of its subtree
        self._mail.flush(d.id, a.child)
        if not _placing(a):  # a Ray task is announced once a node took it (`_on_placed`)
            self._announce(d, a)

    def _announce(self, d: Delegation, a: Attempt) -> None:
        """`attempt.started`, once per attempt: where it runs, when that is known."""
        a.announced = True
        self._emit("attempt.started", d, a, attempt=a.number, pid=a.pid,
                   pid_start_time=getattr(a.child, "pid_start_time", None),
                   node=getattr(a.child, "node", None),
                   **getattr(a.child, "journal_fields", {}),
                   deadline_s=round(a.deadline - self._clock.now(), 6))

    def _on_placed(self, msg: Placed) -> None:
        """A Ray attempt reached a node (waiting for one is not a hang: its stale clock
        starts at its first sign of life, as for every child; the deadline counts from
        the start)."""
        owner = self._live.get(msg.attempt_id)
        if owner is None:
            return
        d, a = owner
        a.pid = msg.pid
        if not a.announced:
            self._announce(d, a)

    def _arm(self, a: Attempt) -> None:
        """One timer per attempt, at its deadline or the moment it would go stale.

        The timer holds the attempt's id, not the attempt: once cancelled it keeps
        nothing of the delegation alive. `TimerError` if that moment is not a finite time.
        """
        when = min(a.deadline, a.watch.stale_at(a.stale_after_s))
        if a.due is not None:
            a.due.cancel()  # moved: the first sign of life, a long tool call ending
        due = AttemptDue(a.id, when)
        a.due = self._clock.call_at(when, lambda: self.send(due))
        a.timers.append(a.due)

    def _budget_left(self, d: Delegation) -> dict[str, float] | None:
        """What `d`'s attempt may spend before its, an ancestor's or the tree's budget is over."""
        chain = [d, *ancestors(d, self._open)]
        return budget_left([*((n.usage, n.policy.budget) for n in chain),
                            (self._tree_usage, self._registry.routing.supervisor.budget)])

    def _nudge_ancestors(self, d: Delegation, now: float) -> None:
        """Progress in `d`'s subtree is progress of every ancestor waiting on it."""
        for parent in ancestors(d, self._open):
            if parent.current is not None:
                parent.current.watch = parent.current.watch.nudge(now)

    def _backend(self, isolation: str) -> Backend:
        try:
            return self._backends[isolation]
        except KeyError:
            raise SupervisorError(f"no {isolation!r} backend is available") from None

    # -- what children report ------------------------------------------------------------

    def _owner(self, message: Any) -> tuple[Delegation, Attempt] | None:
        owner = self._live.get(message.attempt_id)
        if owner is None:
            self._drop(message)
            return None
        d, a = owner
        before, now = a.watch, self._clock.now()
        a.watch = before.observe(message.progress, now)
        if a.watch.progress > before.progress:
            if before.progress < 0:
                self._arm(a)  # its first sign of life starts the stale clock
            if d.parent_id is not None:
                self._nudge_ancestors(d, now)
            if self._events.subscriptions.active and a.watch.progress > 0:  # not a first beat
                self._events.publish("attempt.progress", delegation_id=d.id, attempt_id=a.id,
                                     agent=a.agent, progress=a.watch.progress)
        return owner

    def _drop(self, message: Any) -> None:
        """A late message of a settled delegation, a superseded or a fenced attempt."""
        self._dropped += 1
        attempt_id = getattr(message, "attempt_id", None)
        payer = self._fenced.get(message.attempt_id) if isinstance(message, Charge) else None
        if payer is not None:
            # Late spend is real money: it counts against the tree all the same.
            self._spend(payer, None, priced(message.usage, payer.policy.pricing))
        if isinstance(message, Finished) and attempt_id in self._fenced:
            delegation_id = self._fenced.pop(attempt_id).id
            self._events.emit("attempt.fenced", delegation_id=delegation_id,
                              attempt_id=attempt_id, reason="the abandoned thread ended late",
                              exited=True)
        elif self._events.enabled:
            extra: dict[str, Any] = {"usage_counted": True} if payer is not None else {}
            self._events.emit("message.dropped", attempt_id=attempt_id,
                              message=type(message).__name__, **extra)
        if isinstance(message, DelegateRequest):
            message.reply(DelegationRefused(
                f"attempt {attempt_id} is no longer running; its delegation was refused"))

    def _on_spawned(self, msg: Spawned) -> None:
        """The attempt's process was started outside the mailbox: its pid, for the journal."""
        owner = self._live.get(msg.attempt_id)
        if owner is None:
            return
        d, a = owner
        a.pid = msg.pid
        # Its stale clock starts at its first sign of life, as for every child: a process
        # still being started (Zeus's delay, not the child's) is never stale.
        self._emit("attempt.spawned", d, a, pid=msg.pid, pid_start_time=msg.pid_start_time)

    def _on_heartbeat(self, msg: Heartbeat) -> None:
        owner = self._owner(msg)
        if owner is None:
            return
        d, a = owner
        if msg.note is not None:
            a.last_note = msg.note
        if not self._events.enabled or (msg.liveness and msg.progress <= 0):
            return  # alive, nothing done yet: nothing to log
        now = self._clock.now()
        if now - a.last_logged_beat >= a.policy.heartbeat.interval_s:
            a.last_logged_beat = now
            self._emit("attempt.heartbeat", d, a, progress=msg.progress, note=msg.note)

    def _on_partial(self, msg: Partial) -> None:
        owner = self._owner(msg)
        if owner is None:
            return
        d, a = owner
        if self._events.enabled:
            self._emit("attempt.partial", d, a, item=short_text(msg.item), progress=msg.progress)
        if len(d.partials) < MAX_PARTIALS:
            d.partials.append(msg.item)
        else:
            d.partials_dropped += 1

    def _on_tool_call(self, msg: ToolCall) -> None:
        owner = self._owner(msg)
        if owner is None:
            return
        d, a = owner
        if msg.running is False:  # a long tool call ended
            if a.stopping_since is None:  # (a stopping attempt keeps it, as evidence)
                a.in_tool = None
                self._arm(a)  # the shorter threshold applies again
            return
        a.tool_calls += 1
        a.last_tool = msg.name
        if msg.running:
            a.in_tool = msg.name
        if not msg.read_only:
            # Side effects are a tree: every ancestor attempt that delegated this one wrote.
            a.side_effects = True
            for parent in ancestors(d, self._open):
                if parent.current is not None:
                    parent.current.side_effects = True

    def _on_charge(self, msg: Charge) -> None:
        owner = self._owner(msg)
        if owner is not None:
            self._spend(*owner, priced(msg.usage, owner[1].policy.pricing))

    def _spend(self, d: Delegation, a: Attempt | None, usage: Usage) -> None:
        """Count `usage` against `d` (while open), every open ancestor, and the whole tree.

        `a` is the attempt that charged it, None for the late spend of a fenced one."""
        chain = [d, *ancestors(d, self._open)] if d.id in self._open else [
            *ancestors(d, self._open)]
        for node in chain:
            node.usage = node.usage + usage
            overrun = budget_overrun(node.usage, node.policy.budget)
            if overrun is not None and node.current is not None:
                self._request_stop(node, node.current, AttemptOutcome.budget_exceeded,
                                   detail=overrun)
        self._tree_usage = self._tree_usage + usage
        overrun = budget_overrun(self._tree_usage, self._registry.routing.supervisor.budget)
        if overrun is None:
            return
        payer = a if a is not None else next(
            (n.current for n in chain if n.current is not None), None)
        if payer is not None:
            owner = self._live.get(payer.id)
            if owner is not None:
                self._request_stop(owner[0], payer, AttemptOutcome.budget_exceeded,
                                   detail=f"tree budget: {overrun}")

    def _on_delegate_request(self, msg: DelegateRequest) -> None:
        owner = self._live.get(msg.attempt_id)
        if owner is None:
            self._drop(msg)
            return
        d, a = owner
        a.watch = a.watch.observe(a.watch.progress + 1, self._clock.now())
        self._nudge_ancestors(d, self._clock.now())
        try:
            self._check_delegation(d, msg.brief)
            child_id = self._registry.next_id(msg.brief.agent)
        except SupervisorError as exc:
            msg.reply(exc)
            return
        settled = Settled()
        settled.add_callback(msg.reply)
        self._on_dispatch(Dispatch(child_id, msg.brief, settled, parent_id=d.id))

    def _check_delegation(self, d: Delegation, brief: Brief) -> None:
        refusal = delegation_refusal(
            delegation_id=d.id, agent=d.agent, policy=d.policy, depth=d.depth,
            max_depth=self._registry.routing.supervisor.max_depth, brief=brief,
            policy_of=self._registry.policy,  # (an unknown agent raises UnknownAgent)
        )
        if refusal is not None:
            raise DelegationRefused(refusal)

    # -- stopping an attempt --------------------------------------------------------------

    def _request_stop(
        self, d: Delegation, a: Attempt, cause: AttemptOutcome, *, detail: str | None = None
    ) -> None:
        """Record a stop cause; the first one asks the child to stop and starts the grace."""
        if self._live.get(a.id) is None:
            return
        now = self._clock.now()
        a.stop_causes.append(cause)
        event = {
            AttemptOutcome.timeout: "attempt.timed_out",
            AttemptOutcome.stale: "attempt.stale",
            AttemptOutcome.budget_exceeded: "attempt.budget_exceeded",
        }.get(cause)
        if event is not None:
            extra: dict[str, Any] = {"elapsed_s": round(now - a.started_at, 6)}
            if cause is AttemptOutcome.budget_exceeded:
                extra.update(usage=d.usage.model_dump(), limit=detail)
            self._emit(event, d, a, **extra)
        if a.stopping_since is not None:
            return
        a.stopping_since = now
        # What this attempt delegated has lost its purpose: cancel it now, so that a
        # parent blocked in `ctx.delegate()` gets its answer and can stop.
        self._cancel_children(d, f"the attempt that delegated it ({a.id}) is stopping")
        assert a.child is not None
        a.child.cancel()
        grace = a.policy.shutdown.grace_s
        if grace <= 0:
            self._on_grace_over(GraceOver(a.id))
        else:
            timer = self._after(grace, GraceOver(a.id))
            if timer is not None:
                a.timers.append(timer)

    def _on_attempt_due(self, msg: AttemptDue) -> None:
        if msg.due_at is not None:
            self._observe_lag(msg.due_at)
        owner = self._live.get(msg.attempt_id)
        if owner is None:
            return
        d, a = owner
        now = self._clock.now()
        if now >= a.deadline:
            if AttemptOutcome.timeout not in a.stop_causes:
                self._request_stop(d, a, AttemptOutcome.timeout)  # a losing cause if late
        elif a.stopping_since is not None:
            return
        elif not a.watch.is_stale(now, a.stale_after_s) or waiting_on_children(d, self._open):
            if a.watch.is_stale(now, a.stale_after_s):
                # waiting in ctx.delegate(): the child it waits on has its own watch
                a.watch = a.watch.nudge(now)
            try:
                self._arm(a)  # progress moved the stale moment on
            except Exception as exc:  # noqa: BLE001 - no timer: stop it rather than lose it
                self._timer_refused(exc, "AttemptDue")
                self._request_stop(d, a, AttemptOutcome.stale)
        else:
            self._request_stop(d, a, AttemptOutcome.stale)

    def _observe_lag(self, due_at: float) -> None:
        now = self._clock.now()
        self._lag, warn = self._lag.observe(due_at, now)
        if warn:
            self._events.emit("supervisor.mailbox_lag", lag_s=round(self._lag.last_s, 6),
                              threshold_s=LAG_WARN_S, queued=self._queued())

    def _queued(self) -> int | None:
        """Messages waiting in the mailbox (pykka's threading inbox is a `queue.Queue`)."""
        qsize = getattr(self.actor_inbox, "qsize", None)
        return qsize() if qsize is not None else None

    def _on_grace_over(self, msg: GraceOver) -> None:
        owner = self._live.get(msg.attempt_id)
        if owner is None:
            return
        d, a = owner
        assert a.child is not None
        if a.child.killable:
            a.child.kill()  # `Finished` follows once the process is reaped
            return
        # A thread cannot be killed: fence it. Its late messages are dropped from now on.
        self._fenced[a.id] = d
        self._emit("attempt.fenced", d, a, reason="did not stop within grace_s",
                   grace_s=a.policy.shutdown.grace_s)
        self._end_attempt(d, a, None, fenced=True)

    # -- an attempt ends ------------------------------------------------------------------

    def _on_finished(self, msg: Finished) -> None:
        owner = self._live.get(msg.attempt_id)
        if owner is None:
            self._drop(msg)
            return
        self._end_attempt(*owner, msg)

    def _end_attempt(
        self, d: Delegation, a: Attempt, finished: Finished | None, *, fenced: bool = False
    ) -> None:
        now = self._clock.now()
        self._live.pop(a.id, None)
        if not a.announced:
            self._announce(d, a)
        for timer in a.timers:
            timer.cancel()
        d.current = None
        if finished is not None:
            d.partials_dropped += finished.partials_dropped  # not sent by the child
        outcome = resolve_outcome(
            finished.outcome if finished else None,
            a.stop_causes,
            cancel_requested=d.cancel_requested,
        )
        killed = finished.killed if finished else None
        if finished is not None and a.stopping_since is not None and killed is None:
            killed = "cooperative"
        if killed is not None and finished is not None:
            latency = finished.kill_latency_s
            if latency is None and a.stopping_since is not None:
                latency = now - a.stopping_since
            self._emit("attempt.killed", d, a, how=killed, pid=finished.pid or a.pid,
                       latency_s=None if latency is None else round(latency, 6))
        error = attempt_error(a, outcome, finished)
        if d.restart_pending is not None and outcome is AttemptOutcome.cancelled:
            error = f"restarted: {d.restart_pending}"
        losing = [c.value for c in a.stop_causes if c is not outcome]
        if finished is not None and finished.outcome is not outcome:
            losing.append(f"child:{finished.outcome.value}")
        record = AttemptRecord(
            id=a.id,
            agent=a.agent,
            outcome=outcome,
            duration_s=round(now - a.started_at, 6),
            error=error if outcome is not AttemptOutcome.completed else None,
            pid=(finished.pid if finished and finished.pid else a.pid),
            losing_causes=losing,
            fenced=fenced,
            killed=killed,
            progress=max(a.watch.progress, finished.progress if finished else 0, 0),
            tool_calls=a.tool_calls,
            last_tool=a.last_tool,
            last_note=a.last_note,
        )
        d.attempts.append(record)
        if (finished is not None and finished.outcome is AttemptOutcome.completed
                and outcome is not AttemptOutcome.completed):
            d.lost_output = finished.value  # a result that lost to a stop cause is kept
        if record.error is not None:
            d.last_error = record.error
            d.last_traceback = finished.traceback if finished is not None else None
        if outcome is AttemptOutcome.completed:
            self._emit("attempt.completed", d, a, duration_s=record.duration_s)
        else:
            self._emit("attempt.failed", d, a, outcome=outcome.value, error=record.error,
                       duration_s=record.duration_s, progress=record.progress,
                       tool_calls=record.tool_calls, last_tool=record.last_tool)
        # An attempt's own children lose their owner with it.
        self._cancel_children(d, "the attempt that delegated it ended")
        after = after_attempt(
            outcome,
            forced=d.forced is not None,
            cancel_requested=d.cancel_requested,
            restart_pending=d.restart_pending is not None,
            reviewed=d.brief.mode == "task" and d.policy.review_by is not None,
            grouped=d.group is not None,
        )
        restart_reason = d.restart_pending
        if after.restart_consumed:
            d.restart_pending = None
        value = finished.value if finished else None
        for step in after.steps:
            if step == "settle_forced":
                assert d.forced is not None
                self._settle(d, d.forced)
            elif step == "group_restart":
                if self._group_restart_allowed(d):
                    self._emit("group.restarted", d, a, reason=restart_reason)
                    self._start_attempt(d)
            elif step == "review":
                assert d.policy.review_by is not None
                self._start_review(d, d.policy.review_by, value)
            elif step == "settle_completed":
                self._settle(d, Settle(Status.completed), value=value)
            elif step == "restart_siblings":
                self._restart_siblings(d, outcome)
            else:
                self._next_step(d, a, outcome, fenced=fenced)

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
        )
        if not isinstance(step, Settle):
            allowed = self._through_circuit(d, step, outcome)
            if allowed is None:
                return  # the supervisor gave up (scope: supervisor) and settled it
            step = allowed
        if isinstance(step, Settle):
            self._settle(d, step)
        elif isinstance(step, Retry):
            d.retries_used += 1
            delay = backoff_delay(d.policy.retry, step.number, self._rng)
            self._emit("retry.scheduled", d, a, backoff_s=round(delay, 6),
                       next_attempt_id=f"{d.id}-a{d.attempt_count + 1}",
                       follow_up=step.follow_up)
            d.state = "backoff"
            if delay <= 0:
                self._on_backoff_over(BackoffOver(d.id))
            else:
                d.backoff_timer = self._after(delay, BackoffOver(d.id))
        elif isinstance(step, Fallback):
            self._emit("fallback.dispatched", d, a, **{"from": d.agent, "to": step.agent})
            d.agent = step.agent
            d.policy = self._registry.policy(step.agent)
            d.visited.append(step.agent)
            d.retries_used = 0
            self._start_attempt(d)

    def _restart_siblings(self, d: Delegation, outcome: AttemptOutcome) -> None:
        """one_for_all / rest_for_one: stop the siblings still running, then restart them."""
        group = d.group
        assert group is not None
        running = {m for m in group.members
                   if m in self._open and self._open[m].current is not None}
        for sibling_id in siblings_to_restart(group.strategy, group.members, d.id, running):
            sibling = self._open[sibling_id]
            assert sibling.current is not None
            sibling.restart_pending = (
                f"{group.strategy}: sibling {d.id} failed ({outcome.value})"
            )
            self._request_stop(sibling, sibling.current, AttemptOutcome.cancelled)

    def _start_review(self, d: Delegation, reviewer: str, value: Any) -> None:
        """A task's second stage: the reviewer gets the performer's summary."""
        d.performed = value
        report = value if isinstance(value, Report) else Report(output=value)
        review_brief = Brief(
            agent=reviewer,
            scope=f"Review the work of {d.id}: {d.brief.scope}",
            inputs={
                "performer": d.agent,
                "output": report.output,
                "changes": report.changes,
                "findings": report.findings,
                "partial_results": d.partials[:100],
            },
            expected_output="a verdict (approve or reject) and findings",
        )
        review_id = self._registry.next_id(reviewer)
        settled = Settled()
        settled.add_callback(lambda summary: self.send(ReviewDone(d.id, summary)))
        self._on_dispatch(Dispatch(review_id, review_brief, settled, parent_id=d.id))

    def _on_review_done(self, msg: ReviewDone) -> None:
        d = self._open.get(msg.delegation_id)
        if d is None:
            return
        d.review = msg.review
        approved, why = review_verdict(msg.review)
        if approved:
            self._settle(d, Settle(Status.completed), value=d.performed)
        else:
            self._settle(d, Settle(Status.blocked, reason=why), value=d.performed)

    def _through_circuit(
        self, d: Delegation, step: Retry | Fallback, outcome: AttemptOutcome
    ) -> NextStep | None:
        """The restart `step` if intensity allows it, else what follows instead (None: the
        supervisor gave up and settled `d`)."""
        intensity = self._registry.routing.supervisor.intensity
        if intensity.scope == "supervisor":
            return step if self._restart_allowed(d) else None
        if isinstance(step, Fallback) or self._admit(d):
            return step  # a fallback to another agent is always allowed
        return when_circuit_open(step, outcome, d.policy, d.visited,
                                 circuit_reason(d.agent, intensity))

    def _group_restart_allowed(self, d: Delegation) -> bool:
        """A group restart of `d` counts like any restart; refused, `d` settles `failed`."""
        intensity = self._registry.routing.supervisor.intensity
        if intensity.scope == "supervisor":
            return self._restart_allowed(d)
        if self._admit(d):
            return True
        self._settle(d, Settle(Status.failed, reason=circuit_reason(d.agent, intensity)))
        return False

    def _admit(self, d: Delegation) -> bool:
        """Count one restart of `d`'s agent against its circuit (scope: agent)."""
        intensity = self._registry.routing.supervisor.intensity
        admission = admit_restart(self._windows.get(d.agent, RestartWindow()),
                                  self._clock.now(), intensity,
                                  was_open=d.agent in self._open_circuits)
        self._windows[d.agent] = admission.window
        if admission.allowed:
            self._open_circuits.discard(d.agent)
            return True
        self._open_circuits.add(d.agent)
        if admission.tripped:
            self._events.emit("supervisor.intensity_exceeded", delegation_id=d.id,
                              agent=d.agent, scope="agent",
                              restarts=len(admission.window.restarts),
                              within_s=intensity.within_s)
        return False

    def _restart_allowed(self, d: Delegation) -> bool:
        """Count a restart against the supervisor's intensity; False (and settled) in a storm."""
        intensity = self._registry.routing.supervisor.intensity
        window = self._windows.get(d.parent_id, RestartWindow()).record(
            self._clock.now(), intensity
        )
        self._windows[d.parent_id] = window
        if not window.exceeded(intensity):
            return True
        reason = (
            f"restart intensity exceeded: more than {intensity.max_restarts} restarts "
            f"within {intensity.within_s:g} s; the supervisor stopped restarting"
        )
        self._events.emit("supervisor.intensity_exceeded", delegation_id=d.parent_id,
                          agent=d.agent, scope="supervisor",
                          restarts=len(window.restarts), within_s=intensity.within_s)
        self._windows[d.parent_id] = RestartWindow()
        give_up = Settle(Status.failed, reason=reason)
        self._settle(d, give_up)
        for other in list(self._open.values()):
            if other.parent_id == d.parent_id and other.state != "settled":
                other.forced = give_up
                if other.current is not None:
                    self._request_stop(other, other.current, AttemptOutcome.cancelled)
                else:
                    self._settle(other, give_up)
        return False

    def _on_backoff_over(self, msg: BackoffOver) -> None:
        d = self._open.get(msg.delegation_id)
        if d is None or d.state != "backoff":
            return
        d.backoff_timer = None
        d.state = "running"
        self._start_attempt(d)

    # -- cancellation ----------------------------------------------------------------------

    def _on_cancel(self, msg: Cancel) -> None:
        d = self._open.get(msg.delegation_id)
        if d is None:
            return  # unknown or already settled: a no-op
        self._cancel(d, msg.reason or "cancelled by its owner")

    def _on_deliver(self, msg: Deliver) -> bool:
        """The owner's message: to the running child, or kept for the next attempt."""
        d = self._open.get(msg.delegation_id)
        if d is None:
            return False
        self._mail.deliver(d.id, d.current.child if d.current else None, msg.mail)
        return True

    def _cancel_children(self, d: Delegation, reason: str) -> None:
        """Cancel whatever `d` delegated that is still open."""
        for child_id in list(d.children):
            child = self._open.get(child_id)
            if child is not None:
                self._cancel(child, reason)

    def _cancel(self, d: Delegation, reason: str) -> None:
        if d.cancel_requested or d.state == "settled":
            return
        d.cancel_requested = True
        d.cancel_reason = reason
        self._emit("delegation.cancel_requested", d, d.current, reason=reason)
        self._cancel_children(d, f"its parent {d.id} was cancelled")
        if d.current is not None:
            self._request_stop(d, d.current, AttemptOutcome.cancelled)
        else:
            self._settle(d, Settle(Status.cancelled, reason=reason))

    # -- settlement ------------------------------------------------------------------------

    def _settle(self, d: Delegation, step: Settle, *, value: Any = None) -> None:
        """The single, final decision of a delegation."""
        if d.state == "settled":
            return
        if d.backoff_timer is not None:
            d.backoff_timer.cancel()
        if d.state == "queued":
            with contextlib.suppress(ValueError):
                self._queue.remove(d.id)
        elif d.depth == 1:
            self._running_roots -= 1
        d.state = "settled"
        if value is None:
            value = d.lost_output
        try:
            summary = build_summary(d, step, value, self._clock.now())
        except Exception as exc:  # noqa: BLE001 - a delegation settles exactly once, whatever
            summary = Summary(
                id=d.id, agent=d.agent, scope=d.brief.scope,
                status=Status.cancelled if d.cancel_requested else step.status,
                attempts=list(d.attempts), usage=d.usage,
                error=f"its summary could not be built: {type(exc).__name__}: {exc}",
            )
        self._open.pop(d.id, None)
        self._windows.pop(d.id, None)  # its children's restart window goes with it
        self._mail.drop(d.id)
        self._settled_count += 1
        self._emit("delegation.settled", d, None, status=summary.status.value,
                   duration_s=summary.duration_s, attempts=len(d.attempts),
                   timeout_kind=summary.timeout_kind,
                   error=(summary.error or "").split("\n")[0] or None,
                   usage=summary.usage.model_dump())
        d.settled.set(summary)
        self._cancel_children(d, f"its parent {d.id} settled")
        self._fill_slots()

    def _fill_slots(self) -> None:
        limit = self._registry.routing.supervisor.max_concurrent
        while self._queue and self._running_roots < limit and self._accepting:
            d = self._open.get(self._queue.popleft())
            if d is not None and d.state == "queued":
                self._start(d)

    # -- stop and snapshot ----------------------------------------------------------------

    def _on_hold(self, msg: Hold) -> None:
        msg.held.set()
        msg.release.wait()

    def _on_stop_all(self, msg: StopAll) -> list[Settled]:
        self._accepting = False
        pending = [d.settled for d in self._open.values()]
        for d in list(self._open.values()):
            self._cancel(d, msg.reason)
        return pending

    def _on_force_settle(self, msg: ForceSettle) -> None:
        """Settle what is still open after the stop wait: kill processes, fence threads."""
        for d in list(self._open.values()):
            a = d.current
            if a is not None and a.child is not None:
                if a.child.killable:
                    a.child.kill()  # its `Finished` will arrive late and be dropped
                else:
                    self._fenced[a.id] = d
                self._end_attempt(d, a, None, fenced=not a.child.killable)
            if d.state != "settled":
                self._settle(d, Settle(Status.cancelled, reason=msg.reason))

    def _on_snapshot(self, _msg: Snapshot) -> dict[str, Any]:
        return tree_snapshot(self._open, self._clock.now(), queued=len(self._queue),
                             settled=self._settled_count, abandoned_threads=len(self._fenced),
                             dropped=self._dropped, lag=self._lag, usage=self._tree_usage)

    # -- events ----------------------------------------------------------------------------

    def _emit(self, event: str, d: Delegation, a: Attempt | None = None, **fields: Any) -> None:
        if self._events.enabled:
            self._events.emit(
                event,
                delegation_id=d.id,
                attempt_id=a.id if a else None,
                parent_id=d.parent_id,
                agent=a.agent if a else d.agent,
                **fields,
            )


def _placing(a: Attempt) -> bool:
    """Whether the attempt still waits for a node (a Ray task not yet taken by a worker)."""
    return bool(getattr(a.child, "placing", False))


def _effective(policy: AgentPolicy, brief: Brief) -> dict[str, Any]:
    """The policy a delegation runs under: the agent's, with the brief's overrides applied."""
    overrides = {
        key: value
        for key, value in (("timeout_s", brief.timeout_s), ("partial_ok", brief.partial_ok))
        if value is not None
    }
    effective = policy.model_copy(update=overrides) if overrides else policy
    return effective.model_dump(mode="json", exclude={"metadata"}, by_alias=True)
