"""The delegate tool both agent SDKs share: its description, its checks, its call.

A framework adapter wraps `Delegator.__call__` in its own tool type; the model
then calls `delegate(agent, scope, ...)` and reads the `<subtask_summary>`.
Runs on the host's event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic import ValidationError

from actors import Brief
from supervisor.core.zeus import Zeus
from supervisor.errors import UnknownAgent
from supervisor.integrations import _bridge

__all__ = ["Delegator"]

TOOL_NAME = "delegate"


class Delegator:
    """Delegates to the agents it was given (all of the routing's, by default)."""

    def __init__(self, zeus: Zeus, agents: Sequence[str] | None = None) -> None:
        known = zeus.routing.agents
        names = list(known) if agents is None else list(agents)
        unknown = [name for name in names if name not in known]
        if unknown:
            raise UnknownAgent(
                f"delegate_tool: no agent named {', '.join(map(repr, unknown))}; "
                f"the routing has {', '.join(known) or 'none'}"
            )
        if not names:
            raise UnknownAgent(
                "delegate_tool needs at least one agent: give Zeus a routing.yml or agents="
            )
        self.zeus = zeus
        self.agents = tuple(names)
        self.description = describe(zeus, self.agents)

    def tool_function(self, refused: Callable[[Exception], str]) -> Callable[..., Awaitable[str]]:
        """The tool's function, with the signature a framework reads the tool's schema from.

        A call the model got wrong (an unknown agent, a bad brief) goes to `refused`,
        which returns what the model reads, or raises the framework's retry request.
        """

        async def delegate(
            agent: str,
            scope: str,
            inputs: dict[str, Any] | None = None,
            partial_ok: bool | None = None,
            timeout_s: float | None = None,
        ) -> str:
            try:
                return await self(agent, scope, inputs, partial_ok, timeout_s)
            except (UnknownAgent, ValidationError) as exc:
                return refused(exc)

        return delegate

    async def __call__(
        self,
        agent: str,
        scope: str,
        inputs: dict[str, Any] | None = None,
        partial_ok: bool | None = None,
        timeout_s: float | None = None,
    ) -> str:
        """Delegate one subtask and return its rendered `<subtask_summary>`."""
        if agent not in self.agents:
            raise UnknownAgent(
                f"no agent named {agent!r} to delegate to; use one of: {', '.join(self.agents)}"
            )
        brief = Brief(
            agent=agent, scope=scope, inputs=inputs, partial_ok=partial_ok,
            timeout_s=timeout_s,
        )
        return (await _bridge.await_summary(self.zeus.dispatch(brief))).render()


def describe(zeus: Zeus, agents: Sequence[str]) -> str:
    """What the model reads about the tool: one line per agent (name, role, deadline)."""
    lines = [
        "Delegate a subtask to a supervised agent: Zeus runs it with a deadline, retries, "
        "fallbacks and budgets, and returns one <subtask_summary> (status, findings, "
        "partial results, attempts, usage). Give `agent` (one of the list below) and a "
        "self-contained `scope`; optionally `inputs`, `partial_ok` (accept partial results "
        "at the deadline) and `timeout_s`.",
        "Agents:",
    ]
    for name in agents:
        policy = zeus.routing.agent(name)
        role = f" ({policy.role})" if policy.role else ""
        lines.append(f"- {name}{role}: deadline {policy.timeout_s:g} s")
    return "\n".join(lines)
