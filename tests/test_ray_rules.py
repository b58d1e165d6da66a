"""The Ray backend's pure rules, and what Zeus says without Ray: no Ray needed here."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from actors import AttemptOutcome
from actors.backends.ray.causes import describe_ray_failure, grantable, parse_address, task_options
from supervisor import Routing, Zeus
from supervisor import journal as jr
from supervisor.errors import RoutingError
from supervisor.journal.sweep_ray import RayProbe, job_verdict


def ray_error(name: str, text: str = "", base: type[Exception] = Exception) -> Exception:
    """An exception of a class named as Ray names it (the rules look at names only)."""
    return type(name, (base,), {})(text)


RayError = type("RayError", (Exception,), {})
RayActorError = type("RayActorError", (RayError,), {})


@pytest.mark.parametrize(
    ("error", "outcome", "cause"),
    [
        (ray_error("WorkerCrashedError", base=RayError), "crash", "worker died"),
        (ray_error("NodeDiedError", "node 1 died", RayError), "crash", "node died"),
        (ray_error("OutOfMemoryError", "", RayError), "crash", "out of memory"),
        (ray_error("ActorDiedError", "The actor died", RayActorError), "crash", "worker died"),
        (ray_error("ActorDiedError", "The actor died because its node has died.",
                   RayActorError), "crash", "node died"),
        (ray_error("ActorDiedError", "killed: the node is running out of memory",
                   RayActorError), "crash", "out of memory"),
        (ray_error("OwnerDiedError", "", RayError), "crash", "node died"),
        (ray_error("TaskCancelledError", "", RayError), "cancelled", "cancelled through Ray"),
        (ray_error("RuntimeEnvSetupError", "", RayError), "error",
         "its runtime environment failed"),
        (ray_error("RayTaskError", "boom", RayError), "error", "the Ray task failed"),
        (ValueError("not Ray's"), "error", "the Ray task failed"),
    ],
)
def test_a_ray_failure_names_its_cause_and_is_a_crash_only_when_a_worker_or_node_died(
    error: Exception, outcome: str, cause: str
) -> None:
    ending = describe_ray_failure(error)
    assert (ending.outcome, ending.cause) == (AttemptOutcome(outcome), cause)
    assert ending.error_type == type(error).__name__


@pytest.mark.parametrize(
    ("address", "target"),
    [
        ("auto", None),
        ("10.0.0.5:6379", ("10.0.0.5", 6379)),
        ("ray://head.example:10001", ("head.example", 10001)),
        ("[::1]:6379", ("::1", 6379)),
    ],
)
def test_an_address_names_the_port_that_must_answer(
    address: str, target: tuple[str, int] | None
) -> None:
    assert parse_address(address) == target


@pytest.mark.parametrize("address", ["head.example", "ray://head:", "head:port"])
def test_an_address_without_a_port_is_refused_saying_what_is_allowed(address: str) -> None:
    with pytest.raises(ValueError, match="names no port; allowed: null"):
        parse_address(address)


def test_resources_become_task_options_and_custom_resources() -> None:
    assert task_options(None) == {}
    assert task_options({"num_cpus": 1, "num_gpus": 0.5, "memory": 1e9, "accel": 1}) == {
        "num_cpus": 1, "num_gpus": 0.5, "memory": 1e9, "resources": {"accel": 1}}


@pytest.mark.parametrize(
    ("wanted", "nodes", "ok"),
    [
        ({"num_cpus": 1}, [{"CPU": 2.0}], True),
        ({"num_cpus": 64}, [{"CPU": 2.0}, {"CPU": 8.0}], False),
        ({"num_cpus": 4, "accel": 1}, [{"CPU": 8.0}, {"CPU": 2.0, "accel": 1.0}], False),
        ({"num_cpus": 2, "accel": 1}, [{"CPU": 8.0}, {"CPU": 2.0, "accel": 1.0}], True),
        ({"num_cpus": 1}, [], False),
    ],
)
def test_resources_are_grantable_only_when_one_node_holds_them_all(
    wanted: dict[str, float], nodes: list[dict[str, float]], ok: bool
) -> None:
    assert grantable(wanted, nodes) is ok


RAY_AGENT = {"version": 1, "agents": {"apollo": {"isolation": "ray"}}}


def test_isolation_ray_without_ray_installed_is_a_routing_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("supervisor.routing.checks.ray_installed", lambda: False)
    with pytest.raises(RoutingError, match=r"agents\.apollo\.isolation: .*"
                       r"pip install 'zeus-supervisor\[ray\]'"):
        Routing.from_dict(RAY_AGENT)


def test_zeus_without_ray_refuses_a_ray_agent_registered_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("supervisor.core.startup.ray_installed", lambda: False)
    from supervisor.routing import AgentPolicy

    with Zeus.start() as zeus, pytest.raises(RoutingError, match=r"zeus-supervisor\[ray\]"):
        zeus.register("apollo", print, AgentPolicy(isolation="ray"))


def test_importing_zeus_does_not_import_ray() -> None:
    code = "import sys, actors, supervisor; assert 'ray' not in sys.modules, 'ray imported'"
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)


# -- zeus sweep and Ray children -------------------------------------------------------------


@pytest.mark.parametrize(
    ("jobs", "action", "words"),
    [
        ([{"JobID": "01000000", "IsDead": True}], "ended by Ray", "is dead, so Ray ended"),
        ([{"JobID": "01000000", "IsDead": False, "DriverPid": 77}], "failed",
         "still alive (driver pid 77)"),
        ([{"JobID": "02000000", "IsDead": False}], "ended by Ray", "no longer knows job"),
    ],
)
def test_a_ray_childs_fate_is_its_jobs(
    jobs: list[dict[str, object]], action: str, words: str
) -> None:
    verdict = job_verdict("01000000", jobs)
    assert verdict[0] == action and words in verdict[1]


def ray_journal(tmp_path: Path, address: str) -> jr.Journal:
    """A crashed supervisor's journal: one Ray child started, never seen to end."""
    events = [
        {"ts": 1.0, "event": "zeus.started", "pid": 999_999, "routing": None,
         "delegation_id": None, "attempt_id": None, "parent_id": None, "agent": None},
        {"ts": 1.1, "event": "delegation.dispatched", "delegation_id": "apollo-1",
         "attempt_id": None, "parent_id": None, "agent": "apollo", "scope": "s", "depth": 1},
        {"ts": 1.2, "event": "attempt.started", "delegation_id": "apollo-1",
         "attempt_id": "apollo-1-a1", "parent_id": None, "agent": "apollo", "attempt": 1,
         "pid": 4321, "pid_start_time": None, "node": "10.0.0.7/abcdef12",
         "ray_address": address, "ray_job": "01000000", "deadline_s": 60},
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return jr.load(path)


def test_sweep_asks_the_ray_cluster_and_never_signals_a_ray_child(tmp_path: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        asked: list[str] = []

        def jobs(at: str) -> list[dict[str, object]]:
            asked.append(at)
            return [{"JobID": "01000000", "IsDead": True}]

        results = jr.sweep(ray_journal(tmp_path, address), ray=RayProbe(jobs=jobs),
                           probe=lambda pid: None if pid == 999_999 else pytest.fail(
                               "a Ray child's pid was probed"))
    assert asked == [address]
    assert [(r.target.node, r.action) for r in results] == [
        ("10.0.0.7/abcdef12", jr.SweepAction.ray_ended)]


def test_sweep_says_so_when_the_ray_cluster_cannot_be_reached(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"  # nothing listens once it is closed
    [result] = jr.sweep(ray_journal(tmp_path, address), ray=RayProbe(timeout_s=1))
    assert result.action is jr.SweepAction.unverifiable
    assert f"the Ray cluster at {address} cannot be reached" in result.detail
    assert f"ray list tasks --address {address}" in result.detail
