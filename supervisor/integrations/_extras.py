"""The one error an integration raises when its framework is missing."""

from __future__ import annotations

__all__ = ["missing_extra"]


def missing_extra(integration: str, extra: str, exc: ImportError) -> ImportError:
    """An `ImportError` that says which extra to install; raise it `from exc`."""
    return ImportError(
        f"{integration} needs the {extra!r} extra ({exc.name or exc}): "
        f"pip install 'zeus-supervisor[{extra}]'"
    )
