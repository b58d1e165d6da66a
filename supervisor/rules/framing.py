"""Role framing: the short preamble a host prepends to a child's prompt."""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors import Usage

if TYPE_CHECKING:
    from supervisor.routing import AgentPolicy, Routing

__all__ = ["role_framing"]


def role_framing(
    agent: str,
    policy: AgentPolicy,
    routing: Routing,
    depth: int,
    remaining_s: float,
    usage: Usage,
) -> str:
    """Who the child is, what it may delegate to, and how much time and budget it has."""
    max_depth = routing.supervisor.max_depth
    lines = [f"You are {agent}" + (f", the {policy.role}" if policy.role else "") + "."]
    if policy.kind == "orchestrator" and depth < max_depth:
        targets = (
            ", ".join(policy.can_delegate_to)
            if policy.can_delegate_to is not None
            else ", ".join(sorted(n for n in routing.agents if n != agent)) or "no agent"
        )
        lines.append(
            f"Role: orchestrator at depth {depth} of {max_depth}; you may delegate to: {targets}."
        )
    else:
        lines.append(f"Role: leaf at depth {depth} of {max_depth}; do the work yourself, "
                     "do not delegate.")
    lines.append(f"Deadline: {remaining_s:.0f} s from now.")
    if policy.reasoning_effort is not None:
        lines.append(f"Reasoning effort: {policy.reasoning_effort}.")
    budget = policy.budget
    caps = [
        f"{name} {used:g}/{cap:g}"
        for name, used, cap in (
            ("calls", usage.calls, budget.max_calls),
            ("input tokens", usage.input_tokens, budget.max_input_tokens),
            ("output tokens", usage.output_tokens, budget.max_output_tokens),
            ("cost", usage.cost, budget.max_cost),
        )
        if cap is not None
    ]
    if caps:
        lines.append("Budget used: " + ", ".join(caps) + ".")
    return "\n".join(lines)
