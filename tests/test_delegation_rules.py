"""Who may delegate to whom (`supervisor.rules.delegation`), as a table."""

from __future__ import annotations

import pytest

from actors import Brief
from supervisor.errors import UnknownAgent
from supervisor.routing import AgentPolicy
from supervisor.rules.delegation import delegation_refusal

ORCH = AgentPolicy(kind="orchestrator")
WRITER = AgentPolicy()  # neither read_only nor partial_ok
READER = AgentPolicy(read_only=True)


def policies(agent: str) -> AgentPolicy:
    known = {"writer": WRITER, "reader": READER}
    if agent not in known:
        raise UnknownAgent(f"no agent {agent!r}")
    return known[agent]


@pytest.mark.parametrize(
    ("policy", "depth", "max_depth", "brief", "refused"),
    [
        (ORCH, 1, 2, Brief(agent="writer", scope="s"), None),
        (ORCH, 1, 2, Brief(agent="reader", scope="s", partial_ok=True), None),
        (WRITER, 1, 2, Brief(agent="writer", scope="s"), "is a leaf agent"),
        (ORCH, 2, 2, Brief(agent="writer", scope="s"), "would exceed max_depth 2"),
        (ORCH.model_copy(update={"can_delegate_to": ("reader",)}), 1, 2,
         Brief(agent="writer", scope="s"), "may delegate only to ['reader'], not to 'writer'"),
        (ORCH.model_copy(update={"can_delegate_to": ("reader",)}), 1, 2,
         Brief(agent="reader", scope="s"), None),
        (ORCH, 1, 2, Brief(agent="writer", scope="s", partial_ok=True), "a writer must complete"),
        # The checks run in this order: a leaf is refused before its target is looked up.
        (WRITER, 2, 2, Brief(agent="nobody", scope="s"), "is a leaf agent"),
        (ORCH, 2, 2, Brief(agent="nobody", scope="s"), "would exceed max_depth"),
    ],
)
def test_who_may_delegate_to_whom(
    policy: AgentPolicy, depth: int, max_depth: int, brief: Brief, refused: str | None
) -> None:
    refusal = delegation_refusal(delegation_id="d-1", agent="boss", policy=policy, depth=depth,
                                 max_depth=max_depth, brief=brief, policy_of=policies)
    if refused is None:
        assert refusal is None
    else:
        assert refusal is not None and refused in refusal


def test_an_unknown_target_raises_from_the_lookup() -> None:
    with pytest.raises(UnknownAgent):
        delegation_refusal(delegation_id="d-1", agent="boss", policy=ORCH, depth=1,
                           max_depth=2, brief=Brief(agent="nobody", scope="s"),
                           policy_of=policies)
