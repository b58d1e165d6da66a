"""The supervisor's hand on the store: each step of a delegation's life written ahead of
what it lets happen, and the commit once per turn of the mailbox (docs/design.md,
"The store"). Owned by Zeus's actor thread. A Zeus without a store has a
`MemoryDurable`, the same interface with nothing to write: the supervisor never asks
which it has. The one thing it calls is what the
supervisor hands it to run after a commit: a settlement made known.

What must be durable before it takes effect is committed at once: an attempt before
its child starts (with its delegation's record, written in the same turn), the child's
identity. A summary is committed before its handle resolves: by the next commit, which
the settlements of a busy turn share. Everything else is committed at the turn's end.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from actors import AttemptRecord, Summary, Usage
from actors.clock import Clock
from actors.speaks import SessionTotals
from supervisor.core.settlement import Settlement
from supervisor.core.state import Attempt, Delegation
from supervisor.errors import StoreError, StoreFenced
from supervisor.journal.events import EventLog
from supervisor.store import SharedStore, Store, StoredDelegation

__all__ = ["Durable", "MemoryDurable"]

# How many settlements, and for how many turns of the mailbox, may wait for a shared
# commit while more messages wait (a busy mailbox): throughput against a handle's
# latency. Counted in turns, not time: a fake clock that stands still holds nothing.
HOLD_AT_MOST = 64
# The first and the longest pause between the tries of an attempt's record while a
# shared store's database does not answer (each try also waits out the store's own
# reconnect backoff, a quarter of the lease at most).
_FIRST_PAUSE_S = 0.05
_LAST_PAUSE_S = 0.5
# The least time between two asks for a turn to write late charges the database refused.
_LATE_AGAIN_S = 0.5


class MemoryDurable:
    """A Zeus kept in memory only: every write is dropped, every commit succeeds, and a
    settlement is made known at once. `Durable` is the same interface on a store."""

    store: Store | None = None
    # Called (Zeus's thread) when a commit finds that another host owns its delegations.
    on_fenced: Callable[[str], None] | None = None
    # Called (Zeus's thread) when a commit failed on a shared store with settlements
    # waiting for it: ask for another commit soon, whether or not more messages come.
    retry_later: Callable[[], object] | None = None
    # On a shared store, when this host's lease ends (monotonic): how long an attempt's
    # record may wait for a database that does not answer (docs/design.md, "The
    # database itself fails").
    lease_ends: Callable[[], float] | None = None

    def required(self, what: str, why: str = "only a store keeps what that needs") -> Store:
        """The store, for what only a store can do; `StoreError` saying `what` cannot be
        done without one, and `why`."""
        raise StoreError(f"{what}: this Zeus has no store, and {why} (Zeus.start(store=...))")

    def recorded(self, d: Delegation, *, key: str | None, ordinal: int | None,
                 policy: Callable[[Delegation], dict[str, Any]]) -> None:
        """`d`, dispatched (under `key`, its parent's `ordinal`-th call); `policy(d)` gives
        its effective policy as the store keeps it, asked only where it is kept."""
        del d, key, ordinal, policy

    def attempt_started(self, d: Delegation, a: Attempt) -> bool:
        """The attempt, recorded before its child starts; False: it must not start."""
        del d, a
        return True

    def identity(self, a: Attempt, pid: int | None, pid_start_time: float | None,
                 node: str | None, *, running: bool = False) -> None:
        """Who the attempt's child is (and, `running`, that it began the work)."""
        del a, pid, pid_start_time, node, running

    def in_tool(self, a: Attempt, tool: str | None) -> None:
        """A thread child of `a` entered the side-effect tool call `tool` (None: left it)."""
        del a, tool

    def charged(self, delegation_id: str, attempt_id: str, usage: Usage,
                session: tuple[str, SessionTotals] | None = None, progress: int = 0) -> None:
        """`usage` charged by the attempt; `session`: the agent CLI session it was charged
        in and what it adds to that session's totals, `progress` the charge's progress
        count (both kept with the charge)."""
        del delegation_id, attempt_id, usage, session, progress

    def charged_late(self, attempt_id: str, usage: Usage, progress: int) -> None:
        """A charge of an attempt this host lost with its lease, written whoever owns its
        delegation now (docs/design.md, "Spend is a fact, not a decision")."""
        del attempt_id, usage, progress

    def usage_of(self, attempt_ids: Iterable[str]) -> dict[str, Usage]:
        """What the store holds as charged by each attempt (none in memory)."""
        del attempt_ids
        return {}

    @property
    def lease_s(self) -> float | None:
        """The host's lease on a shared store (None: the host holds none)."""
        return None

    def session_totals(self, session_id: str) -> SessionTotals | None:
        """What a CLI session was charged, as the store keeps it: None in memory."""
        del session_id
        return None

    def partial(self, d: Delegation, attempt_id: str, item: Any) -> None:
        del d, attempt_id, item

    def attempt_ended(self, record: AttemptRecord) -> None:
        del record

    def release_once_ended(self, attempt_id: str, release: Callable[[], object]) -> None:
        """`release()` (what a gone worker left behind, removed) once the attempt's end
        is committed. Without a store nothing was left behind: at once."""
        del attempt_id
        release()

    def retry_scheduled(self, d: Delegation, a: Attempt, delay: float, agent: str) -> None:
        del d, a, delay, agent

    def settled(self, d: Delegation, summary: Summary | Settlement,
                resolve: Callable[[], object]) -> None:
        """The summary (as decided: nothing makes it here); `resolve()` (the handle
        resolving) runs once it is kept: at once."""
        del d, summary
        resolve()

    def summary(self, delegation_id: str) -> Summary | None:
        """A settled summary the store keeps: none here."""
        del delegation_id
        return None

    def by_key(self, key: str) -> StoredDelegation | None:
        """The stored delegation of `key`: none here."""
        del key
        return None

    def epoch(self, delegation_id: str) -> int:
        """The delegation's epoch (`ctx.fence`): 1 in memory, where it never moves."""
        del delegation_id
        return 1

    def commit_now(self) -> bool:
        """Commit what is buffered; True: nothing is."""
        return True

    def end_turn(self, waiting: int) -> None:
        """The mailbox's turn ended with `waiting` messages queued: nothing to commit."""
        del waiting

    def fence(self) -> list[Delegation]:
        """This host's lease on a shared store is lost: nothing more is written (in
        memory, nothing ever is, and nothing waits for a commit)."""
        return []

    def unfence(self) -> None:
        """The host joined its shared store again: its writes reach the store again."""

    @property
    def writable(self) -> bool:
        return True


class Durable(MemoryDurable):
    """Writes of one Zeus to its store, in clock time converted to the wall clock."""

    def __init__(self, store: Store, clock: Clock, events: EventLog) -> None:
        self.store: Store = store
        self._clock = clock
        self._events = events
        self._dirty = False
        self._resolve: list[Callable[[], object]] = []  # handles waiting for the commit
        self._held = 0  # turns whose writes wait for the next commit
        self._uncommitted: dict[str, Summary] = {}  # settled since the last commit
        self.fenced = False  # the host's lease on a shared store is lost: nothing is written
        self._settling: list[Delegation] = []  # settled since the last commit
        self._shared = isinstance(store, SharedStore)
        self._late = False  # late charges wait to be written (a shared store's)
        self._late_asked = -math.inf  # until when a turn to write them again is asked for
        self._release_on_end: dict[str, Callable[[], object]] = {}  # by attempt id
        self._release_on_commit: list[Callable[[], object]] = []  # its end buffered

    def wall(self, when: float) -> float:
        """Clock time `when` as wall-clock time (epoch seconds), as the store keeps time."""
        return self._clock.wall() + (when - self._clock.now())

    # -- writes (buffered until the turn ends, or the next `commit_now`) -------------------

    def required(self, what: str, why: str = "") -> Store:
        del what, why
        return self.store

    def recorded(self, d: Delegation, *, key: str | None, ordinal: int | None,
                 policy: Callable[[Delegation], dict[str, Any]]) -> None:
        self.store.record_delegation(
            d.id, key=key, parent_id=d.parent_id, ordinal=ordinal, agent=d.agent,
            brief=d.brief, policy=policy(d),
            deadline=None if d.deadline_cap is None else self.wall(d.deadline_cap),
            created=self.wall(d.dispatched_at),
        )
        self._dirty = True

    def attempt_started(self, d: Delegation, a: Attempt) -> bool:
        """The attempt, committed at once: no child starts that the store does not know.
        False when it could not be committed: the child must not start. On a shared
        store whose database does not answer (a restart, say), the commit is tried again
        with backoff until the lease ends: a database back within the lease fails no
        attempt (Zeus's thread waits meanwhile; what runs goes on)."""
        self.store.attempt_started(a.id, delegation_id=d.id, number=a.number, agent=a.agent,
                                   started=self.wall(a.started_at), deadline=self.wall(a.deadline))
        self._dirty = True
        if self._commit(say=True):
            return True
        if self.lease_ends is None:
            return False
        pause = _FIRST_PAUSE_S
        while not self.fenced and (left := self.lease_ends() - time.monotonic()) > 0:
            time.sleep(min(pause, left))
            pause = min(2 * pause, _LAST_PAUSE_S)
            if self._commit(say=False):
                return True
        return False

    def identity(self, a: Attempt, pid: int | None, pid_start_time: float | None,
                 node: str | None, *, running: bool = False) -> None:
        """Who the attempt's child is, committed at once: recovery needs it to confirm the
        child gone before anything runs in its place. `running`: its child began to run
        the work, so its start and deadline are stored too (docs/design.md, "An
        attempt's clock"), with the turn's commit."""
        pgid = None
        if pid is not None:
            try:
                # Only a group the child leads (workers and command agents make their
                # own): a group it merely shares may hold processes that are not its.
                pgid = pid if os.getpgid(pid) == pid else None
            except OSError:
                pgid = None  # gone already: its pid and start time still tell
        if running:
            self.store.attempt_identity(a.id, pid=pid, pid_start_time=pid_start_time, pgid=pgid,
                                        node=node, started=self.wall(a.started_at),
                                        deadline=self.wall(a.deadline))
            self._dirty = True
            return
        self.store.attempt_identity(a.id, pid=pid, pid_start_time=pid_start_time, pgid=pgid,
                                    node=node)
        self._dirty = True
        self.commit_now()

    def in_tool(self, a: Attempt, tool: str | None) -> None:
        """With the turn's commit: a taker of a shared store then blocks the writer
        instead of running it again beside a thread it cannot stop."""
        self.store.attempt_in_tool(a.id, tool)
        self._dirty = True

    def charged(self, delegation_id: str, attempt_id: str, usage: Usage,
                session: tuple[str, SessionTotals] | None = None, progress: int = 0) -> None:
        self.store.charge(delegation_id, attempt_id, usage, session=session, progress=progress)
        self._dirty = True

    def charged_late(self, attempt_id: str, usage: Usage, progress: int) -> None:
        store = self.store
        if isinstance(store, SharedStore):  # (only a shared store fences a host)
            store.charge_late(attempt_id, usage, progress)
            self._late = True

    def _write_late(self) -> None:
        """The late charges, written at the turn's end (a fenced host's too); kept while
        the database cannot be reached, for a turn asked for soon: an idle host (all its
        work taken over) has no other turn to write them in."""
        store = self.store
        assert isinstance(store, SharedStore)
        try:
            store.write_late()
        except StoreError:
            now = self._clock.now()
            if self.retry_later is not None and now >= self._late_asked:
                self._late_asked = now + _LATE_AGAIN_S  # (one ask at a time will do)
                self.retry_later()
            return
        self._late = False

    def usage_of(self, attempt_ids: Iterable[str]) -> dict[str, Usage]:
        store = self.store
        if not isinstance(store, SharedStore):
            return {}  # one host: no other writes to its attempts
        return store.usage_of(attempt_ids)

    @property
    def lease_s(self) -> float | None:
        store = self.store
        return store.lease_s if isinstance(store, SharedStore) else None

    def session_totals(self, session_id: str) -> SessionTotals | None:
        return self.store.session_totals(session_id)

    def partial(self, d: Delegation, attempt_id: str, item: Any) -> None:
        self.store.partial(d.id, attempt_id, item)
        self._dirty = True

    def attempt_ended(self, record: AttemptRecord) -> None:
        self.store.attempt_ended(record.id, outcome=record.outcome.value,
                                 ended=self._clock.wall(), error=record.error, record=record)
        self._dirty = True
        if (release := self._release_on_end.pop(record.id, None)) is not None:
            self._release_on_commit.append(release)

    def release_once_ended(self, attempt_id: str, release: Callable[[], object]) -> None:
        """`release()` once the attempt's end is committed: what its gone worker left
        behind (its `Finished` among it, adopted) is removed only then, so that a host
        that dies before reads it again instead of finding the attempt open and its
        worker gone (docs/design.md, "It takes nothing with it")."""
        self._release_on_end[attempt_id] = release

    def retry_scheduled(self, d: Delegation, a: Attempt, delay: float, agent: str) -> None:
        self.store.retry_scheduled(d.id, after_attempt=a.id, due=self._clock.wall() + delay,
                                   agent=agent)
        self._dirty = True

    def settled(self, d: Delegation, summary: Summary | Settlement,
                resolve: Callable[[], object]) -> None:
        """The summary; `resolve()` (the handle resolving) runs once it is committed, by
        the next commit: when the mailbox has no more waiting, or before an attempt
        starts, so that the settlements of a busy turn share one commit. A commit that
        fails resolves them all the same, on a store of one host (the host is never kept
        waiting on a disk), not on a shared one (`commit_now`). Writing it is its first
        read: the `Summary` is made here, and the handle gets that one."""
        if isinstance(summary, Settlement):
            summary = summary.summary()
        self.store.settled(d.id, status=summary.status, summary=summary,
                           at=self._clock.wall())
        self._dirty = True
        self._resolve.append(resolve)
        self._uncommitted[d.id] = summary
        self._settling.append(d)

    def summary(self, delegation_id: str) -> Summary | None:
        """A settled summary: the store's, or one settled since the last commit (a replayed
        orchestrator may ask for it in the same turn)."""
        pending = self._uncommitted.get(delegation_id)
        return pending if pending is not None else self.store.summary(delegation_id)

    def by_key(self, key: str) -> StoredDelegation | None:
        return self.store.by_key(key)

    def epoch(self, delegation_id: str) -> int:
        """The delegation's epoch on the store (grown by each takeover)."""
        return self.store.epoch(delegation_id)

    # -- commits ------------------------------------------------------------------------------

    def commit_now(self) -> bool:
        """Commit what is buffered; False (and said in the journal) when the store cannot
        be written: the writes stay buffered for the next commit. The settlements waiting
        for it are made known all the same (the host is never kept waiting on a disk),
        except on a shared store: there another host may take the delegations over while
        this one cannot write, so a settlement is known only once it is stored."""
        return self._commit(say=True)

    def _commit(self, *, say: bool) -> bool:
        """`commit_now`; `say` False: a failure to reach the store is not journalled again
        (a wait that tries again)."""
        if not self._dirty:
            return True
        if self.fenced:
            return False
        try:
            self.store.commit()
        except StoreFenced as exc:  # another host owns these delegations now
            if self.on_fenced is not None:
                self.on_fenced(str(exc))  # fences this Durable: nothing is resolved here
            if not self.fenced:
                self._failed(str(exc))
            return False
        except StoreError as exc:
            if say:
                self._failed(str(exc))
            return False
        self._uncommitted.clear()
        self._made_known()
        self._dirty = False
        release, self._release_on_commit = self._release_on_commit, []
        for each in release:
            each()
        return True

    def _failed(self, error: str) -> None:
        self._events.emit("zeus.internal_error", message="store", error=error)
        self._held = 0
        if not self._shared:
            self._made_known()
        elif self._resolve and self.retry_later is not None:
            self.retry_later()  # settlements wait on it: try again soon, messages or not

    def _made_known(self) -> None:
        self._held = 0
        self._settling = []
        resolve, self._resolve = self._resolve, []
        for settle in resolve:
            settle()

    def end_turn(self, waiting: int) -> None:
        """The mailbox's turn ended with `waiting` messages queued: one commit for what
        the turn wrote, unless more messages wait and the settlements held back for the
        commit are few and recent (then the next turns' writes join it)."""
        if self._late:
            self._write_late()
        if not self._dirty:
            return
        if waiting and len(self._resolve) < HOLD_AT_MOST and self._held < HOLD_AT_MOST:
            self._held += 1
            return
        self.commit_now()

    def fence(self) -> list[Delegation]:
        """This host's lease is lost (Zeus's thread): nothing more reaches the store, and
        what waited for a commit is let go unwritten: the delegations settled here whose
        settlement was not committed (their handles must wait for their new host's)."""
        self.fenced = True
        self._dirty = False
        self._held = 0
        store = self.store
        if isinstance(store, SharedStore):
            store.keep_late()
            self._late = store.late_pending
        self._resolve.clear()
        self._uncommitted.clear()
        settling, self._settling = self._settling, []
        return settling

    def unfence(self) -> None:
        """The host joined its shared store again as a new incarnation (Zeus's thread):
        its writes reach the store again, from nothing buffered but its late charges."""
        self.fenced = False
        self._dirty = False
        store = self.store
        self._late = isinstance(store, SharedStore) and store.late_pending

    @property
    def writable(self) -> bool:
        return not self.fenced and self.store.writable
