"""What children report to Zeus: signs of life, partials, tool calls, spend and their
own delegations. Handled in the actor's thread; late ones are dropped (and counted)."""

from __future__ import annotations

from typing import Any

from actors import AttemptOutcome, Brief, Usage
from actors.protocol import Charge, DelegateRequest, Finished, Heartbeat, Partial, Spawned, ToolCall
from supervisor.core.handle import Settled
from supervisor.core.messages import Dispatch
from supervisor.core.shell import ActorShell
from supervisor.core.state import MAX_PARTIALS, Attempt, Delegation
from supervisor.core.tree import ancestors
from supervisor.errors import DelegationRefused, SupervisorError
from supervisor.journal.streams import short_text
from supervisor.rules.budget import budget_overrun, priced
from supervisor.rules.delegation import delegation_refusal

__all__ = ["ChildReports"]


class ChildReports(ActorShell):
    """The handlers of what children send (from their own threads, through `send`)."""

    def _owner(self, message: Any) -> tuple[Delegation, Attempt] | None:
        owner = self._live.get(message.attempt_id)
        if owner is None:
            self._drop(message)
            return None
        d, a = owner
        before, now = a.watch, self._clock.now()
        a.watch = before.observe(message.progress, now)
        if a.watch.progress > before.progress:
            if before.progress < 0 and a.watch.stale_at(a.stale_after_s) < a.due_at:
                self._arm(a)  # its first sign of life starts the stale clock (the timer
                # armed at its start is due no later, and moves on when it comes, unless
                # its stale threshold shrank meanwhile)
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
