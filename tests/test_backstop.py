"""A process attempt's hard kill-by time is kept by the worker itself, so it holds even
when the host is frozen (one of its threads holding the GIL in C); Zeus still settles."""

from __future__ import annotations

import ctypes
import math
import signal
import threading
import time
from pathlib import Path

import pytest

from actors import Brief, Context, Status
from actors.backends.backstop import MARGIN_S, Backstop, kill_by
from supervisor import Routing, Zeus
from tests._support import alive, eventually


@pytest.mark.parametrize(
    ("deadline", "grace", "term", "expected"),
    [
        (100.0, 1.0, 0.5, 100.0 + 1.0 + 0.5 + MARGIN_S),
        (100.0, -1.0, -1.0, 100.0 + MARGIN_S),  # nonsense waits count as none
        (math.inf, 1.0, 1.0, None),  # nothing to keep
        (math.nan, 1.0, 1.0, None),
        (1e12, 0.0, 0.0, None),  # further than a month: not armed
    ],
)
def test_the_kill_by_time_is_deadline_plus_grace_plus_term_plus_a_margin(
    deadline: float, grace: float, term: float, expected: float | None
) -> None:
    if deadline == 100.0:
        deadline = time.monotonic() + 100.0
        expected = None if expected is None else expected - 100.0 + deadline
    assert kill_by(deadline, grace, term) == expected


@pytest.mark.realtime
def test_an_armed_backstop_fires_once_and_a_disarmed_one_never() -> None:
    fired: list[float] = []
    done = threading.Event()

    def fire() -> None:
        fired.append(time.monotonic())
        done.set()

    backstop = Backstop(fire)
    backstop.arm(time.monotonic() + 0.05)
    backstop.disarm()  # the attempt ended in time
    armed_at = time.monotonic()
    backstop.arm(armed_at + 0.1)
    assert done.wait(10)
    assert len(fired) == 1 and fired[0] >= armed_at + 0.1


@pytest.mark.parametrize("thread_looks", ["while the first job runs", "after it ended"])
def test_back_to_back_jobs_never_wake_the_backstop_thread(thread_looks: str) -> None:
    """Only a kill-by time sooner than the thread's next look wakes it, whichever way the
    first job and the thread's first look raced (a thread that first found the worker idle
    used to be woken by every later job, each over before it could look)."""
    backstop = Backstop(lambda: None)
    first = time.monotonic() + 600.0
    if thread_looks == "while the first job runs":
        backstop.arm(first)
        assert eventually(lambda: backstop.looks == 1)
        backstop.disarm()
    else:
        with backstop._lock:  # the thread starts, but looks only once the job is over
            backstop.arm(first)
            backstop.disarm()
        assert eventually(lambda: backstop.looks == 1)
    for i in range(1, 50):  # later jobs, each with a later kill-by time
        backstop.arm(first + i * 0.001)
        backstop.disarm()
        time.sleep(0.001)  # the worker waits for its next job: the thread could run
    sooner = first - 300.0
    backstop.arm(sooner)  # wakes it: the one look these jobs cost
    assert eventually(lambda: backstop._wake_at == sooner)
    assert backstop.looks == 2
    backstop.disarm()


def test_the_kernel_timer_is_armed_only_while_sigalrm_has_its_default_action() -> None:
    """Agent code that handles SIGALRM keeps its own alarm; otherwise the kernel timer
    is set a second after the kill-by time, and cleared when the attempt ends."""
    handler = signal.getsignal(signal.SIGALRM)  # pytest-timeout's, if it uses the signal
    saved = signal.setitimer(signal.ITIMER_REAL, 0)
    backstop = Backstop(lambda: None)
    try:
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        backstop.arm(time.monotonic() + 100.0)
        assert 100.0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 101.0
        backstop.disarm()
        assert signal.getitimer(signal.ITIMER_REAL)[0] == 0.0

        signal.signal(signal.SIGALRM, lambda signum, frame: None)
        signal.setitimer(signal.ITIMER_REAL, 50.0)  # the agent's own alarm
        backstop.arm(time.monotonic() + 100.0)
        assert 49.0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 50.0
        backstop.disarm()
        assert 49.0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 50.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, handler)
        if saved[0]:
            signal.setitimer(signal.ITIMER_REAL, *saved)


def _freeze(seconds: float) -> None:
    """Hold the GIL in C for `seconds`, every other thread of this process stopped: libc's
    `poll` on nothing, called through `ctypes.PyDLL`, which keeps the GIL for the call."""
    libc = ctypes.PyDLL(None)  # this process's own symbols, libc's among them
    until = time.monotonic() + seconds
    while (left := until - time.monotonic()) > 0:  # a signal may end a call early
        libc.poll(None, 0, math.ceil(left * 1000))


def hang(brief: Brief, ctx: Context) -> None:
    with open(brief.scope, "w") as f:
        f.write("running")
    time.sleep(120)


@pytest.mark.process
@pytest.mark.realtime
def test_a_frozen_host_still_has_its_process_child_killed_at_the_kill_by_time(
    tmp_path: Path,
) -> None:
    timeout_s, grace_s, term_s = 2.0, 0.1, 0.1
    kill_by_s = timeout_s + grace_s + term_s + MARGIN_S
    r = Routing.from_dict({"version": 1, "agents": {"p": {
        "isolation": "process", "timeout_s": timeout_s, "retry": {"max_retries": 0},
        "shutdown": {"grace_s": grace_s, "term_s": term_s}}}})
    running = tmp_path / "running"
    events: list[dict[str, object]] = []
    with Zeus.start(r, agents={"p": hang}, log=events.append) as zeus:
        handle = zeus.dispatch(Brief(agent="p", scope=str(running)))
        assert eventually(running.exists, 20)
        started = time.monotonic()
        _freeze(kill_by_s + 2.0)  # the whole host is frozen meanwhile
        frozen_for = time.monotonic() - started
        pid = next(e["pid"] for e in events if e["event"] == "attempt.spawned")
        assert isinstance(pid, int)
        died_while_frozen = not alive(pid)  # before the host's own ladder could run
        summary = handle.result(20)
    assert frozen_for > kill_by_s, "the freeze was too short to show anything"
    assert died_while_frozen
    assert summary.status is Status.timed_out
