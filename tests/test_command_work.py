"""A command agent's program under a worker process (`commands_in_workers`): what only that
path has. `tests/test_command_backend.py` runs the behaviour both paths share."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from actors import AttemptOutcome, Brief, Cancelled, Context
from actors import wire as _wire
from actors.backends import ChildSpec, ProcessBackend, run_work
from actors.backends.command.work import CommandWork, as_worker_job
from actors.clock import SystemClock
from actors.mail import CancelSignal, Inbox, Mail
from actors.osproc import ProcessTree
from actors.protocol import Finished, Heartbeat, Partial, Spawned
from actors.run import Ended
from tests._support import Outbox, alive, eventually


def spec(command: tuple[str, ...], **overrides: Any) -> ChildSpec:
    clock = SystemClock()
    fields: dict[str, Any] = {
        "agent": "talos", "delegation_id": "talos-1", "attempt": 1, "attempt_id": "talos-1-a1",
        "brief": Brief(agent="talos", scope="s"), "deadline": clock.now() + 60.0,
        "clock": clock, "command": command, "heartbeat_interval_s": 5.0, "term_s": 0.5,
    }
    fields.update(overrides)
    return ChildSpec(**fields)


def context(sent: list[object], cancel: CancelSignal, inbox: Inbox) -> Context:
    return Context(
        brief=Brief(agent="talos", scope="s"), agent="talos", delegation_id="talos-1",
        attempt=1, attempt_id="talos-1-a1", deadline=1e9, clock=SystemClock(),
        send=sent.append, cancel_event=cancel, heartbeat_interval_s=0.0, inbox=inbox,
    )


# -- the pieces (no process) ---------------------------------------------------------------


def test_work_that_passes_stops_on_still_reports_and_receives_once_cancelled() -> None:
    sent: list[object] = []
    cancel, inbox = CancelSignal(), Inbox()
    ctx = context(sent, cancel, inbox)
    calls: list[str] = []
    ctx.pass_cancel_on(lambda: calls.append(threading.current_thread().name))
    cancel.set()
    assert calls == [threading.current_thread().name]  # in the thread that cancels
    ctx.partial("winding down")
    ctx.heartbeat()
    assert ctx.receive(0.02) is None  # waited its time out: no Cancelled
    inbox.put({"late": True})
    assert ctx.receive(0) == {"late": True}
    assert [type(m) for m in sent] == [Partial, Heartbeat] and ctx.progress == 2
    with pytest.raises(Cancelled):
        ctx.check()  # an explicit check still says it was asked to stop


def test_without_passing_stops_on_the_same_calls_raise() -> None:
    sent: list[object] = []
    cancel = CancelSignal()
    ctx = context(sent, cancel, Inbox())
    cancel.set()
    for call in (lambda: ctx.partial("x"), ctx.heartbeat, lambda: ctx.receive(60)):
        with pytest.raises(Cancelled):
            call()
    assert sent == []


def test_a_work_function_that_raises_ended_ends_the_attempt_with_its_own_finished() -> None:
    made = Finished("talos-1-a1", AttemptOutcome.crash, error="died", error_type="CommandFailed",
                    exit_code=-11, progress=4)

    def work(brief: Brief, ctx: Context) -> None:
        raise Ended(made)

    finished = run_work(work, Brief(agent="talos", scope="s"),
                        context([], CancelSignal(), Inbox()), pid=123)
    assert finished == Finished("talos-1-a1", AttemptOutcome.crash, error="died",
                                error_type="CommandFailed", exit_code=-11, progress=4, pid=123)


def test_a_command_attempt_becomes_a_worker_job_whose_work_crosses_the_pipe() -> None:
    job = as_worker_job(spec(("prog", "{session}"), inputs_via="stdin", session_key="k"))
    assert job.command is None
    # With the host's environment as it is at dispatch (the program runs with it).
    assert job.work == CommandWork(("prog", "{session}"), "stdin", "k", env=dict(os.environ))
    assert _wire.loads(_wire.dumps_work(job.work, "work")) == job.work


# -- real programs under a worker ----------------------------------------------------------


@pytest.fixture
def backend() -> Iterator[ProcessBackend]:
    b = ProcessBackend(commands_in_workers=True)
    yield b
    b.close()


@pytest.mark.process
def test_the_program_runs_below_its_worker_in_a_session_of_its_own(
    backend: ProcessBackend,
) -> None:
    inbox = Outbox()
    script = 'sleep 1000 & echo "{\\"partial\\": \\"$$ $!\\"}"; wait'  # its pids, as a partial
    handle = backend.start(spec(("sh", "-c", script), speaks="jsonl"), inbox)
    program, grandchild = map(int, inbox.wait_for(Partial).item.split())
    worker = inbox.wait_for(Spawned).pid
    assert handle.pid == worker != program
    assert psutil.Process(program).ppid() == worker
    assert os.getsid(program) == program != os.getsid(worker)
    tree = ProcessTree(worker)
    tree.walk()  # what the kill ladder walks: by parent, whatever the session
    assert {program, grandchild} <= set(tree.known)
    handle.kill()
    assert inbox.finished().pid == worker
    assert eventually(lambda: not alive(program) and not alive(grandchild))


# Leaves a descendant in a session of its own, prints its pid, and exits at once.
LEAVE_A_DAEMON = (
    "import subprocess, sys\n"
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1000)'],\n"
    "                     start_new_session=True)\n"
    "print(p.pid)\n"
)


@pytest.mark.process
def test_a_warm_worker_runs_the_next_command_with_nothing_left_below_it(
    backend: ProcessBackend,
) -> None:
    first, second = Outbox(), Outbox()
    backend.start(spec((sys.executable, "-c", LEAVE_A_DAEMON)), first)
    done = first.finished()
    assert done.outcome is AttemptOutcome.completed
    daemon = int(done.value)  # its whole output, the value
    assert eventually(lambda: not alive(daemon))  # killed as its program ended
    worker = psutil.Process(done.pid or 0)
    assert eventually(lambda: worker.children() == [])  # and reaped by its worker
    backend.start(spec(("sh", "-c", "echo again"), attempt_id="talos-1-a2"), second)
    assert second.finished().pid == done.pid and second.of(Spawned) == []


# Prints "ready", waits until the file argv[1] exists, then the length of each line of
# standard input until the message "stop".
READ_WHEN_TOLD = (
    "import os, sys, time\n"
    "print('ready', flush=True)\n"
    "while not os.path.exists(sys.argv[1]):\n"
    "    time.sleep(0.01)\n"
    "for line in sys.stdin:\n"
    "    if line.strip() == '\"stop\"':\n"
    "        break\n"
    "    print(len(line), flush=True)\n"
)


@pytest.mark.process
def test_messages_wait_for_room_on_a_full_stdin_and_none_is_dropped(
    backend: ProcessBackend, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    inbox = Outbox()
    handle = backend.start(spec((sys.executable, "-c", READ_WHEN_TOLD, str(go))), inbox)
    # "ready" was read: the first line's heartbeat is sent at once.
    assert eventually(lambda: any(not b.liveness and b.progress >= 1
                                  for b in inbox.of(Heartbeat))), inbox.messages
    big = "x" * 40_000  # three of them do not fit in a pipe (64 KiB)
    for message in (big, big, big, "stop"):
        handle.put_mail(Mail(message).encode("command"))
    go.touch()
    finished = inbox.finished()
    assert finished.outcome is AttemptOutcome.completed, finished
    assert finished.value.splitlines() == ["ready"] + [str(len(big) + 3)] * 3


# A host that runs one command under a worker, prints the pids its program reports as a
# jsonl partial, and waits.
HOST = r"""
import time
from actors import Brief
from actors.backends import ChildSpec, ProcessBackend
from actors.clock import SystemClock
from actors.protocol import Partial
clock = SystemClock()
backend = ProcessBackend(commands_in_workers=True)
spec = ChildSpec(agent="c", delegation_id="c-1", attempt=1, attempt_id="c-1-a1",
                 brief=Brief(agent="c", scope="s"), deadline=clock.now() + 60, clock=clock,
                 command=("sh", "-c", 'sleep 1000 & echo "{\\"partial\\": \\"$$ $!\\"}"; wait'),
                 speaks="jsonl")
backend.start(spec, lambda m: isinstance(m, Partial) and print(m.item, flush=True))
time.sleep(120)
"""


@pytest.mark.process
@pytest.mark.realtime
def test_a_worker_whose_supervisor_was_killed_takes_its_program_with_it() -> None:
    host = subprocess.Popen([sys.executable, "-c", HOST], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parent.parent)
    try:
        assert host.stdout is not None
        program, grandchild = map(int, host.stdout.readline().split())
        assert alive(program) and alive(grandchild)
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait(timeout=10)
        host.stdout.close()  # type: ignore[union-attr]
    assert eventually(lambda: not alive(program) and not alive(grandchild))
