"""Zeus's side of `isolation: ray`: whether Ray is needed, installed, and reachable.

`actors.backends.ray` (which imports Ray) is imported only when an agent runs on Ray,
so Zeus imports and runs without the extra.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from typing import TYPE_CHECKING

from actors.backends import Backend
from supervisor.errors import RoutingError, SupervisorError
from supervisor.routing.policies import AgentPolicy

if TYPE_CHECKING:
    from supervisor.routing import Routing

__all__ = ["MISSING_RAY", "ray_backend", "ray_installed", "wants_ray"]

MISSING_RAY = (
    "isolation: ray needs Ray, which is not installed here; install the extra: "
    "pip install 'zeus-supervisor[ray]'"
)


def ray_installed() -> bool:
    return importlib.util.find_spec("ray") is not None


def wants_ray(policies: Iterable[AgentPolicy]) -> bool:
    """Whether any of `policies` runs on Ray (a command agent always runs as a process)."""
    return any(p.isolation == "ray" and not p.command for p in policies)


def ray_backend(routing: Routing) -> Backend:
    """Start or join Ray as `supervisor.ray` says, and the backend on it.

    `RoutingError` when Ray is not installed; `SupervisorError` saying what to
    fix when it cannot be started or reached (nothing is left running then).
    """
    if not ray_installed():
        raise RoutingError(f"{routing.source or 'routing'}: {MISSING_RAY}")
    from actors.backends.ray import RayBackend
    from actors.backends.ray_place import RayConnectError

    config = routing.supervisor.ray
    try:
        return RayBackend(address=config.address, init=config.init,
                          connect_timeout_s=config.connect_timeout_s)
    except RayConnectError as exc:
        raise SupervisorError(str(exc)) from None
