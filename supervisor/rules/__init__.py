"""Pure decisions, each a function of (state, event, now), table-tested without actors:
settlement precedence and next step (settle), backoff, stale detection (stale), budgets
(budget), restart intensity (intensity), group strategies (groups), the result policy
(results) and role framing (framing)."""
