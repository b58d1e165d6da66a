"""The tree as the actor walks it: a delegation's open ancestors, and what an attempt
may still spend. Pure functions of the actor's state (run in the actor's thread)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from actors import AttemptRecord, Usage
from supervisor.routing import BudgetPolicy

if TYPE_CHECKING:
    from supervisor.core.state import Delegation

__all__ = ["ancestors", "budget_left", "capped", "previous_error", "waiting_on_children"]


def ancestors(d: Delegation, open_: Mapping[str, Delegation]) -> Iterator[Delegation]:
    """`d`'s open ancestors, nearest first (a settled one ends the walk)."""
    parent_id = d.parent_id
    while parent_id is not None:
        parent = open_.get(parent_id)
        if parent is None:
            return
        yield parent
        parent_id = parent.parent_id


def waiting_on_children(d: Delegation, open_: Mapping[str, Delegation]) -> bool:
    """Whether `d`'s current attempt has a delegation of its own still open: it is waiting
    on it (in `ctx.delegate()`), and that child is watched by its own stale clock."""
    return any(child_id in open_ for child_id in d.children)


_CAPS = (("calls", "max_calls"), ("input_tokens", "max_input_tokens"),
         ("output_tokens", "max_output_tokens"), ("cost", "max_cost"))


def capped(budget: BudgetPolicy) -> bool:
    """Whether any cap was given (one that was not is None: nothing to check)."""
    return bool(budget.model_fields_set)


def budget_left(spent_and_caps: Iterable[tuple[Usage, BudgetPolicy]]) -> dict[str, float] | None:
    """What may still be spent before any of the budgets is over: the least room under
    each cap, by usage name; None when no cap is set."""
    left: dict[str, float] = {}
    for usage, budget in spent_and_caps:
        if not capped(budget):
            continue
        for name, cap_name in _CAPS:
            cap = getattr(budget, cap_name)
            if cap is not None:
                room = cap - getattr(usage, name)
                left[name] = min(room, left.get(name, room))
    return left or None


def previous_error(attempts: list[AttemptRecord]) -> str | None:
    """How the delegation's last attempt ended, for the next one (`ctx.previous_error`)."""
    if not attempts:
        return None
    last = attempts[-1]
    return f"{last.outcome.value}: {last.error}" if last.error else last.outcome.value
