"""Example agents that do real work without a model."""
