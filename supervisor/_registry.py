"""The agents Zeus knows: routing policies plus registered work functions. Thread-safe."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from supervisor._policies import agent_name_problem
from supervisor.errors import RoutingError, SupervisorError
from supervisor.routing import AgentPolicy, Routing

__all__ = ["Registry"]


class Registry:
    """Read from the host's threads (dispatch) and the actor's thread (attempts)."""

    def __init__(self, routing: Routing) -> None:
        self._lock = threading.Lock()
        self.routing = routing
        self._works: dict[str, Callable[..., Any]] = {}
        self._counters: dict[str, itertools.count[int]] = {}

    def register(
        self, agent: str, work: Callable[..., Any], policy: AgentPolicy | None = None
    ) -> None:
        bad_name = agent_name_problem(agent) if isinstance(agent, str) else f"found {agent!r}"
        if bad_name is not None:
            raise RoutingError(f"register({agent!r}, ...): {bad_name}")
        if not callable(work):
            raise SupervisorError(f"register({agent!r}, ...) needs a callable work function")
        with self._lock:
            if policy is not None or agent not in self.routing.agents:
                self.routing = self.routing.with_agent(agent, policy)
            self._works[agent] = work

    def policy(self, agent: str) -> AgentPolicy:
        """The agent's effective policy; `UnknownAgent` if nobody defined it."""
        return self.routing.agent(agent)

    def work(self, agent: str) -> Callable[..., Any] | None:
        """The registered work function, else the policy's `entrypoint`, else None."""
        with self._lock:
            work = self._works.get(agent)
        if work is not None:
            return work
        work = self.routing.resolve_work(agent)
        if work is None:
            return None
        with self._lock:
            self._works.setdefault(agent, work)
        return work

    def next_id(self, agent: str) -> str:
        """`<agent>-<n>`: n counts this agent's delegations from 1; ids never shift."""
        with self._lock:
            counter = self._counters.setdefault(agent, itertools.count(1))
            return f"{agent}-{next(counter)}"
