"""Zeus's side of `isolation: ray` in a routing: whether it needs Ray, and whether Ray is there.

The backend itself is started by `actors.backends.ray_start`; `ray_backend` turns
its failures into Zeus's errors, for Zeus's core, which builds its backends.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from actors.backends import Backend
from actors.backends.ray_start import (
    MISSING_RAY,
    RayUnavailable,
    ray_installed,
    start_ray_backend,
)
from supervisor.errors import RoutingError, SupervisorError
from supervisor.routing.policies import AgentPolicy

if TYPE_CHECKING:
    from supervisor.routing import Routing

__all__ = ["MISSING_RAY", "ray_backend", "ray_installed", "wants_ray"]


def wants_ray(policies: Iterable[AgentPolicy]) -> bool:
    """Whether any of `policies` runs on Ray (a command agent always runs as a process)."""
    return any(p.isolation == "ray" and not p.command for p in policies)


def ray_backend(routing: Routing) -> Backend:
    """The Ray backend as `supervisor.ray` says (`actors.backends.ray_start`).

    `RoutingError` when Ray is not installed; `SupervisorError` saying what to
    fix when it cannot be started or reached (nothing is left running then).
    """
    if not ray_installed():
        raise RoutingError(f"{routing.source or 'routing'}: {MISSING_RAY}")
    config = routing.supervisor.ray
    try:
        return start_ray_backend(address=config.address, init=config.init,
                                 connect_timeout_s=config.connect_timeout_s)
    except RayUnavailable as exc:
        raise SupervisorError(str(exc)) from None
