"""What `zeus sweep` does with a Ray child a crashed supervisor left behind.

A Ray child is not a process of this host to signal: its pid may be on another
node, and a Ray worker is Ray's to end. Ray ties a task to the job of the
driver that submitted it (the supervisor) and ends the tasks of a job whose
driver died, once it notices. So the sweep asks the Ray cluster the journal
recorded whether that job is dead; when the cluster cannot be reached (or Ray
is not installed here) it says so, and how to check later.
"""

from __future__ import annotations

import contextlib
import importlib.util
import socket
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["RayProbe", "job_verdict"]

Verdict = tuple[str, str]  # a SweepAction's value, and the detail


def job_verdict(job: str, jobs: Iterable[Mapping[str, Any]]) -> Verdict:
    """Whether Ray has ended the child's job, from the cluster's job table (pure)."""
    for entry in jobs:
        if str(entry.get("JobID", "")).lower() == job.lower():
            if entry.get("IsDead"):
                return "ended by Ray", f"its Ray job {job} is dead, so Ray ended its tasks"
            driver = entry.get("DriverPid") or "?"
            return ("failed", f"its Ray job {job} is still alive (driver pid {driver}); "
                    "end that driver, and Ray ends its tasks")
    return "ended by Ray", f"the Ray cluster no longer knows job {job}; nothing of it runs"


class RayProbe:
    """Asks each recorded Ray cluster about its jobs, once per address."""

    def __init__(self, timeout_s: float = 2.0,
                 jobs: Callable[[str], list[dict[str, Any]]] | None = None) -> None:
        self._timeout_s = timeout_s
        self._jobs = jobs or _ray_jobs
        self._tables: dict[str, list[dict[str, Any]] | str] = {}  # address -> jobs or why not

    def verdict(self, node: str, address: str | None, job: str | None, dry_run: bool) -> Verdict:
        if address is None or job is None:
            return ("unverifiable", f"a Ray child on node {node}; the journal names no Ray "
                    "address or job to ask (Ray ends a dead driver's tasks itself)")
        table = self._table(address)
        if isinstance(table, str):
            return ("unverifiable", f"a Ray child on node {node}; {table}; Ray ends a dead "
                    f"driver's tasks once it notices: check with `ray list tasks --address "
                    f"{address}` when it is back")
        action, detail = job_verdict(job, table)
        if dry_run and action == "failed":
            return "would stop", detail
        return action, detail

    def _table(self, address: str) -> list[dict[str, Any]] | str:
        if address not in self._tables:
            self._tables[address] = self._ask(address)
        return self._tables[address]

    def _ask(self, address: str) -> list[dict[str, Any]] | str:
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=self._timeout_s).close()
        except (OSError, ValueError) as exc:
            return f"the Ray cluster at {address} cannot be reached ({exc})"
        if self._jobs is _ray_jobs and importlib.util.find_spec("ray") is None:
            return "Ray is not installed here to ask (pip install 'zeus-supervisor[ray]')"
        try:
            return self._jobs(address)
        except Exception as exc:  # noqa: BLE001 - whatever Ray says, the sweep goes on
            return f"the Ray cluster at {address} did not answer: {type(exc).__name__}: {exc}"


def _ray_jobs(address: str) -> list[dict[str, Any]]:
    """The cluster's job table (joins it as a driver of its own, briefly)."""
    import ray
    from ray._private import state

    joined = not ray.is_initialized()
    if joined:
        ray.init(address=address, log_to_driver=False)
    try:
        return [dict(job) for job in state.jobs()]
    finally:
        if joined:
            with contextlib.suppress(Exception):
                ray.shutdown()
