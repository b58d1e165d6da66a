"""`RemoteSettlements`: handles on delegations that another host of a shared store runs.

A handle to such a delegation (`zeus.handle(id)`, `dispatch(key=K)` for a key another
host holds, or one of this host's own after its lease was lost and another host took
it over) resolves when the store says it settled. The thread `zeus-remote` asks the
store, on a connection of its own, for the summaries of every watched delegation at
once, every `poll_s` while any is watched (docs/design.md, "Several hosts"). It sets
each future in that thread; nothing here calls into Zeus's actor.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from actors import Summary
from supervisor.core.future import DelegationFuture
from supervisor.errors import ZeusStopped

__all__ = ["RemoteSettlements"]

ReadSummaries = Callable[[Sequence[str]], dict[str, Summary]]


class RemoteSettlements:
    """The futures of delegations run elsewhere, set from the store as they settle."""

    def __init__(self, read: ReadSummaries, *, poll_s: float = 0.25,
                 thread: bool = True) -> None:
        """`thread` False: no thread polls; the caller calls `poll()` (tests)."""
        self._read = read
        self.poll_s = poll_s
        self._threaded = thread
        self._watched: dict[str, list[DelegationFuture]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self.failures = 0  # polls the store did not answer (it is asked again)
        self._thread: threading.Thread | None = None

    def watch(self, delegation_id: str, future: DelegationFuture) -> None:
        """Set `future` once the store holds `delegation_id`'s summary (any thread)."""
        with self._lock:
            if self._closed:
                raise ZeusStopped("Zeus is stopped; start a new one to wait on the store")
            self._watched.setdefault(delegation_id, []).append(future)
            if self._thread is None and self._threaded:
                self._thread = threading.Thread(target=self._run, name="zeus-remote",
                                                daemon=True)
                self._thread.start()
        self._wake.set()

    @property
    def watching(self) -> int:
        with self._lock:
            return len(self._watched)

    def poll(self) -> int:
        """One look at the store (the zeus-remote thread, or a test): how many settled."""
        with self._lock:
            ids = list(self._watched)
        if not ids:
            return 0
        try:
            found = self._read(ids)
        except Exception:  # noqa: BLE001 - the store away: the next poll asks again
            self.failures += 1
            return 0
        settled = 0
        for delegation_id, summary in found.items():
            with self._lock:
                futures = self._watched.pop(delegation_id, [])
            for future in futures:
                settled += future.set(summary)
        return settled

    def _run(self) -> None:  # the zeus-remote thread
        while True:
            self._wake.wait(self.poll_s)
            self._wake.clear()
            with self._lock:
                if self._closed:
                    return
            self.poll()

    def close(self, why: str) -> None:
        """Watch no more: each future still waiting fails with `ZeusStopped(why)`."""
        with self._lock:
            self._closed = True
            waiting, self._watched = self._watched, {}
        self._wake.set()
        for futures in waiting.values():
            for future in futures:
                if not future.done():
                    future.set_exception(ZeusStopped(why))
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
