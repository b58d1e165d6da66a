"""The thread-side sessions of the agents: one dict per session key a brief names, kept
per agent, least recently used dropped first. Used only in Zeus's actor thread."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

__all__ = ["Sessions"]


class Sessions:
    """At most `limit` session dicts per agent (the policy's `session_max`), LRU."""

    def __init__(self) -> None:
        self._by_agent: dict[str, OrderedDict[str, dict[str, Any]]] = {}

    def get(self, agent: str, key: str | None, limit: int) -> dict[str, Any] | None:
        """The session dict for `key` (a fresh one if new); None without a key or a limit."""
        if key is None or limit == 0:
            return None
        sessions = self._by_agent.setdefault(agent, OrderedDict())
        if key in sessions:
            sessions.move_to_end(key)
        else:
            sessions[key] = {}
            while len(sessions) > limit:
                sessions.popitem(last=False)
        return sessions[key]
