"""The running core: the `Zeus` facade (zeus); its actor, the mailbox (actor), which holds
the supervisor (supervisor) and the part that hears children (reports); the
supervisor's helpers (open_tree, timers, restarts, spending, sessions, pending_mail);
the delegation state (state), the host's handles (handle) over the delegation's
future (future), mailbox messages (messages) and the agent registry (registry)."""
