"""Workers that outlive their supervisor and wait to be picked up (docs/design.md, "Reattach").

A real host process (`tests._reattach_host`) starts attempts on a `ProcessBackend`
with a store's place and is SIGKILLed; this process then finds the workers that wait
(`find_waiting`, `wait_for_listener`) and picks them up (`ProcessBackend.reattach`).
One host, killed once, leaves the workers of most tests waiting (`killed_host`); the
tests that need graces of their own, or two hosts, start their own.

These hosts open no store: a store's name only names the place its workers wait in
(`place_for_store`), a file's beside it and a PostgreSQL URL's in the temporary
directory, which the place test checks for both; what happens in between is the
worker's and the backend's, the same for either store. A real Zeus host on each store,
killed and started again, is tests/test_host_reattach.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from actors import AttemptOutcome, Brief, Context, Status, Summary
from actors.backends import ChildSpec, ProcessBackend, ProcessChild
from actors.backends.process.reattach import (
    ReattachPlace,
    Waiting,
    children_dir,
    existing_place,
    find_waiting,
    place_for_store,
    wait_for_listener,
)
from actors.backends.process.worker_wait import Held
from actors.clock import SystemClock
from actors.mail import Mail
from actors.protocol import Charge, DelegateRequest, Finished, Heartbeat, Partial
from tests._support import WAIT_S, Outbox, alive, eventually
from tests._zygote import forked

pytestmark = [pytest.mark.process, pytest.mark.realtime]

SHARED_GRACE_S = 30.0  # the shared host's workers wait that long: every test picks its own up
TERM_S = 0.5  # the host's specs


class Host:
    """A host process (`tests._reattach_host`) and the JSON lines it printed."""

    def __init__(self, tmp: Path, name: str, plan: dict[str, Any]) -> None:
        path = tmp / f"{name}.json"
        path.write_text(json.dumps(plan), encoding="utf-8")
        root = Path(__file__).resolve().parent.parent
        env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        # forked from a process that has imported Zeus (tests/_zygote.py)
        self.process = forked("tests._reattach_host", [str(path)], cwd=root, env=env,
                              stderr=False)
        self.lines: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._cond:
                self.lines.append(json.loads(line))
                self._cond.notify_all()

    def wait_for(self, kind: str, attempt_id: str, **fields: Any) -> dict[str, Any]:
        """The first line of `kind` for the attempt (with those fields), once printed."""

        def found() -> dict[str, Any] | None:
            return next((line for line in self.lines if line.get("kind") == kind
                         and line.get("attempt_id") == attempt_id
                         and all(line.get(k) == v for k, v in fields.items())), None)  # fmt: skip

        with self._cond:
            assert self._cond.wait_for(lambda: found() is not None, WAIT_S), self.lines
            line = found()
        assert line is not None
        return line

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self._reader.join(WAIT_S)
        assert self.process.stdout is not None
        self.process.stdout.close()


@dataclass
class Started:
    """An attempt the host started: its worker, and the gates its work waits on."""

    attempt_id: str
    pid: int
    start_time: float | None
    gates: Path
    grandchildren: list[int] = field(default_factory=list)  # what `family` started

    def open(self, *steps: int) -> None:
        for i in steps:
            (self.gates / f"go-{i}").touch()

    def made(self, step: int) -> bool:
        return (self.gates / f"made-{step}").exists()


@dataclass
class KilledHost:
    place: ReattachPlace
    started: dict[str, Started]


def start_host(
    tmp: Path, name: str, store: Path, grace_s: float, attempts: dict[str, dict[str, Any]]
) -> tuple[Host, dict[str, Started]]:
    """A host that starts `attempts`, by name: `work`, `open` (the gates opened at once),
    and what else the host's plan takes. Returns once each has its process."""
    plan = {}
    for name_of, attempt in attempts.items():
        gates = tmp / f"{name}-{name_of}"
        gates.mkdir()
        for i in attempt.pop("open", ()):
            (gates / f"go-{i}").touch()
        plan[name_of] = {"attempt_id": f"apollo-{name}-{name_of}-a1", "gates": str(gates),
                         **attempt}  # fmt: skip
    host = Host(tmp, name, {"store": str(store), "grace_s": grace_s,
                            "start": list(plan.values())})  # fmt: skip
    started = {}
    for name_of, attempt in plan.items():
        line = host.wait_for("Spawned", attempt["attempt_id"])
        started[name_of] = Started(attempt["attempt_id"], line["pid"], line["pid_start_time"],
                                   Path(attempt["gates"]))  # fmt: skip
        if attempt["work"] == "family":
            started[name_of].grandchildren = host.wait_for("Partial", attempt["attempt_id"])["item"]
    return host, started


