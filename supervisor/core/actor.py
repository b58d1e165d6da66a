"""The root actor: Zeus's mailbox. It owns the pykka inbox, `on_receive` and the table
of handlers; the decisions are the supervisor's (`core/supervisor.py`) and what
children report is handled by `core/reports.py`. Every handler runs in the actor's
thread, one message at a time."""

from __future__ import annotations

import queue
import random
import time
import traceback
from collections.abc import Callable
from typing import Any, cast

import pykka

from actors import Summary
from actors.backends import Backend
from actors.clock import Clock
from supervisor.core.durable import MemoryDurable
from supervisor.core.handle import DelegationFuture
from supervisor.core.hosts import HostLife, HostTerms
from supervisor.core.messages import (
    AttemptsDue,
    BackoffOver,
    Burst,
    Cancel,
    Dispatch,
    ForceSettle,
    GraceOver,
    Hold,
    LeaseLost,
    LookElsewhere,
    OwnerMessage,
    Ping,
    Recover,
    Rejoined,
    Resolve,
    Resume,
    RetryStore,
    ReviewDone,
    Snapshot,
    StopAll,
    StoredLookup,
    StoredSummary,
    TakeOver,
)
from supervisor.core.registry import Registry
from supervisor.core.reports import ChildReports
from supervisor.core.supervisor import Supervisor
from supervisor.core.tree_view import tree_snapshot
from supervisor.core.verbs import resolve, resume
from supervisor.journal.events import EventLog
from supervisor.store import Recovery, StoredDelegation

__all__ = ["ZeusActor"]


class ZeusActor(pykka.ThreadingActor):
    """The root supervisor's mailbox. All methods but `tell` run in the actor's thread."""

    # A host that forgets `zeus.stop()` must still be able to exit.
    use_daemon_thread = True

    @staticmethod
    def _create_actor_inbox() -> Any:
        """The mailbox: a `queue.SimpleQueue` (pykka uses only put, get, empty and we qsize),
        not pykka's `queue.Queue`, whose Condition costs a fifth of a no-op delegation's time
        in Zeus's thread (measured with yappi)."""
        return queue.SimpleQueue()

    def __init__(
        self,
        *,
        registry: Registry,
        clock: Clock,
        events: EventLog,
        backends: dict[str, Backend],
        rng: random.Random,
        durable: MemoryDurable,
        host: HostTerms | None = None,
    ) -> None:
        """`host`: on a shared store, what Zeus's thread knows of this host's lease."""
        super().__init__()
        self._events = events
        self.supervisor = Supervisor(registry=registry, clock=clock, events=events,
                                     backends=backends, rng=rng, tell=self.tell,
                                     queued=self.queued, durable=durable)
        self.host = None if host is None else HostLife(self.supervisor, host)
        self._durable = self.supervisor.durable
        self.reports = ChildReports(self.supervisor)
        sup = self.supervisor
        self._handlers: dict[type, Callable[[Any], Any]] = {
            **self.reports.handlers(),
            Dispatch: sup.on_dispatch,
            Cancel: sup.on_cancel,
            OwnerMessage: sup.on_owner_message,
            AttemptsDue: sup.on_attempts_due,
            GraceOver: sup.on_grace_over,
            BackoffOver: sup.on_backoff_over,
            ReviewDone: sup.on_review_done,
            StopAll: self._on_stop_all,
            ForceSettle: sup.on_force_settle,
            Snapshot: self._on_snapshot,
            Ping: lambda _msg: None,
            Hold: self._on_hold,
            Recover: self._on_recover,
            LeaseLost: self._on_lease_lost,
            TakeOver: self._on_take_over,
            Rejoined: self._on_rejoined,
            Resume: lambda m: resume(sup, m.delegation_id, who=m.who, why=m.why, note=m.note,
                                     keep_handle=m.keep_handle),
            Resolve: lambda m: resolve(sup, m.delegation_id, m.status, who=m.who, note=m.note),
            StoredLookup: self._on_stored_lookup,
            StoredSummary: self._on_stored_summary,
            RetryStore: self._on_retry_store,
            LookElsewhere: lambda _m: sup.look_elsewhere(),
        }

    def tell(self, message: object) -> None:
        """Put `message` in the mailbox (any thread: children report through it, and the
        timers); dropped once Zeus is gone."""
        try:  # noqa: SIM105 - not contextlib.suppress: the hot path of every child message
            self.actor_ref.tell(message)
        except pykka.ActorDeadError:
            pass

    def queued(self) -> int:
        """Messages waiting in the mailbox."""
        inbox = cast("queue.SimpleQueue[Any]", self.actor_inbox)
        return inbox.qsize()

    def on_receive(self, message: Any) -> Any:
        """Runs in the actor thread. Nothing may escape: pykka would stop every actor.

        A `Burst` (the host's dispatches of one step of its event loop) is one turn: its
        messages are handled in order, each as if it came alone, and one commit follows."""
        if self.host is not None:
            self.host.check(time.monotonic())
        try:
            if type(message) is Burst:
                for each in message.messages:
                    self._handle(each)
                return None
            return self._handle(message)
        finally:
            self._durable.end_turn(self.queued())  # one commit for what the turn wrote

    def _handle(self, message: Any) -> Any:
        handler = self._handlers.get(type(message))
        if handler is None:
            self._events.emit("zeus.unknown_message", type=type(message).__name__)
            return None
        try:
            return handler(message)
        except BaseException as exc:  # noqa: BLE001 - Zeus survives everything
            self._events.emit(
                "zeus.internal_error",
                message=type(message).__name__,
                error=f"{type(exc).__name__}: {exc}",
                traceback=traceback.format_exc(),
            )
            return exc if isinstance(exc, Exception) else None

    def _on_recover(self, msg: Recover) -> Recovery:
        return self.supervisor.recovery.recover_store(msg.keep_handle)

    def _on_lease_lost(self, msg: LeaseLost) -> None:
        if self.host is not None:
            self.host.lease_lost(msg.why)

    def _on_rejoined(self, msg: Rejoined) -> None:
        if self.host is not None:
            self.host.rejoined(msg.joined)

    def _on_stop_all(self, msg: StopAll) -> list[DelegationFuture]:
        if self.host is not None:  # a host that joins its store again meanwhile runs nothing
            self.host.stopping = True
        return self.supervisor.on_stop_all(msg)

    def _on_take_over(self, msg: TakeOver) -> None:
        if self.host is not None:
            self.host.take_over(msg.hosts, msg.keep_handle)

    def _on_stored_lookup(self, msg: StoredLookup) -> StoredDelegation | None:
        return self._durable.by_key(msg.key)

    def _on_stored_summary(self, msg: StoredSummary) -> Summary | None:
        return self._durable.summary(msg.delegation_id)

    def _on_retry_store(self, _msg: RetryStore) -> bool:
        return self._durable.commit_now()

    def _on_hold(self, msg: Hold) -> None:
        msg.held.set()
        msg.release.wait()

    def _on_snapshot(self, _msg: Snapshot) -> dict[str, Any]:
        sup = self.supervisor
        tree = sup.tree
        return tree_snapshot(tree.delegations, sup.clock.now(), queued=len(tree.queue),
                             settled=tree.settled_count, abandoned_threads=len(tree.fenced),
                             dropped=self.reports.dropped, lag=sup.timers.lag,
                             usage=sup.spending.tree_usage)
