"""Ray as a place to run: joining or starting it, and asking it about its nodes and workers.

Runs in Zeus's process. Ray is imported only here and in the other `actors.backends.ray.backend*`
modules.
"""

from __future__ import annotations

import contextlib
import socket
import time
import uuid
from collections.abc import Mapping
from typing import Any

import ray

from actors.backends.base import StoredChild
from actors.backends.ray.causes import grantable, parse_address
from actors.backends.ray.reporter import Reporter
from actors.osproc import CONFIRM_WAIT_S, child_gone, confirm_gone, read_stat

__all__ = ["RayConnectError", "confirmed_gone", "connect", "gone", "never_granted", "new_reporter",
           "seen_gone"]

_HEAD = "node:__internal_head__"  # a resource only the head node has


class RayConnectError(ConnectionError):
    """Ray could not be started or joined; the message says what to fix."""


def connect(address: str | None, init: Mapping[str, Any], timeout_s: float) -> bool:
    """Join or start Ray for Zeus; True when this call connected (and Zeus owns that).

    A Ray already initialised in this process is used as it is. Otherwise an
    `address` is probed first (TCP, `timeout_s`): `ray.init` on an address that
    does not answer retries for minutes. With `address` None, `ray.init` starts
    a local Ray (or joins the one `RAY_ADDRESS` names).
    """
    if ray.is_initialized():
        return False
    if address is not None:
        try:
            target = parse_address(address)
        except ValueError as exc:
            raise RayConnectError(str(exc)) from None
        if target is not None:
            try:
                socket.create_connection(target, timeout=timeout_s).close()
            except OSError as exc:
                raise RayConnectError(
                    f"cannot reach the Ray cluster at {address!r} ({exc}); start it "
                    "(`ray start --head`) or fix supervisor.ray.address in routing.yml"
                ) from None
    kwargs = dict(init)
    if address is None:
        kwargs.setdefault("include_dashboard", False)
    try:
        ray.init(address=address, **kwargs)
    except Exception as exc:  # noqa: BLE001 - whatever ray.init raises, nothing stays half-up
        with contextlib.suppress(Exception):
            ray.shutdown()
        where = "start a local Ray" if address is None else f"join the Ray cluster at {address!r}"
        raise RayConnectError(
            f"could not {where}: {type(exc).__name__}: {exc}; check supervisor.ray in routing.yml"
        ) from None
    return True


def new_reporter() -> tuple[Any, str]:
    """A reporter actor on the head node (which lives as long as the cluster does), and the
    name children look it up by."""
    name = f"zeus-reporter-{uuid.uuid4().hex}"
    handle = ray.remote(Reporter).options(
        name=name, num_cpus=0, max_concurrency=100_000, max_restarts=0, resources={_HEAD: 0.001}
    ).remote()
    return handle, name


def never_granted(resources: Mapping[str, float] | None) -> str:
    """Why a killed attempt never ran: what it asked for, and whether any node has it."""
    wanted = dict(resources or {}) or {"num_cpus": 1}
    asked = ", ".join(f"{k}={v:g}" for k, v in wanted.items())
    text = f"the Ray task never started: the resources it asks for ({asked}) were never granted"
    try:
        nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    except Exception:  # noqa: BLE001 - the cluster's state is a detail here
        return text
    if not grantable(wanted, nodes):
        return text + "; no node of the cluster has them (Ray keeps such a task pending for good)"
    return text + "; the nodes that have them stayed busy"


def gone(pid: int) -> bool:
    """Whether process `pid` of this host has exited (a zombie has); True where /proc is not."""
    stat = read_stat(pid)
    return stat is None or stat.dead  # no such process (or no /proc), or it exited


def worker_alive(pid: int, node: str | None) -> bool | None:
    """Ray's word on a worker process (recovery, after its driver died): whether the
    cluster's worker table holds a live worker `pid`, on `node` ("ip/node-id-prefix",
    as `node_label` writes it) when known; None when Ray cannot be asked, or this
    cluster never had that node (a local Ray started by the dead Zeus ended with it).

    Ray ends the workers of a job whose driver died (the job is then dead); a worker
    another job runs on under a reused pid is another process, and is counted alive
    only if it is on that node: recovery then waits, and never signals it."""
    from ray._private import state
    from ray.core.generated import common_pb2, gcs_pb2

    prefix = node.rpartition("/")[2] if node else ""
    try:
        accessor = state.state._connect_and_get_accessor()
        if prefix and not any(n["NodeID"].startswith(prefix) for n in state.state.node_table()):
            return None  # a node of another cluster (or one it forgot): it cannot say
        table = accessor.get_worker_table()
    except Exception:  # noqa: BLE001 - a Ray that cannot answer cannot confirm
        return None
    for raw in table:
        worker = gcs_pb2.WorkerTableData.FromString(raw)
        if not worker.is_alive or worker.pid != pid or worker.worker_type != common_pb2.WORKER:
            continue
        if not prefix or worker.worker_address.node_id.hex().startswith(prefix):
            return True
    return False


def dead_drivers_workers_alive() -> bool | None:
    """Whether Ray still runs a worker of a job whose driver died (recovery, for an
    attempt whose worker's pid its Zeus never recorded); None when Ray cannot be asked."""
    from ray._private import state
    from ray.core.generated import common_pb2, gcs_pb2

    try:
        dead = {str(job["JobID"]).lower() for job in state.jobs() if job.get("IsDead")}
        table = state.state._connect_and_get_accessor().get_worker_table()
    except Exception:  # noqa: BLE001 - a Ray that cannot answer cannot confirm
        return None
    for raw in table:
        worker = gcs_pb2.WorkerTableData.FromString(raw)
        if (worker.is_alive and worker.worker_type == common_pb2.WORKER
                and worker.job_id.hex() in dead):
            return True
    return False


def _ray_says_alive(child: StoredChild) -> bool | None:
    """Ray's worker table on a stored attempt's worker now (without a pid: on any worker
    of a driver that died); None when Ray cannot say."""
    if child.pid is not None:
        return worker_alive(child.pid, child.node)
    return dead_drivers_workers_alive()


def seen_gone(child: StoredChild) -> bool:
    """Whether a Ray attempt's worker is gone, by Ray's word now (never waited for, never
    signalled: a person's `zeus resume`); its pid on this host when Ray cannot say."""
    pid = child.pid
    alive = _ray_says_alive(child)
    if alive is not None:
        return not alive
    return pid is None or child_gone(pid, child.pid_start_time, child.pgid)


def confirmed_gone(child: StoredChild) -> bool:
    """Whether a Ray attempt's worker is gone (recovery, Zeus's thread; it waits up to
    `osproc.CONFIRM_WAIT_S`). A Ray worker is Ray's (it may run other tasks, on another
    node): never signalled here. Ray ends the tasks and workers of a driver that died,
    and its worker table says when it has (`worker_alive`; without a pid recorded,
    whether any worker of a driver that died still runs). When Ray cannot say (a local
    Ray started by the dead Zeus ended with it), its pid is checked on this host."""
    pid = child.pid
    give_up = time.monotonic() + CONFIRM_WAIT_S
    while (alive := _ray_says_alive(child)) and time.monotonic() < give_up:
        time.sleep(0.05)
    if alive is not None:
        return not alive
    if pid is None:
        return True  # never placed, or placed on a Ray that ended with its Zeus
    return confirm_gone(pid, child.pid_start_time, child.pgid, kill=False)
