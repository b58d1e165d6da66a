"""`zeus mcp` driven as a subprocess through the real `mcp` stdio client."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install -e '.[mcp]')")

import anyio
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from supervisor.cli.main import main
from supervisor.integrations.mcp import build_server, progress_message
from supervisor.routing import Routing

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parent.parent
ROUTING = """\
version: 1
agents:
  echo: {role: echoes its scope, timeout_s: 5, entrypoint: "tests._integration_agents:echo"}
  steady:
    role: beats until stopped
    timeout_s: 30
    heartbeat: {interval_s: 0.01, stale_after_s: 10}
    shutdown: {grace_s: 1}
    entrypoint: "tests._integration_agents:steady"
"""
TOOLS = {"delegate", "status", "result", "cancel", "send", "tree", "agents"}


def serve(tmp_path: Path, body: Callable[[Client], Awaitable[None]], *, log: bool = False) -> None:
    """Run `zeus mcp` on a routing of test agents and hand a connected client to `body`."""
    routing = tmp_path / "routing.yml"
    routing.write_text(ROUTING)
    args = ["-m", "supervisor.cli", "mcp", "--routing", str(routing)]
    if log:
        args += ["--log", str(tmp_path / "events.jsonl")]
    params = StdioServerParameters(command=sys.executable, args=args, cwd=ROOT)

    async def main() -> None:
        async with Client(params) as client:
            await body(client)

    asyncio.run(main())


def text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def settled_status(client: Client, delegation_id: str) -> str:
    """Poll status() until the delegation settles (a safety bound, not an assertion)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status = json.loads(text(await client.call_tool("status", {"id": delegation_id})))
        if status["settled"]:
            return str(status["status"])
        await anyio.sleep(0.02)
    raise AssertionError(f"{delegation_id} did not settle")


async def follow_by_id(client: Client) -> None:
    """delegate(wait=false), then status, tree, result, send and cancel by id."""
    started = json.loads(text(await client.call_tool(
        "delegate", {"agent": "steady", "scope": "long", "wait": False}
    )))
    assert started == {"id": "steady-1", "status": "running"}
    status = json.loads(text(await client.call_tool("status", {"id": "steady-1"})))
    assert (status["settled"], status["agent"]) == (False, "steady")
    tree = json.loads(text(await client.call_tool("tree", {})))
    assert [d["id"] for d in tree["delegations"]] == ["steady-1"]

    waited = json.loads(text(await client.call_tool(
        "result", {"id": "steady-1", "timeout_s": 0.05}
    )))
    assert waited["status"] == "running"  # a wait that runs out cancels nothing

    sent = json.loads(text(await client.call_tool(
        "send", {"id": "steady-1", "message": "hurry"}
    )))
    assert sent == {"id": "steady-1", "sent": True}  # into the running child's mailbox

    cancelled = json.loads(text(await client.call_tool(
        "cancel", {"id": "steady-1", "reason": "enough"}
    )))
    assert cancelled == {"id": "steady-1", "cancel_requested": True}
    summary = text(await client.call_tool("result", {"id": "steady-1"}))
    assert "cancelled" in summary and "enough" in summary

    unknown = await client.call_tool("status", {"id": "steady-99"})
    assert unknown.is_error and "no delegation 'steady-99'" in text(unknown)


def test_a_client_delegates_follows_by_id_and_bad_calls_leave_the_server_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def body(client: Client) -> None:
        tools = await client.list_tools()
        assert {tool.name for tool in tools.tools} == TOOLS
        agents = json.loads(text(await client.call_tool("agents", {})))
        assert [(a["name"], a["role"], a["timeout_s"]) for a in agents] == [
            ("echo", "echoes its scope", 5.0), ("steady", "beats until stopped", 30.0)
        ]

        unknown = await client.call_tool("delegate", {"agent": "nobody", "scope": "x"})
        assert unknown.is_error
        assert "no agent named 'nobody'; the agents are: echo, steady" in text(unknown)

        malformed = await client.call_tool("delegate", {"agent": "echo", "timeout_s": "soon"})
        assert malformed.is_error
        no_tool = await client.call_tool("no_such_tool", {})
        assert no_tool.is_error

        done = await client.call_tool("delegate", {"agent": "echo", "scope": "still up"})
        assert not done.is_error
        assert "<subtask_summary" in text(done) and "completed" in text(done)

        await follow_by_id(client)

    serve(tmp_path, body, log=True)
    journal = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in journal if e["delegation_id"] == "echo-1"] == [
        "delegation.dispatched", "attempt.started", "attempt.completed", "delegation.settled"
    ]
    assert journal[-1]["event"] == "zeus.stopped"
    main(["tree", str(tmp_path / "events.jsonl")])  # read back as a run's journal is
    tree = capsys.readouterr().out
    assert "echo-1" in tree and "steady-1" in tree


