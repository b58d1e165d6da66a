"""Whether a brief may be dispatched to an agent at all: checks on the brief against the
agent's policy, made before anything starts (in the host's thread, or Zeus's for a
nested delegation). Pure functions."""

from __future__ import annotations

from actors import Brief
from supervisor.routing import AgentPolicy

__all__ = ["writer_partial_refusal"]


def writer_partial_refusal(brief: Brief, policy: AgentPolicy) -> str | None:
    """Why `brief` may not ask `policy`'s agent for partial results, or None.

    A brief may narrow a policy, never widen it for a writer: an agent that is
    neither `read_only` nor `partial_ok` must complete or fail (references/000:
    timeout parcial is "never for implementers").
    """
    if brief.partial_ok and not policy.partial_ok and not policy.read_only:
        return (
            f"brief asks {brief.agent} for partial results (partial_ok: true), but "
            f"{brief.agent} writes (read_only: false) and its policy has partial_ok: false; "
            "a writer must complete or fail: drop partial_ok from the brief, or make the "
            "agent read_only or partial_ok in routing.yml"
        )
    return None
