"""`zeus mcp`: Zeus as a stdio MCP server, so any MCP client can delegate through it.

Tools: `delegate`, `status`, `result`, `cancel`, `send`, `tree`, `agents`
(docs/integrations.md). While `delegate` waits, the delegation's heartbeats, attempts,
retries and fallbacks reach the client as progress notifications (when it asked
for progress); a client that cancels the call, or whose read times out, cancels
the delegation. `result` only waits: running out of `timeout_s` or being
cancelled leaves the delegation running (`cancel` stops it). Progress comes from
`handle.events()`, subscribed while `delegate` waits.

Tools run on the server's event loop; Zeus runs in its own threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from actors import Brief
from supervisor.core.handle import Handle
from supervisor.core.zeus import Zeus
from supervisor.errors import SupervisorError
from supervisor.integrations import _bridge
from supervisor.integrations._extras import missing_extra
from supervisor.journal.streams import EventStream
from supervisor.routing import Routing

try:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise missing_extra("supervisor.integrations.mcp", "mcp", exc) from exc

__all__ = ["KEEP_HANDLES", "build_server", "progress_message", "serve"]

KEEP_HANDLES = 10_000  # settled delegations `status`/`result` still answer for, oldest dropped
CLIENT_CANCELLED = "cancelled by the MCP client"


def serve(routing: Routing, *, log: Path | None = None) -> None:
    """Serve MCP on stdin/stdout until the client goes away, then stop Zeus."""
    build_server(routing, log=log).run("stdio")


def build_server(routing: Routing, *, log: Path | None = None) -> MCPServer[Any]:
    """The MCP server; Zeus starts with it (after stdio is claimed) and stops with it."""
    tools = _Tools()

    @asynccontextmanager
    async def lifespan(_server: MCPServer[Any]) -> AsyncIterator[None]:
        tools.zeus = await asyncio.to_thread(Zeus.start, routing, log=log)
        try:
            yield None
        finally:
            await asyncio.to_thread(tools.zeus.stop)

    server: MCPServer[Any] = MCPServer(
        "zeus",
        instructions="Delegate subtasks to supervised agents: call agents() to see them, "
        "then delegate(agent, scope). Each delegation settles exactly once with a "
        "<subtask_summary>.",
        lifespan=lifespan,
        log_level="WARNING",
    )
    for tool in (tools.delegate, tools.status, tools.result, tools.cancel, tools.send,
                 tools.tree, tools.agents):
        server.add_tool(tool, description=inspect.cleandoc(tool.__doc__ or ""))
    return server


class _Tools:
    """The tools, on the server's event loop. `zeus` is set once the server starts."""

    zeus: Zeus

    def __init__(self) -> None:
        self._handles: OrderedDict[str, Handle] = OrderedDict()

    async def delegate(
        self,
        agent: str,
        scope: str,
        ctx: Context,
        inputs: Any = None,
        partial_ok: bool | None = None,
        timeout_s: float | None = None,
        wait: bool = True,
    ) -> str:
        """Delegate a subtask to a supervised agent (see agents()). With wait (the
        default) return its <subtask_summary>; cancelling this call cancels the
        delegation. With wait=false return its id at once (then status/result/cancel)."""
        known = self.zeus.routing.agents
        if agent not in known:
            raise ToolError(f"no agent named {agent!r}; the agents are: {', '.join(known)}")
        try:
            brief = Brief(agent=agent, scope=scope, inputs=inputs, partial_ok=partial_ok,
                          timeout_s=timeout_s)
            handle = self.zeus.dispatch(brief, watch=wait)  # every event, from the first
        except (ValidationError, SupervisorError) as exc:
            raise ToolError(f"cannot delegate: {exc}") from exc
        self._keep(handle)
        if not wait:
            return json.dumps({"id": handle.id, "status": "running"})
        return await _with_progress(handle, ctx)

    async def status(self, id: str) -> str:
        """A delegation's state: running (with its attempts and progress) or how it settled."""
        handle = self._handle(id)
        if handle.done():
            summary = handle.result(0)
            return json.dumps({"id": id, "status": summary.status.value, "settled": True,
                               "attempts": len(summary.attempts)})
        node = _find((await asyncio.to_thread(self.zeus.tree))["delegations"], id)
        return json.dumps({"id": id, "status": "running", "settled": False, **(node or {})},
                          default=str)

    async def result(self, id: str, timeout_s: float | None = None) -> str:
        """Wait up to timeout_s (default: until settled) for a delegation's
        <subtask_summary>. Running out of time, or cancelling this call, leaves it running."""
        summary = await _bridge.wait_summary(self._handle(id), timeout_s)
        if summary is None:
            return json.dumps({"id": id, "status": "running",
                               "note": f"not settled within {timeout_s} s; it goes on"})
        return summary.render()

    async def cancel(self, id: str, reason: str | None = None) -> str:
        """Cancel a delegation (a no-op once it has settled)."""
        handle = self._handle(id)
        handle.cancel(reason or CLIENT_CANCELLED)
        return json.dumps({"id": id, "cancel_requested": not handle.done()})

    async def send(self, id: str, message: str) -> str:
        """Send a message to a running delegation's child."""
        try:
            sent = _bridge.send(self.zeus, self._handle(id).id, message)
        except (SupervisorError, TypeError) as exc:
            raise ToolError(str(exc)) from exc
        return json.dumps({"id": id, "sent": sent})

    async def tree(self) -> str:
        """The live supervision tree: open delegations, their attempts, usage."""
        return json.dumps(await asyncio.to_thread(self.zeus.tree), default=str)

    async def agents(self) -> str:
        """The agents you can delegate to: name, role, kind, deadline, fallback."""
        rows = [
            {"name": name, "role": p.role, "kind": p.kind, "timeout_s": p.timeout_s,
             "fallback": p.fallback, "isolation": "command" if p.runs_program else p.isolation}
            for name, p in self.zeus.routing.agents.items()
        ]
        return json.dumps(rows)

    def _keep(self, handle: Handle) -> None:
        self._handles[handle.id] = handle
        while len(self._handles) > KEEP_HANDLES:
            oldest = next(iter(self._handles))
            if not self._handles[oldest].done():
                break  # never forget an open delegation
            del self._handles[oldest]

    def _handle(self, delegation_id: str) -> Handle:
        handle = self._handles.get(delegation_id)
        if handle is None:
            raise ToolError(
                f"no delegation {delegation_id!r} from this server "
                "(ids come from delegate(..., wait=false))"
            )
        return handle


