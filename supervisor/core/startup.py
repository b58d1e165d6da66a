"""What `Zeus.start` builds before its actor: the store it owns and the backends its
routing needs. Runs in the host's thread, as Zeus starts (or registers an agent)."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from actors.backends import Backend, ProcessBackend
from actors.backends.process.reattach import place_for_store
from actors.backends.ray.start import MISSING_RAY, RayUnavailable, ray_installed, start_ray_backend
from actors.clock import Clock
from supervisor.core.shared_host import ladder_bound
from supervisor.core.state import backend_name
from supervisor.errors import RoutingError, SupervisorError
from supervisor.routing import AgentPolicy, Routing
from supervisor.routing.ray_policy import wants_ray
from supervisor.store import SqliteStore, Store

__all__ = [
    "open_store",
    "prestart",
    "process_backends",
    "ray_backend",
    "ray_backends",
    "wanted_backends",
]


def open_store(routing: Routing, store: str | Path | None, clock: Clock) -> Store | None:
    """The store `Zeus.start` was given, else the routing's `supervisor.store`, opened
    and owned (`StoreBusy`, `StoreError`); None for a Zeus kept in memory only."""
    policy = routing.supervisor.store
    path = store if store is not None else policy.path
    if path is None:
        return None
    if str(path).startswith(("postgresql://", "postgres://")):
        from supervisor.store.postgres import PostgresStore  # psycopg: only for this store

        return PostgresStore.open(str(path), lease_s=policy.lease_s,
                                  bound_s=ladder_bound(routing), keep_days=policy.keep_days,
                                  now=clock.wall)
    return SqliteStore.open(path, synchronous=policy.synchronous, keep_days=policy.keep_days,
                            now=clock.wall)


def process_backends(routing: Routing, store: Store | None = None) -> dict[str, Backend]:
    """The process backend (readied by `prestart`, as every backend that `readies`).

    With a store and `supervisor.orphan_grace_s` above 0, its workers wait that long
    for the next Zeus when this one dies (docs/design.md, "Reattach"), and command
    agents run under a worker, which holds their pipes meanwhile."""
    grace = routing.supervisor.orphan_grace(store is not None)
    place = place_for_store(store.path, grace) if store is not None and grace > 0 else None
    return {"process": ProcessBackend(reattach=place, commands_in_workers=place is not None)}


def wanted_backends(policies: Iterable[AgentPolicy]) -> set[str]:
    """The backends the agents of `policies` run on."""
    return {backend_name(p) for p in policies}


def prestart(backends: Mapping[str, Backend], wanted: Iterable[str]) -> None:
    """Ready each backend of `wanted` that has something to ready (`Backend.readies`: the
    process backend's fork server, about 0.5 s of imports), on a thread of its own:
    `Zeus.start` returns at once, also inside an event loop's `async with`, and the
    first attempt does not stall Zeus's mailbox on it. With a store, Zeus calls it once
    recovery is done, which readying would slow. An attempt that starts before its
    backend is ready waits for it in the backend, as it would have without it."""
    for name in sorted(set(wanted)):
        backend = backends.get(name)
        if backend is not None and backend.readies:
            threading.Thread(target=backend.prestart, name=f"zeus-ready-{name}",
                             daemon=True).start()


def ray_backends(routing: Routing) -> dict[str, Backend]:
    """The Ray backend, when an agent runs on Ray (Ray is started or joined now)."""
    if not wants_ray(routing.agents.values()):
        return {}
    return {"ray": ray_backend(routing)}


def ray_backend(routing: Routing) -> Backend:
    """The Ray backend as `supervisor.ray` says (`actors.backends.ray.start`); also for
    an agent registered later that runs on Ray.

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
