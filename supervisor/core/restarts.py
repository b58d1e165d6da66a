"""Restarts under supervision: restart intensity and the circuit of each agent, group
restarts of siblings, and a task's review stage. Runs in the actor's thread."""

from __future__ import annotations

from typing import Any

from actors import AttemptOutcome, Status
from supervisor.core.handle import Settled
from supervisor.core.messages import Dispatch, ReviewDone
from supervisor.core.shell import ActorShell
from supervisor.core.state import Delegation
from supervisor.rules.circuit import admit_restart, circuit_reason, when_circuit_open
from supervisor.rules.groups import review_brief, review_verdict, siblings_to_restart
from supervisor.rules.intensity import RestartWindow
from supervisor.rules.settle import COMPLETED, Fallback, NextStep, Retry, Settle

__all__ = ["Restarts"]


class Restarts(ActorShell):
    """Restart intensity, circuits, group restarts and reviews."""

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
        brief = review_brief(reviewer, delegation_id=d.id, scope=d.brief.scope,
                             performer=d.agent, value=value, partials=d.partials)
        review_id = self._registry.next_id(reviewer)
        settled = Settled()
        settled.add_callback(lambda summary: self.send(ReviewDone(d.id, summary)))
        self._on_dispatch(Dispatch(review_id, brief, settled, parent_id=d.id))

    def _on_review_done(self, msg: ReviewDone) -> None:
        d = self._open.get(msg.delegation_id)
        if d is None:
            return
        d.review = msg.review
        approved, why = review_verdict(msg.review)
        if approved:
            self._settle(d, COMPLETED, value=d.performed)
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
