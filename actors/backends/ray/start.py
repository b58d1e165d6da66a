"""Starting the Ray backend (`isolation: ray`) from Zeus's settings.

Ray is imported only once a backend is started here (by `actors.backends.ray.backend`), so
Zeus imports and runs without the extra; `ray_installed` says whether it could.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

from actors.backends.base import Backend

__all__ = ["MISSING_RAY", "RayUnavailable", "ray_installed", "start_ray_backend"]

MISSING_RAY = (
    "isolation: ray needs Ray, which is not installed here; install the extra: "
    "pip install 'zeus-supervisor[ray]'"
)


class RayUnavailable(RuntimeError):
    """Ray could not be started or joined; the message says what to fix."""


def ray_installed() -> bool:
    return importlib.util.find_spec("ray") is not None


def start_ray_backend(
    *, address: str | None, init: Mapping[str, Any] | None, connect_timeout_s: float
) -> Backend:
    """Start or join Ray (`supervisor.ray`'s `address`, `init`, `connect_timeout_s`), and
    the backend on it. `RayUnavailable` saying what to fix when Ray cannot be started
    or reached (nothing is left running then); `ImportError` without Ray."""
    from actors.backends.ray.backend import RayBackend
    from actors.backends.ray.place import RayConnectError

    try:
        return RayBackend(address=address, init=init, connect_timeout_s=connect_timeout_s)
    except RayConnectError as exc:
        raise RayUnavailable(str(exc)) from None