@pytest.fixture(scope="module")
def killed_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KilledHost]:
    """One host, SIGKILLed once its attempts got as far as each test needs: a writer one
    step in, a writer that will finish while no host runs, an orchestrator waiting on
    its first delegation, an idle worker holding a session, families of grandchildren,
    a worker waiting for mail, writers for the wrong key and for a crash, and an idle
    worker without a session."""
    tmp = tmp_path_factory.mktemp("reattach")
    store = tmp / "zeus.db"
    host, started = start_host(tmp, "shared", store, SHARED_GRACE_S, {
        "writer": {"work": "steps", "open": [0], "heartbeat_interval_s": 0.05},
        "finisher": {"work": "steps", "open": [0]},
        "orchestrator": {"work": "orchestrate"},
        "session": {"work": "remember", "session_key": "s1"},
        "family": {"work": "family"},
        "locked": {"work": "steps", "open": [0]},
        "mailbox": {"work": "mailbox"},
        "doomed": {"work": "family"},
        "crasher": {"work": "steps", "open": [0]},
        "idle": {"work": "remember"},
    })  # fmt: skip
    for name in ("writer", "finisher", "locked", "crasher"):
        host.wait_for("Partial", started[name].attempt_id, item=0)
    host.wait_for("Partial", started["mailbox"].attempt_id, item="listening")
    host.wait_for("DelegateRequest", started["orchestrator"].attempt_id, ordinal=1)
    host.wait_for("Finished", started["session"].attempt_id)
    host.wait_for("Finished", started["idle"].attempt_id)
    host.kill()
    place = place_for_store(store, SHARED_GRACE_S)
    yield KilledHost(place, started)
    for waiting in find_waiting(place):  # a test that failed left its worker waiting
        waiting.stop()
    assert eventually(lambda: not any(alive(s.pid) for s in started.values()))


@pytest.fixture
def backend() -> Iterator[ProcessBackend]:
    backend = ProcessBackend()
    yield backend
    backend.close()


def rebuilt(started: Started, **overrides: Any) -> ChildSpec:
    """The attempt's spec as a new supervisor rebuilds it (the same attempt id), or, with
    overrides, a next attempt of the agent."""
    clock = SystemClock()
    fields: dict[str, Any] = {
        "agent": "apollo", "delegation_id": started.attempt_id.rsplit("-", 1)[0], "attempt": 1,
        "attempt_id": started.attempt_id, "brief": Brief(agent="apollo", scope=str(started.gates)),
        "deadline": clock.now() + 60.0, "clock": clock, "term_s": TERM_S,
    }  # fmt: skip
    return ChildSpec(**{**fields, **overrides})


def found(place: ReattachPlace, started: Started, timeout_s: float = WAIT_S) -> Waiting:
    waiting = wait_for_listener(place, started.pid, started.start_time, timeout_s=timeout_s)
    assert waiting is not None, f"worker {started.pid} is not waiting"
    assert (waiting.pid, waiting.start_time, waiting.agent) == (
        started.pid,
        started.start_time,
        "apollo",
    )
    return waiting


def reports(outbox: Outbox) -> list[Any]:
    """What the outbox got, liveness beats aside, as comparable values."""
    return [
        ("partial", m.item) if isinstance(m, Partial)
        else ("charge", m.usage.calls) if isinstance(m, Charge)
        else ("finished", m.outcome, m.value) if isinstance(m, Finished)
        else ("delegate", m.ordinal) if isinstance(m, DelegateRequest)
        else type(m).__name__
        for m in outbox.messages
        if not (isinstance(m, Heartbeat) and m.liveness)
    ]  # fmt: skip


def gone(*pids: int) -> Callable[[], bool]:
    return lambda: not any(alive(pid) for pid in pids)


# -- picked up -------------------------------------------------------------------------


