"""`isolation: ray` in a routing: whether it needs Ray, and whether Ray is installed.

The backend itself is built by Zeus's core as it starts (`core/startup.py`), through
`actors.backends.ray.start`.
"""

from __future__ import annotations

from collections.abc import Iterable

from actors.backends.ray.start import MISSING_RAY, ray_installed
from supervisor.routing.policies import AgentPolicy

__all__ = ["MISSING_RAY", "ray_installed", "wants_ray"]


def wants_ray(policies: Iterable[AgentPolicy]) -> bool:
    """Whether any of `policies` runs on Ray (a command agent always runs as a process)."""
    return any(p.isolation == "ray" and not p.runs_program for p in policies)
