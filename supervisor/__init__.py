"""Zeus: an Erlang/OTP-style supervision tree for AI-agent delegations."""

from actors import Brief, Report, Status, Summary, Usage
from supervisor.core.handle import GroupHandle, Handle
from supervisor.core.zeus import Zeus
from supervisor.errors import (
    DelegationRefused,
    RoutingError,
    SupervisorError,
    UnknownAgent,
    UnknownDelegation,
    ZeusStopped,
)
from supervisor.routing import AgentPolicy, Routing

__version__ = "0.1.0"

__all__ = [
    "AgentPolicy",
    "Brief",
    "DelegationRefused",
    "GroupHandle",
    "Handle",
    "Report",
    "Routing",
    "RoutingError",
    "Status",
    "Summary",
    "SupervisorError",
    "UnknownAgent",
    "UnknownDelegation",
    "Usage",
    "Zeus",
    "ZeusStopped",
    "__version__",
]
