"""Exceptions that agent code sees (the child side)."""

from __future__ import annotations

__all__ = ["Cancelled", "DelegationRefused", "TransientError", "describe_error"]


def describe_error(exc: BaseException) -> str:
    """`Type: message` of an exception, even one whose `str()` raises (it is agent code too)."""
    name = type(exc).__name__
    try:
        return f"{name}: {exc}"
    except BaseException as inner:  # noqa: BLE001 - whatever its __str__ raises
        return f"{name}: <its str() raised {type(inner).__name__}>"


class Cancelled(BaseException):
    """Raised by `Context.check()` once cancellation of the attempt is requested.

    It derives from `BaseException` so that `except Exception` in agent code
    cannot swallow it.
    """


class TransientError(Exception):
    """Raise this from a work function for a failure worth retrying.

    Connection and timeout errors from the standard library count as transient too.
    """


class DelegationRefused(Exception):
    """`Context.delegate()` was refused: a leaf agent, too deep, or a target it may not use.

    The message says what to do instead. (Re-exported by `supervisor.errors`.)
    """
