"""Zeus joining and starting Ray, and a two-node `ray.cluster_utils.Cluster` that loses a
node mid-attempt. Runs after the shared local Ray's tests: each test here needs Ray
down in this process first (a driver joins one cluster at a time).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import Brief, Context
from supervisor import Routing, Status, Zeus
from supervisor.errors import SupervisorError
from tests.conftest import RAY_SKIP, Recorder

ray = pytest.importorskip("ray", reason=RAY_SKIP)
cluster_utils = pytest.importorskip("ray.cluster_utils", reason=RAY_SKIP)
pytestmark = pytest.mark.ray


@pytest.fixture
def no_ray() -> Iterator[None]:
    if ray.is_initialized():
        ray.shutdown()
    yield
    if ray.is_initialized():
        ray.shutdown()


def routing(ray_config: dict[str, Any], **agent: Any) -> Routing:
    return Routing.from_dict({
        "version": 1,
        "supervisor": {"ray": ray_config},
        "agents": {"worker": {"isolation": "ray", "timeout_s": 30, **agent}},
    })


def where(brief: Brief, ctx: Context) -> str:
    return str(ray.get_runtime_context().get_node_id())


def sleeps(seconds: float) -> None:
    time.sleep(seconds)


def waits_for_its_node_to_go(brief: Brief, ctx: Context) -> str:
    node = str(ray.get_runtime_context().get_node_id())
    if ctx.attempt == 1:
        ctx.partial(node)
        while True:
            ctx.heartbeat("working")
            time.sleep(0.1)
    return node


def test_an_unreachable_address_is_a_clear_error_from_start_that_leaves_nothing_running(
    no_ray: None,
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once it is closed
    threads = set(threading.enumerate())
    unreachable = rf"cannot reach the Ray cluster at '127.0.0.1:{port}'"
    with pytest.raises(SupervisorError, match=unreachable):
        Zeus.start(routing({"address": f"127.0.0.1:{port}", "connect_timeout_s": 1}))
    assert not ray.is_initialized()
    assert set(threading.enumerate()) <= threads


def test_a_node_removed_mid_attempt_is_a_crash_that_the_retry_survives_on_the_other_node(
    no_ray: None,
) -> None:
    cluster = cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False,
                        "_system_config": {"health_check_initial_delay_ms": 0,
                                           "health_check_period_ms": 200,
                                           "health_check_failure_threshold": 3}},
    )
    head = cluster.head_node.node_id
    doomed = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)  # the host's own Ray connection
    log = Recorder()
    zeus = Zeus.start(routing({"address": cluster.address},
                              retry={"max_retries": 1, "initial_s": 0, "jitter": 0}), log=log)
    try:
        zeus.register("worker", waits_for_its_node_to_go)
        # The head's one CPU is taken, so the first attempt lands on the other node.
        blocker = ray.remote(num_cpus=1)(sleeps).remote(60)
        handle = zeus.dispatch(Brief(agent="worker", scope="survive"))
        started = log.wait_for("attempt.started", timeout=30)[0]
        assert started["node"].endswith(doomed.node_id[:8])
        ray.cancel(blocker, force=True)
        cluster.remove_node(doomed, allow_graceful=False)
        summary = handle.result(timeout=60)
    finally:
        zeus.stop()
        joined = ray.is_initialized()
        ray.shutdown()
        cluster.shutdown()
    assert joined, "Zeus shut down a Ray connection it did not make"
    assert summary.status is Status.completed
    first, second = summary.attempts
    assert (first.outcome.value, second.outcome.value) == ("crash", "completed")
    assert first.error is not None and first.error.split(" (")[0] in ("node died", "worker died")
    assert summary.partial_results == [doomed.node_id]
    assert summary.output == head != doomed.node_id


@pytest.mark.process
@pytest.mark.realtime
def test_after_a_host_crash_ray_says_its_task_is_gone_before_it_runs_again(
    no_ray: None, tmp_path: Path,
) -> None:
    """Ray ends the tasks of a driver that died: the next host asks Ray's worker table
    about the old attempt's worker, and only once Ray says it is gone is it run again."""
    from actors.osproc import process_running
    from tests._crash import Host, agent, brief, outcomes, runs, wait_charged, wait_for

    cluster = cluster_utils.Cluster(initialize_head=True,
                                    head_node_args={"num_cpus": 2, "include_dashboard": False})
    try:
        plan = {"agents": {"reader": agent(isolation="ray", read_only=True,
                                           retry={"max_retries": 1})},
                "briefs": [brief("reader", tmp_path, "reader")],
                "supervisor": {"ray": {"address": cluster.address}}}
        first = Host(tmp_path, tmp_path / "zeus.db", plan)
        wait_for(tmp_path / "reader.started", first)
        wait_charged(tmp_path / "zeus.db", 1, first)  # where it runs is in the store
        first.kill()
        (tmp_path / "release").write_text("")
        recovered, summaries = Host(tmp_path, tmp_path / "zeus.db", plan).results()
    finally:
        cluster.shutdown()
    assert recovered["rerun"] == ["reader-1"]
    assert outcomes(summaries["reader"]) == ["lost", "completed"]
    [(old_pid, old_start, _), (_, _, overlap)] = runs(tmp_path, "reader")
    assert not overlap  # the old task's worker was gone when the new one started
    assert process_running(old_pid, old_start) is False
