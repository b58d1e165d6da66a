"""Reading fields of a decoded JSON event without trusting their types.

A decoder calls these instead of indexing: a field that is missing or of the wrong
type reads as empty (None, 0, {} or []), so an odd event is skipped, never raised on.
"""

from __future__ import annotations

from typing import Any

__all__ = ["as_dict", "as_float", "as_int", "as_list", "as_str"]


def as_dict(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """`value` if it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def as_str(value: Any) -> str | None:
    """`value` if it is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def as_int(value: Any) -> int:
    """`value` as a count of tokens: an int or a float that is whole (never a bool,
    never negative); anything else is 0."""
    if type(value) is int:  # the usual case, first (a bool's type is bool)
        return value if value > 0 else 0
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(0, value)
    if isinstance(value, float) and value.is_integer():
        return max(0, int(value))
    return 0


def as_float(value: Any) -> float | None:
    """`value` as an amount in dollars (an int or a float, not a bool, finite and not
    negative); None otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    amount = float(value)
    if amount != amount or amount in (float("inf"), float("-inf")) or amount < 0:
        return None
    return amount
