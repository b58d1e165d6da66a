"""Every tool call a child starts and ends is a journal event `attempt.tool`
(docs/design.md, "Events"): a work function's `ctx.tool_call` and `with ctx.tool`, a
command speaking Zeus's `jsonl`, and an agent CLI that reports a tool only once it is
over; the journal's replay reads them, and `zeus tree` shows the tool in flight."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from actors import Brief, Context
from actors.clock import FakeClock
from supervisor import journal as jr
from supervisor.cli.main import main
from supervisor.cli.render import attempt_label, describe
from supervisor.testing import sync
from tests._agent_clis import FakeClis, fake_clis
from tests.conftest import Recorder, ZeusFactory

__all__ = ["fake_clis"]  # the fixture, imported for its use here

WAIT = 10.0
COMMON = ("ts", "delegation_id", "parent_id", "agent")


def tools(recorder: Recorder) -> list[dict[str, Any]]:
    """The `attempt.tool` events, without the fields every event has (checked here)."""
    out = []
    for e in recorder.named("attempt.tool"):
        assert all(k in e for k in COMMON), e
        out.append({k: v for k, v in e.items() if k not in COMMON})
    return out


def test_a_work_functions_tool_calls_are_events_and_a_long_one_ends_with_its_duration(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    inside, leave = threading.Event(), threading.Event()

    def tester(brief: Brief, ctx: Context) -> None:
        ctx.tool_call("read_file", read_only=True)
        with ctx.tool("pytest", read_only=True), ctx.tool("deploy"):
            inside.set()
            leave.wait(WAIT)

    zeus = make_zeus({"t": {"timeout_s": 300}}, works={"t": tester})
    handle = zeus.dispatch(Brief(agent="t", scope="s"))
    assert inside.wait(WAIT)
    sync(zeus)
    clock.advance(12.5)
    node = zeus.tree()["delegations"][0]["attempts"][0]
    assert (node["in_tool"], node["in_tool_s"], node["tool_calls"]) == ("pytest", 12.5, 3)
    leave.set()
    assert handle.result(WAIT).ok
    a = "t-1-a1"
    assert tools(recorder) == [
        {"event": "attempt.tool", "attempt_id": a, "phase": "end", "tool": "read_file",
         "side_effects": False},
        {"event": "attempt.tool", "attempt_id": a, "phase": "start", "tool": "pytest",
         "side_effects": False},
        {"event": "attempt.tool", "attempt_id": a, "phase": "start", "tool": "deploy",
         "side_effects": True},
        {"event": "attempt.tool", "attempt_id": a, "phase": "end", "tool": "deploy",
         "side_effects": True, "duration_s": 12.5},
        {"event": "attempt.tool", "attempt_id": a, "phase": "end", "tool": "pytest",
         "side_effects": False, "duration_s": 12.5},
    ]
    names = recorder.names()
    at = [n for n, name in enumerate(names) if name == "attempt.tool"]
    assert names.index("attempt.started") < at[0] < at[-1] < names.index("attempt.completed")


@pytest.mark.process
@pytest.mark.parametrize("where", ["supervisor", "worker"])
def test_a_jsonl_commands_tool_start_and_end_are_events_timed_between_them(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder, tmp_path: Path, where: str
) -> None:
    """Read by the supervisor's process, and by a worker (a Zeus with a store and an orphan
    grace runs a command so), whose pipe the call's id crosses."""
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    script = (  # Zeus's own line protocol: a tool call that lasts until the test opens the gate
        "import json, sys\n"
        "say = lambda e: print(json.dumps(e), flush=True)\n"
        "say({'tool': {'name': 'pytest', 'phase': 'start', 'side_effects': False, 'id': 'c1'}})\n"
        "open(sys.argv[1]).read()\n"
        "say({'tool': {'name': 'pytest', 'phase': 'end', 'id': 'c1'}})\n"
        "say({'result': 'done'})\n"
    )
    durable: dict[str, Any] = {} if where == "supervisor" else {
        "store": str(tmp_path / "zeus.db"), "supervisor": {"orphan_grace_s": 5}}
    zeus = make_zeus({"s": {"command": [sys.executable, "-c", script, "{scope}"],
                            "speaks": "jsonl", "timeout_s": 60}}, **durable)
    handle = zeus.dispatch(Brief(agent="s", scope=str(gate)))
    recorder.wait_for("attempt.tool")
    sync(zeus)
    assert zeus.tree()["delegations"][0]["attempts"][0]["in_tool"] == "pytest"
    clock.advance(7)
    with gate.open("w") as opened:
        opened.write("go")
    assert handle.result(WAIT).output == "done"
    assert tools(recorder) == [
        {"event": "attempt.tool", "attempt_id": "s-1-a1", "phase": "start", "tool": "pytest",
         "side_effects": False, "call_id": "c1"},
        {"event": "attempt.tool", "attempt_id": "s-1-a1", "phase": "end", "tool": "pytest",
         "side_effects": False, "call_id": "c1", "duration_s": 7.0},
    ]


