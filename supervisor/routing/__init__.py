"""The routing file: `Routing` (table), the policy models (policies), YAML line marks
(lines), problem reports (problems), the checks pydantic cannot see (checks), the
Pantheon dialect (pantheon) and entrypoint imports (entrypoints).
"""

from pathlib import Path

from supervisor.routing.policies import (
    OWNER,
    AgentPolicy,
    Backoff,
    BudgetPolicy,
    HeartbeatPolicy,
    IntensityPolicy,
    PricingPolicy,
    ResultPolicy,
    RetryOn,
    RetryPolicy,
    ShutdownPolicy,
    StorePolicy,
    SupervisorPolicy,
)
from supervisor.routing.table import Routing

DEFAULT_ROUTING = Path(__file__).with_name("routing.yml")
"""The pantheon Zeus ships with (the repository's top-level routing.yml is the same file)."""

__all__ = [
    "DEFAULT_ROUTING",
    "OWNER",
    "AgentPolicy",
    "Backoff",
    "BudgetPolicy",
    "HeartbeatPolicy",
    "IntensityPolicy",
    "PricingPolicy",
    "ResultPolicy",
    "RetryOn",
    "RetryPolicy",
    "Routing",
    "ShutdownPolicy",
    "StorePolicy",
    "SupervisorPolicy",
]