def test_heartbeats_reach_the_client_as_progress_and_a_cancelled_call_cancels_the_delegation(
    tmp_path: Path,
) -> None:
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async def body(client: Client) -> None:
        beats = await client.call_tool(
            "delegate", {"agent": "steady", "scope": "beat", "inputs": {"beats": 5}},
            progress_callback=on_progress,
        )
        assert "completed" in text(beats)
        assert messages[0] == "attempt 1 started on steady"
        assert any(m.startswith("steady working (progress") for m in messages)

        # The client gives up waiting (its read times out): the delegation is cancelled.
        with pytest.raises(MCPError):
            await client.call_tool(
                "delegate", {"agent": "steady", "scope": "forever"}, read_timeout_seconds=0.3
            )
        assert await settled_status(client, "steady-2") == "cancelled"

        # The client cancels its own call.
        with anyio.move_on_after(0.3):
            await client.call_tool("delegate", {"agent": "steady", "scope": "forever"})
        assert await settled_status(client, "steady-3") == "cancelled"

    serve(tmp_path, body)


def test_what_a_delegation_did_before_it_settled_reaches_the_client_before_its_summary() -> None:
    """In process, where the server awaits the client's progress callback as it reports:
    a slow client still gets every partial, in order, of a delegation that settled
    while it was reading the first."""
    routing = Routing.from_dict({"version": 1, "agents": {
        "chatty": {"entrypoint": "tests._integration_agents:chatty"}}})
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")
        await asyncio.sleep(0.05)  # a slow reader: the delegation settles meanwhile

    async def body() -> str:
        async with Client(build_server(routing)) as client:
            return text(await client.call_tool(
                "delegate", {"agent": "chatty", "scope": "one two three"},
                progress_callback=on_progress,
            ))

    assert "completed" in asyncio.run(body())
    assert messages == ["attempt 1 started on chatty", "chatty partial: one",
                        "chatty partial: two", "chatty partial: three"]


def test_a_line_that_is_not_json_rpc_leaves_the_server_answering(tmp_path: Path) -> None:
    routing = tmp_path / "routing.yml"
    routing.write_text(ROUTING)
    server = subprocess.Popen(
        [sys.executable, "-m", "supervisor.cli", "mcp", "--routing", str(routing)],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None
    hello = {"protocolVersion": "2025-06-18", "capabilities": {},
             "clientInfo": {"name": "raw", "version": "1"}}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        "this is not json",
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": 5}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
    ]
    try:
        for line in lines:
            server.stdin.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
        server.stdin.flush()
        replies = {}
        while 3 not in replies:
            reply = json.loads(server.stdout.readline())
            replies[reply.get("id")] = reply
        assert replies[2]["error"]["code"] == -32602  # invalid params: an error, not a crash
        assert {t["name"] for t in replies[3]["result"]["tools"]} == TOOLS
    finally:
        server.stdin.close()
        server.wait(20)
        server.stdout.close()
    assert server.returncode == 0


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({"event": "attempt.heartbeat", "agent": "a", "progress": 3, "note": "pytest"},
         "a working (progress 3): pytest"),
        ({"event": "attempt.started", "agent": "a", "attempt": 2}, "attempt 2 started on a"),
        ({"event": "retry.scheduled", "agent": "a", "backoff_s": 0.5}, "retry in 0.50 s"),
        ({"event": "fallback.dispatched", "agent": "a", "from": "a", "to": "b"},
         "fallback a -> b"),
        ({"event": "attempt.partial", "agent": "a", "item": "hit"}, "a partial: hit"),
        ({"event": "delegation.settled", "agent": "a"}, None),
    ],
)
def test_events_become_progress_messages(event: dict[str, Any], message: str | None) -> None:
    assert progress_message(event) == message
