"""Restart intensity as a circuit breaker per agent. Pure functions, tested by tables.

With `scope: agent` (the default), more than `max_restarts`
restarts of one agent within `within_s` open that agent's circuit: its
failures are no longer restarted (retries, group restarts) until the window
has room again; a fallback to another agent is still allowed, and attempts
already running are never touched. With `scope: supervisor` the window counts
the restarts of every delegation under one supervisor and, once exceeded, the
supervisor gives up on its open delegations (OTP's escalation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from actors import AttemptOutcome, Status
from supervisor.routing import OWNER, AgentPolicy, IntensityPolicy
from supervisor.rules.intensity import RestartWindow
from supervisor.rules.settle import TIMEOUT_KIND, Fallback, NextStep, Retry, Settle

__all__ = ["Admission", "admit_restart", "circuit_reason", "when_circuit_open"]


@dataclass(frozen=True, slots=True)
class Admission:
    """Whether one more restart may start, and the window to keep afterwards."""

    allowed: bool
    window: RestartWindow
    tripped: bool  # this refusal opened the circuit (the first one since it last had room)


def admit_restart(
    window: RestartWindow, now: float, policy: IntensityPolicy, *, was_open: bool
) -> Admission:
    """Count one more restart at `now` against `window`, if the window has room for it.

    A refused restart is not recorded: the circuit closes again as soon as the
    oldest restart slides out of the window.
    """
    kept = RestartWindow(tuple(t for t in window.restarts if now - t < policy.within_s))
    if len(kept.restarts) < policy.max_restarts:
        return Admission(True, kept.record(now, policy), tripped=False)
    return Admission(False, kept, tripped=not was_open)


def circuit_reason(agent: str, policy: IntensityPolicy) -> str:
    """Why a restart was refused, in a sentence."""
    if policy.scope == "supervisor":
        return (f"restart intensity exceeded: more than {policy.max_restarts} restarts "
                f"within {policy.within_s:g} s; the supervisor stopped restarting")
    return (f"restart intensity exceeded for agent {agent}: more than {policy.max_restarts} "
            f"restarts within {policy.within_s:g} s; not restarted until the window has room")


def when_circuit_open(
    step: Retry,
    outcome: AttemptOutcome,
    policy: AgentPolicy,
    visited: Sequence[str],
    reason: str,
) -> NextStep:
    """What follows instead of `step` (a retry) when the agent's circuit is open.

    A fallback to another agent is still allowed; otherwise the delegation
    settles as it would once its retries were spent, with the reason.
    """
    if (policy.fallback is not None and policy.fallback != OWNER
            and policy.fallback not in visited):
        return Fallback(policy.fallback)
    kind = TIMEOUT_KIND.get(outcome)
    if kind is not None:
        return Settle(Status.timed_out, kind, reason)
    return Settle(Status.failed, reason=reason)
