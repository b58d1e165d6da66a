"""`SessionTotals`: what an agent CLI's session has been charged so far, over all its runs.

Some CLIs report totals that run across a session's runs, not a run's own (Codex's
`turn.completed.usage`; Claude Code's `total_cost_usd` and `modelUsage` from 2.1.328 on,
docs/agent-clis.md, "Usage and cost"). A follow-up's decoder is given its session's
totals so that it charges only what its run added; the supervisor keeps them per session
id (in the store, where there is one), summed from the session's charges.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SessionTotals"]


@dataclass(frozen=True, slots=True)
class SessionTotals:
    """A session's charged spend (picklable: a worker builds invocations too).
    `input_tokens` counts cached input too; `cached_input_tokens` is the part of it that
    was cached; `cost` is in USD."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0

    def most(self, other: SessionTotals | None) -> SessionTotals:
        """The larger of each count: totals only grow, so of two readings of one session
        (this host's, and the store's, which another host may have added to) the larger
        is the later."""
        if other is None:
            return self
        return SessionTotals(max(self.input_tokens, other.input_tokens),
                             max(self.cached_input_tokens, other.cached_input_tokens),
                             max(self.output_tokens, other.output_tokens),
                             max(self.cost, other.cost))

    def __add__(self, other: SessionTotals) -> SessionTotals:
        return SessionTotals(self.input_tokens + other.input_tokens,
                             self.cached_input_tokens + other.cached_input_tokens,
                             self.output_tokens + other.output_tokens,
                             round(self.cost + other.cost, 10))
