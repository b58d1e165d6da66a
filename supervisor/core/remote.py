"""`RemoteSettlements`: handles on delegations that another host of a shared store runs.

A handle to such a delegation (`zeus.handle(id)`, `dispatch(key=K)` for a key another
host holds, or one of this host's own after its lease was lost and another host took
it over) resolves when the store says it settled. The thread `zeus-remote` waits for
the store's word of settlements (a `SettledFeed`: PostgreSQL's `LISTEN`) and then asks
the store, on a connection of its own, for the summaries of every watched delegation
at once; it also asks every `backstop_s` whatever it heard, and every `poll_s` where
the store gives no word (docs/design.md, "Several hosts"). It sets each future in that
thread; nothing here calls into Zeus's actor.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from actors import Summary
from supervisor.core.handle import DelegationFuture
from supervisor.errors import ZeusStopped
from supervisor.store import SettledFeed

__all__ = ["RemoteSettlements"]

ReadSummaries = Callable[[Sequence[str]], dict[str, Summary]]
SLICE_S = 0.05  # the longest a new watch waits for its first look while the feed is heard


class RemoteSettlements:
    """The futures of delegations run elsewhere, set from the store as they settle."""

    def __init__(self, read: ReadSummaries, *,
                 feed: Callable[[], SettledFeed | None] | None = None,
                 poll_s: float = 0.25, backstop_s: float = 2.0, thread: bool = True) -> None:
        """`feed` makes the store's word of settlements (in the zeus-remote thread);
        `thread` False: no thread polls; the caller calls `poll()` (tests)."""
        self._read = read
        self._feed = feed
        self.poll_s = poll_s
        self.backstop_s = backstop_s
        self._threaded = thread
        self._watched: dict[str, list[DelegationFuture]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._added = 0  # watches made (the thread looks once for each new one)
        self._closed = False
        self.failures = 0  # polls the store did not answer (it is asked again)
        self.polls = 0  # looks at the store
        self._thread: threading.Thread | None = None

    def watch(self, delegation_id: str, future: DelegationFuture) -> None:
        """Set `future` once the store holds `delegation_id`'s summary (any thread)."""
        with self._lock:
            if self._closed:
                raise ZeusStopped("Zeus is stopped; start a new one to wait on the store")
            self._watched.setdefault(delegation_id, []).append(future)
            self._added += 1
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
        self.polls += 1
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
        feed = self._feed() if self._feed is not None else None
        seen = -1  # the watches already looked for
        due = 0.0  # the backstop's next look (monotonic)
        try:
            while True:
                heard: set[str] | None = None
                if feed is not None:
                    heard = feed.wait(SLICE_S)
                if heard is None:  # no word to trust: the store's own pace
                    self._wake.wait(self.poll_s if feed is None else min(self.poll_s, 1.0))
                    self._wake.clear()
                with self._lock:
                    if self._closed:
                        return
                    fresh = self._added != seen
                    seen = self._added
                    if heard is not None and not fresh and time.monotonic() < due \
                            and heard.isdisjoint(self._watched):
                        continue
                self.poll()
                due = time.monotonic() + self.backstop_s
        finally:
            if feed is not None:
                feed.close()

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
