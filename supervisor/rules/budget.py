"""Budget arithmetic: which cap, if any, a usage total breaks, and what may still be spent.
Pure functions."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from actors import Usage
from supervisor.routing import BudgetPolicy, PricingPolicy

__all__ = ["BUDGET_CAPS", "budget_left", "budget_overrun", "capped", "caps_of", "priced"]

# Each usage total and the budget field that caps it: the one list of them.
BUDGET_CAPS = (("calls", "max_calls"), ("input_tokens", "max_input_tokens"),
               ("output_tokens", "max_output_tokens"), ("cost", "max_cost"))


def priced(usage: Usage, pricing: PricingPolicy | None) -> Usage:
    """`usage` with its cost from `pricing` when it carries tokens but no cost of its own."""
    if pricing is None or usage.cost or not (usage.input_tokens or usage.output_tokens):
        return usage
    cost = (
        usage.input_tokens * pricing.input_per_mtok + usage.output_tokens * pricing.output_per_mtok
    ) / 1_000_000
    return usage.model_copy(update={"cost": cost})


def capped(budget: BudgetPolicy) -> bool:
    """Whether any cap was given (one that was not is None: nothing to check)."""
    return bool(budget.model_fields_set)


def caps_of(usage: Usage, budget: BudgetPolicy) -> Iterator[tuple[str, float, float]]:
    """(usage name, used, cap) for each cap `budget` sets, in `BUDGET_CAPS` order."""
    for name, cap_name in BUDGET_CAPS:
        cap = getattr(budget, cap_name)
        if cap is not None:
            yield name, getattr(usage, name), cap


def budget_overrun(usage: Usage, budget: BudgetPolicy) -> str | None:
    """A sentence naming the first cap `usage` exceeds, or None when within budget."""
    for name, used, cap in caps_of(usage, budget):
        if used > cap:
            return f"{name} {used:g} over the cap of {cap:g} (max_{name})"
    return None


def budget_left(spent_and_caps: Iterable[tuple[Usage, BudgetPolicy]]) -> dict[str, float] | None:
    """What may still be spent before any of the budgets is over: the least room under
    each cap, by usage name; None when no cap is set."""
    left: dict[str, float] = {}
    for usage, budget in spent_and_caps:
        if not capped(budget):
            continue
        for name, used, cap in caps_of(usage, budget):
            room = cap - used
            left[name] = min(room, left.get(name, room))
    return left or None
