"""Bounds on what a routing file, a brief or an agent may ask for.

A duration longer than `MAX_DURATION_S` (one week) is refused when it is read,
not when a timer is due: the clock cannot schedule `inf` or `1e10` seconds
(`OverflowError: timestamp out of range`), and nothing a supervisor waits for
is meant to take longer than a week.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

__all__ = ["MAX_DURATION_S", "MAX_DURATION_WORDS", "Seconds"]

MAX_DURATION_S = 7 * 24 * 3600.0
MAX_DURATION_WORDS = "one week"

# A number of seconds: finite and at most a week (the lower bound is each field's own).
Seconds = Annotated[float, Field(allow_inf_nan=False, le=MAX_DURATION_S)]