def test_a_reattached_worker_sends_what_it_held_in_order_before_reattach_returns_then_goes_live(
    killed_host: KilledHost, backend: ProcessBackend
) -> None:
    started = killed_host.started["writer"]
    started.open(1, 2)  # made while no host runs: held
    assert eventually(lambda: started.made(2))
    waiting = found(killed_host.place, started)
    assert (waiting.attempt_id, waiting.finished, waiting.session_key) == (
        started.attempt_id,
        False,
        None,
    )
    outbox = Outbox()
    child = backend.reattach(waiting, rebuilt(started), outbox)
    assert isinstance(child, ProcessChild)
    # First the charge it sent its host before the crash (which that host may not have
    # committed: a host counts only those above its store's `charged_progress`), then
    # what it held.
    assert reports(outbox) == [("charge", 1), ("partial", 1), ("charge", 1), ("partial", 2),
                               ("charge", 1)]
    assert (child.pid, child.pid_start_time) == (started.pid, started.start_time)
    started.open(3)
    finished = outbox.finished()
    assert (finished.outcome, finished.value, finished.pid) == (
        AttemptOutcome.completed,
        "done",
        started.pid,
    )
    assert reports(outbox)[5:] == [
        ("partial", 3),
        ("charge", 1),
        ("finished", AttemptOutcome.completed, "done"),
    ]
    assert not os.path.exists(killed_host.place.address(started.pid))  # attached: not listening


def test_a_worker_whose_attempt_finished_while_no_host_ran_delivers_its_result(
    killed_host: KilledHost, backend: ProcessBackend
) -> None:
    started = killed_host.started["finisher"]
    started.open(1, 2, 3)
    assert eventually(lambda: started.made(3))
    waiting = found(killed_host.place, started)
    until = time.monotonic() + WAIT_S
    while not waiting.finished and time.monotonic() < until:  # it follows `made-3` closely
        waiting.close()  # hung up on: it waits on
        waiting = found(killed_host.place, started)
    assert (waiting.attempt_id, waiting.finished) == (started.attempt_id, True)
    outbox = Outbox()
    child = backend.reattach(waiting, rebuilt(started), outbox)
    assert isinstance(child, ProcessChild)
    assert outbox.finished_event.is_set()  # before reattach returned
    assert reports(outbox)[-1] == ("finished", AttemptOutcome.completed, "done")
    assert [m for m in reports(outbox) if m[0] == "partial"] == [
        ("partial", 1),
        ("partial", 2),
        ("partial", 3),
    ]
    # Its worker is warm now, like any other: it takes the agent's next attempt.

    def pid(brief: Brief, ctx: Context) -> int:
        import os

        return os.getpid()

    again = Outbox()
    backend.start(rebuilt(started, attempt_id="apollo-next-a1", work=pid), again)
    assert again.finished().value == started.pid


def test_an_idle_worker_holding_a_session_is_reattached_into_the_pool_and_keeps_its_session(
    killed_host: KilledHost, backend: ProcessBackend
) -> None:
    started = killed_host.started["session"]
    waiting = found(killed_host.place, started)
    # It says which attempt it ran last (its host may not have handled the result).
    assert (waiting.attempt_id, waiting.finished, waiting.session_key) == (
        started.attempt_id, True, "s1")
    assert backend.reattach(waiting, None, Outbox()) is True

    def recall(brief: Brief, ctx: Context) -> tuple[int, Any]:
        import os

        return os.getpid(), ctx.session.get("seen")

    outbox = Outbox()
    backend.start(rebuilt(started, attempt_id="apollo-follow-up-a1", work=recall,
                          session_key="s1"), outbox)  # fmt: skip
    assert outbox.finished().value == (started.pid, [str(started.gates)])


def test_a_reattached_orchestrators_pending_delegation_comes_again_with_its_ordinal(
    killed_host: KilledHost, backend: ProcessBackend
) -> None:
    started = killed_host.started["orchestrator"]

    def answer(request: DelegateRequest) -> None:
        request.reply(Summary(id=f"hermes-{request.ordinal}", agent="hermes",
                              scope=request.brief.scope, status=Status.completed,
                              output=f"answer {request.ordinal}"))  # fmt: skip

    outbox = Outbox()
    outbox.after(2, DelegateRequest, answer)  # the next one, made live, answered as it comes
    child = backend.reattach(found(killed_host.place, started), rebuilt(started), outbox)
    assert child is not None
    again = outbox.of(DelegateRequest)  # sent again, before reattach returned
    assert [(r.ordinal, r.brief.scope) for r in again] == [(1, "first")]
    answer(again[0])
    finished = outbox.finished()
    assert finished.value == ["answer 1", "answer 2"]
    assert [m.ordinal for m in outbox.of(DelegateRequest)] == [1, 2]


