"""The running core: the `Zeus` facade (zeus), its actor and mailbox (actor), handles
(handle), the delegation state (state), mailbox messages (messages) and the agent
registry (registry)."""
