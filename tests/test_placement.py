"""An attempt that waits for a node (a Ray task not yet taken by a worker), with a fake
backend and a fake clock: no Ray needed.

Waiting for resources is neither a hang nor the agent's time: its deadline and stale
clock start when the child says where it runs (`Placed`), and `attempt.started` is
written then, with its node and pid; an attempt that never runs ends `crash` once
`spawn_timeout_s` has passed, announced once (docs/design.md, "An attempt's clock").
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from actors import AttemptOutcome, Brief, Status
from actors.backends import ChildHandle, ChildSpec, Send
from actors.clock import FakeClock
from actors.protocol import Finished, Heartbeat, Placed, Started
from supervisor.testing import sync
from tests.conftest import Recorder, ZeusFactory


class WaitingChild(ChildHandle):
    """A child that has been submitted but not yet placed on a node."""

    pid: int | None = None

    def __init__(self, spec: ChildSpec, send: Send) -> None:
        self.spec, self.send = spec, send
        self.placing = True
        self.node: str | None = None
        self.journal_fields = {"ray_address": "10.0.0.1:6379", "ray_job": "01000000"}
        self.killed = False

    @property
    def killable(self) -> bool:
        return True

    def cancel(self) -> None:
        """Cooperative cancel: this child never answers it."""

    def kill(self) -> None:
        self.killed = True
        self.send(Finished(self.spec.attempt_id, AttemptOutcome.cancelled, killed="kill",
                           error="its resources were never granted" if self.placing else None))

    def place(self, pid: int, node: str) -> None:
        self.placing, self.pid, self.node = False, pid, node
        self.send(Placed(self.spec.attempt_id, pid, node))
        # The worker's first liveness beat, as a Ray child's reporter thread sends it:
        # the stale clock starts at this first sign of life.
        self.send(Heartbeat(self.spec.attempt_id, 0, liveness=True))


class WaitingBackend:
    def __init__(self) -> None:
        self.children: list[WaitingChild] = []

    def start(self, spec: ChildSpec, send: Send) -> WaitingChild:
        child = WaitingChild(spec, send)
        self.children.append(child)
        return child

    def close(self) -> None:
        """Nothing to release."""


POLICY = {"isolation": "ray", "timeout_s": 10, "heartbeat": {"interval_s": 1, "stale_after_s": 3},
          "shutdown": {"grace_s": 0}, "retry": {"max_retries": 0}}


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> WaitingBackend:
    monkeypatch.setattr("supervisor.routing.checks.ray_installed", lambda: True)
    return WaitingBackend()


def started(recorder: Recorder) -> list[dict[str, Any]]:
    return recorder.named("attempt.started")


def test_an_attempt_waiting_for_a_node_never_goes_stale_nor_late_and_crashes_at_its_spawn_bound(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder, backend: WaitingBackend
) -> None:
    policy = {**POLICY, "spawn_timeout_s": 12}
    zeus = make_zeus({"worker": policy}, works={"worker": print}, backends={"ray": backend})
    handle = zeus.dispatch(Brief(agent="worker", scope="wait"))
    sync(zeus)
    assert started(recorder) == []  # not announced while it waits for a node
    clock.advance(11.9)  # far past stale_after_s, and past timeout_s: neither counts yet
    sync(zeus)
    assert not handle.done() and not backend.children[0].killed
    clock.advance(0.1)
    summary = handle.result(timeout=5)
    assert summary.status is Status.failed and summary.attempts[0].outcome is AttemptOutcome.crash
    assert "its child did not start within 12s" in (summary.error or "")
    assert "its resources were never granted" in (summary.error or "")
    [event] = started(recorder)
    assert (event["pid"], event["node"], event["deadline_s"]) == (None, None, 0.0)
    names = recorder.names()
    assert names.index("attempt.started") < names.index("attempt.failed")


def test_a_placed_attempt_is_announced_with_its_node_and_its_stale_clock_starts_then(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder, backend: WaitingBackend
) -> None:
    zeus = make_zeus({"worker": POLICY}, works={"worker": print}, backends={"ray": backend})
    handle = zeus.dispatch(Brief(agent="worker", scope="wait"))
    sync(zeus)
    clock.advance(5)  # queued for 5 s: longer than stale_after_s, and not stale
    backend.children[0].place(4321, "10.0.0.7/abcdef12")
    sync(zeus)
    [event] = started(recorder)
    # Its whole timeout_s from where it runs: the 5 s it waited were not its time.
    assert (event["pid"], event["node"], event["deadline_s"]) == (4321, "10.0.0.7/abcdef12", 10.0)
    assert (event["ray_address"], event["ray_job"]) == ("10.0.0.1:6379", "01000000")
    clock.advance(2.9)
    sync(zeus)
    assert not handle.done()
    clock.advance(0.1)  # 3 s after its first beat with no progress: stale
    summary = handle.result(timeout=5)
    assert summary.status is Status.timed_out and summary.timeout_kind == "stale"
    assert summary.attempts[0].pid == 4321
    assert len(started(recorder)) == 1


def test_a_placed_attempt_times_out_its_whole_timeout_after_it_was_placed(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder, backend: WaitingBackend
) -> None:
    policy = {**POLICY, "heartbeat": {"interval_s": 1, "stale_after_s": 30}}
    zeus = make_zeus({"worker": policy}, works={"worker": print}, backends={"ray": backend})
    handle = zeus.dispatch(Brief(agent="worker", scope="wait"))
    sync(zeus)
    clock.advance(8)  # waiting for a node: not the agent's time
    backend.children[0].place(4321, "10.0.0.7/abcdef12")
    sync(zeus)
    clock.advance(9.9)  # 17.9 s after the decision, 9.9 s of running
    sync(zeus)
    assert not handle.done()
    clock.advance(0.1)
    summary = handle.result(timeout=5)
    assert summary.status is Status.timed_out and summary.timeout_kind == "deadline"
    assert (summary.attempts[0].error or "").startswith("deadline of 10 s passed")


class StartingChild(WaitingChild):
    """A child whose code runs later than it was started (a process worker's job): it says
    so with `Started`."""

    starts_later = True

    def __init__(self, spec: ChildSpec, send: Send) -> None:
        super().__init__(spec, send)
        self.placing = False

    def run(self) -> None:
        self.send(Started(self.spec.attempt_id))


class StartingBackend(WaitingBackend):
    def start(self, spec: ChildSpec, send: Send) -> StartingChild:
        child = StartingChild(spec, send)
        self.children.append(child)
        return child


LATER = {**POLICY, "isolation": "process",
         "heartbeat": {"interval_s": 1, "stale_after_s": 30}}


def test_a_child_that_starts_later_gets_its_whole_timeout_from_its_start(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    backend = StartingBackend()
    zeus = make_zeus({"worker": LATER}, works={"worker": print}, backends={"process": backend})
    handle = zeus.dispatch(Brief(agent="worker", scope="later"))
    sync(zeus)
    clock.advance(7)  # a new worker and its imports: not the agent's time
    assert started(recorder) == []
    [attempt] = zeus.tree()["delegations"][0]["attempts"]
    assert (attempt["state"], attempt["deadline_in_s"]) == ("starting", 53.0)  # spawn bound
    child = backend.children[0]
    assert isinstance(child, StartingChild)
    child.run()
    sync(zeus)
    [event] = started(recorder)
    assert event["deadline_s"] == 10.0
    [attempt] = zeus.tree()["delegations"][0]["attempts"]
    assert (attempt["state"], attempt["timeout_s"], attempt["elapsed_s"]) == ("running", 10.0, 0)
    clock.advance(9.9)
    sync(zeus)
    assert not handle.done()
    clock.advance(0.1)
    summary = handle.result(timeout=5)
    assert summary.status is Status.timed_out and summary.timeout_kind == "deadline"


def test_a_cancel_while_its_child_waits_to_start_settles_cancelled_at_once(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    backend = StartingBackend()
    zeus = make_zeus({"worker": LATER}, works={"worker": print}, backends={"process": backend})
    handle = zeus.dispatch(Brief(agent="worker", scope="later"))
    sync(zeus)
    clock.advance(3)
    handle.cancel()
    summary = handle.result(timeout=5)  # no time moved: at once
    assert summary.status is Status.cancelled
    assert backend.children[0].killed


def test_the_store_keeps_the_start_and_deadline_of_a_child_that_started_later(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder, tmp_path: Path
) -> None:
    backend = StartingBackend()
    path = tmp_path / "zeus.db"
    zeus = make_zeus({"worker": LATER}, works={"worker": print}, backends={"process": backend},
                     store=path)
    zeus.dispatch(Brief(agent="worker", scope="later"))
    sync(zeus)

    def stored() -> tuple[float, float]:
        with sqlite3.connect(path) as con:
            started, deadline = con.execute("SELECT started, deadline FROM attempts").fetchone()
        return started, deadline

    decided, first_deadline = stored()
    assert first_deadline - decided == pytest.approx(10.0)
    clock.advance(7)
    child = backend.children[0]
    assert isinstance(child, StartingChild)
    child.run()
    sync(zeus)
    started, deadline = stored()  # a Zeus that reattaches it holds it to these
    assert (started - decided, deadline - started) == pytest.approx((7.0, 10.0))
