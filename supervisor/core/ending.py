"""An attempt ends: its record, its events, and what follows it in the order
`rules.after_attempt` gives (retry, fallback or settle last). Runs in the actor's thread."""

from __future__ import annotations

from actors import AttemptOutcome
from actors.protocol import Finished
from supervisor.core.messages import BackoffOver
from supervisor.core.restarts import Restarts
from supervisor.core.state import Attempt, Delegation, attempt_record, how_killed
from supervisor.rules.after_attempt import after_attempt
from supervisor.rules.backoff import backoff_delay
from supervisor.rules.settle import COMPLETED, Fallback, Retry, Settle, decide_next, resolve_outcome

__all__ = ["AttemptEnds"]


class AttemptEnds(Restarts):
    """An attempt's end and the steps after it."""

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
        killed = how_killed(a, finished)
        if killed is not None and finished is not None:
            latency = finished.kill_latency_s
            if latency is None and a.stopping_since is not None:
                latency = now - a.stopping_since
            self._emit("attempt.killed", d, a, how=killed, pid=finished.pid or a.pid,
                       latency_s=None if latency is None else round(latency, 6))
        record = attempt_record(a, outcome, finished, now=now, killed=killed, fenced=fenced,
                                restart_pending=d.restart_pending)
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
                self._settle(d, COMPLETED, value=value)
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

    def _on_backoff_over(self, msg: BackoffOver) -> None:
        d = self._open.get(msg.delegation_id)
        if d is None or d.state != "backoff":
            return
        d.backoff_timer = None
        d.state = "running"
        self._start_attempt(d)
