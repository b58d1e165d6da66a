"""The process backend on its own: real worker processes, driven through `start` and a `send`.

Work functions here are defined inside the tests (or in `_works()`), not at
module level: they then travel by value (dill), and a worker never imports
this module (and pytest with it, ~0.3 s per worker).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import multiprocess.forkserver
import multiprocess.resource_tracker
import psutil
import pytest

from actors import AttemptOutcome, Brief, Context, DelegationRefused, Status, Summary
from actors.backends import ChildSpec, ProcessBackend, ProcessChild
from actors.clock import FakeClock, SystemClock
from actors.osproc import same_start
from actors.protocol import DelegateRequest, Finished, Heartbeat, Partial
from tests._support import WAIT_S, Outbox, alive, eventually

pytestmark = pytest.mark.process

class Harness:
    """One backend, the inboxes of its attempts, and a spec factory."""

    def __init__(self, backend: ProcessBackend) -> None:
        self.backend = backend
        self.inboxes: list[Outbox] = []
        self._n = 0

    def spec(self, work: Callable[..., Any], agent: str = "apollo", **overrides: Any) -> ChildSpec:
        self._n += 1
        clock = overrides.pop("clock", None) or SystemClock()
        fields: dict[str, Any] = {
            "agent": agent,
            "delegation_id": f"{agent}-{self._n}",
            "attempt": 1,
            "attempt_id": f"{agent}-{self._n}-a1",
            "brief": Brief(agent=agent, scope=f"scope {self._n}"),
            "deadline": clock.now() + 60.0,
            "clock": clock,
            "work": work,
            "heartbeat_interval_s": 5.0,
            "term_s": 0.5,
        }
        fields.update(overrides)
        return ChildSpec(**fields)

    def start(
        self, work: Callable[..., Any], agent: str = "apollo", **overrides: Any
    ) -> tuple[ProcessChild, Outbox]:
        inbox = Outbox()
        self.inboxes.append(inbox)
        handle = self.backend.start(self.spec(work, agent, **overrides), inbox)
        assert isinstance(handle, ProcessChild)
        return handle, inbox

    def run(self, work: Callable[..., Any], agent: str = "apollo", **overrides: Any) -> Finished:
        return self.start(work, agent, **overrides)[1].finished()


@pytest.fixture
def harness() -> Iterator[Harness]:
    h = Harness(ProcessBackend())
    yield h
    h.backend.close()
    for inbox in h.inboxes:  # exactly one Finished per attempt, even after close()
        assert len(inbox.of(Finished)) == 1, inbox.messages


def infrastructure() -> set[int]:
    """The fork server and the resource tracker: shared by every multiprocess user here."""
    pids = {
        multiprocess.forkserver._forkserver._forkserver_pid,
        multiprocess.resource_tracker._resource_tracker._pid,
    }
    return {p for p in pids if p is not None}


def descendants() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True) if alive(p.pid)}


def _works() -> Any:
    """Work functions shared by several tests (nested, so they travel by value)."""

    def hang_with_grandchild(brief: Brief, ctx: Context) -> None:
        import subprocess
        import time

        grandchild = subprocess.Popen(["sleep", "1000"])
        ctx.partial(grandchild.pid)
        time.sleep(1000)

    def pid(brief: Brief, ctx: Context) -> int:
        import os

        return os.getpid()

    return SimpleNamespace(hang_with_grandchild=hang_with_grandchild, pid=pid)


W = _works()


# -- results and errors -----------------------------------------------------------------


def test_a_lambda_runs_in_another_process_and_its_result_comes_back(harness: Harness) -> None:
    finished = harness.run(lambda brief, ctx: (brief.scope.upper(), os.getpid()))
    assert finished.outcome is AttemptOutcome.completed
    value, pid = finished.value
    assert value == "SCOPE 1"
    assert pid != os.getpid() and finished.pid == pid


def test_a_closure_carries_its_captured_values(harness: Harness) -> None:
    factor = 7
    seen = {"words": ["a", "b"]}

    def work(brief: Brief, ctx: Context) -> list[str]:
        for word in seen["words"]:
            ctx.partial(word * factor)
        return [w.upper() for w in seen["words"]]

    handle, inbox = harness.start(work)
    finished = inbox.finished()
    assert finished.outcome is AttemptOutcome.completed and finished.value == ["A", "B"]
    partials = inbox.of(Partial)
    assert [(p.progress, p.item) for p in partials] == [(1, "aaaaaaa"), (2, "bbbbbbb")]
    assert finished.progress == 2
    assert handle.pid == finished.pid


def test_an_async_work_function_is_awaited_in_the_child(harness: Harness) -> None:
    async def work(brief: Brief, ctx: Context) -> int:
        import asyncio

        await asyncio.sleep(0)
        ctx.charge(calls=1, input_tokens=10)
        return 42

    finished = harness.run(work)
    assert finished.outcome is AttemptOutcome.completed and finished.value == 42


def test_exceptions_are_classified_as_on_a_thread(harness: Harness) -> None:
    def permanent(brief: Brief, ctx: Context) -> None:
        raise ValueError("bad input")

    def transient(brief: Brief, ctx: Context) -> None:
        raise ConnectionResetError("peer went away")

    error = harness.run(permanent)
    assert error.outcome is AttemptOutcome.error
    assert error.error == "ValueError: bad input" and error.error_type == "ValueError"
    assert error.traceback is not None and "bad input" in error.traceback
    assert harness.run(transient).outcome is AttemptOutcome.transient


@pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt()])
def test_a_base_exception_in_agent_code_fails_that_attempt_only(
    harness: Harness, exc: BaseException
) -> None:
    def work(brief: Brief, ctx: Context) -> None:
        raise exc

    first = harness.run(work)
    assert first.outcome is AttemptOutcome.error
    assert first.error_type == type(exc).__name__
    # The worker survived it and takes the agent's next attempt.
    assert harness.run(W.pid).value == first.pid


def test_a_work_function_that_cannot_cross_fails_before_any_process_starts(
    harness: Harness,
) -> None:
    pending = (n for n in range(3))  # even dill cannot pickle a generator

    def work(brief: Brief, ctx: Context) -> int:
        return next(pending)

    handle, inbox = harness.start(work)
    finished = inbox.finished()
    assert finished.outcome is AttemptOutcome.error
    assert finished.error_type == "CrossingError"
    assert (finished.error or "").startswith("the work function ")
    assert "cannot cross the process boundary" in (finished.error or "")
    assert "'generator'" in (finished.error or "")
    assert handle.pid is None and not handle.killable


def test_a_result_that_cannot_cross_fails_the_attempt_with_its_type(harness: Harness) -> None:
    def work(brief: Brief, ctx: Context) -> object:
        return (n for n in range(3))

    finished = harness.run(work)
    assert finished.outcome is AttemptOutcome.error
    assert finished.error_type == "CrossingError"
    assert (finished.error or "").startswith("the result (a generator) cannot cross")
    # The worker is fine: it takes the next attempt.
    assert harness.run(W.pid).value == finished.pid


def test_a_partial_that_cannot_cross_fails_the_attempt_even_if_agent_code_swallows_it(
    harness: Harness,
) -> None:
    def work(brief: Brief, ctx: Context) -> str:
        ctx.partial("fine")
        with contextlib.suppress(TypeError):
            ctx.partial(n for n in range(3))
        return "done anyway"

    _, inbox = harness.start(work)
    finished = inbox.finished()
    assert finished.outcome is AttemptOutcome.error
    assert "a partial result (a generator) cannot cross" in (finished.error or "")
    assert [p.item for p in inbox.of(Partial)] == ["fine"]


def test_the_child_deadline_follows_the_specs_clock_even_a_fake_one(harness: Harness) -> None:
    clock = FakeClock(start=5_000.0)
    finished = harness.run(
        lambda brief, ctx: ctx.remaining(), clock=clock, deadline=clock.now() + 30.0
    )
    assert 20.0 < finished.value <= 30.0


# -- heartbeats, cancel, delegation ------------------------------------------------------


@pytest.mark.realtime
def test_the_child_sends_liveness_heartbeats_with_its_progress(harness: Harness) -> None:
    def work(brief: Brief, ctx: Context) -> str:
        import time

        ctx.partial("one")
        ctx.tool_call("grep", read_only=True)
        while not ctx.cancelled:  # busy, reporting nothing, until cancelled
            time.sleep(0.01)
        return "stopped"

    handle, inbox = harness.start(work, heartbeat_interval_s=0.05)
    beat = inbox.wait_for(Heartbeat)
    assert beat.liveness and beat.progress == 2 and beat.attempt_id == handle.attempt_id
    handle.cancel()
    finished = inbox.finished()
    assert finished.outcome is AttemptOutcome.completed and finished.value == "stopped"


@pytest.mark.realtime
def test_a_warm_worker_beats_for_each_attempt_after_a_quick_one_or_a_long_idle(
    harness: Harness,
) -> None:
    # The heartbeat thread is not woken per attempt: after an attempt it sleeps
    # an interval, then, the worker still idle, until an attempt needs it.
    def busy(brief: Brief, ctx: Context) -> int:
        import os
        import time

        while not ctx.cancelled:  # reports nothing: only the heartbeat thread beats
            time.sleep(0.01)
        return os.getpid()

    pid = harness.run(W.pid, heartbeat_interval_s=0.05).value
    for idle_s in (0.0, 0.3):
        time.sleep(idle_s)
        handle, inbox = harness.start(busy, heartbeat_interval_s=0.05)
        beat = inbox.wait_for(Heartbeat)
        assert beat.liveness and beat.attempt_id == handle.attempt_id
        handle.cancel()
        assert inbox.finished().value == pid
        pid = harness.run(W.pid, heartbeat_interval_s=0.05).value  # a fresh worker each round


def test_cancel_sets_the_child_contexts_cancel_event(harness: Harness) -> None:
    def work(brief: Brief, ctx: Context) -> None:
        ctx.partial("waiting")
        ctx.sleep(1000)

    handle, inbox = harness.start(work)
    inbox.wait_for(Partial)
    handle.cancel()
    finished = inbox.finished()
    assert finished.outcome is AttemptOutcome.cancelled
    assert finished.killed == "cooperative" and finished.kill_latency_s is not None
    assert finished.error_type == "Cancelled"


def test_a_cancel_sent_right_after_start_is_never_lost(harness: Harness) -> None:
    # The cancel may reach the worker before or after it picked up the job; the
    # work waits for it either way. (Workers are warm after the first round, and
    # a cancelled worker is retired, so each round starts a fresh one too.)
    def work(brief: Brief, ctx: Context) -> None:
        ctx.sleep(1000)

    for _ in range(5):
        harness.run(W.pid)
        handle, inbox = harness.start(work)
        handle.cancel()
        assert inbox.finished().outcome is AttemptOutcome.cancelled


def test_delegate_from_a_child_goes_through_send_and_the_reply_comes_back(
    harness: Harness,
) -> None:
    def work(brief: Brief, ctx: Context) -> str:
        summary = ctx.delegate(Brief(agent="hermes", scope="look up X"))
        return f"{summary.status}: {summary.output}"

    handle, inbox = harness.start(work)
    request = inbox.wait_for(DelegateRequest)
    assert request.attempt_id == handle.attempt_id
    assert request.brief == Brief(agent="hermes", scope="look up X")
    request.reply(
        Summary(
            id="hermes-1",
            agent="hermes",
            scope="look up X",
            status=Status.completed,
            output="found",
        )
    )
    assert inbox.finished().value == "completed: found"


def test_a_refused_delegation_raises_in_the_child(harness: Harness) -> None:
    def work(brief: Brief, ctx: Context) -> None:
        ctx.delegate(Brief(agent="hermes", scope="too deep"))

    _, inbox = harness.start(work)
    inbox.wait_for(DelegateRequest).reply(DelegationRefused("max_depth 1: delegate less"))
    finished = inbox.finished()
    assert finished.outcome is AttemptOutcome.error
    assert finished.error == "DelegationRefused: max_depth 1: delegate less"


# -- kill and crash ----------------------------------------------------------------------


@pytest.mark.realtime
def test_kill_stops_a_child_blocked_in_sleep_and_the_grandchild_it_started(
    harness: Harness,
) -> None:
    handle, inbox = harness.start(W.hang_with_grandchild)
    grandchild = inbox.wait_for(Partial).item
    pid = handle.pid
    assert pid is not None and alive(pid) and alive(grandchild)
    assert os.getpgid(grandchild) == pid  # the worker leads its own group
    handle.kill()
    finished = inbox.finished()
    assert finished.outcome is AttemptOutcome.cancelled
    assert finished.killed == "terminate" and finished.pid == pid
    assert finished.kill_latency_s is not None and finished.kill_latency_s < 0.5
    assert finished.exit_code == -signal.SIGTERM
    assert not alive(pid)  # reaped before Finished was sent
    assert eventually(lambda: not alive(grandchild))


@pytest.mark.realtime
def test_a_child_that_ignores_sigterm_is_sigkilled_after_term_s(harness: Harness) -> None:
    def stubborn(brief: Brief, ctx: Context) -> None:
        import signal
        import time

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        ctx.partial("ignoring SIGTERM")
        time.sleep(1000)

    handle, inbox = harness.start(stubborn, term_s=0.2)
    inbox.wait_for(Partial)
    handle.kill()
    finished = inbox.finished()
    assert finished.killed == "kill" and finished.exit_code == -signal.SIGKILL
    assert finished.kill_latency_s is not None and 0.2 <= finished.kill_latency_s < 5.0


def test_a_segfault_is_a_crash_that_names_the_signal(harness: Harness) -> None:
    def segfault(brief: Brief, ctx: Context) -> None:
        import ctypes

        ctx.partial("about to crash")
        ctypes.string_at(0)

    _, inbox = harness.start(segfault)
    finished = inbox.finished()
    assert finished.outcome is AttemptOutcome.crash
    assert "child process died of SIGSEGV (exit code -11)" in (finished.error or "")
    assert finished.exit_code == -11 and finished.progress == 1
    assert finished.killed is None


def test_os_exit_is_a_crash_that_names_the_exit_code(harness: Harness) -> None:
    finished = harness.run(lambda brief, ctx: os._exit(3))
    assert finished.outcome is AttemptOutcome.crash
    assert "child process exited with exit code 3" in (finished.error or "")
    assert finished.exit_code == 3


def test_a_crashed_childs_grandchildren_are_swept_with_its_group(harness: Harness) -> None:
    def crash_leaving_a_grandchild(brief: Brief, ctx: Context) -> None:
        import os
        import subprocess

        ctx.partial(subprocess.Popen(["sleep", "1000"]).pid)
        os._exit(1)

    _, inbox = harness.start(crash_leaving_a_grandchild)
    assert inbox.finished().outcome is AttemptOutcome.crash
    assert eventually(lambda: not alive(inbox.of(Partial)[0].item))


def test_kill_after_the_attempt_finished_leaves_the_warm_worker_alone(harness: Harness) -> None:
    handle, inbox = harness.start(W.pid)
    first = inbox.finished()
    handle.kill()
    handle.cancel()
    assert harness.run(W.pid).value == first.value
    assert alive(first.value)


# -- warm workers ------------------------------------------------------------------------


def test_a_warm_worker_takes_the_agents_next_attempt(harness: Harness) -> None:
    pids = {harness.run(W.pid).value for _ in range(3)}
    assert len(pids) == 1
    # Another agent gets a worker of its own.
    assert harness.run(W.pid, agent="hermes").value not in pids


def test_killed_crashed_and_cancelled_workers_are_never_reused(harness: Harness) -> None:
    handle, inbox = harness.start(W.hang_with_grandchild)
    inbox.wait_for(Partial)
    handle.kill()
    killed = inbox.finished().pid

    crashed = harness.run(lambda brief, ctx: os._exit(9)).pid

    def wait_for_cancel(brief: Brief, ctx: Context) -> None:
        ctx.partial("go")
        ctx.sleep(1000)

    handle, inbox = harness.start(wait_for_cancel)
    inbox.wait_for(Partial)
    handle.cancel()
    cancelled = inbox.finished().pid

    fresh = harness.run(W.pid).value
    assert fresh not in {killed, crashed, cancelled}
    assert eventually(lambda: not alive(cancelled))  # retired, not kept


def test_an_idle_worker_that_died_unnoticed_is_passed_over_for_a_new_one(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    import select

    idle = harness.run(W.pid).value
    (sentinel,) = [w.sentinel for w in harness.backend._table.workers() if w.pid == idle]
    # The hub does not get to the dead worker's sentinel until the attempt is placed.
    real = harness.backend._watch._on_sentinel
    monkeypatch.setattr(harness.backend._watch, "_on_sentinel", lambda worker: time.sleep(0.001))
    os.kill(idle, signal.SIGKILL)
    # Reaped, all its threads gone (a zombie's threads may still hold its pipes).
    assert eventually(lambda: bool(select.select([sentinel], [], [], 0)[0]))
    finished = harness.run(W.pid)
    assert finished.outcome is AttemptOutcome.completed
    assert finished.value not in {idle, None}
    monkeypatch.setattr(harness.backend._watch, "_on_sentinel", real)


# -- work functions pickled once -----------------------------------------------------------


def jobs_posted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, int, int]]:
    """Records the work part of every job sent to a worker: (flush, token, size of its bytes)."""
    from actors.backends import frames
    from actors.backends.process.worker_table import WorkerRecord

    posted: list[tuple[bool, int, int]] = []
    post = WorkerRecord.post

    def spy(worker: Any, data: bytes, **kwargs: Any) -> bool:
        if kwargs.get("job"):
            frame = frames.read_job(data)
            if isinstance(frame, frames.Run):
                posted.append((frame.flush, frame.token, len(frame.work)))
        return post(worker, data, **kwargs)

    monkeypatch.setattr(WorkerRecord, "post", spy)
    return posted


def returning(value: int) -> Callable[..., Any]:
    """A new closure on each call: one name, one code, a value of its own."""

    def work(brief: Brief, ctx: Context) -> tuple[int, int]:
        import os

        return value, os.getpid()

    return work


def test_a_warm_worker_gets_a_work_function_in_full_once_then_its_token(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    posted = jobs_posted(monkeypatch)
    pids = {harness.run(W.pid).value for _ in range(3)}
    assert len(pids) == 1
    (flush, token, size), *later = posted
    assert token and size > 0 and not flush
    assert later == [(False, token, 0)] * 2


def test_functions_with_one_name_or_a_closure_made_again_get_bytes_of_their_own(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    posted = jobs_posted(monkeypatch)
    one, two = returning(1), returning(2)
    assert one.__qualname__ == two.__qualname__
    results = [harness.run(work).value for work in (one, two, one, returning(1), two)]
    assert [value for value, _ in results] == [1, 2, 1, 1, 2]
    assert len({pid for _, pid in results}) == 1  # one warm worker took them all
    tokens = [token for _, token, _ in posted]
    assert tokens[0] == tokens[2] and tokens[1] == tokens[4]
    assert len({tokens[0], tokens[1], tokens[3]}) == 3  # the closure made again: a new token
    assert [size > 0 for _, _, size in posted] == [True, True, False, True, False]


def test_a_worker_told_to_forget_its_functions_gets_them_again(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors.backends.process import backend as _process

    monkeypatch.setattr(_process, "_WORKS_KEPT", 2)
    posted = jobs_posted(monkeypatch)
    works = [returning(n) for n in range(3)]
    results = [harness.run(work).value for work in (*works, works[0])]
    assert [value for value, _ in results] == [0, 1, 2, 0]
    assert len({pid for _, pid in results}) == 1
    flushed_and_sent = [(flush, size > 0) for flush, _, size in posted]
    assert flushed_and_sent == [(False, True), (False, True), (True, True), (False, True)]


def test_work_that_fails_to_unpickle_in_the_child_fails_each_attempt_alike(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A module only the supervisor process has: the function goes by reference
    # and fails to unpickle in the worker, each time.
    import sys
    import types

    module = types.ModuleType("zeus_only_here")
    exec("def work(brief, ctx):\n    return 'unreachable'\n", module.__dict__)
    monkeypatch.setitem(sys.modules, "zeus_only_here", module)
    posted = jobs_posted(monkeypatch)
    first, second = harness.run(module.work), harness.run(module.work)
    for finished in (first, second):
        assert finished.outcome is AttemptOutcome.error
        assert finished.error_type == "ModuleNotFoundError"
        assert "could not be unpickled in the child process" in (finished.error or "")
    assert first.pid == second.pid
    assert [size > 0 for _, _, size in posted] == [True, False]


def test_the_work_cache_keeps_a_function_while_it_lives_and_plain_functions_only() -> None:
    import functools
    import gc

    from actors import wire as _wire

    cache = _wire.WorkCache()
    work = returning(1)
    token, data = cache.get(work)
    assert token is not None and cache.get(work) == (token, data)
    assert cache.get(returning(1))[0] not in {None, token}
    del work
    gc.collect()
    assert len(cache) == 0
    partial = functools.partial(returning(1))
    assert cache.get(partial)[0] is None and len(cache) == 0
    gen = (n for n in range(3))
    with pytest.raises(_wire.CrossingError):
        cache.get(lambda brief, ctx: next(gen))
    assert len(cache) == 0


def test_messages_are_framed_whole_whatever_the_reads_cut() -> None:
    from actors import wire as _wire

    sizes = [0, 1, 7, 100, 4000, 70_000, 300_000, 3_000_000, 5]
    messages = [os.urandom(size) for size in sizes]
    read_fd, write_fd = os.pipe()

    def write() -> None:
        for message in messages:
            _wire.write_frame(write_fd, message)
        os.close(write_fd)

    writer = threading.Thread(target=write)
    writer.start()
    reader, got = _wire.FrameReader(read_fd), []
    while (batch := reader.read()) is not None:
        got.extend(batch)
    writer.join()
    os.close(read_fd)
    assert got == messages

    # A non-blocking reader handed the bytes a few at a time.
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    reader, got = _wire.FrameReader(read_fd), []
    stream = b"".join(len(m).to_bytes(8, "big") + m for m in messages[:6])
    for i in range(0, len(stream), 997):
        os.write(write_fd, stream[i : i + 997])
        with contextlib.suppress(BlockingIOError):
            while (batch := reader.read()) is not None:
                got.extend(batch)
    os.close(read_fd)
    os.close(write_fd)
    assert got == messages[:6]


def test_a_large_result_comes_back_whole(harness: Harness) -> None:
    finished = harness.run(lambda brief, ctx: bytes(range(256)) * 40_000)
    assert finished.outcome is AttemptOutcome.completed
    assert finished.value == bytes(range(256)) * 40_000


def test_pid_start_time_names_the_worker_as_psutil_does(harness: Harness) -> None:
    handle, inbox = harness.start(W.pid)
    pid = inbox.finished().value
    assert same_start(handle.pid_start_time, psutil.Process(pid).create_time())


def test_fifty_children_at_once_all_complete(harness: Harness) -> None:
    def work(brief: Brief, ctx: Context) -> str:
        ctx.partial(brief.scope)
        return brief.scope

    started = [harness.start(work, agent=f"agent{i % 5}") for i in range(50)]
    results = [inbox.finished() for _, inbox in started]
    assert all(f.outcome is AttemptOutcome.completed for f in results), results
    assert [f.value for f in results] == [h.spec.brief.scope for h, _ in started]


# -- close -------------------------------------------------------------------------------


def test_close_leaves_no_process_behind() -> None:
    before = descendants()
    h = Harness(ProcessBackend())
    idle_pid = h.run(W.pid).value
    busy, inbox = h.start(W.hang_with_grandchild, agent="hermes")
    grandchild = inbox.wait_for(Partial).item
    assert alive(idle_pid) and alive(grandchild)
    h.backend.close()
    finished = inbox.finished(timeout=0)  # close() returned only after the Finished
    assert finished.killed in {"terminate", "kill"}
    assert not alive(idle_pid) and not alive(busy.pid or 0)  # workers: reaped
    assert eventually(lambda: not alive(grandchild))  # SIGTERM to its group: dies at once
    assert eventually(lambda: not (descendants() - before - infrastructure()))


ORPHAN_HOST = """
import os, threading
from actors import Brief
from actors.backends import ChildSpec, Partial, ProcessBackend, SystemClock

