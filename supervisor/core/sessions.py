"""The thread-side sessions of the agents: one dict per session key a brief names, kept
per agent, least recently used dropped first. Used only in Zeus's actor thread."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from actors.speaks import SessionTotals

__all__ = ["AgentSessions", "Sessions"]


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


class AgentSessions:
    """The agent programs' own session ids (an agent CLI's conversation), by the agent and
    the session a brief names: a follow-up brief in that session resumes it. The most
    recent `limit` are kept."""

    def __init__(self, limit: int = 10_000) -> None:
        self._ids: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._limit = limit
        # What each CLI session's charges added (tokens, cached tokens, cost): a CLI whose
        # totals run across its session's runs is told what its earlier runs were charged.
        self._totals: OrderedDict[str, SessionTotals] = OrderedDict()

    def counted(self, session_id: str, charge: SessionTotals) -> None:
        """`charge` was charged by an attempt in `session_id`."""
        self.known(session_id, self._totals.pop(session_id, SessionTotals()) + charge)

    def known(self, session_id: str, totals: SessionTotals) -> None:
        """`session_id`'s charges so far are `totals` (as its store keeps them)."""
        self._totals[session_id] = totals
        self._totals.move_to_end(session_id)
        while len(self._totals) > self._limit:
            self._totals.popitem(last=False)

    def totals(self, session_id: str | None) -> SessionTotals | None:
        """What `session_id`'s runs were charged so far, if any were counted here."""
        return self._totals.get(session_id) if session_id is not None else None

    def bind(self, agent: str, session: str | None, session_id: str) -> None:
        """`session_id` is what the brief's `session` now continues (None: no session)."""
        if session is None:
            return
        key = (agent, session)
        self._ids[key] = session_id
        self._ids.move_to_end(key)
        while len(self._ids) > self._limit:
            self._ids.popitem(last=False)

    def resume(self, agent: str, session: str | None, *, stateful_follow_up: str | None
               ) -> str | None:
        """The session id an attempt of `agent` continues: the one its brief's session is
        bound to, else a stateful performer's own from its failed attempt (its one
        follow-up is that resume); None to start a new one."""
        if session is not None:
            return self._ids.get((agent, session))
        return stateful_follow_up
