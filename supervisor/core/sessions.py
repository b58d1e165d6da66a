"""The thread-side sessions of the agents: one dict per session key a brief names, kept
per agent, least recently used dropped first. Used only in Zeus's actor thread."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

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
        # The tokens counted in each session (input, cached input, output): a CLI whose
        # totals run across its session's runs is told what its earlier runs counted.
        self._tokens: OrderedDict[str, tuple[int, int, int]] = OrderedDict()

    def counted(self, session_id: str, input_tokens: int, output_tokens: int) -> None:
        """Tokens charged by an attempt in `session_id`."""
        before = self._tokens.pop(session_id, (0, 0, 0))
        self._tokens[session_id] = (before[0] + input_tokens, before[1],
                                    before[2] + output_tokens)
        while len(self._tokens) > self._limit:
            self._tokens.popitem(last=False)

    def tokens(self, session_id: str | None) -> tuple[int, int, int] | None:
        """What `session_id`'s runs counted so far, if any were counted here."""
        return self._tokens.get(session_id) if session_id is not None else None

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