def test_a_reattached_worker_takes_its_owners_mail(
    killed_host: KilledHost, backend: ProcessBackend
) -> None:
    started = killed_host.started["mailbox"]
    outbox = Outbox()
    child = backend.reattach(found(killed_host.place, started), rebuilt(started), outbox)
    assert child is not None
    child.put_mail(Mail({"to": "apollo"}))
    assert outbox.finished().value == {"to": "apollo"}


def test_kill_stops_a_reattached_worker_and_its_grandchildren_with_the_ladder(
    killed_host: KilledHost, backend: ProcessBackend
) -> None:
    started = killed_host.started["doomed"]
    outbox = Outbox()
    child = backend.reattach(found(killed_host.place, started), rebuilt(started), outbox)
    assert child is not None and child.killable
    child.kill()
    finished = outbox.finished()
    assert (finished.outcome, finished.killed, finished.pid) == (
        AttemptOutcome.cancelled,
        "terminate",
        started.pid,
    )
    assert finished.exit_code is None  # it is not this process's child: its parent reads it
    assert eventually(gone(started.pid, *started.grandchildren), timeout=TERM_S + 5.0)


def test_a_reattached_worker_that_dies_is_a_crash_that_says_so(
    killed_host: KilledHost, backend: ProcessBackend
) -> None:
    started = killed_host.started["crasher"]
    outbox = Outbox()
    child = backend.reattach(found(killed_host.place, started), rebuilt(started), outbox)
    assert child is not None
    os.kill(started.pid, signal.SIGKILL)
    finished = outbox.finished()
    assert (finished.outcome, finished.error_type, finished.pid) == (
        AttemptOutcome.crash,
        "ChildProcessDied",
        started.pid,
    )
    assert finished.error == "child process died while reattached before reporting a result"


# -- not picked up -----------------------------------------------------------------------


def test_an_idle_worker_without_a_session_waits_with_its_last_result(
    killed_host: KilledHost,
) -> None:
    """Its host may have died before it handled that result: the worker keeps it until
    its next job, and waits with it; told to stop (nobody asks for it), it goes."""
    started = killed_host.started["idle"]
    waiting = found(killed_host.place, started)
    assert (waiting.attempt_id, waiting.finished, waiting.session_key) == (
        started.attempt_id, True, None)
    waiting.stop()
    assert eventually(gone(started.pid), timeout=5.0)
    assert not os.path.exists(killed_host.place.address(started.pid))


def test_a_connection_with_the_wrong_key_or_none_is_refused_and_the_worker_waits_on(
    killed_host: KilledHost, backend: ProcessBackend
) -> None:
    started = killed_host.started["locked"]
    place = killed_host.place
    wrong = ReattachPlace(place.directory, bytes(32), place.grace_s)
    assert wait_for_listener(wrong, started.pid, started.start_time, timeout_s=0.3) is None
    assert os.path.exists(place.address(started.pid)) and alive(started.pid)
    # One that connects and says nothing holds it for at most the challenge's timeout.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.connect(place.address(started.pid))
        waiting = found(place, started, timeout_s=5.0)
    outbox = Outbox()
    assert backend.reattach(waiting, rebuilt(started), outbox) is not None
    started.open(1, 2, 3)
    assert outbox.finished().value == "done"


def test_stop_ends_a_waiting_workers_job_and_its_grandchildren(killed_host: KilledHost) -> None:
    started = killed_host.started["family"]
    waiting = found(killed_host.place, started)
    kept, escaped, stubborn = started.grandchildren
    assert alive(kept) and alive(escaped) and os.getsid(escaped) == escaped and alive(stubborn)
    waiting.stop()
    assert eventually(gone(started.pid, kept, escaped, stubborn), timeout=TERM_S + 5.0)
    assert not os.path.exists(killed_host.place.address(started.pid))


def test_without_a_new_host_the_worker_and_its_grandchildren_are_gone_after_grace_and_ladder(
    tmp_path: Path,
) -> None:
    grace_s = 1.0
    host, started = start_host(tmp_path, "alone", tmp_path / "zeus.db", grace_s,
                               {"family": {"work": "family"}})  # fmt: skip
    family = started["family"]
    kept, escaped, stubborn = family.grandchildren
    host.kill()
    killed_at = time.monotonic()
    place = place_for_store(tmp_path / "zeus.db", grace_s)
    found(place, family).close()  # it waits; hung up on, it waits on, its grace running
    assert eventually(gone(family.pid, kept, escaped, stubborn), timeout=grace_s + TERM_S + 5.0)
    assert time.monotonic() - killed_at >= grace_s * 0.9  # not before its grace was over
    assert not os.path.exists(place.address(family.pid))
    assert find_waiting(place) == []


