"""Processes are started in the backend's spawner thread, never in the caller's (Zeus's
mailbox): the caller gets its handle at once, and the pid follows as `Spawned`."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from actors import AttemptOutcome, Brief, Context, Status
from actors.backends import ChildHandle, ChildSpec, ProcessBackend
from actors.backends.command import child as _command
from actors.backends.process.spawner import Spawner
from actors.clock import SystemClock
from actors.protocol import Heartbeat, Spawned
from supervisor import Routing, Zeus
from supervisor import journal as jr
from supervisor.testing import sync
from tests._support import Outbox

pytestmark = [pytest.mark.process, pytest.mark.realtime]


def work(brief: Brief, ctx: Context) -> str:
    return "done"


def _spec(attempt_id: str, **overrides: Any) -> ChildSpec:
    clock = SystemClock()
    fields: dict[str, Any] = {
        "agent": "a", "delegation_id": attempt_id.rsplit("-", 1)[0], "attempt": 1,
        "attempt_id": attempt_id, "brief": Brief(agent="a", scope="s"),
        "deadline": clock.now() + 60.0, "clock": clock, "work": work,
        "heartbeat_interval_s": 5.0, "term_s": 0.2,
    }
    fields.update(overrides)
    return ChildSpec(**fields)


@pytest.fixture(params=[False, True], ids=["commands-in-supervisor", "commands-in-workers"])
def backend(request: pytest.FixtureRequest) -> Iterator[ProcessBackend]:
    b = ProcessBackend(commands_in_workers=request.param)
    b.prestart()
    yield b
    b.close()


def test_a_cold_worker_and_a_command_start_outside_the_callers_thread(
    backend: ProcessBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    where: list[str] = []
    spawn = backend._spawn

    def recording_spawn(agent: str) -> Any:
        where.append(threading.current_thread().name)
        return spawn(agent)

    real_popen = subprocess.Popen

    def recording_popen(*args: Any, **kwargs: Any) -> Any:
        where.append(threading.current_thread().name)
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(backend, "_spawn", recording_spawn)
    # A command's program is started here, or (in a worker) its worker is: one of the two.
    monkeypatch.setattr(_command.subprocess, "Popen", recording_popen)
    worker_inbox, command_inbox = Outbox(), Outbox()
    child = backend.start(_spec("a-1-a1"), worker_inbox)
    command = backend.start(
        _spec("c-1-a1", agent="c", work=None, command=(sys.executable, "-c", "print('hi')")),
        command_inbox,
    )
    assert child.pid is None and command.pid is None  # nothing started in this thread yet
    assert worker_inbox.finished().outcome is AttemptOutcome.completed
    assert command_inbox.finished().outcome is AttemptOutcome.completed
    assert where == ["zeus-spawner", "zeus-spawner"]
    for inbox in (worker_inbox, command_inbox):
        spawned = inbox.wait_for(Spawned)
        assert spawned.pid > 0
        assert inbox.messages.index(spawned) < inbox.messages.index(inbox.finished())


def test_a_kill_or_cancel_before_the_process_starts_ends_the_attempt_without_one(
    backend: ProcessBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = threading.Event()
    spawned: list[str] = []
    spawn = backend._spawn
    monkeypatch.setattr(backend, "_spawn", lambda agent: spawned.append(agent) or spawn(agent))
    backend._spawner.submit(lambda: gate.wait(10))  # the spawner is busy
    killed_inbox, cancelled_inbox, command_inbox = Outbox(), Outbox(), Outbox()
    killed = backend.start(_spec("a-1-a1"), killed_inbox)
    cancelled = backend.start(_spec("a-2-a1"), cancelled_inbox)
    command = backend.start(
        _spec("c-1-a1", work=None, command=(sys.executable, "-c", "import time; time.sleep(60)")),
        command_inbox,
    )
    assert killed.killable and command.killable  # Zeus kills them rather than fence them
    killed.kill()
    cancelled.cancel()
    command.kill()
    gate.set()
    for inbox in (killed_inbox, cancelled_inbox, command_inbox):
        finished = inbox.finished()
        assert finished.outcome is AttemptOutcome.cancelled
        assert "before its" in (finished.error or "")
        assert inbox.of(Spawned) == []
    assert spawned == []


def test_the_journal_names_a_process_started_outside_the_mailbox(tmp_path: Any) -> None:
    log = tmp_path / "events.jsonl"
    r = Routing.from_dict({"version": 1, "agents": {"p": {"isolation": "process"}}})
    with Zeus.start(r, agents={"p": work}, log=str(log)) as zeus:
        summary = zeus.dispatch(Brief(agent="p", scope="s")).result(20)
    assert summary.status is Status.completed
    pid = summary.attempts[0].pid
    assert pid is not None
    journal = jr.load(log)
    attempts = [a for run in journal.runs for a in run.attempts.values()]
    assert [(a.pid, a.pid_start_time is not None) for a in attempts] == [(pid, True)]


def test_the_spawner_runs_steps_in_order_and_survives_one_that_raises(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spawner = Spawner("test-spawner")
    seen: list[int] = []
    done = threading.Event()

    def boom() -> None:
        raise SystemExit("a step that raises")

    try:
        spawner.submit(lambda: seen.append(1))
        spawner.submit(boom)
        spawner.submit(lambda: seen.append(2))
        spawner.submit(done.set)
        assert done.wait(10)
    finally:
        spawner.close()
    assert seen == [1, 2]
    assert "a step that raises" in capsys.readouterr().err
    assert spawner.submit(lambda: None) is False


class _Starting(ChildHandle):
    """A process handle whose process the backend has not started yet."""

    pid: int | None = None
    killable = True

    def __init__(self) -> None:
        self.killed = False

    def cancel(self) -> None:
        pass

    def kill(self) -> None:
        self.killed = True


class _SlowSpawns:
    """A process backend that starts nothing until the test says so."""

    def __init__(self) -> None:
        self.started: list[tuple[ChildSpec, Any, _Starting]] = []

    def start(self, spec: ChildSpec, send: Any) -> _Starting:
        handle = _Starting()
        self.started.append((spec, send, handle))
        return handle

    def close(self) -> None:
        pass


def test_a_process_still_starting_is_never_stale_and_its_clock_starts_at_its_first_beat(
) -> None:
    from actors.clock import FakeClock
    from tests.conftest import Recorder

    clock, recorder, backend = FakeClock(), Recorder(), _SlowSpawns()
    r = Routing.from_dict({"version": 1, "agents": {"p": {
        "isolation": "process", "timeout_s": 30, "heartbeat": {"stale_after_s": 2}}}})
    zeus = Zeus.start(r, agents={"p": work}, clock=clock, log=recorder,
                      backends={"process": backend})  # type: ignore[dict-item]
    try:
        handle = zeus.dispatch(Brief(agent="p", scope="s"))
        sync(zeus)
        clock.advance(5)  # three stale periods while the process is being started
        sync(zeus)
        assert recorder.named("attempt.stale") == []
        spec, send, _ = backend.started[0]
        send(Spawned(spec.attempt_id, 4242, 1.0))
        sync(zeus)
        assert [e["pid"] for e in recorder.named("attempt.spawned")] == [4242]
        clock.advance(1.0)
        sync(zeus)
        assert recorder.named("attempt.stale") == []  # spawned, not yet heard from
        send(Heartbeat(spec.attempt_id, 0, liveness=True))  # its worker's first beat
        sync(zeus)
        clock.advance(1.9)
        sync(zeus)
        assert recorder.named("attempt.stale") == []
        clock.advance(0.1)  # stale_after_s after its first sign of life
        sync(zeus)
        assert len(recorder.named("attempt.stale")) == 1
        zeus.cancel(handle.id)
    finally:
        zeus.stop(timeout=1)


def test_an_attempt_whose_process_never_starts_still_times_out_at_its_deadline() -> None:
    from actors.clock import FakeClock
    from tests.conftest import Recorder

    clock, recorder, backend = FakeClock(), Recorder(), _SlowSpawns()
    r = Routing.from_dict({"version": 1, "agents": {"p": {
        "isolation": "process", "timeout_s": 5, "retry": {"max_retries": 0},
        "heartbeat": {"interval_s": 0.5, "stale_after_s": 1}, "shutdown": {"grace_s": 0}}}})
    zeus = Zeus.start(r, agents={"p": work}, clock=clock, log=recorder,
                      backends={"process": backend})  # type: ignore[dict-item]
    try:
        zeus.dispatch(Brief(agent="p", scope="s"))
        sync(zeus)
        clock.advance(5)
        sync(zeus)
        assert recorder.named("attempt.stale") == []
        assert len(recorder.named("attempt.timed_out")) == 1
        assert backend.started[0][2].killed
    finally:
        zeus.stop(timeout=1)


def test_a_process_spawned_after_its_stale_check_times_out_once_at_its_deadline() -> None:
    from actors.clock import FakeClock
    from tests.conftest import Recorder

    clock, recorder, backend = FakeClock(), Recorder(), _SlowSpawns()
    r = Routing.from_dict({"version": 1, "agents": {"p": {
        "isolation": "process", "timeout_s": 5, "retry": {"max_retries": 0},
        "heartbeat": {"interval_s": 0.5, "stale_after_s": 10}, "shutdown": {"grace_s": 0}}}})
    zeus = Zeus.start(r, agents={"p": work}, clock=clock, log=recorder,
                      backends={"process": backend})  # type: ignore[dict-item]
    try:
        zeus.dispatch(Brief(agent="p", scope="s"))
        sync(zeus)
        clock.advance(1)
        spec, send, _ = backend.started[0]
        send(Spawned(spec.attempt_id, 4242, 1.0))
        sync(zeus)
        clock.advance(4)
        sync(zeus)
        assert len(recorder.named("attempt.timed_out")) == 1
        assert clock.pending() == []
    finally:
        zeus.stop(timeout=1)