async def _with_progress(handle: Handle, ctx: Context) -> str:
    """Await the summary; meanwhile turn the delegation's events (`handle.events()`)
    into progress (which the session drops for a client that did not ask for it).

    Cancelling this task cancels the delegation (awaiting a handle does that). Once
    it settles, what the stream has received still goes out before the summary.
    """
    events = handle.events()  # opened at the dispatch (watch=True): every event
    forwarder = asyncio.create_task(_forward(events, ctx))
    try:
        summary = await _bridge.await_summary(handle)
    except BaseException:  # cancelled (the delegation with it): no more progress
        events.close()
        forwarder.cancel()
        raise
    events.close()
    with contextlib.suppress(Exception):  # progress is best-effort; the summary is not
        await forwarder
    return summary.render()


async def _forward(events: EventStream, ctx: Context) -> None:
    """Send each event worth a line as the call's next progress step (the server's loop)."""
    step = 0
    async for event in events:
        message = progress_message(event)
        if message is not None:
            step += 1
            await ctx.report_progress(step, None, message)


def progress_message(event: dict[str, Any]) -> str | None:
    """What a client reads about one event of its delegation (None: nothing to say)."""
    name = event["event"]
    if name == "attempt.heartbeat":
        note = f": {event['note']}" if event.get("note") else ""
        return f"{event['agent']} working (progress {event.get('progress')}){note}"
    if name == "attempt.partial":
        return f"{event['agent']} partial: {event.get('item', '')}"
    if name == "attempt.started":
        return f"attempt {event.get('attempt')} started on {event['agent']}"
    if name == "attempt.failed":
        return f"attempt ended: {event.get('outcome')} ({event.get('error')})"
    if name == "retry.scheduled":
        return f"retry in {event.get('backoff_s', 0):.2f} s"
    if name == "fallback.dispatched":
        return f"fallback {event.get('from')} -> {event.get('to')}"
    return None


def _find(nodes: list[dict[str, Any]], delegation_id: str) -> dict[str, Any] | None:
    for node in nodes:
        if node.get("id") == delegation_id:
            return {k: v for k, v in node.items() if k != "children"}
        found = _find(node.get("children", []), delegation_id)
        if found is not None:
            return found
    return None
