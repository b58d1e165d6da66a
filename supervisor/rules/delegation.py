"""Whether a brief may be dispatched at all: the checks on a brief against its agent's
policy (made before anything starts, in the host's thread, or Zeus's for a nested
delegation), and who may delegate to whom (a child's `ctx.delegate()`); and the role
framing a dispatched brief's prompt starts with (`role_framing`). Pure functions."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from actors import Brief, Usage
from supervisor.routing import AgentPolicy
from supervisor.rules.budget import capped, caps_of

if TYPE_CHECKING:
    from supervisor.routing import AgentPolicy, Routing

__all__ = [
    "MAX_KEY_BYTES",
    "FramingHeads",
    "delegation_refusal",
    "framing_head",
    "key_refusal",
    "role_framing",
    "writer_partial_refusal",
]


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


def writer_partial_refusal(brief: Brief, policy: AgentPolicy) -> str | None:
    """Why `brief` may not ask `policy`'s agent for partial results, or None.

    A brief may narrow a policy, never widen it for a writer: an agent that is
    neither `read_only` nor `partial_ok` must complete or fail: partial results on a
    timeout are never for implementers.
    """
    if brief.partial_ok and not policy.partial_ok and not policy.read_only:
        return (
            f"brief asks {brief.agent} for partial results (partial_ok: true), but "
            f"{brief.agent} writes (read_only: false) and its policy has partial_ok: false; "
            "a writer must complete or fail: drop partial_ok from the brief, or make the "
            "agent read_only or partial_ok in routing.yml"
        )
    return None


# The longest key, in UTF-8 bytes, that both stores keep and index: PostgreSQL's btree
# takes an entry of about 2.7 kB at most, and the key is indexed with more beside it.
MAX_KEY_BYTES = 1024


def key_refusal(key: object) -> str | None:
    """Why `key` cannot be a dispatch key, saying what to fix, or None. The same on every
    store (and without one): a key one store refuses is refused by all."""
    if not isinstance(key, str):
        return f"a dispatch key is a string, not {type(key).__name__}: pass str(key)"
    if not key:
        return "a dispatch key is not empty: pass key=None for no key"
    if "\0" in key:
        return (f"a dispatch key holds no NUL (0x00) character; this one has one at index "
                f"{key.index(chr(0))}: take it out, or encode the key (hex, base64)")
    size = len(key.encode("utf-8", "surrogatepass"))
    if size > MAX_KEY_BYTES:
        return (f"a dispatch key is at most {MAX_KEY_BYTES} bytes (UTF-8); this one is "
                f"{size}: pass a digest of it (hashlib.sha256(key.encode()).hexdigest())")
    return None


# --------------------------------------------------------------------------------------
# Role framing: the short preamble a host prepends to a child's prompt.
# --------------------------------------------------------------------------------------


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
