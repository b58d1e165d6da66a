"""The kill ladder, `zeus.stop()`, a host's exit and `zeus sweep` reach every descendant,
including those that left the child's process group: `setsid`, `setpgid`, a double-forked
daemon. Real processes, loose bounds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from actors import Brief, Context, Status
from actors.osproc import become_subreaper
from supervisor import Routing, Zeus
from supervisor import journal as jr
from tests._support import alive, eventually

pytestmark = [pytest.mark.process, pytest.mark.realtime]

FAST_STOP = {"shutdown": {"grace_s": 0.1, "term_s": 0.3}}
MODES = ["setsid", "setpgid", "double-fork"]

# Leaves the group as `mode` says, writes its pid to argv[2], then sleeps; ignores SIGTERM.
ESCAPE = """
import os, signal, sys, time
mode, out = sys.argv[1], sys.argv[2]
if mode == "double-fork":
    if os.fork():
        os._exit(0)
    os.setsid()
    if os.fork():
        os._exit(0)
elif mode == "setsid":
    os.setsid()
elif mode == "setpgid":
    os.setpgid(0, 0)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(out + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(out + ".tmp", out)
time.sleep(120)
"""

# A command agent: starts the escaping descendant, says so, then hangs.
COMMAND = (
    "import subprocess, sys, time\n"
    "mode, out = sys.argv[1].split(' ', 1)\n"
    f"subprocess.Popen([sys.executable, '-c', {ESCAPE!r}, mode, out])\n"
    "print('started', flush=True)\n"
    "time.sleep(120)\n"
)


def escape_then_hang(brief: Brief, ctx: Context) -> None:
    mode, out = brief.scope.split(" ", 1)
    subprocess.Popen([sys.executable, "-c", ESCAPE, mode, out])
    ctx.heartbeat("started")
    time.sleep(120)


def _escaped_pid(pidfile: Path) -> int:
    assert eventually(pidfile.exists, 20), "the escaping descendant never started"
    pid = int(pidfile.read_text())
    assert alive(pid)
    return pid


def _gone(pid: int) -> bool:
    return eventually(lambda: not alive(pid), 10)


def _process_routing(timeout_s: float) -> Routing:
    return Routing.from_dict({"version": 1, "agents": {"p": {
        "isolation": "process", "timeout_s": timeout_s, **FAST_STOP}}})


@pytest.mark.parametrize("mode", MODES)
def test_the_kill_ladder_reaches_a_process_childs_escaped_descendant(
    tmp_path: Path, mode: str
) -> None:
    pidfile = tmp_path / "escaped.pid"
    with Zeus.start(_process_routing(60.0), agents={"p": escape_then_hang}) as zeus:
        handle = zeus.dispatch(Brief(agent="p", scope=f"{mode} {pidfile}"))
        escaped = _escaped_pid(pidfile)
        handle.cancel("stop it now")  # it ignores the cancel: the ladder kills it
        summary = handle.result(30)
        assert summary.status is Status.cancelled
        assert summary.attempts[0].killed in ("terminate", "kill")
        assert _gone(escaped), f"the {mode} descendant outlived the kill ladder"


@pytest.mark.parametrize("mode", MODES)
def test_the_kill_ladder_reaches_a_command_agents_escaped_descendant(
    tmp_path: Path, mode: str
) -> None:
    pidfile = tmp_path / "escaped.pid"
    r = Routing.from_dict({"version": 1, "agents": {"c": {
        "command": [sys.executable, "-c", COMMAND, "{scope}"],
        "timeout_s": 60.0, **FAST_STOP}}})
    with Zeus.start(r) as zeus:
        handle = zeus.dispatch(Brief(agent="c", scope=f"{mode} {pidfile}"))
        escaped = _escaped_pid(pidfile)
        handle.cancel("stop it now")  # SIGINT to its group, then the ladder
        summary = handle.result(30)
        assert summary.status is Status.cancelled
        assert _gone(escaped), f"the {mode} descendant outlived the kill ladder"


@pytest.mark.parametrize("mode", MODES)
def test_zeus_stop_reaches_escaped_descendants_of_process_and_command_agents(
    tmp_path: Path, mode: str
) -> None:
    r = Routing.from_dict({"version": 1, "agents": {
        "p": {"isolation": "process", "timeout_s": 60, **FAST_STOP},
        "c": {"command": [sys.executable, "-c", COMMAND, "{scope}"], "timeout_s": 60,
              **FAST_STOP},
    }})
    zeus = Zeus.start(r, agents={"p": escape_then_hang})
    try:
        zeus.dispatch(Brief(agent="p", scope=f"{mode} {tmp_path / 'p.pid'}"))
        zeus.dispatch(Brief(agent="c", scope=f"{mode} {tmp_path / 'c.pid'}"))
        escaped = [_escaped_pid(tmp_path / "p.pid"), _escaped_pid(tmp_path / "c.pid")]
    finally:
        zeus.stop(timeout=5)
    assert all(_gone(pid) for pid in escaped)


HOST = """
import sys, time
from supervisor import Routing, Zeus
from actors import Brief
from tests.test_escaped_descendants import escape_then_hang
r = Routing.from_dict({"version": 1, "agents": {"p": {"isolation": "process", "timeout_s": 60}}})
zeus = Zeus.start(r, agents={"p": escape_then_hang})
zeus.dispatch(Brief(agent="p", scope=sys.argv[1]))
time.sleep(120)
"""


def test_a_killed_hosts_workers_take_their_escaped_descendants_with_them(
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "escaped.pid"
    host = subprocess.Popen([sys.executable, "-c", HOST, f"double-fork {pidfile}"],
                            cwd=Path(__file__).resolve().parent.parent)
    try:
        escaped = _escaped_pid(pidfile)
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait(timeout=10)
    assert _gone(escaped)


def test_sweep_reaches_what_a_command_left_outside_its_group(tmp_path: Path) -> None:
    """A command agent's program is a child subreaper, so after a supervisor crash its
    double-forked daemon is still below it, where `zeus sweep` finds it."""
    pidfile = tmp_path / "escaped.pid"
    proc = subprocess.Popen(
        [sys.executable, "-c", COMMAND, f"double-fork {pidfile}"],
        stdout=subprocess.DEVNULL, start_new_session=True, preexec_fn=become_subreaper,
    )
    try:
        escaped = _escaped_pid(pidfile)
        start = psutil.Process(proc.pid).create_time()
        events = [
            {"ts": 1.0, "event": "zeus.started", "pid": 999_999_999},
            {"ts": 1.0, "event": "delegation.dispatched", "delegation_id": "c-1",
             "attempt_id": None, "parent_id": None, "agent": "c", "scope": "s"},
            {"ts": 1.0, "event": "attempt.started", "delegation_id": "c-1",
             "attempt_id": "c-1-a1", "parent_id": None, "agent": "c", "attempt": 1,
             "pid": proc.pid, "pid_start_time": start},
        ]
        path = tmp_path / "e.jsonl"
        import json

        path.write_text("".join(json.dumps(e) + "\n" for e in events))
        results = jr.sweep(jr.load(path), grace_s=0.5)
        assert [r.action for r in results] == [jr.SweepAction.stopped]
        assert _gone(escaped)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        if os.path.exists(pidfile):
            pid = int(pidfile.read_text())
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