got, pids = threading.Event(), []
def send(message):
    if isinstance(message, Partial):
        pids.append(message.item)
        got.set()

def work(brief, ctx):
    import subprocess, time
    ctx.partial(subprocess.Popen(["sleep", "1000"]).pid)
    time.sleep(1000)

clock = SystemClock()
handle = ProcessBackend().start(ChildSpec(
    agent="apollo", delegation_id="apollo-1", attempt=1, attempt_id="apollo-1-a1",
    brief=Brief(agent="apollo", scope="s"), deadline=clock.now() + 60, clock=clock, work=work,
), send)
assert got.wait(30)
print(handle.pid, pids[0], flush=True)
os._exit(0)  # the supervisor process dies: no close(), no atexit
"""


def test_a_worker_whose_supervisor_process_died_kills_its_group() -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", ORPHAN_HOST], capture_output=True, text=True, timeout=WAIT_S
    )
    assert out.returncode == 0, out.stderr
    worker, grandchild = map(int, out.stdout.split())
    assert eventually(lambda: not alive(worker) and not alive(grandchild))


def test_start_after_close_fails_the_attempt() -> None:
    h = Harness(ProcessBackend())
    h.backend.close()
    finished = h.run(W.pid)
    assert finished.outcome is AttemptOutcome.error
    assert finished.error == "the process backend is closed"


def test_a_cancelled_attempt_reports_why_it_was_stopped(harness: Harness) -> None:
    """The cause travels with the cancel, and a child over its own budget says so: a Zeus
    that reattaches a child learns from its `Finished` why it stopped."""

    def waits(brief: Brief, ctx: Context) -> None:
        ctx.partial("up")
        while True:
            ctx.sleep(0.01)

    def overspends(brief: Brief, ctx: Context) -> None:
        ctx.charge(calls=2)
        ctx.partial("one more")  # the next reporting call stops it

    child, inbox = harness.start(waits)
    inbox.wait_for(Partial)
    child.cancel_for(AttemptOutcome.timeout.value)
    told = inbox.finished()
    assert (told.outcome, told.stop_cause) == (AttemptOutcome.cancelled, "timeout")
    own = harness.run(overspends, budget_left={"calls": 1.0})
    assert (own.outcome, own.stop_cause) == (AttemptOutcome.cancelled, "budget_exceeded")
    plain, plain_inbox = harness.start(waits)
    plain.cancel()
    assert plain_inbox.finished().stop_cause is None
