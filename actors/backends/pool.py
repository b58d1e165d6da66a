"""`WarmPool`: idle worker processes kept per agent, least recently used first.

After a clean finish a worker process stays up and may take its agent's next
attempt. A worker that ran a brief naming a session holds that session (its
`ctx.session` dict lives in the worker) and is kept for the next brief naming
it. At most `limit` idle workers per agent: beyond that the least recently
used are evicted. Not thread-safe: the backend's lock guards it.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

__all__ = ["WarmPool"]

W = TypeVar("W")


class WarmPool(Generic[W]):
    def __init__(self) -> None:
        # agent -> idle worker -> the session it holds; insertion order is LRU order.
        self._idle: dict[str, OrderedDict[W, str | None]] = {}

    def take(self, agent: str, session: str | None) -> W | None:
        """An idle worker for `agent`: the one holding `session`, else one holding no session.

        A worker holding another session is never handed out (its state would be
        lost); None means "start a new worker".
        """
        idle = self._idle.get(agent)
        if not idle:
            return None
        for wanted in (session, None) if session is not None else (None,):
            for worker, held in reversed(idle.items()):  # most recently used first
                if held == wanted:
                    del idle[worker]
                    return worker
        return None

    def put(self, agent: str, worker: W, session: str | None, limit: int) -> list[W]:
        """Keep `worker` idle (most recently used); returns the workers evicted beyond `limit`."""
        idle = self._idle.setdefault(agent, OrderedDict())
        idle[worker] = session
        idle.move_to_end(worker)
        evicted: list[W] = []
        while len(idle) > max(0, limit):
            evicted.append(idle.popitem(last=False)[0])
        return evicted

    def discard(self, agent: str, worker: W) -> None:
        idle = self._idle.get(agent)
        if idle is not None:
            idle.pop(worker, None)

    def idle(self, agent: str | None = None) -> list[W]:
        """The idle workers (of `agent`, or of every agent), least recently used first."""
        if agent is not None:
            return list(self._idle.get(agent, ()))
        return [w for idle in self._idle.values() for w in idle]