def test_a_worker_outlives_two_hosts_killed_during_one_attempt(
    tmp_path: Path, backend: ProcessBackend
) -> None:
    store = tmp_path / "zeus.db"
    first, started = start_host(tmp_path, "first", store, 3.0,
                                {"steps": {"work": "steps", "open": [0]}})  # fmt: skip
    steps = started["steps"]
    first.wait_for("Partial", steps.attempt_id, item=0)
    first.kill()
    second = Host(tmp_path, "second", {"store": str(store), "grace_s": 3.0,
                                       "reattach": [steps.attempt_id]})  # fmt: skip
    assert second.wait_for("reattached", steps.attempt_id)["pid"] == steps.pid
    steps.open(1)
    second.wait_for("Partial", steps.attempt_id, item=1)
    second.kill()
    steps.open(2)
    assert eventually(lambda: steps.made(2))
    outbox = Outbox()
    child = backend.reattach(found(place_for_store(store, 3.0), steps), rebuilt(steps), outbox)
    assert child is not None and child.pid == steps.pid
    # The charges of steps 0 and 1, sent to the two hosts, again; then what it held.
    assert reports(outbox) == [("charge", 1), ("charge", 1), ("partial", 2), ("charge", 1)]
    steps.open(3)
    assert outbox.finished().value == "done"


# -- the place, and finding ----------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def store_name(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store's name, as its place is found by it: a SQLite file's path, or a PostgreSQL
    URL (no server needed: its place is named by the URL alone)."""
    if request.param == "sqlite":
        yield str(tmp_path / "zeus.db")
        return
    url = f"postgresql://zeus@/zeus?host={tmp_path}"
    yield url
    shutil.rmtree(children_dir(url), ignore_errors=True)  # in the temporary directory


def test_a_stores_place_is_private_and_keeps_its_key(store_name: str, tmp_path: Path) -> None:
    assert existing_place(store_name) is None
    place = place_for_store(store_name, 5.0)
    if "://" in store_name:  # no file to lie beside: the user's own temporary directory
        parent = Path(place.directory).parent
        assert parent.name == f"zeus-{os.getuid()}"
        assert stat.S_IMODE(os.stat(parent).st_mode) == 0o700
    else:
        assert place.directory == str(tmp_path / "zeus.db.children")
    assert place.directory == str(children_dir(store_name))
    assert stat.S_IMODE(os.stat(place.directory).st_mode) == 0o700
    key_file = Path(place.directory) / "key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600 and len(place.key) == 32
    assert place_for_store(store_name, 7.0).key == place.key
    assert existing_place(store_name) == ReattachPlace(place.directory, place.key, 0.0)
    assert repr(place.key) not in repr(place)
    with pytest.raises(ValueError, match="grace_s"):
        place_for_store(store_name, 0.0)


def test_a_store_whose_socket_path_would_be_too_long_waits_in_the_temporary_directory(
    tmp_path: Path,
) -> None:
    # A file's path only: a URL's place is always there (the place test above).
    deep = tmp_path / ("d" * 90) / "zeus.db"
    directory = children_dir(deep)
    assert directory.parent.name == f"zeus-{os.getuid()}"
    assert len(os.fsencode(directory / "1234567.sock")) <= 100
    assert children_dir(deep) == directory != children_dir(tmp_path / ("e" * 90) / "zeus.db")


def test_find_waiting_removes_a_socket_nobody_listens_on(tmp_path: Path) -> None:
    place = place_for_store(tmp_path / "zeus.db", 5.0)
    stale = place.address(4_000_000)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(stale)  # bound, never listening, then closed: what a killed worker leaves
    assert find_waiting(place) == [] and not os.path.exists(stale)


def test_liveness_beats_in_a_row_are_held_as_the_last_one() -> None:
    held = Held()
    for data, beat in [
        (b"b1", True),
        (b"b2", True),
        (b"p1", False),
        (b"b3", True),
        (b"p2", False),
        (b"p3", False),
        (b"b4", True),
        (b"b5", True),
    ]:
        held.keep(data, beat)
    assert held.frames == [b"b2", b"p1", b"b3", b"p2", b"p3", b"b5"]
