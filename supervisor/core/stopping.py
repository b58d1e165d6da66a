"""Stopping an attempt: its deadline or stale moment, the cooperative cancel, the grace
period and the kill (or the fence, for a thread). Runs in the actor's thread."""

from __future__ import annotations

from typing import Any

from actors import AttemptOutcome
from supervisor.core.messages import AttemptDue, GraceOver
from supervisor.core.shell import ActorShell
from supervisor.core.state import Attempt, Delegation
from supervisor.core.tree import waiting_on_children
from supervisor.rules.lag import WARN_S as LAG_WARN_S

__all__ = ["StoppingAttempts"]


class StoppingAttempts(ActorShell):
    """Stop causes, the grace period, kills and fences."""

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
