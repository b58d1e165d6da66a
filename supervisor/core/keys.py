"""The host's dispatch keys (`dispatch(brief, key=...)`): each key names one delegation,
the one first dispatched under it, in this Zeus or in its store. Used from the host's
threads; one dispatch per key, whichever thread asks first."""

from __future__ import annotations

import threading
from collections.abc import Callable

from actors import Brief
from supervisor.errors import KeyConflict
from supervisor.rules.recovery import brief_differences

__all__ = ["Keys"]


class Keys:
    """key -> (delegation id, brief). `stored(key)` looks a key up in the store (None
    without one): a key the host gave before a restart."""

    def __init__(self, stored: Callable[[str], tuple[str, Brief] | None] | None) -> None:
        self.lock = threading.Lock()  # held across find, dispatch and add
        self._known: dict[str, tuple[str, Brief]] = {}
        self._stored = stored

    def find(self, key: str, brief: Brief) -> str | None:
        """The id of the delegation dispatched under `key`, or None (a new key).
        `KeyConflict` when it was dispatched with another brief. Call with `lock` held."""
        known = self._known.get(key)
        if known is None and self._stored is not None:
            known = self._stored(key)
            if known is not None:
                self._known[key] = known
        if known is None:
            return None
        delegation_id, first = known
        differ = brief_differences(first, brief)
        if differ:
            raise KeyConflict(key, delegation_id, differ)
        return delegation_id

    def add(self, key: str, delegation_id: str, brief: Brief) -> None:
        """`key` now names the delegation just dispatched. Call with `lock` held."""
        self._known[key] = (delegation_id, brief)
