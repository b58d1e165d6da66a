"""The supervisor's hand on the store: each step of a delegation's life written ahead of
what it lets happen, and the commit once per turn of the mailbox (docs/design.md,
"The store"). Owned by Zeus's actor thread; it never calls back into the supervisor.

What must be durable before it takes effect is committed at once: an attempt before
its child starts (with its delegation's record, written in the same turn), a summary
before its handle resolves. Everything else is committed at the end of the turn.
"""

from __future__ import annotations

import os
from typing import Any

from actors import AttemptRecord, Summary, Usage
from actors.clock import Clock
from supervisor.core.state import Attempt, Delegation
from supervisor.errors import StoreError
from supervisor.journal.events import EventLog
from supervisor.store import Store

__all__ = ["Durable"]


class Durable:
    """Writes of one Zeus to its store, in clock time converted to the wall clock."""

    def __init__(self, store: Store, clock: Clock, events: EventLog) -> None:
        self.store = store
        self._clock = clock
        self._events = events
        self._dirty = False

    def wall(self, when: float) -> float:
        """Clock time `when` as wall-clock time (epoch seconds), as the store keeps time."""
        return self._clock.wall() + (when - self._clock.now())

    # -- writes (buffered until the turn ends, or the next `commit_now`) -------------------

    def recorded(self, d: Delegation, *, key: str | None, ordinal: int | None,
                 policy: dict[str, Any]) -> None:
        self.store.record_delegation(
            d.id, key=key, parent_id=d.parent_id, ordinal=ordinal, agent=d.agent,
            brief=d.brief, policy=policy,
            deadline=None if d.deadline_cap is None else self.wall(d.deadline_cap),
            created=self.wall(d.dispatched_at),
        )
        self._dirty = True

    def attempt_started(self, d: Delegation, a: Attempt) -> bool:
        """The attempt, committed at once: no child starts that the store does not know.
        False when it could not be committed: the child must not start."""
        self.store.attempt_started(a.id, delegation_id=d.id, number=a.number, agent=a.agent,
                                   started=self.wall(a.started_at), deadline=self.wall(a.deadline))
        self._dirty = True
        return self.commit_now()

    def identity(self, a: Attempt, pid: int | None, pid_start_time: float | None,
                 node: str | None) -> None:
        """Who the attempt's child is, committed at once: recovery needs it to confirm the
        child gone before anything runs in its place."""
        pgid = None
        if pid is not None:
            try:
                # Only a group the child leads (workers and command agents make their
                # own): a group it merely shares may hold processes that are not its.
                pgid = pid if os.getpgid(pid) == pid else None
            except OSError:
                pgid = None  # gone already: its pid and start time still tell
        self.store.attempt_identity(a.id, pid=pid, pid_start_time=pid_start_time, pgid=pgid,
                                    node=node)
        self._dirty = True
        self.commit_now()

    def charged(self, delegation_id: str, attempt_id: str, usage: Usage) -> None:
        self.store.charge(delegation_id, attempt_id, usage)
        self._dirty = True

    def partial(self, d: Delegation, a: Attempt, item: Any) -> None:
        self.store.partial(d.id, a.id, item)
        self._dirty = True

    def attempt_ended(self, record: AttemptRecord) -> None:
        self.store.attempt_ended(record.id, outcome=record.outcome.value,
                                 ended=self._clock.wall(), error=record.error, record=record)
        self._dirty = True

    def retry_scheduled(self, d: Delegation, a: Attempt, delay: float, agent: str) -> None:
        self.store.retry_scheduled(d.id, after_attempt=a.id, due=self._clock.wall() + delay,
                                   agent=agent)
        self._dirty = True

    def settled(self, d: Delegation, summary: Summary) -> bool:
        """The summary, committed before the handle resolves; False if it could not be
        (the handle still resolves: the host is never kept waiting on a disk)."""
        self.store.settled(d.id, status=summary.status, summary=summary,
                           at=self._clock.wall())
        self._dirty = True
        return self.commit_now()

    # -- commits ------------------------------------------------------------------------------

    def commit_now(self) -> bool:
        """Commit what is buffered; False (and said in the journal) when the store cannot
        be written: the writes stay buffered for the next commit."""
        if not self._dirty:
            return True
        try:
            self.store.commit()
        except StoreError as exc:
            self._events.emit("zeus.internal_error", message="store", error=str(exc))
            return False
        self._dirty = False
        return True

    def end_turn(self) -> None:
        """The mailbox's turn ended: one commit for what it wrote."""
        if self._dirty:
            self.commit_now()

    @property
    def writable(self) -> bool:
        return self.store.writable
