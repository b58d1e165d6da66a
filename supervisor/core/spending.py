"""The spending: charges counted against a delegation, its open ancestors and the whole
tree, and which budgets they break. Owned by Zeus's actor thread; it reports the
overruns and leaves stopping the attempts to its caller."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from actors import Usage
from supervisor.core.state import Delegation
from supervisor.routing import BudgetPolicy
from supervisor.rules.budget import budget_left, budget_overrun, capped

__all__ = ["Spending"]


class Spending:
    """The tree's total, under the supervisor's budget."""

    def __init__(self, tree_budget: BudgetPolicy) -> None:
        self.tree_budget = tree_budget
        self.tree_usage = Usage()

    def charge(
        self, chain: Sequence[Delegation], usage: Usage
    ) -> tuple[list[tuple[Delegation, str]], str | None]:
        """Count `usage` against every delegation of `chain` and the tree. Returns the
        delegations of the chain now over their budget while an attempt runs, each with
        the cap it broke, and the tree budget's cap it broke (or None)."""
        overruns: list[tuple[Delegation, str]] = []
        for node in chain:
            node.usage = node.usage + usage
            overrun = budget_overrun(node.usage, node.policy.budget)
            if overrun is not None and node.current is not None:
                overruns.append((node, overrun))
        self.tree_usage = self.tree_usage + usage
        return overruns, budget_overrun(self.tree_usage, self.tree_budget)

    def left(self, d: Delegation, ancestors: Iterable[Delegation]) -> dict[str, float] | None:
        """What an attempt of `d` may spend before its own, an ancestor's (`ancestors`:
        its open ones, walked only when needed) or the tree's budget is over."""
        if d.parent_id is None and not (capped(d.policy.budget) or capped(self.tree_budget)):
            return None  # a root with no cap above it: most delegations
        return budget_left([*((n.usage, n.policy.budget) for n in (d, *ancestors)),
                            (self.tree_usage, self.tree_budget)])
