"""Stale detection: progress, not liveness. A pure record plus pure functions of `now`.

A child is stale when its progress counter has not advanced for `stale_after_s`.
The watch starts with `progress = -1`, and the stale clock starts at the child's
first sign of life (even a bare liveness beat with counter 0), not at dispatch:
a thread or process that is slow to start is not "making no progress", and a
slow first LLM call never looks stale before `stale_after_s` has passed since
it began. Before that first sign only the deadline holds.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ProgressWatch"]


class ProgressWatch(NamedTuple):  # a tuple: built on every message, so it must be cheap
    progress: int  # the highest counter seen; -1 before the first report
    progressed_at: float  # clock time the counter last advanced (the start, at first)
    seen_at: float  # clock time of the last message of any kind

    @classmethod
    def start(cls, now: float) -> ProgressWatch:
        return cls(-1, now, now)  # (progress, progressed_at, seen_at)

    def observe(self, progress: int, now: float) -> ProgressWatch:
        """The watch after a message carrying `progress` arrived at `now`."""
        if progress > self.progress:
            return ProgressWatch(progress, now, now)
        return ProgressWatch(self.progress, self.progressed_at, now)

    def nudge(self, now: float) -> ProgressWatch:
        """Progress elsewhere that counts for this attempt: a descendant's (its counter stays)."""
        return ProgressWatch(self.progress, now, now)

    def stale_at(self, stale_after_s: float) -> float:
        """When this attempt becomes stale if nothing advances (never before its first sign
        of life)."""
        if self.progress < 0:
            return float("inf")
        return self.progressed_at + stale_after_s

    def is_stale(self, now: float, stale_after_s: float) -> bool:
        return now >= self.stale_at(stale_after_s)
