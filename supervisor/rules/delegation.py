"""Who may delegate to whom: the checks on a child's `ctx.delegate()`, made in Zeus's
thread before the nested delegation is dispatched. Pure functions."""

from __future__ import annotations

from collections.abc import Callable

from actors import Brief
from supervisor.routing import AgentPolicy
from supervisor.rules.admission import writer_partial_refusal

__all__ = ["delegation_refusal"]


def delegation_refusal(
    *,
    delegation_id: str,
    agent: str,
    policy: AgentPolicy,
    depth: int,
    max_depth: int,
    brief: Brief,
    policy_of: Callable[[str], AgentPolicy],
) -> str | None:
    """Why `agent` (running `delegation_id` at `depth` under `policy`) may not delegate
    `brief`, or None if it may. `policy_of` looks up the target's policy (it raises for an
    unknown agent); it is asked last, so a leaf or a too-deep delegation is refused first."""
    if policy.kind != "orchestrator":
        return (
            f"{agent} is a leaf agent and may not delegate; do the work yourself "
            "(or make it `kind: orchestrator` in routing.yml)"
        )
    if depth + 1 > max_depth:
        return (
            f"delegating from {delegation_id} (depth {depth}) would exceed max_depth "
            f"{max_depth}; do the work yourself"
        )
    if policy.can_delegate_to is not None and brief.agent not in policy.can_delegate_to:
        allowed = list(policy.can_delegate_to)
        return f"{agent} may delegate only to {allowed}, not to {brief.agent!r}"
    return writer_partial_refusal(brief, policy_of(brief.agent))
