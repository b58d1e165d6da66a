"""The retry backoff schedule: a pure function of policy, retry number and a seeded random."""

from __future__ import annotations

import random

from supervisor.routing import Backoff, RetryPolicy

__all__ = ["backoff_delay"]


def backoff_delay(policy: RetryPolicy, retry: int, rng: random.Random) -> float:
    """Seconds to wait before retry number `retry` (1 for the first retry).

    Exponential: `initial_s * factor ** (retry - 1)`; fixed: `initial_s`; none: 0.
    Jitter spreads the wait by +/- `jitter` of itself; the result never exceeds `max_s`.
    """
    if retry < 1:
        raise ValueError(f"retry numbers start at 1, got {retry}")
    if policy.backoff is Backoff.none:
        return 0.0
    if policy.backoff is Backoff.fixed:
        base = policy.initial_s
    else:
        # Cap the exponent's result early so huge retry numbers cannot overflow.
        base = policy.initial_s
        for _ in range(retry - 1):
            base *= policy.factor
            if base >= policy.max_s:
                break
    base = min(base, policy.max_s)
    if policy.jitter:
        base *= 1.0 + policy.jitter * rng.uniform(-1.0, 1.0)
    return max(0.0, min(base, policy.max_s))
