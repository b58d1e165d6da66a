"""Zeus: an Erlang/OTP-style supervision tree for AI-agent delegations."""

from actors import Brief, Report, Status, Summary, Usage
from supervisor.core.handle import GroupHandle, Handle
from supervisor.core.zeus import Zeus
from supervisor.errors import (
    DelegationRefused,
    KeyConflict,
    NotBlocked,
    RoutingError,
    StoreBusy,
    StoreError,
    SupervisorError,
    UnknownAgent,
    UnknownDelegation,
    ZeusStopped,
)
from supervisor.routing import AgentPolicy, Routing
from supervisor.store import Recovery

__version__ = "0.1.0"

__all__ = [
    "AgentPolicy",
    "Brief",
    "DelegationRefused",
    "GroupHandle",
    "Handle",
    "KeyConflict",
    "NotBlocked",
    "Recovery",
    "Report",
    "Routing",
    "RoutingError",
    "Status",
    "StoreBusy",
    "StoreError",
    "Summary",
    "SupervisorError",
    "UnknownAgent",
    "UnknownDelegation",
    "Usage",
    "Zeus",
    "ZeusStopped",
    "__version__",
]
