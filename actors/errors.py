"""Exceptions that agent code sees (the child side)."""

from __future__ import annotations

__all__ = ["Cancelled", "DelegationRefused", "TransientError"]


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
