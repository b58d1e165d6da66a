"""What both stores buffer alike before a commit: each effective policy's id (a hash of
its JSON, made once per policy object), a turn's charges summed per attempt and per
agent CLI session, and a partial result's JSON. Used by the one thread that uses a
store."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel

from actors import Usage
from actors.speaks import SessionTotals

__all__ = ["Charges", "PolicyIds", "SessionCharges", "item_json"]

_KEEP_AT_MOST = 1024  # policy objects whose id is kept (cleared whole past it)


def item_json(item: Any) -> str:
    """A partial result as the stores keep it (what JSON cannot hold, as text)."""
    return json.dumps(item, default=str, separators=(",", ":"))


class PolicyIds:
    """The stored id of each effective policy, and whether it still has to be written."""

    def __init__(self) -> None:
        self._by_object: dict[int, tuple[object, str]] = {}  # id(policy) -> (policy, its id)
        self._stored: set[str] = set()  # ids written (or buffered) by this store

    def id_of(self, policy: BaseModel | dict[str, Any]) -> tuple[str, str | None]:
        """The policy's id, and its JSON the first time this store meets that id (to be
        buffered with the delegation that has it); None after that."""
        cached = self._by_object.get(id(policy))
        if cached is not None and cached[0] is policy:
            return cached[1], None
        text = (json.dumps(policy, default=str, sort_keys=True) if isinstance(policy, dict)
                else policy.model_dump_json())
        policy_id = hashlib.blake2b(text.encode(), digest_size=12).hexdigest()
        new = policy_id not in self._stored
        self._stored.add(policy_id)
        if len(self._by_object) >= _KEEP_AT_MOST:
            self._by_object.clear()
        self._by_object[id(policy)] = (policy, policy_id)  # holding it keeps its id unique
        return policy_id, text if new else None


class Charges(dict[str, list[float]]):
    """A turn's charges by attempt id: [calls, input tokens, output tokens, cost], summed,
    and the progress count of the last (one update per attempt at the commit)."""

    def add(self, attempt_id: str, usage: Usage, progress: int = 0) -> None:
        total = self.get(attempt_id)
        if total is None:
            self[attempt_id] = [usage.calls, usage.input_tokens, usage.output_tokens,
                                usage.cost, progress]
        else:
            total[0] += usage.calls
            total[1] += usage.input_tokens
            total[2] += usage.output_tokens
            total[3] += usage.cost
            total[4] = max(total[4], progress)


class SessionCharges(dict[str, SessionTotals]):
    """A turn's charges by agent CLI session id, summed (one upsert per session at the
    commit, which adds them to the session's row)."""

    def add(self, session_id: str, added: SessionTotals) -> None:
        self[session_id] = self.get(session_id, SessionTotals()) + added

    def rows(self, now: float) -> list[tuple[str, int, int, int, float, float]]:
        """The `SESSION_CHARGE` rows (`now`: when they were charged)."""
        return [(session_id, t.input_tokens, t.cached_input_tokens, t.output_tokens, t.cost,
                 now) for session_id, t in self.items()]
