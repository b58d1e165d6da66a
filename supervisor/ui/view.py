"""What the page shows, folded from a source's events: the tree `replay.Journal`
rebuilds (the one `zeus tree` prints) and each delegation's own events.

A `View` owns its source and its journal; `refresh()` reads what is new and
folds it in. Only the server's event-loop thread touches a view.
"""

from __future__ import annotations

import time

from supervisor.journal import Event, Journal, ReplayedDelegation, Run
from supervisor.ui.source import Source

__all__ = ["View"]


class View:
    """A source's runs as the journal tells them, kept up to date by `refresh()`."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.journal = Journal()
        self.seq = 0  # events folded in so far: the `id` of each event the stream sends
        self.resets = 0  # times the source started over
        # (run index, delegation id) -> its events, in journal order
        self._events: dict[tuple[int, str], list[Event]] = {}
        # A shared store's hosts as last read, and when (`time.monotonic()`); None for a
        # source without hosts (a journal, a SQLite store)
        self.hosts: list[Event] | None = None
        self.hosts_read = 0.0
        self.hosts_version = 0  # changes when a host does (a renewal, a release, a takeover)

    def refresh(self) -> tuple[list[Event], bool]:
        """Fold in what the source has new: the new events, and whether it started over."""
        batch = self.source.read_new()
        if batch.reset:
            self.journal = Journal()
            self._events.clear()
            self.resets += 1
        self.journal.notes.extend(batch.notes)
        if batch.hosts is not None:
            self._hosts_read(batch.hosts)
        for event in batch.events:
            self.journal.apply(event)
            self.seq += 1
            delegation_id = event.get("delegation_id")
            if isinstance(delegation_id, str):
                key = (self.journal.run.index, delegation_id)
                self._events.setdefault(key, []).append(event)
        return batch.events, batch.reset

    def _hosts_read(self, hosts: list[Event]) -> None:
        self.hosts_read = time.monotonic()
        moved = [{k: v for k, v in h.items() if k != "lease_left_s"} for h in hosts]
        before = [{k: v for k, v in h.items() if k != "lease_left_s"} for h in self.hosts or ()]
        if self.hosts is None or moved != before:
            self.hosts_version += 1
        self.hosts = hosts

    def run(self, index: int | None = None) -> Run | None:
        """Run `index` (1-based), or the last run; None when there is no such run."""
        runs = self.journal.runs
        if index is None:
            return runs[-1]
        return runs[index - 1] if 1 <= index <= len(runs) else None

    def find(self, delegation_id: str) -> tuple[Run, ReplayedDelegation] | None:
        """The delegation with this id, in the latest run that has one."""
        for run in reversed(self.journal.runs):
            d = run.delegations.get(delegation_id)
            if d is not None:
                return run, d
        return None

    def events_of(self, run: Run, delegation_id: str) -> list[Event]:
        return self._events.get((run.index, delegation_id), [])

    def version(self, run: Run, delegation_id: str) -> int:
        """How many events the delegation has had: it changes when the delegation does."""
        return len(self._events.get((run.index, delegation_id), ()))
