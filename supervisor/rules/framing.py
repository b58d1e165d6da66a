"""Role framing: the short preamble a host prepends to a child's prompt."""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors import Usage
from supervisor.rules.budget import capped, caps_of

if TYPE_CHECKING:
    from supervisor.routing import AgentPolicy, Routing

__all__ = ["FramingHeads", "framing_head", "role_framing"]


def role_framing(
    agent: str,
    policy: AgentPolicy,
    routing: Routing,
    depth: int,
    remaining_s: float,
    usage: Usage,
    *,
    heads: FramingHeads | None = None,
) -> str:
    """Who the child is, what it may delegate to, and how much time and budget it has.

    The first two lines depend only on the agent, its depth and the routing:
    `heads` keeps them from one attempt to the next.
    """
    head = heads.head(agent, policy, routing, depth) if heads else framing_head(
        agent, policy, routing, depth)
    deadline = f"{head}\nDeadline: {remaining_s:.0f} s from now."
    budget = policy.budget
    if policy.reasoning_effort is None and not capped(budget):
        return deadline  # most attempts: built on every one, in Zeus's thread
    lines = [deadline]
    if policy.reasoning_effort is not None:
        lines.append(f"Reasoning effort: {policy.reasoning_effort}.")
    caps = [f"{name.replace('_', ' ')} {used:g}/{cap:g}"
            for name, used, cap in caps_of(usage, budget)]
    if caps:
        lines.append("Budget used: " + ", ".join(caps) + ".")
    return "\n".join(lines)


def framing_head(agent: str, policy: AgentPolicy, routing: Routing, depth: int) -> str:
    """The framing's first lines: who the child is and whom it may delegate to."""
    max_depth = routing.supervisor.max_depth
    first = f"You are {agent}" + (f", the {policy.role}" if policy.role else "") + "."
    if policy.kind == "orchestrator" and depth < max_depth:
        targets = (
            ", ".join(policy.can_delegate_to)
            if policy.can_delegate_to is not None
            else ", ".join(sorted(n for n in routing.agents if n != agent)) or "no agent"
        )
        return (f"{first}\nRole: orchestrator at depth {depth} of {max_depth}; "
                f"you may delegate to: {targets}.")
    return (f"{first}\nRole: leaf at depth {depth} of {max_depth}; do the work yourself, "
            "do not delegate.")


class FramingHeads:
    """Each agent's `framing_head` at each depth, made once per routing and policy (an
    orchestrator's lists every agent: on a large routing, the costliest line by far).
    Used by one thread (Zeus's actor)."""

    def __init__(self) -> None:
        self._routing: Routing | None = None
        self._heads: dict[tuple[str, int], tuple[AgentPolicy, str]] = {}

    def head(self, agent: str, policy: AgentPolicy, routing: Routing, depth: int) -> str:
        if routing is not self._routing:  # `register()` made a new routing: start over
            self._routing, self._heads = routing, {}
        kept = self._heads.get((agent, depth))
        if kept is not None and kept[0] is policy:
            return kept[1]
        head = framing_head(agent, policy, routing, depth)
        self._heads[(agent, depth)] = (policy, head)
        return head
