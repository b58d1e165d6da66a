"""What children report to Zeus: signs of life, partials, tool calls, spend, their own
delegations and their end. Handled in the actor's thread; late ones are dropped (and
counted). This part depends on the supervisor, never the other way round."""

from __future__ import annotations

from typing import Any

from actors import Brief
from actors.protocol import (
    AgentSession,
    Charge,
    ChildMessage,
    DelegateRequest,
    Finished,
    Heartbeat,
    Partial,
    Placed,
    Spawned,
    Started,
    ToolCall,
)
from actors.speaks import SessionTotals
from supervisor.core.handle import DelegationFuture
from supervisor.core.state import Attempt, Delegation
from supervisor.core.supervisor import Supervisor
from supervisor.errors import DelegationRefused, SupervisorError
from supervisor.journal.streams import short_text
from supervisor.rules.budget import priced
from supervisor.rules.delegation import delegation_refusal
from supervisor.rules.recovery import is_writer

__all__ = ["ChildReports"]




class ChildReports:
    """The handlers of what children send (from their own threads, through the mailbox)."""

    def __init__(self, supervisor: Supervisor) -> None:
        self._sup = supervisor
        self._tree = supervisor.tree
        self._events = supervisor.events
        self._clock = supervisor.clock
        self.dropped = 0  # late messages of settled delegations, superseded or fenced attempts

    def handlers(self) -> dict[type, Any]:
        """The message types this part handles, each with its handler."""
        return {
            Heartbeat: self.on_heartbeat,
            Placed: self.on_placed,
            Partial: self.on_partial,
            Charge: self.on_charge,
            ToolCall: self.on_tool_call,
            AgentSession: self.on_agent_session,
            Finished: self.on_finished,
            Spawned: self.on_spawned,
            Started: self.on_started,
            DelegateRequest: self.on_delegate_request,
        }

    def _owner(self, message: Heartbeat | Partial | Charge | ToolCall | AgentSession) -> (
            tuple[Delegation, Attempt] | None):
        """The running attempt that sent `message`, its watch moved on by its progress."""
        owner = self._tree.owner(message.attempt_id)
        if owner is None:
            self.drop(message)
            return None
        d, a = owner
        if a.start_by is not None:  # a report proves it runs, whatever said so first
            self._sup.running(d, a)
        now = self._clock.now()
        before = a.observe(message.progress, now)
        if a.watch.progress > before.progress:
            if before.progress < 0 and a.watch.stale_at(a.stale_after_s) < a.due_at:
                self._sup.timers.arm(a)  # its first sign of life starts the stale clock
                # (the timer armed at its start is due no later, and moves on when it
                # comes, unless its stale threshold shrank meanwhile)
            if d.parent_id is not None:
                self._tree.nudge_ancestors(d, now)
            if self._events.subscriptions.active and a.watch.progress > 0:  # not a first beat
                self._events.publish("attempt.progress", delegation_id=d.id, attempt_id=a.id,
                                     agent=a.agent, progress=a.watch.progress)
        return owner

    def drop(self, message: ChildMessage) -> None:
        """A late message of a settled delegation, a superseded or a fenced attempt."""
        self.dropped += 1
        attempt_id = message.attempt_id
        fenced = self._tree.fenced
        payer = None
        if isinstance(message, Charge):
            payer = fenced.get(attempt_id)
            if payer is not None:
                # Late spend is real money: it counts against the tree all the same.
                self._sup.spend(payer, None, priced(message.usage, payer.policy.pricing),
                                attempt_id)
            elif (lost := self._tree.lease_lost.get(attempt_id)) is not None and (
                    self._charged_late(lost[1], message)):
                payer = lost[0]
        elif isinstance(message, Finished):
            self._tree.lease_lost.pop(attempt_id, None)  # its child ended: nothing more comes
        if isinstance(message, Finished) and attempt_id in fenced:
            delegation_id = fenced.pop(attempt_id).id
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

    def _charged_late(self, a: Attempt, msg: Charge) -> bool:
        """A charge of `a`, which this host let go when its lease was lost: written late,
        for whoever owns its delegation now, once (docs/design.md, "Spend is a fact, not a
        decision"); False when it was counted already."""
        if not a.new_charge(msg.progress):
            return False
        self._sup.durable.charged_late(a.id, priced(msg.usage, a.policy.pricing), msg.progress)
        return True

    def on_finished(self, msg: Finished) -> None:
        owner = self._tree.owner(msg.attempt_id)
        if owner is None:
            self.drop(msg)
            return
        self._sup.end_attempt(*owner, msg)

    def on_spawned(self, msg: Spawned) -> None:
        """The attempt's process was started outside the mailbox: its pid, for the journal."""
        owner = self._tree.owner(msg.attempt_id)
        if owner is None:
            return
        d, a = owner
        a.spawned_as(msg.pid)
        # Its clocks start once it runs the work (`Started`): a process still being started
        # (Zeus's delay, not the child's) is neither stale nor late.
        self._sup.emit("attempt.spawned", d, a, pid=msg.pid, pid_start_time=msg.pid_start_time)
        self._sup.durable.identity(a, msg.pid, msg.pid_start_time, None)

    def on_started(self, msg: Started) -> None:
        """The attempt's child began to run the work (a worker took its job, a command's
        program was started): its deadline and stale clock start there."""
        owner = self._tree.owner(msg.attempt_id)
        if owner is not None:
            self._sup.running(*owner, msg.at)

    def on_placed(self, msg: Placed) -> None:
        """A Ray attempt reached a node (waiting for one is neither a hang nor the agent's
        time: its deadline and stale clock start here)."""
        owner = self._tree.owner(msg.attempt_id)
        if owner is None:
            return
        d, a = owner
        a.spawned_as(msg.pid)
        assert a.child is not None  # a child that reports was started
        self._sup.durable.identity(a, msg.pid, a.child.pid_start_time, a.child.node)
        self._sup.running(d, a)
        if not a.announced:
            self._sup.announce(d, a)

    def on_heartbeat(self, msg: Heartbeat) -> None:
        owner = self._owner(msg)
        if owner is None:
            return
        d, a = owner
        if msg.note is not None:
            a.noted(msg.note)
        if not self._events.enabled or (msg.liveness and msg.progress <= 0):
            return  # alive, nothing done yet: nothing to log
        if a.heartbeat_due(self._clock.now()):
            self._sup.emit("attempt.heartbeat", d, a, progress=msg.progress, note=msg.note)

    def on_partial(self, msg: Partial) -> None:
        owner = self._owner(msg)
        if owner is None:
            return
        d, a = owner
        if self._events.enabled:
            self._sup.emit("attempt.partial", d, a, item=short_text(msg.item),
                           progress=msg.progress)
        self._sup.durable.partial(d, a.id, msg.item)
        d.keep_partial(msg.item)

    def on_tool_call(self, msg: ToolCall) -> None:
        """A tool call began, ended, or was seen only once it was over: each a journal
        event `attempt.tool` (docs/design.md, "Events"), timed by Zeus's clock."""
        owner = self._owner(msg)
        if owner is None:
            return
        d, a = owner
        if msg.running is False:
            self._tool_ended(d, a, msg)
            return
        a.tool_began(msg.call_id, msg.name, side_effects=not msg.read_only,
                     now=self._clock.now(), running=bool(msg.running))
        if (msg.running and not a.tool_stored and is_writer(a.policy) and not msg.read_only
                and self._sup.backend_for(a.policy).runs_in_host):
            a.tool_told_to_store(True)  # a thread that no lease can stop is writing
            self._sup.durable.in_tool(a, msg.name)
        call_id = {} if msg.call_id is None else {"call_id": msg.call_id}
        self._sup.emit("attempt.tool", d, a, phase="start" if msg.running else "end",
                       tool=msg.name, side_effects=not msg.read_only, **call_id)
        if not msg.read_only:
            d.ran_tool(f"{msg.name}({msg.detail})" if msg.detail else msg.name)
            # Side effects are a tree: every ancestor attempt that delegated this one wrote.
            for parent in self._tree.ancestors(d):
                if parent.current is not None:
                    parent.current.wrote()

    def _tool_ended(self, d: Delegation, a: Attempt, msg: ToolCall) -> None:
        """A long tool call ended: its start (by the child's id of it, else the latest of
        its name) gives its duration; none seen (a reattached child's), none is said."""
        began = a.tool_ended(msg.call_id, msg.name)
        fields: dict[str, Any] = {} if msg.call_id is None else {"call_id": msg.call_id}
        if began is not None:
            fields["duration_s"] = round(self._clock.now() - began.since, 6)
        self._sup.emit("attempt.tool", d, a, phase="end", tool=msg.name,
                       side_effects=began.side_effects if began else not msg.read_only,
                       **fields)
        if a.tools:
            return  # still inside the oldest of the others
        if a.tool_stored:
            a.tool_told_to_store(False)
            self._sup.durable.in_tool(a, None)
        if a.stopping_since is None:  # (a stopping attempt keeps it, as evidence)
            self._sup.timers.arm(a)  # the shorter threshold applies again

    def on_agent_session(self, msg: AgentSession) -> None:
        """The agent program's own session id: kept with the attempt, and bound to the
        brief's session so that a follow-up in it resumes (docs/agent-clis.md)."""
        owner = self._owner(msg)
        if owner is None:
            return
        d, a = owner
        d.in_session(a, msg.session_id)
        self._sup.agent_sessions.bind(d.agent, d.brief.session, msg.session_id)
        self._sup.emit("attempt.session", d, a, session_id=msg.session_id)

    def on_charge(self, msg: Charge) -> None:
        """Spend: counted against the budgets and, for an agent CLI's session, added to what
        that session was charged (kept with the charge, docs/agent-clis.md)."""
        owner = self._owner(msg)
        if owner is None:
            return
        d, a = owner
        if not a.new_charge(msg.progress):
            return  # sent again by a worker its last host had not answered: counted already
        usage = priced(msg.usage, a.policy.pricing)
        session = None
        if a.agent_session is not None:
            added = SessionTotals(usage.input_tokens, min(msg.cached_input_tokens,
                                                          usage.input_tokens),
                                  usage.output_tokens, usage.cost)
            self._sup.agent_sessions.counted(a.agent_session, added)
            session = (a.agent_session, added)
        self._sup.spend(d, a, usage, msg.attempt_id, session=session, progress=msg.progress)

    def on_delegate_request(self, msg: DelegateRequest) -> None:
        owner = self._tree.owner(msg.attempt_id)
        if owner is None:
            self.drop(msg)
            return
        d, a = owner
        a.observe(a.watch.progress + 1, self._clock.now())
        self._tree.nudge_ancestors(d, self._clock.now())
        try:
            self._check_delegation(d, msg.brief)
        except SupervisorError as exc:
            msg.reply(exc)
            return
        future = DelegationFuture()
        future.add_callback(msg.reply)
        self._sup.dispatch_nested(d, msg.brief, future, msg.ordinal)

    def _check_delegation(self, d: Delegation, brief: Brief) -> None:
        refusal = delegation_refusal(
            delegation_id=d.id, agent=d.agent, policy=d.policy, depth=d.depth,
            max_depth=self._sup.registry.routing.supervisor.max_depth, brief=brief,
            policy_of=self._sup.registry.policy,  # (an unknown agent raises UnknownAgent)
        )
        if refusal is not None:
            raise DelegationRefused(refusal)

