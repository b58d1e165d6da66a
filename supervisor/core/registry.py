"""The agents Zeus knows: routing policies plus registered work functions. Thread-safe."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from supervisor.errors import RoutingError, SupervisorError
from supervisor.routing import AgentPolicy, Routing
from supervisor.routing.entrypoints import signature_problem
from supervisor.routing.policies import agent_name_problem

__all__ = ["Registry"]


class Registry:
    """Read from the host's threads (dispatch) and the actor's thread (attempts)."""

    def __init__(self, routing: Routing) -> None:
        self._lock = threading.Lock()
        self.routing = routing
        self._works: dict[str, Callable[..., Any]] = {}
        self._issued: dict[str, int] = {}  # agent -> how many ids it was given
        # On a shared store: where each agent's ids come from, blocks no other host uses.
        self._next_block: Callable[[str], int] | None = None
        self._block_size = 0
        self._blocks: dict[str, list[tuple[int, int]]] = {}  # agent -> (first, last) given

    def register(
        self, agent: str, work: Callable[..., Any], policy: AgentPolicy | None = None
    ) -> None:
        bad_name = agent_name_problem(agent) if isinstance(agent, str) else f"found {agent!r}"
        if bad_name is not None:
            raise RoutingError(f"register({agent!r}, ...): {bad_name}")
        if not callable(work):
            raise SupervisorError(f"register({agent!r}, ...) needs a callable work function")
        problem = signature_problem(work)
        if problem is not None:
            raise SupervisorError(f"register({agent!r}, ...): {problem}")
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
        """`<agent>-<n>`: n counts this agent's delegations from 1; ids never shift. On a
        shared store, n counts on within a block of numbers this host reserved."""
        with self._lock:
            n = self._issued.get(agent, 0) + 1
            if self._next_block is not None:
                blocks = self._blocks.setdefault(agent, [])
                if not blocks or n > blocks[-1][1]:
                    first = self._next_block(agent) + 1  # the store: a round trip a block
                    blocks.append((first, first + self._block_size - 1))
                    n = first
            self._issued[agent] = n
            return f"{agent}-{n}"

    def use_blocks(self, next_block: Callable[[str], int], size: int) -> None:
        """Give out each agent's ids from blocks of `size` numbers that
        `next_block(agent)` reserves (the start of each, exclusive): several hosts of one
        store never give the same id."""
        with self._lock:
            self._next_block = next_block
            self._block_size = size
            self._issued.clear()

    def continue_from(self, issued: dict[str, int]) -> None:
        """Give out ids after those already stored (a Zeus recovering a store)."""
        with self._lock:
            for agent, n in issued.items():
                self._issued[agent] = max(self._issued.get(agent, 0), n)

    def issued(self, delegation_id: str) -> bool:
        """Whether `delegation_id` is one `next_id` gave out."""
        agent, _, n = delegation_id.rpartition("-")
        if not n.isdigit():
            return False
        with self._lock:
            if self._next_block is not None:
                top = self._issued.get(agent, 0)
                return any(first <= int(n) <= min(last, top)
                           for first, last in self._blocks.get(agent, ()))
            return 1 <= int(n) <= self._issued.get(agent, 0)
