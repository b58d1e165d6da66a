"""Entrypoints: `pkg.module:attr.attr`, the work function an agent names, imported once."""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from collections.abc import Callable
from typing import Any

from supervisor.errors import did_you_mean

__all__ = ["EntrypointError", "entrypoint_form_problem", "import_entrypoint", "signature_problem"]

_ENTRYPOINT = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


class EntrypointError(Exception):
    """Why an entrypoint does not resolve (the caller adds file and key path)."""


def entrypoint_form_problem(spec: str) -> str | None:
    """Why `spec` does not read `pkg.module:attr`, without importing anything; None if it does."""
    if _ENTRYPOINT.fullmatch(spec):
        return None
    return f"found {spec!r}; allowed: 'pkg.module:function' (a module, a colon, a callable in it)"


@functools.cache
def import_entrypoint(spec: str) -> Callable[..., Any]:
    """Import `pkg.module:attr.attr` once (failures are not cached: a fixed module can retry).

    Importing runs the module's import-time code: a routing file is code.
    """
    problem = entrypoint_form_problem(spec)
    if problem is not None:
        raise EntrypointError(problem)
    module_name, _, attrs = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 -- any import failure is reported as bad input
        raise EntrypointError(
            f"found {spec!r}, but module {module_name!r} does not import "
            f"({type(exc).__name__}: {exc}); is it installed, or run from the project root?"
        ) from None
    for part in attrs.split("."):
        if not hasattr(target, part):
            public = [name for name in dir(target) if not name.startswith("_")]
            raise EntrypointError(
                f"found {spec!r}, but {getattr(target, '__name__', module_name)!r} has no "
                f"attribute {part!r}{did_you_mean(part, public)}"
            )
        target = getattr(target, part)
    if not callable(target):
        raise EntrypointError(
            f"found {spec!r}, which is a {type(target).__name__}; allowed: a callable "
            "(a work function taking a brief and a context)"
        )
    problem = signature_problem(target)
    if problem is not None:
        raise EntrypointError(f"found {spec!r}, but {problem}")
    return target  # type: ignore[no-any-return]


def signature_problem(work: Callable[..., Any]) -> str | None:
    """Why `work` cannot be called as `work(brief, ctx)`, or None when it can (or cannot be told).

    Runs where the function is registered or its entrypoint is imported, so a
    wrong signature is refused there rather than failing every attempt later.
    """
    try:
        signature = inspect.signature(work)
    except (TypeError, ValueError):  # a builtin without a signature: it is given the benefit
        return None
    try:
        signature.bind(None, None)
    except TypeError as exc:
        name = getattr(work, "__qualname__", None) or type(work).__name__
        return (
            f"{name}{signature} cannot be called as work(brief, ctx) ({exc}); "
            "a work function takes two positional arguments: the brief and the context"
        )
    return None
