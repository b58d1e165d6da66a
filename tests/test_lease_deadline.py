"""A host's lease deadline pushed down to its process children, which stop themselves when
no extension comes (`actors.backends.process.lease_deadline`,
`actors.backends.process.worker_lease`).

The pieces first (no process), then real workers: one whose deadline passes, one that
keeps being extended, a command agent's program and its grandchildren, an idle worker,
and a real host frozen with SIGSTOP (`tests._lease_host`) while its worker runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

from actors import AttemptOutcome, Brief, Context
from actors.backends import ChildSpec, ProcessBackend
from actors.backends.backstop import Backstop
from actors.backends.process.lease_deadline import (
    SIZE,
    LeaseFile,
    LeaseView,
    remove_stale,
    valid_until,
)
from actors.backends.process.reattach import find_waiting, place_for_store
from actors.backends.process.worker_lease import POLL_S, LeaseWatch
from actors.clock import SystemClock
from actors.protocol import Finished, Partial, Spawned
from tests._support import WAIT_S, Outbox, alive, eventually
from tests._zygote import forked

GRACE_S = 0.5
TERM_S = 0.5
BOUND_S = GRACE_S + TERM_S + POLL_S  # the most a child runs past its last extension
SLACK_S = 2.0  # a loaded machine's signals, reaping and scheduling; loose on purpose


# -- the file ------------------------------------------------------------------------------


def test_what_the_host_writes_each_worker_reads_and_none_is_no_lease(tmp_path: Path) -> None:
    lease = LeaseFile.create(str(tmp_path))
    view = LeaseView(lease.path)
    assert os.stat(lease.path).st_size == SIZE and os.stat(lease.path).st_mode & 0o777 == 0o600
    assert view.read() is None  # made with no lease
    lease.write(1234.5)
    assert view.read() == 1234.5 == lease.read()
    lease.write(None)
    assert view.read() is None
    lease.close()
    assert not os.path.exists(lease.path)
    assert view.read() is None  # the mapping outlives the name
    view.close()


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), "10", True])
def test_a_deadline_that_is_no_monotonic_time_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="lease deadline"):
        valid_until(bad)


def test_a_file_that_is_not_a_lease_file_is_neither_read_nor_adopted(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.lease"
    wrong.write_bytes(b"123")
    link = tmp_path / "link.lease"
    link.symlink_to(LeaseFile.create(str(tmp_path)).path)
    for path in (wrong, link, tmp_path / "missing.lease"):
        with pytest.raises(OSError):
            LeaseView(str(path))
        assert LeaseFile.adopt(str(path)) is None


def test_an_adopted_file_is_written_for_its_reader_and_stale_files_are_removed(
    tmp_path: Path,
) -> None:
    made = LeaseFile.create(str(tmp_path))
    view = LeaseView(made.path)
    adopted = LeaseFile.adopt(made.path)
    assert adopted is not None and not adopted.owned
    adopted.write(99.0)
    assert view.read() == 99.0
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = tmp_path / f"{gone.stdout.strip()}-00000000.lease"
    stale.write_bytes(bytes(SIZE))
    remove_stale(str(tmp_path))
    assert not stale.exists() and os.path.exists(made.path)  # this process runs


# -- the watch (no process) ----------------------------------------------------------------


ID = "apollo-1-a1"


class Stopped(Exception):
    pass


class Keeper:
    def __init__(self) -> None:
        self.looks: list[Callable[[float], float | None]] = []
        self.pokes = 0

    def watch(self, look: Callable[[float], float | None]) -> None:
        self.looks.append(look)

    def poke(self) -> None:
        self.pokes += 1


def watch(running: list[bool]) -> tuple[LeaseWatch, list[str], Keeper]:
    calls: list[str] = []

    def cancel() -> bool:
        calls.append("cancel")
        return running[0]

    def stop(term_s: float) -> NoReturn:
        calls.append(f"stop {term_s}")
        raise Stopped

    keeper = Keeper()
    return LeaseWatch(cancel, stop, keeper), calls, keeper


def test_the_watch_cancels_then_stops_after_the_grace_and_an_extension_then_changes_nothing(
    tmp_path: Path,
) -> None:
    lease = LeaseFile.create(str(tmp_path))
    now = time.monotonic()
    lease.write(now + 10.0)
    lease_watch, calls, keeper = watch([True])
    assert lease_watch.take((lease.path, 2.0, 0.5), ID, 7) is None
    assert keeper.looks == [lease_watch.look] and lease_watch.path == lease.path
    assert lease_watch.look(now) == now + POLL_S  # it looks every POLL_S while a lease is set
    assert lease_watch.look(now + 9.9) == now + 10.0
    assert calls == []
    assert lease_watch.look(now + 10.0) == now + 10.0 + POLL_S  # due: cancelled
    assert calls == ["cancel"]
    lease.write(now + 100.0)  # too late: what was decided holds
    assert lease_watch.look(now + 11.9) == now + 12.0  # its grace_s ends at now + 12
    refused = lease_watch.take((lease.path, 2.0, 0.5), ID, 7)
    assert refused is not None and refused.outcome is AttemptOutcome.cancelled  # none runs now
    assert refused.attempt_id == ID and refused.pid == 7
    with pytest.raises(Stopped):
        lease_watch.look(now + 12.0)
    assert calls == ["cancel", "cancel", "cancel", "stop 0.5"]


def test_an_attempt_that_ends_within_its_grace_lets_the_worker_go_at_the_next_look(
    tmp_path: Path,
) -> None:
    lease = LeaseFile.create(str(tmp_path))
    now = time.monotonic()
    lease.write(now)
    running = [True]
    lease_watch, calls, _ = watch(running)
    lease_watch.take((lease.path, 30.0, 0.5), ID, 7)
    assert lease_watch.look(now) == now + POLL_S
    running[0] = False  # it stopped when cancelled
    with pytest.raises(Stopped):
        lease_watch.look(now + POLL_S)
    assert calls == ["cancel", "cancel", "stop 0.5"]


def test_an_idle_worker_stops_at_once_and_without_a_lease_nothing_is_looked_at(
    tmp_path: Path,
) -> None:
    lease = LeaseFile.create(str(tmp_path))
    lease_watch, calls, keeper = watch([False])
    assert lease_watch.take((lease.path, 2.0, 0.5), ID, 7) is None
    assert lease_watch.look(time.monotonic()) is None  # no lease: it sleeps until poked
    lease.write(time.monotonic() + 0.001)
    lease_watch.take((lease.path, 2.0, 0.5), ID, 7)  # a job came, a lease is set: it looks now
    assert keeper.pokes == 1
    with pytest.raises(Stopped):
        lease_watch.look(time.monotonic() + 1.0)
    assert calls == ["cancel", "stop 0.5"]


def test_a_job_of_a_host_without_a_lease_unbinds_the_worker(tmp_path: Path) -> None:
    lease = LeaseFile.create(str(tmp_path))
    lease.write(time.monotonic() - 1.0)
    lease_watch, _, _ = watch([True])
    assert lease_watch.take(None, ID, 7) is None and lease_watch.path is None  # never bound
    refused = lease_watch.take((lease.path, 1.0, 0.5), ID, 7)
    assert refused is not None and refused.outcome is AttemptOutcome.cancelled
    other, _, _ = watch([True])
    unread = other.take((str(tmp_path / "missing.lease"), 1.0, 0.5), ID, 7)
    assert unread is not None and unread.outcome is AttemptOutcome.error  # never unbounded
    fresh, fresh_calls, _ = watch([True])
    lease.write(time.monotonic() + 60.0)
    assert fresh.take((lease.path, 1.0, 0.5), ID, 7) is None
    assert fresh.take(None, ID, 7) is None and fresh.path is None
    assert fresh.look(time.monotonic() + 120.0) is None and fresh_calls == []


def test_the_backstop_thread_looks_for_what_it_watches_and_again_when_poked() -> None:
    looked: list[float] = []
    twice = threading.Event()

    def look(now: float) -> float | None:
        looked.append(now)
        if len(looked) >= 2:
            twice.set()
        return None

    backstop = Backstop(fire=lambda: None)
    backstop.watch(look)
    assert eventually(lambda: len(looked) == 1)
    backstop.poke()
    assert twice.wait(WAIT_S)


def test_a_watch_that_fails_fires_the_backstop(capfd: pytest.CaptureFixture[str]) -> None:
    fired = threading.Event()

    def look(now: float) -> float | None:
        raise ValueError("the mapping is gone")

    Backstop(fire=fired.set).watch(look)
    assert fired.wait(WAIT_S)  # what cannot tell does not let the worker run on
    assert "the mapping is gone" in capfd.readouterr().err


# -- real workers --------------------------------------------------------------------------


def spec(work: Callable[..., Any] | None = None, **overrides: Any) -> ChildSpec:
    clock = SystemClock()
    fields: dict[str, Any] = {
        "agent": "apollo", "delegation_id": "apollo-1", "attempt": 1,
        "attempt_id": "apollo-1-a1", "brief": Brief(agent="apollo", scope="s"),
        "deadline": clock.now() + 120.0, "clock": clock, "work": work,
        "heartbeat_interval_s": 60.0, "grace_s": GRACE_S, "term_s": TERM_S,
    }  # fmt: skip
    fields.update(overrides)
    return ChildSpec(**fields)


@pytest.fixture
def backend() -> Iterator[ProcessBackend]:
    b = ProcessBackend()
    b.prestart()  # the fork server is ready: a cold start takes ms, not the lease
    yield b
    b.close()


def gone_by(pids: list[int], until: float) -> float:
    """Wait until none of `pids` runs; when that was seen (a bound on the wait, not a sync)."""
    assert eventually(lambda: not any(alive(pid) for pid in pids), until + WAIT_S
                      - time.monotonic())  # fmt: skip
    return time.monotonic()


def waits_for_cancel(brief: Brief, ctx: Context) -> str:
    ctx.heartbeat()
    ctx.sleep(1e9)
    return "never"


def deaf(brief: Brief, ctx: Context) -> None:
    import time

    ctx.heartbeat()
    while True:
        time.sleep(0.05)


@pytest.mark.process
@pytest.mark.realtime
def test_a_worker_cancels_its_attempt_at_the_deadline_and_exits(backend: ProcessBackend) -> None:
    until = time.monotonic() + 2.0
    backend.extend_lease(until)
    outbox = Outbox()
    backend.start(spec(waits_for_cancel), outbox)
    pid = outbox.wait_for(Spawned).pid
    finished = outbox.finished()
    assert finished.outcome is AttemptOutcome.cancelled and finished.error_type == "Cancelled"
    # stopped for its host's loss, which no one asked for: a host that reattaches it judges
    # it as lost, never as cancelled
    assert "lease" in (finished.error or "") and finished.stop_cause == "lost"
    assert until <= time.monotonic()  # not before the deadline
    # Its attempt ended within the grace: the worker goes at its next look, if the backend
    # (alive here) has not retired it first; a worker whose attempt ended cancelled is
    # never reused.
    assert gone_by([pid], until) <= until + 2 * POLL_S + SLACK_S
    backend.extend_lease(time.monotonic() + 60.0)  # a later lease: a new worker, not that one
    again = Outbox()
    backend.start(spec(lambda brief, ctx: "ran", attempt_id="apollo-1-a2"), again)
    assert again.finished().value == "ran" and again.wait_for(Spawned).pid != pid


@pytest.mark.process
@pytest.mark.realtime
def test_a_worker_deaf_to_the_cancel_is_killed_after_grace_and_term(
    backend: ProcessBackend,
) -> None:
    until = time.monotonic() + 2.0
    backend.extend_lease(until)
    outbox = Outbox()
    backend.start(spec(deaf), outbox)
    pid = outbox.wait_for(Spawned).pid
    seen = gone_by([pid], until)
    assert until + GRACE_S <= seen <= until + BOUND_S + SLACK_S
    assert outbox.finished().outcome is AttemptOutcome.crash  # it killed itself


@pytest.mark.process
@pytest.mark.realtime
def test_a_worker_whose_lease_keeps_being_extended_runs_on(
    backend: ProcessBackend, tmp_path: Path,
) -> None:
    gate = tmp_path / "go"

    def until_gate(brief: Brief, ctx: Context) -> str:
        import os

        ctx.heartbeat()
        while not os.path.exists(brief.scope):
            ctx.sleep(0.01)
        return "done"

    backend.extend_lease(time.monotonic() + 0.5)
    outbox = Outbox()
    backend.start(spec(until_gate, brief=Brief(agent="apollo", scope=str(gate))), outbox)
    pid = outbox.wait_for(Spawned).pid
    end = time.monotonic() + 2.0  # four times the lease
    while time.monotonic() < end:
        backend.extend_lease(time.monotonic() + 0.5)
        time.sleep(0.1)  # the renewals' pace, not a synchronisation
    assert alive(pid) and outbox.of(Finished) == []
    gate.touch()
    finished = outbox.finished()
    assert finished.outcome is AttemptOutcome.completed and finished.value == "done"
    assert alive(pid)  # warm, waiting for its next job


@pytest.mark.process
@pytest.mark.realtime
def test_a_command_under_a_worker_dies_with_its_grandchildren_at_the_deadline(
    backend: ProcessBackend,
) -> None:
    until = time.monotonic() + 2.0
    backend.extend_lease(until)  # turns commands_in_workers on
    outbox = Outbox()
    script = ("trap '' INT; sleep 1000 & setsid sleep 1000 & "
              'echo "{\\"partial\\": \\"$$ $!\\"}"; wait')  # fmt: skip
    backend.start(spec(command=("sh", "-c", script), speaks="jsonl"), outbox)
    worker = outbox.wait_for(Spawned).pid
    program, escaped = map(int, outbox.wait_for(Partial).item.split())
    assert program != worker  # it runs below a worker, not below this process
    seen = gone_by([worker, program, escaped], until)
    assert seen <= until + BOUND_S + SLACK_S


@pytest.mark.process
@pytest.mark.realtime
def test_an_idle_warm_worker_exits_when_its_lease_runs_out(backend: ProcessBackend) -> None:
    def quick(brief: Brief, ctx: Context) -> int:
        import os

        return os.getpid()

    backend.extend_lease(time.monotonic() + 60.0)
    outbox = Outbox()
    backend.start(spec(quick), outbox)
    pid = outbox.finished().value
    assert alive(pid)
    until = time.monotonic() + 0.3
    backend.extend_lease(until)  # moved earlier: seen within POLL_S
    assert gone_by([pid], until) <= until + POLL_S + SLACK_S


# -- a real host ---------------------------------------------------------------------------


class Host:
    """A host process (`tests._lease_host`) and the JSON lines it printed."""

    def __init__(self, tmp: Path, plan: dict[str, Any]) -> None:
        path = tmp / "plan.json"
        path.write_text(json.dumps(plan))
        # forked from a process that has imported Zeus (tests/_zygote.py)
        self.proc = forked("tests._lease_host", [str(path)], cwd=Path(__file__).parent.parent,
                           stderr=False)
        self.lines: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(json.loads(line))
                self._cond.notify_all()

    def get(self, key: str) -> Any:
        with self._cond:
            assert self._cond.wait_for(lambda: any(key in line for line in self.lines), WAIT_S)
            return next(line[key] for line in self.lines if key in line)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGCONT)
        self.proc.kill()
        self.proc.wait(WAIT_S)
        self._reader.join(WAIT_S)  # at the end of its output: the host's alone
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Callable[..., Host]]:
    made: list[Host] = []

    def make(**plan: Any) -> Host:
        plan = {"lease_s": 1.5, "grace_s": GRACE_S, "term_s": TERM_S, "work": "family",
                "orphan_grace_s": 30.0, **plan}  # fmt: skip
        made.append(Host(tmp_path, plan))
        return made[-1]

    yield make
    for h in made:
        h.close()


def deadline_of(path: str) -> float:
    view = LeaseView(path)
    try:
        until = view.read()
    finally:
        view.close()
    assert until is not None
    return until


@pytest.mark.process
@pytest.mark.realtime
def test_the_workers_of_a_frozen_host_are_gone_before_its_last_extension_and_the_bound(
    host: Callable[..., Host],
) -> None:
    h = host()
    lease = h.get("lease")
    worker, kept, escaped = h.get("partial")
    os.kill(h.proc.pid, signal.SIGSTOP)
    until = deadline_of(lease)  # its last extension: nothing writes it any more
    seen = gone_by([worker, kept, escaped], until)
    assert seen <= until + BOUND_S + SLACK_S
    assert h.proc.poll() is None  # the host itself is frozen, not gone
    os.kill(h.proc.pid, signal.SIGCONT)


@pytest.mark.process
@pytest.mark.realtime
def test_a_worker_waiting_for_a_dead_host_stops_at_the_lease_unless_a_new_host_extends_it(
    host: Callable[..., Host], tmp_path: Path,
) -> None:
    store = tmp_path / "agents.db"
    first = host(store=str(store), work="patient")
    lease = first.get("lease")
    pid = first.get("pid")
    first.get("partial")
    first.proc.kill()  # its worker waits for the grace (30 s) to be picked up
    first.proc.wait(WAIT_S)
    until = deadline_of(lease)
    assert gone_by([pid], until) <= until + BOUND_S + SLACK_S  # the lease, not the grace

    second = host(store=str(store), work="patient")
    pid = second.get("pid")
    second.get("partial")
    second.proc.kill()
    second.proc.wait(WAIT_S)
    place = place_for_store(store, 30.0)
    backend = ProcessBackend(reattach=place)
    try:
        renewed = time.monotonic() + 60.0
        backend.extend_lease(renewed)
        assert eventually(lambda: any(w.pid == pid for w in _peek(place)))
        waiting = next(w for w in find_waiting(place) if w.pid == pid)
        assert waiting.lease == second.get("lease")
        outbox = Outbox()
        child = backend.reattach(waiting, spec(attempt_id="apollo-1-a1"), outbox)
        assert child is not None and deadline_of(second.get("lease")) == renewed
        old = time.monotonic() + 1.5 + BOUND_S + 0.5  # past the dead host's lease and bound
        while time.monotonic() < old:
            assert alive(pid)
            time.sleep(0.1)  # the pace of the look, not a synchronisation
        child.kill()
        assert outbox.finished().attempt_id == "apollo-1-a1"
    finally:
        backend.close()


def _peek(place: Any) -> list[Any]:
    found = find_waiting(place)
    for waiting in found:
        waiting.close()
    return found
