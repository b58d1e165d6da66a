"""Pure decisions, each a function of (state, event, now), table-tested without actors:
settlement precedence and next step (settle), the order of the steps after an attempt
(after_attempt), backoff, stale detection (stale), budgets (budget), restart intensity
(intensity, circuit), group strategies and reviews (groups), who may delegate to whom
(delegation, admission), the result policy (results), role framing (framing), the shape
of `zeus.tree()` (snapshot) and the mailbox's lag (lag)."""
