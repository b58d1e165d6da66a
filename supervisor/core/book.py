"""The handles Zeus can give back by id: every open delegation the host dispatched,
and the `keep` most recently settled ones (oldest dropped first). Thread-safe."""

from __future__ import annotations

import difflib
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from supervisor.core.handle import Handle

__all__ = ["HandleBook"]


class HandleBook:
    """Written by the host's threads (`add`) and Zeus's actor thread (a handle settling)."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._lock = threading.Lock()
        self._open: dict[str, Handle] = {}
        self._settled: OrderedDict[str, Handle] = OrderedDict()

    def add(self, handle: Handle) -> None:
        with self._lock:
            self._open[handle.id] = handle
        handle.future.add_done_callback(lambda _future: self._on_settled(handle.id))

    def _on_settled(self, delegation_id: str) -> None:
        """Runs in Zeus's actor thread as the delegation settles (or at once if it had)."""
        with self._lock:
            handle = self._open.pop(delegation_id, None)
            if handle is None or self.keep == 0:
                return
            self._settled[delegation_id] = handle
            while len(self._settled) > self.keep:
                self._settled.popitem(last=False)

    def get(self, delegation_id: str) -> Handle | None:
        with self._lock:
            return self._open.get(delegation_id) or self._settled.get(delegation_id)

    def nearest(self, delegation_id: str, n: int = 3) -> list[str]:
        """The known ids closest to `delegation_id` (difflib), best first."""
        with self._lock:
            known = [*self._open, *self._settled]
        return difflib.get_close_matches(delegation_id, known, n=n, cutoff=0.5)

    def __len__(self) -> int:
        with self._lock:
            return len(self._open) + len(self._settled)
