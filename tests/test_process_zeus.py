"""Real processes under Zeus: a timeout that really stops the child and its grandchild,
crashes named, no overlapping writers, sessions, command agents, and a clean stop.

These use the real clock and real processes, with loose bounds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from actors import Brief, Cancelled, Context, Status, TransientError
from supervisor import Routing, Zeus
from tests._support import alive

pytestmark = [pytest.mark.process, pytest.mark.realtime]

FAST_STOP = {"shutdown": {"grace_s": 0.2, "term_s": 0.5}}


def routing(**agents: dict[str, Any]) -> Routing:
    return Routing.from_dict({
        "version": 1,
        "supervisor": {"max_concurrent": 100},
        "agents": {name: {"isolation": "process", **FAST_STOP, **p} for name, p in agents.items()},
    })


def wait_gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.02)
    return False


def hang_with_grandchild(brief: Brief, ctx: Context) -> None:
    grandchild = subprocess.Popen(["sleep", "1000"])
    Path(brief.scope).write_text(str(grandchild.pid))
    ctx.partial(f"grandchild {grandchild.pid}")
    time.sleep(1000)  # really hung: never looks at cancellation


def test_a_hung_child_is_killed_at_its_deadline_with_its_grandchild(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    # Its running time starts once its worker took the job (docs/design.md, "An attempt's
    # clock"): a loaded machine's slow start does not eat into it.
    r = routing(hang={"timeout_s": 1.5})
    events: list[dict[str, Any]] = []
    with Zeus.start(r, agents={"hang": hang_with_grandchild}, log=events.append) as zeus:
        started = time.monotonic()
        summary = zeus.dispatch(Brief(agent="hang", scope=str(pidfile))).result(15)
        elapsed = time.monotonic() - started
    assert summary.status is Status.timed_out
    attempt = summary.attempts[0]
    assert attempt.killed in ("terminate", "kill")
    assert attempt.pid is not None and wait_gone(attempt.pid)
    assert wait_gone(int(pidfile.read_text()))  # the grandchild died with its group
    assert 1.5 <= elapsed < 10.0
    killed = [e for e in events if e["event"] == "attempt.killed"]
    assert killed and killed[0]["how"] == attempt.killed and killed[0]["latency_s"] < 2.0


def segfault(brief: Brief, ctx: Context) -> None:
    import ctypes

    ctypes.string_at(0)


def exits_hard(brief: Brief, ctx: Context) -> None:
    os._exit(3)


def fine(brief: Brief, ctx: Context) -> int:
    return os.getpid()


def test_a_segfaulting_child_fails_with_sigsegv_named_and_zeus_goes_on() -> None:
    r = routing(segv={}, exit={}, fine={})
    with Zeus.start(r, agents={"segv": segfault, "exit": exits_hard, "fine": fine}) as zeus:
        crashed = zeus.dispatch(Brief(agent="segv", scope="s")).result(15)
        exited = zeus.dispatch(Brief(agent="exit", scope="s")).result(15)
        after = zeus.dispatch(Brief(agent="fine", scope="s")).result(15)
    assert crashed.status is Status.failed
    assert crashed.attempts[0].outcome == "crash"
    assert crashed.error is not None and "SIGSEGV" in crashed.error
    assert exited.error is not None and "exit code 3" in exited.error
    assert after.status is Status.completed and after.output != os.getpid()


def crash_then_note(brief: Brief, ctx: Context) -> int:
    log = Path(brief.scope)
    with log.open("a") as f:
        f.write(f"start {ctx.attempt} {os.getpid()}\n")
    if ctx.attempt == 1:
        time.sleep(1000)
    return os.getpid()


def test_a_retry_never_starts_while_its_previous_process_lives(tmp_path: Path) -> None:
    log = tmp_path / "starts.log"
    # 1 s of running time, from when its worker took the job (docs/design.md, "An
    # attempt's clock"): the first attempt hangs it out, the second needs a few ms of it.
    r = routing(w={"timeout_s": 1.0, "retry": {"max_retries": 1, "backoff": "none"},
                   "shutdown": {"grace_s": 0.3, "term_s": 0.3}})
    with Zeus.start(r, agents={"w": crash_then_note}) as zeus:
        summary = zeus.dispatch(Brief(agent="w", scope=str(log))).result(20)
    assert summary.status is Status.completed
    (first_pid, second_pid) = [int(line.split()[2]) for line in log.read_text().splitlines()]
    assert first_pid != second_pid
    assert not alive(first_pid)
    first = summary.attempts[0]
    assert len(summary.attempts) == 2
    assert first.outcome == "timeout" and first.killed in ("terminate", "kill")


def test_fifty_process_children_run_at_once() -> None:
    def nap(brief: Brief, ctx: Context) -> int:
        time.sleep(0.5)
        return os.getpid()

    r = routing(nap={"timeout_s": 60, "session_max": 0})
    with Zeus.start(r, agents={"nap": nap}) as zeus:
        handles = [zeus.dispatch(Brief(agent="nap", scope=str(i))) for i in range(50)]
        summaries = [h.result(60) for h in handles]
    assert {s.status for s in summaries} == {Status.completed}
    assert len({s.output for s in summaries}) >= 40  # really separate processes


def counter(brief: Brief, ctx: Context) -> tuple[int, int]:
    ctx.session["count"] = ctx.session.get("count", 0) + 1
    return os.getpid(), ctx.session["count"]


def test_a_session_keeps_its_process_and_state() -> None:
    r = routing(hermes={"session_max": 2})
    with Zeus.start(r, agents={"hermes": counter}) as zeus:
        outputs = [
            zeus.dispatch(Brief(agent="hermes", scope="s", session="hermes-1")).result(15).output
            for _ in range(3)
        ]
    pids = {pid for pid, _count in outputs}
    assert len(pids) == 1
    assert [count for _pid, count in outputs] == [1, 2, 3]


def test_a_hung_command_agent_is_killed_with_its_group() -> None:
    r = Routing.from_dict({"version": 1, "agents": {"talos": {
        "command": [sys.executable, "-c", "import time,sys; print('working', flush=True); "
                    "time.sleep(1000)", "{scope}"],
        "timeout_s": 1.0, **FAST_STOP}}})
    with Zeus.start(r) as zeus:
        summary = zeus.dispatch(Brief(agent="talos", scope="hotfix")).result(15)
    assert summary.status is Status.timed_out
    assert summary.partial_results  # its output line counted as progress
    pid = summary.attempts[0].pid
    assert pid is not None and wait_gone(pid)


def test_a_command_agent_gets_brief_fields_as_single_arguments() -> None:
    r = Routing.from_dict({"version": 1, "agents": {"echo": {
        "command": [sys.executable, "-c", "import sys; print(sys.argv[1])", "{scope}"]}}})
    with Zeus.start(r) as zeus:
        tricky = "a; rm -rf / $(whoami) 'quoted'"
        summary = zeus.dispatch(Brief(agent="echo", scope=tricky)).result(15)
    assert summary.status is Status.completed
    assert str(summary.output).strip() == tricky


def test_stop_leaves_no_child_process_behind() -> None:
    def sleeper(brief: Brief, ctx: Context) -> None:
        time.sleep(1000)

    me = psutil.Process()
    r = routing(s={"timeout_s": 60, "session_max": 2})
    zeus = Zeus.start(r, agents={"s": sleeper})
    handles = [zeus.dispatch(Brief(agent="s", scope=str(i))) for i in range(4)]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and zeus.tree()["open"] and not all(
        a.get("pid") for n in zeus.tree()["delegations"] for a in n["attempts"]
    ):
        time.sleep(0.05)
    pids = [a["pid"] for n in zeus.tree()["delegations"] for a in n["attempts"] if a.get("pid")]
    assert len(pids) == 4
    zeus.stop(timeout=5)
    assert {h.result(0).status for h in handles} == {Status.cancelled}
    assert all(wait_gone(pid) for pid in pids)
    workers = [p for p in me.children(recursive=True) if p.pid in pids]
    assert workers == []


def test_a_transient_error_in_a_process_child_is_retried() -> None:
    def flaky(brief: Brief, ctx: Context) -> str:
        if ctx.attempt == 1:
            raise TransientError("503")
        return "ok"

    r = routing(f={"retry": {"max_retries": 1, "backoff": "none"}})
    with Zeus.start(r, agents={"f": flaky}) as zeus:
        summary = zeus.dispatch(Brief(agent="f", scope="s")).result(15)
    assert summary.status is Status.completed and len(summary.attempts) == 2


def report_context(brief: Brief, ctx: Context) -> dict[str, Any]:
    """Attempt 1 fails transiently; attempt 2 says what it was told, then charges past its
    budget and shows that its next Context call is a cancellation point."""
    if ctx.attempt == 1:
        raise TransientError("rate limited")
    seen = {"previous_error": ctx.previous_error, "effort": ctx.reasoning_effort,
            "framing": ctx.framing}
    with ctx.tool("pytest", read_only=True):
        pass
    ctx.charge(cost=1.0)
    try:
        ctx.heartbeat("after the charge")
    except Cancelled:
        return {**seen, "raised": "Cancelled"}  # kept: a result that lost to the budget
    return seen


def test_a_process_child_gets_previous_error_effort_and_its_budget(tmp_path: Path) -> None:
    with Zeus.start(routing(p={"reasoning_effort": "low", "budget": {"max_cost": 0.5},
                               "retry": {"max_retries": 1, "backoff": "none"}})) as zeus:
        zeus.register("p", report_context)
        summary = zeus.dispatch(Brief(agent="p", scope="s")).result(30)
    assert summary.status is Status.budget_exceeded
    seen = summary.output
    assert seen["previous_error"] == "transient: TransientError: rate limited"
    assert seen["effort"] == "low" and "Reasoning effort: low." in seen["framing"]
    assert seen["raised"] == "Cancelled"
    assert (summary.attempts[-1].tool_calls, summary.attempts[-1].last_tool) == (1, "pytest")


FRESH_HOST = '''
import json
import time

from actors import Brief, Context
from supervisor import Routing, Zeus


def writes(brief: Brief, ctx: Context) -> str:
    time.sleep(0.2)
    return "written"


def main() -> None:
    routing = Routing.from_dict({"version": 1, "agents": {
        "writer": {"isolation": "process", "timeout_s": 0.4}}})
    events = []
    with Zeus.start(routing, agents={"writer": writes}, log=events.append) as zeus:
        # The moment it returns: its fork server is still being readied.
        summary = zeus.dispatch(Brief(agent="writer", scope="now")).result(30)
    started = [e for e in events if e["event"] == "attempt.started"]
    print(json.dumps({"status": summary.status.value, "error": summary.error,
                      "started": len(started), "spawned_first": [
                          e["event"] for e in events if e["event"].startswith("attempt.")][:2]}))
'''


def test_a_brief_dispatched_as_zeus_starts_gets_its_whole_timeout_of_running_time(
    tmp_path: Path,
) -> None:
    """docs/design.md, "An attempt's clock": the wait for the fork server, a new worker and
    its imports is not the agent's time. A fresh host, so that no fork server is ready."""
    (tmp_path / "fresh_host.py").write_text(FRESH_HOST)
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", "import fresh_host; fresh_host.main()"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (result["status"], result["error"]) == ("completed", None)
    # `attempt.started` once, when its worker took the job: after its process was spawned.
    assert result["started"] == 1
    assert result["spawned_first"] == ["attempt.spawned", "attempt.started"]
