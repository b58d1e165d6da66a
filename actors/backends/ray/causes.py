"""Pure rules of the Ray backend: how a Ray failure ends an attempt, what an address
names, which task options an agent's `resources` become, and whether any node
could ever grant them.

No Ray import here: errors are recognised by the names of their classes (as
`ray.exceptions` spells them), so these rules are table-tested without Ray.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from actors.models import AttemptOutcome

__all__ = [
    "RayEnding",
    "describe_ray_failure",
    "grantable",
    "parse_address",
    "task_options",
]


@dataclass(frozen=True, slots=True)
class RayEnding:
    """How an attempt ended when Ray, not the work function, said so."""

    outcome: AttemptOutcome
    error_type: str
    cause: str  # "worker died", "node died", "out of memory", ...


# First match wins, in MRO order of the error: a class name -> (outcome, cause).
_CAUSES: dict[str, tuple[AttemptOutcome, str]] = {
    "OutOfMemoryError": (AttemptOutcome.crash, "out of memory"),
    "NodeDiedError": (AttemptOutcome.crash, "node died"),
    "LocalRayletDiedError": (AttemptOutcome.crash, "node died"),
    "OwnerDiedError": (AttemptOutcome.crash, "node died"),
    "ObjectLostError": (AttemptOutcome.crash, "node died"),
    "WorkerCrashedError": (AttemptOutcome.crash, "worker died"),
    "ActorDiedError": (AttemptOutcome.crash, "worker died"),
    "RayActorError": (AttemptOutcome.crash, "worker died"),
    "ActorUnavailableError": (AttemptOutcome.crash, "worker unreachable"),
    "TaskCancelledError": (AttemptOutcome.cancelled, "cancelled through Ray"),
    "RuntimeEnvSetupError": (AttemptOutcome.error, "its runtime environment failed"),
    "TaskUnschedulableError": (AttemptOutcome.error, "it cannot be scheduled"),
    "ActorUnschedulableError": (AttemptOutcome.error, "it cannot be scheduled"),
    "RaySystemError": (AttemptOutcome.crash, "Ray system error"),
}

# Words in an error's text that say more than its class (an actor's death carries its cause).
_TEXT_CAUSES = (
    ("out of memory", "out of memory"),
    ("node died", "node died"),
    ("node has died", "node died"),
    ("node is dead", "node died"),
    ("node that was running", "node died"),
    ("raylet", "node died"),
)


def describe_ray_failure(exc: BaseException) -> RayEnding:
    """The attempt outcome for a Ray error raised by the attempt's result.

    Anything Ray did not raise on its own behalf (the task body failing before
    the work ran) is a permanent `error`; a worker, node or memory death is a
    `crash`, retried per `retry.on`.
    """
    names = [cls.__name__ for cls in type(exc).__mro__]
    for name in names:
        found = _CAUSES.get(name)
        if found is None:
            continue
        outcome, cause = found
        if outcome is AttemptOutcome.crash and cause == "worker died":
            text = str(exc).lower()
            cause = next((c for word, c in _TEXT_CAUSES if word in text), cause)
        return RayEnding(outcome, name, cause)
    return RayEnding(AttemptOutcome.error, type(exc).__name__, "the Ray task failed")


def parse_address(address: str) -> tuple[str, int] | None:
    """`(host, port)` that a Ray address names, or None when Ray resolves it itself ("auto").

    `ray://host:10001` (Ray Client) and `host:6379` (the GCS) both name a TCP
    port that must answer before `ray.init` is worth calling: `ray.init` on an
    address that does not answer retries for minutes. Raises `ValueError` for
    an address that names no port.
    """
    if address in ("auto", "local"):
        return None
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(
            f"Ray address {address!r} names no port; allowed: null (start a local Ray), "
            "'auto', 'host:port' or 'ray://host:port'"
        )
    return host.strip("[]"), int(port)


_OWN_OPTIONS = {"num_cpus": "num_cpus", "num_gpus": "num_gpus", "memory": "memory",
                "CPU": "num_cpus", "GPU": "num_gpus"}


def task_options(resources: Mapping[str, float] | None) -> dict[str, Any]:
    """An agent's `resources` as Ray task options: num_cpus, num_gpus, memory, and the rest
    as custom resources."""
    options: dict[str, Any] = {}
    custom: dict[str, float] = {}
    for key, amount in (resources or {}).items():
        own = _OWN_OPTIONS.get(key)
        if own is not None:
            options[own] = amount
        else:
            custom[key] = amount
    if custom:
        options["resources"] = custom
    return options


def _as_node_resources(resources: Mapping[str, float]) -> dict[str, float]:
    """An agent's `resources` in the names a node reports (`CPU`, `GPU`, `memory`, custom)."""
    names = {"num_cpus": "CPU", "num_gpus": "GPU"}
    return {names.get(key, key): amount for key, amount in resources.items()}


def grantable(
    resources: Mapping[str, float] | None, nodes: Iterable[Mapping[str, float]]
) -> bool:
    """Whether some node's total resources hold everything `resources` asks for at once.

    False means no node of the cluster as it stands can ever run the attempt
    (Ray calls such a task infeasible and keeps it pending for good).
    """
    wanted = _as_node_resources(resources or {})
    return any(
        all(node.get(key, 0.0) >= amount for key, amount in wanted.items()) for node in nodes
    )
