"""The four ways agent hosts await Zeus, each played by a few lines of plain asyncio (no
framework installed): a framework's tool awaiting a handle, a graph node awaiting a group,
a tool call under `wait_for`, and an MCP-style call its client cancels. In each, the host
giving up leaves no child running.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from actors import Brief, Cancelled, Context
from supervisor import Zeus
from supervisor.core.handle import AWAITER_CANCELLED
from tests._support import eventually
from tests.conftest import Recorder, ZeusFactory


class Children:
    """Work functions that run until released or cancelled, counting who is still running."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.running = 0
        self.cancelled = 0
        self._lock = threading.Lock()

    def __call__(self, brief: Brief, ctx: Context) -> str:
        with self._lock:
            self.running += 1
        try:
            for step in range(10_000):
                ctx.check()
                if self.release.wait(0.002):
                    return f"{brief.scope} done"
                if step % 5 == 0:
                    ctx.partial(f"{brief.scope} step {step}")
            return "gave up"
        except Cancelled:
            with self._lock:
                self.cancelled += 1
            raise
        finally:
            with self._lock:
                self.running -= 1


def settled_statuses(recorder: Recorder, count: int) -> list[str]:
    return sorted(e["status"] for e in recorder.wait_for("delegation.settled", count=count))


def test_a_framework_tool_awaiting_a_handle_is_cancelled_with_the_run(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    children = Children()
    zeus = make_zeus(works={"research": children})

    async def research_tool(query: str) -> str:  # what a framework's @tool would wrap
        summary = await zeus.dispatch(Brief(agent="research", scope=query))
        return summary.output or ""

    async def agent_run(tools: list[Callable[[str], Awaitable[str]]]) -> list[str]:
        return list(await asyncio.gather(*(tool(f"q{i}") for i, tool in enumerate(tools))))

    async def main() -> None:
        run = asyncio.ensure_future(agent_run([research_tool] * 3))
        assert await asyncio.to_thread(eventually, lambda: children.running == 3)
        run.cancel()  # the user aborts the agent run, its three children running
        with pytest.raises(asyncio.CancelledError):
            await run

    asyncio.run(main())
    assert settled_statuses(recorder, 3) == ["cancelled"] * 3
    assert children.running == 0 and children.cancelled == 3


def test_a_graph_node_awaiting_a_group_is_cancelled_with_the_graph(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    children = Children()
    zeus = make_zeus(works={"worker": children})
    visited: list[str] = []

    async def plan(state: dict[str, Any]) -> dict[str, Any]:
        visited.append("plan")
        return {**state, "briefs": [Brief(agent="worker", scope=f"part {i}") for i in range(5)]}

    async def fan_out(state: dict[str, Any]) -> dict[str, Any]:
        visited.append("fan_out")
        summaries = await zeus.dispatch_group(state["briefs"])
        return {**state, "outputs": [s.output for s in summaries]}

    async def ainvoke(state: dict[str, Any]) -> dict[str, Any]:  # a graph of two nodes
        for node in (plan, fan_out):
            state = await node(state)
        return state

    async def main() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(ainvoke({}), 0.2)

    asyncio.run(main())
    assert visited == ["plan", "fan_out"]
    assert settled_statuses(recorder, 5) == ["cancelled"] * 5
    assert children.running == 0 and children.cancelled == 5


def test_a_tool_call_under_wait_for_and_one_that_finishes_in_time(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    children = Children()
    zeus = make_zeus(works={"research": children})

    async def main() -> str:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(zeus.dispatch(Brief(agent="research", scope="slow")), 0.05)
        children.release.set()
        fast = await asyncio.wait_for(zeus.dispatch(Brief(agent="research", scope="fast")), 10)
        return fast.output or ""

    assert asyncio.run(main()) == "fast done"
    cancelled = [e for e in recorder.wait_for("delegation.settled", count=2)
                 if e["status"] == "cancelled"]
    assert len(cancelled) == 1
    assert recorder.named("delegation.cancel_requested")[0]["reason"] == AWAITER_CANCELLED


class McpStyleServer:
    """A server that runs each tool call in a task of its own, sends progress notifications
    from the delegation's events, and cancels the call's task when its client cancels it."""

    def __init__(self, zeus: Zeus) -> None:
        self.zeus = zeus
        self.calls: dict[int, asyncio.Task[Any]] = {}
        self.notifications: list[dict[str, Any]] = []

    async def call_tool(self, request_id: int, scope: str) -> str:
        handle = self.zeus.dispatch(Brief(agent="research", scope=scope))
        forward = asyncio.ensure_future(self._progress(request_id, handle.events()))
        try:
            return (await handle).output or ""
        finally:
            await forward  # the stream ends with the delegation

    async def _progress(self, request_id: int, events: Any) -> None:
        async for event in events:
            if event["event"] == "attempt.progress":
                self.notifications.append({"id": request_id, "progress": event["progress"]})

    def request(self, request_id: int, scope: str) -> asyncio.Task[Any]:
        self.calls[request_id] = asyncio.ensure_future(self.call_tool(request_id, scope))
        return self.calls[request_id]

    def cancelled_notification(self, request_id: int) -> None:  # notifications/cancelled
        self.calls[request_id].cancel()


def test_an_mcp_style_call_cancelled_by_its_client(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    children = Children()
    zeus = make_zeus(works={"research": children})

    async def main() -> McpStyleServer:
        server = McpStyleServer(zeus)
        call = server.request(7, "deep question")
        while not server.notifications:  # progress reaches the client while it runs
            await asyncio.sleep(0.005)
        server.cancelled_notification(7)
        with pytest.raises(asyncio.CancelledError):
            await call
        return server

    server = asyncio.run(main())
    assert settled_statuses(recorder, 1) == ["cancelled"]
    assert recorder.named("delegation.cancel_requested")[0]["reason"] == AWAITER_CANCELLED
    assert children.running == 0 and children.cancelled == 1
    progress = [n["progress"] for n in server.notifications]
    assert progress == sorted(progress) and len(progress) >= 1
