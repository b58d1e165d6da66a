"""Budget checks: which cap, if any, a usage total breaks."""

from __future__ import annotations

from actors import Usage
from supervisor.routing import BudgetPolicy, PricingPolicy

__all__ = ["budget_overrun", "priced"]


def priced(usage: Usage, pricing: PricingPolicy | None) -> Usage:
    """`usage` with its cost from `pricing` when it carries tokens but no cost of its own."""
    if pricing is None or usage.cost or not (usage.input_tokens or usage.output_tokens):
        return usage
    cost = (
        usage.input_tokens * pricing.input_per_mtok + usage.output_tokens * pricing.output_per_mtok
    ) / 1_000_000
    return usage.model_copy(update={"cost": cost})


def budget_overrun(usage: Usage, budget: BudgetPolicy) -> str | None:
    """A sentence naming the first cap `usage` exceeds, or None when within budget."""
    checks: tuple[tuple[str, float, float | int | None], ...] = (
        ("calls", usage.calls, budget.max_calls),
        ("input_tokens", usage.input_tokens, budget.max_input_tokens),
        ("output_tokens", usage.output_tokens, budget.max_output_tokens),
        ("cost", usage.cost, budget.max_cost),
    )
    for name, used, cap in checks:
        if cap is not None and used > cap:
            return f"{name} {used:g} over the cap of {cap:g} (max_{name})"
    return None
