"""The handles Zeus can give back by id: every open delegation the host dispatched,
and the `keep` most recently settled ones (oldest dropped first). Thread-safe.

A settled one is kept compactly: its summary and a weak reference to its handle.
While the host holds that handle, the same one is given back; once it is gone, a
new handle on the same summary. Every object kept is walked by each full garbage
collection, so a kept handle (its future, the future's lock and condition, its
callbacks) would cost every later delegation: about 30 objects each, against 15.
"""

from __future__ import annotations

import difflib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from actors import Summary
from supervisor.core.settlement import Settlement

if TYPE_CHECKING:
    from supervisor.core.future import DelegationFuture
    from supervisor.core.handle import Handle

__all__ = ["HandleBook"]


class HandleBook:
    """Written by the host's threads (`add`, `get`) and Zeus's actor thread (a handle
    settling). `revive(id, summary)` makes a settled handle anew (any thread)."""

    def __init__(self, keep: int, revive: Callable[[str, Summary], Handle]) -> None:
        self.keep = keep
        self._revive = revive
        self._lock = threading.Lock()
        self._open: dict[str, Handle] = {}
        # A summary as decided (a `Settlement`) until a revived handle needs it made.
        self._settled: OrderedDict[str, tuple[weakref.ref[Handle], Summary | Settlement]] = (
            OrderedDict())
        self._hook = self._on_settled  # bound once: each future gets the same one

    def add(self, handle: Handle, settled: DelegationFuture) -> None:
        """Before Zeus hears of the delegation (`settled` is the handle's future)."""
        delegation_id = handle.id
        with self._lock:
            self._open[delegation_id] = handle
        # The future holds the id, not the handle: no cycle through the handle's future.
        settled.delegation_id = delegation_id
        settled.on_settled = self._hook

    def _on_settled(self, delegation_id: str, summary: Summary | Settlement) -> None:
        """Runs in Zeus's actor thread as the delegation settles (or at once if it had)."""
        with self._lock:
            handle = self._open.pop(delegation_id, None)
            if handle is None or self.keep == 0:
                return
            self._settled[delegation_id] = (weakref.ref(handle), summary)
            while len(self._settled) > self.keep:
                self._settled.popitem(last=False)

    def get(self, delegation_id: str) -> Handle | None:
        with self._lock:
            handle = self._open.get(delegation_id)
            kept = self._settled.get(delegation_id) if handle is None else None
            if kept is None:
                return handle
            ref, summary = kept
            handle = ref()
            if handle is None:  # the host let it go: a new one, kept in the same place
                if isinstance(summary, Settlement):
                    summary = summary.summary()
                handle = self._revive(delegation_id, summary)
                self._settled[delegation_id] = (weakref.ref(handle), summary)
            return handle

    def nearest(self, delegation_id: str, n: int = 3) -> list[str]:
        """The known ids closest to `delegation_id` (difflib), best first."""
        with self._lock:
            known = [*self._open, *self._settled]
        return difflib.get_close_matches(delegation_id, known, n=n, cutoff=0.5)

    def __len__(self) -> int:
        with self._lock:
            return len(self._open) + len(self._settled)