@pytest.mark.process
def test_a_cli_that_reports_each_tool_once_it_is_over_gives_one_end_event_each(
    make_zeus: ZeusFactory, recorder: Recorder, fake_clis: FakeClis
) -> None:
    zeus = make_zeus({"hermes": {"speaks": "opencode", "timeout_s": 30}})
    summary = zeus.dispatch(Brief(agent="hermes", scope="Fix it (scenario: completed)")).result(
        30)
    assert summary.ok, summary.error
    assert [(e["phase"], e["tool"], e["side_effects"]) for e in tools(recorder)] == [
        ("end", "read", False), ("end", "bash", True), ("end", "edit", True),
        ("end", "bash", True)]
    assert not any("duration_s" in e or "call_id" in e for e in tools(recorder))


# -- the journal read back ---------------------------------------------------------------
T0 = 1_700_000_000.0


def ev(event: str, t: float, attempt_id: str | None = "apollo-1-a1",
       **fields: Any) -> dict[str, Any]:
    """An event of delegation apollo-1 as Zeus writes it, `t` seconds after T0."""
    return {"ts": T0 + t, "event": event, "delegation_id": "apollo-1",
            "attempt_id": attempt_id, "parent_id": None, "agent": "apollo", **fields}


def tool(t: float, phase: str, name: str, **fields: Any) -> dict[str, Any]:
    return ev("attempt.tool", t, phase=phase, tool=name, **fields)


STORY = [
    {"ts": T0, "event": "zeus.started", "delegation_id": None, "attempt_id": None,
     "parent_id": None, "agent": None, "pid": 4242},
    ev("delegation.dispatched", 0.0, None, scope="fix the login", timeout_s=60, policy={}),
    ev("attempt.started", 0.1, attempt=1, pid=5001, deadline_s=60),
    tool(1.0, "start", "Bash", side_effects=True, call_id="t1"),
    tool(2.0, "start", "Bash", side_effects=True, call_id="t2"),
    tool(3.0, "end", "read", side_effects=False),  # seen only once it was over
    tool(4.0, "end", "Bash", side_effects=True, call_id="t2", duration_s=2.0),
    tool(5.0, "start", "pytest", side_effects=False),
    tool(6.0, "end", "pytest", side_effects=False, duration_s=1.0),
    ev("attempt.heartbeat", 13.0, progress=9, note="still going"),
]


def test_the_journals_replay_pairs_each_tool_calls_end_with_its_start() -> None:
    journal = jr.Journal()
    for event in STORY:
        journal.apply(event)
    a = journal.run.attempts["apollo-1-a1"]
    assert a.tools == [
        jr.ReplayedTool("Bash", True, "t1", started_ts=T0 + 1.0),
        jr.ReplayedTool("Bash", True, "t2", started_ts=T0 + 2.0, ended_ts=T0 + 4.0,
                        duration_s=2.0),
        jr.ReplayedTool("read", False, None, ended_ts=T0 + 3.0),
        jr.ReplayedTool("pytest", False, None, started_ts=T0 + 5.0, ended_ts=T0 + 6.0,
                        duration_s=1.0),
    ]
    assert a.in_tool is a.tools[0] and a.last_tool == "pytest"
    journal.apply(ev("attempt.failed", 14.0, outcome="timeout", duration_s=13.9))
    assert a.in_tool is None  # ended inside it: cut short, in flight no more
    assert a.tools[0].ended_ts is None


def test_zeus_tree_shows_the_tool_a_running_attempt_is_in_and_for_how_long(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in STORY))
    assert main(["tree", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == ("    - apollo-1-a1 apollo pid 5001: running, progress 9, in Bash 12.0s "
                       "(still going)")
    line = attempt_label(jr.load(path).run.attempts["apollo-1-a1"])  # no time: no seconds
    assert "running, progress 9, in Bash (still going)" in line


@pytest.mark.parametrize(("fields", "said"), [
    ({"phase": "start", "tool": "Bash", "side_effects": True},
     "tool Bash started, with side effects"),
    ({"phase": "end", "tool": "Bash", "side_effects": True, "duration_s": 12.5},
     "tool Bash ended after 12.50s, with side effects"),
    ({"phase": "end", "tool": "read", "side_effects": False}, "tool read ended"),
])
def test_a_tool_event_in_words(fields: dict[str, Any], said: str) -> None:
    assert describe({"event": "attempt.tool", **fields}) == said
