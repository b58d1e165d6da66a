"""Budget checks: which cap, if any, a usage total breaks."""

from __future__ import annotations

from actors import Usage
from supervisor.routing import BudgetPolicy

__all__ = ["budget_overrun"]


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
