"""Reading a framework's own usage counters into a `Usage`, by duck typing.

`actors` never imports an agent framework: a pydantic-ai `RunUsage` or
`RequestUsage`, the OpenAI Agents SDK's `Usage`, an OpenAI `CompletionUsage` or
`ResponseUsage`, or a plain mapping with the same keys all read the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.models import Usage

__all__ = ["usage_from"]

_INPUT = ("input_tokens", "prompt_tokens")
_OUTPUT = ("output_tokens", "completion_tokens")
_COST = ("cost", "total_cost")


def usage_from(usage: object) -> Usage:
    """The calls, tokens and cost `usage` reports.

    Calls come from `requests` where the object counts them, else one (a single
    request's usage). Cost comes from `cost` or `total_cost` where there is one,
    else 0 (Zeus then prices the tokens with the agent's `pricing`, if it has one).
    """
    fields = usage if isinstance(usage, Mapping) else None

    def read(names: tuple[str, ...]) -> Any:
        for name in names:
            value = fields.get(name) if fields is not None else getattr(usage, name, None)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return value
        return None

    input_tokens, output_tokens = read(_INPUT), read(_OUTPUT)
    if input_tokens is None and output_tokens is None:
        raise TypeError(
            "charge_usage() takes a pydantic-ai RunUsage or RequestUsage, or an OpenAI-style "
            "usage with input_tokens/output_tokens or prompt_tokens/completion_tokens; "
            f"{type(usage).__name__} has none of these (call ctx.charge(...) instead)"
        )
    requests = read(("requests",))
    cost = read(_COST)
    return Usage(
        calls=int(requests) if requests is not None else 1,
        input_tokens=int(input_tokens or 0),
        output_tokens=int(output_tokens or 0),
        cost=float(cost or 0.0),
    )
