"""The root actor. Every decision is taken here, in the actor's thread, one message at a time.

The actor is a thin shell: it keeps the state of open delegations, feeds
messages to the pure decisions in `supervisor.rules` and carries out what they
decide through the backends and the clock's timers. Nothing here blocks on a child.

It is assembled from parts (see `core/shell.py`): this module has the mailbox,
dispatch and the start of an attempt, cancellation by the owner, the stop of Zeus
and the snapshot; what children report, stopping an attempt, an attempt's end and
restarts have a module each.
"""

from __future__ import annotations

import random
import traceback
from collections.abc import Callable
from typing import Any

from actors import AttemptOutcome, Brief, Status
from actors.backends import Backend
from actors.clock import Clock, check_when
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
from supervisor.core.ending import AttemptEnds
from supervisor.core.handle import Settled
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
from supervisor.core.reports import ChildReports
from supervisor.core.snapshot import tree_snapshot
from supervisor.core.spec import child_spec, isolation_of, work_of
from supervisor.core.state import Attempt, Delegation
from supervisor.core.stopping import StoppingAttempts
from supervisor.errors import SupervisorError
from supervisor.journal.events import EventLog
from supervisor.routing import AgentPolicy
from supervisor.rules.settle import Settle
from supervisor.rules.stale import ProgressWatch

__all__ = ["ZeusActor"]


class ZeusActor(ChildReports, StoppingAttempts, AttemptEnds):
    """The root supervisor. All methods run in the actor's own thread."""

    def __init__(
        self,
        *,
        registry: Registry,
        clock: Clock,
        events: EventLog,
        backends: dict[str, Backend],
        rng: random.Random,
    ) -> None:
        super().__init__(registry=registry, clock=clock, events=events, backends=backends, rng=rng)
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

    # -- dispatch and the start of an attempt -------------------------------------------

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
                              budget_left=self._budget_left(d), heads=self._framing_heads)
            self._arm(a)  # before the child starts: a deadline no timer can keep fails it here
            a.child = self._backend(isolation_of(a)).start(spec, self.send)
            a.pid = a.child.pid
            if getattr(a.child, "alive", False):  # alive as it starts: its first sign of life
                a.watch = a.watch.observe(0, now)
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
        if not self._events.enabled:
            return
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

        Before its first sign of life it is due no later than `stale_after_s` from now
        (the soonest it could go stale), so that sign moves no timer: the timer checks
        and re-arms when it comes (`_on_attempt_due`). The timer holds the attempt's id,
        not the attempt: once cancelled it keeps nothing of the delegation alive.
        `TimerError` if its deadline or stale moment is not a finite time.
        """
        when = check_when(min(a.deadline, a.watch.stale_at(a.stale_after_s)))
        if a.watch.progress < 0:
            when = min(when, self._clock.now() + a.stale_after_s)
        if a.due is not None:
            a.due.cancel()  # moved: the first sign of life, a long tool call ending
        due = AttemptDue(a.id, when)
        a.due_at = when
        a.due = self._clock.call_at(when, lambda: self.send(due))
        a.timers.append(a.due)

    def _backend(self, isolation: str) -> Backend:
        try:
            return self._backends[isolation]
        except KeyError:
            raise SupervisorError(f"no {isolation!r} backend is available") from None

    # -- the owner's cancel and mail ---------------------------------------------------

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
