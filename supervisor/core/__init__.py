"""The running core: the `Zeus` facade (zeus); its actor, the mailbox (actor), which holds
the supervisor (supervisor) and the part that hears children (reports); the
delegation state and the supervisor's helpers that keep it (state), the host's handles
and the delegation's future (handle), mailbox messages (messages) and the agent
registry (registry)."""
