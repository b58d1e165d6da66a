"""The backend seam (`actors.backends.base.Backend`): every member Zeus calls is declared
with a default that says what Zeus assumes; the core asks no backend what it is and
signals no process itself; one reader of `/proc/<pid>/stat`; and the recovery rule a
takeover needs (a writer whose child its host's lease stopped may run again)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from actors import Usage
from actors.backends import Backend, ChildSpec, ProcessBackend, ThreadBackend
from actors.backends.base import Found, StoredChild, as_backend
from actors.osproc import process_start_time, read_stat, same_start
from supervisor.routing import AgentPolicy, RetryPolicy
from supervisor.rules.recovery import AttemptFacts, Plan, Rerun, recover
from supervisor.rules.settle import Settle

ROOT = Path(__file__).resolve().parent.parent


class Minimal(Backend):
    """A backend that defines only what it must."""

    def start(self, spec: ChildSpec, send: Any) -> Any:
        raise NotImplementedError


def test_a_backend_that_defines_only_start_gets_every_other_member_as_a_default() -> None:
    backend = Minimal()
    child = StoredChild("d-1-a1", "apollo")
    assert backend.readies is False and backend.runs_in_host is False
    assert backend.prestart() is None and backend.close() is None
    assert backend.find_waiting([child]) == Found()
    assert backend.stop_left() is None and backend.extend_lease(12.5) is None
    assert backend.extend_lease(None) is None
    assert backend.confirm_gone(child) is True  # no pid: it ran in its host's process


def test_the_shipped_backends_say_what_they_ready_and_where_their_children_run() -> None:
    assert ThreadBackend.runs_in_host and not ThreadBackend.readies
    assert ProcessBackend.readies and not ProcessBackend.runs_in_host
    assert issubclass(ThreadBackend, Backend) and issubclass(ProcessBackend, Backend)


def test_a_backend_given_with_only_start_and_close_is_wrapped_with_the_defaults() -> None:
    closed = threading.Event()

    class OldStyle:
        def start(self, spec: ChildSpec, send: Any) -> Any:
            return ("started", spec, send)

        def close(self) -> None:
            closed.set()

    old = OldStyle()
    wrapped = as_backend(old)
    assert isinstance(wrapped, Backend) and wrapped.find_waiting([]) == Found()
    assert wrapped.start("spec", print) == ("started", "spec", print)  # type: ignore[arg-type]
    wrapped.close()
    assert closed.is_set()
    thread = ThreadBackend()
    assert as_backend(thread) is thread
    thread.close()


@pytest.mark.process
def test_the_default_confirmation_kills_a_survivor_and_sees_it_gone() -> None:
    survivor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = process_start_time(survivor.pid)
        assert started is not None
        threading.Thread(target=survivor.wait, daemon=True).start()  # reaped once killed
        gone = Minimal().confirm_gone(StoredChild("d-1-a1", "apollo", survivor.pid, started))
        assert gone is True
        assert survivor.wait(5) == -9  # it was killed (SIGKILL), not left running
    finally:
        survivor.kill()
        survivor.wait()


def test_the_default_look_for_a_persons_resume_sees_a_live_child_and_never_stops_it() -> None:
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = process_start_time(live.pid)
        assert started is not None
        child = StoredChild("d-1-a1", "apollo", live.pid, started)
        assert Minimal().child_gone(child) is False
        assert live.poll() is None  # looked at, not stopped
        live.kill()
        live.wait()
        assert Minimal().child_gone(child) is True
        assert Minimal().child_gone(StoredChild("d-1-a1", "apollo", None, None)) is True
    finally:
        live.kill()
        live.wait()


def test_a_pid_now_another_process_is_not_signalled_and_counts_gone() -> None:
    me = os.getpid()
    started = process_start_time(me)
    assert started is not None
    # This process, named with another start time: the pid was reused, its child is gone.
    assert Minimal().confirm_gone(StoredChild("d-1-a1", "apollo", me, started - 100.0)) is True


def test_one_reader_of_proc_stat_names_its_fields() -> None:
    stat = read_stat(os.getpid())
    assert stat is not None
    assert (stat.pid, stat.ppid, stat.pgrp) == (os.getpid(), os.getppid(), os.getpgrp())
    assert stat.state in ("R", "S") and not stat.dead
    assert stat.start_time == process_start_time(os.getpid())
    assert read_stat(2**22 + 1) is None  # above Linux's pid_max: no such process


def test_one_start_reads_the_same_or_one_second_apart_when_the_boot_time_moved() -> None:
    """/proc/stat's boot time is in whole seconds and follows the slewed wall clock: a
    process that read it a moment later may read every start 1 s later. Anything else
    apart, to the tick, is another process."""
    start = 1_796_340_311.97
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert same_start(start, start) and same_start(start, start + 1.0)
    assert same_start(start + 1.0, start)
    for other in (start + tick, start - tick, start + 1.0 + tick, start + 0.5, start + 2.0):
        assert not same_start(start, other), other


def test_only_the_osproc_module_reads_proc_stat() -> None:
    readers = [path.relative_to(ROOT).as_posix()
               for folder in ("actors", "supervisor") for path in (ROOT / folder).rglob("*.py")
               if re.search(r"/proc/\{[^}]+\}/stat", path.read_text())]
    assert readers == ["actors/osproc.py"]


def test_core_asks_no_backend_what_it_is_and_signals_no_process() -> None:
    pattern = re.compile(r"isinstance\(.*Backend|isolation ==|os\.kill|killpg")
    found = [f"{path.name}:{n}" for path in sorted((ROOT / "supervisor/core").glob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert found == []


ARGS: dict[str, Any] = dict(deadline=None, now=1_000.0, spent=Usage(), has_partials=False,
                            partial_ok=False, retries_used=0, visited=["apollo"],
                            retry_pending=False)


@pytest.mark.parametrize(("policy", "stopped", "reruns"), [
    (AgentPolicy(retry=RetryPolicy(max_retries=1)), False, False),  # a writer: blocked
    (AgentPolicy(retry=RetryPolicy(max_retries=1)), True, True),  # stopped by its lease
    (AgentPolicy(read_only=True, retry=RetryPolicy(max_retries=1)), False, True),
    (AgentPolicy(read_only=True, retry=RetryPolicy(max_retries=1)), True, True),
    (AgentPolicy(stateful=True, retry=RetryPolicy(max_retries=1)), True, False),  # session gone
])
def test_a_writer_runs_again_only_when_its_child_was_stopped_by_its_hosts_lease(
        policy: AgentPolicy, stopped: bool, reruns: bool) -> None:
    plan = recover([AttemptFacts("d-a1", open=True)], policy, writers_stopped=stopped, **ARGS)
    if reruns:
        assert plan == Plan(("d-a1",), Rerun(1))
    else:
        assert isinstance(plan.step, Settle) and plan.step.status.value == "blocked"


@pytest.mark.parametrize(("policy", "in_tool", "reruns"), [
    (AgentPolicy(retry=RetryPolicy(max_retries=1)), None, True),
    (AgentPolicy(retry=RetryPolicy(max_retries=1)), "write_file", False),  # may still write
    (AgentPolicy(read_only=True, retry=RetryPolicy(max_retries=1)), "write_file", True),
    (AgentPolicy(idempotent=True, retry=RetryPolicy(max_retries=1)), "write_file", True),
])
def test_a_taken_writer_whose_thread_was_inside_a_side_effect_tool_is_blocked(
        policy: AgentPolicy, in_tool: str | None, reruns: bool) -> None:
    plan = recover([AttemptFacts("d-a1", open=True, in_tool=in_tool)], policy,
                   writers_stopped=True, **ARGS)
    if reruns:
        assert plan == Plan(("d-a1",), Rerun(1))
    else:
        assert isinstance(plan.step, Settle) and plan.step.status.value == "blocked"
        assert "'write_file'" in (plan.step.reason or "") and "thread" in (plan.step.reason or "")
