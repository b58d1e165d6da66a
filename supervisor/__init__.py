"""Zeus: an Erlang/OTP-style supervision tree for AI-agent delegations."""

from actors import Brief, Report, Status, Summary, Usage
from supervisor.errors import (
    DelegationRefused,
    RoutingError,
    SupervisorError,
    UnknownAgent,
    ZeusStopped,
)
from supervisor.routing import AgentPolicy, Routing

__version__ = "0.1.0"

__all__ = [
    "AgentPolicy",
    "Brief",
    "DelegationRefused",
    "Report",
    "Routing",
    "RoutingError",
    "Status",
    "Summary",
    "SupervisorError",
    "UnknownAgent",
    "Usage",
    "ZeusStopped",
    "__version__",
]
