"""pyproject.toml's `filterwarnings`, as pytest applies it around each test: Zeus's own
warnings are errors, a third-party deprecation stays a warning (STYLE: an upstream
release cannot stop the suite).

A warning is attributed to a module by its stack level, so a library's deprecation
seen from Zeus's call reads as Zeus's module; each case names the module it is
attributed to, as `warnings.warn_explicit` lets it.
"""

from __future__ import annotations

import warnings

import pytest


class _LibraryDeprecation(UserWarning):
    """What starlette's StarletteDeprecationWarning is: a UserWarning, not a deprecation."""


def _outcome(category: type[Warning], message: str, module: str) -> str:
    """'error' when the filters in force raise it, 'warning' when they let it through."""
    with warnings.catch_warnings(record=True) as caught:  # keeps the filters in force
        try:
            warnings.warn_explicit(message, category, module.replace(".", "/") + ".py", 1,
                                   module=module, registry={})
        except Warning:
            return "error"
    return "warning" if caught else "ignored"


@pytest.mark.parametrize(
    ("category", "message", "module", "expected"),
    [
        (UserWarning, "a warning of Zeus's own", "supervisor.core.tree", "error"),
        (RuntimeWarning, "coroutine 'x' was never awaited", "actors.run", "error"),
        (ResourceWarning, "unclosed file", "tests.test_store", "error"),
        (UserWarning, "a library's warning that deprecates nothing", "starlette.routing",
         "error"),
        (DeprecationWarning, "old() is deprecated", "pydantic.main", "warning"),
        # A library's deprecated name called from Zeus: attributed to Zeus's module.
        (DeprecationWarning, "old() is deprecated", "supervisor.ui.app", "warning"),
        (PendingDeprecationWarning, "old() will be deprecated", "langgraph.graph", "warning"),
        (FutureWarning, "the default will change", "opentelemetry.sdk", "warning"),
        # starlette's, raised while a ui test imports starlette.testclient without httpx2.
        (_LibraryDeprecation,
         "Using `httpx` with `starlette.testclient` is deprecated; install `httpx2` instead.",
         "tests.test_ui", "warning"),
        (_LibraryDeprecation, "generator function lifespans are deprecated, use an "
         "@contextlib.asynccontextmanager function instead", "supervisor.ui.app", "warning"),
    ],
)
def test_zeus_warnings_are_errors_and_a_third_party_deprecation_stays_a_warning(
    category: type[Warning], message: str, module: str, expected: str
) -> None:
    assert _outcome(category, message, module) == expected
