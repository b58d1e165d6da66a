"""`SharedHost`: what a host on a shared store runs beside Zeus's actor (docs/design.md,
"Several hosts"): the lease keeper's thread, and the watch of delegations that other
hosts run. Made, started and stopped in the host's thread; the keeper's callbacks only
put messages in Zeus's mailbox (`LeaseLost`, `Rejoined`, `TakeOver`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence

from actors.backends import Backend
from actors.backends.process.worker_lease import POLL_S
from supervisor.core.handle import DelegationFuture
from supervisor.core.hosts import HostTerms
from supervisor.core.lease import LeaseKeeper
from supervisor.core.messages import LeaseLost, Rejoined, TakeOver
from supervisor.core.remote import RemoteSettlements
from supervisor.errors import ZeusStopped
from supervisor.routing import AgentPolicy, Routing
from supervisor.store import SharedStore
from supervisor.store.shared import Joined

__all__ = ["SharedHost", "ladder_bound"]

KeepHandle = Callable[[str, DelegationFuture], object]


def ladder_bound(routing: Routing) -> float:
    """How long a child may take to stop once told (the longest `grace_s + term_s` of the
    routing, or of the defaults), with a worker's look at its lease and a margin: what a
    host's children stop ahead of its lease's end, and what a taker waits past it."""
    policies = [*routing.agents.values(), AgentPolicy.model_validate(routing.defaults)]
    return float(max(p.shutdown.grace_s + p.shutdown.term_s for p in policies)) + POLL_S + 0.25


class SharedHost:
    """A host's lease on a shared store and its view of the other hosts' delegations."""

    def __init__(self, store: SharedStore, *,
                 backends: Mapping[str, Backend], tell: Callable[[object], None],
                 keep_handle: KeepHandle) -> None:
        self.store = store
        self.bound_s = store.bound_s  # as the store registered it (ladder_bound)
        self._backends = backends
        self._tell = tell
        self._keep_handle = keep_handle
        self.lease = store.lease()
        self.remote = RemoteSettlements(self.lease.summaries, feed=self.lease.settled_feed)
        self.keeper = LeaseKeeper(self.lease, lease_s=store.lease_s, bound_s=self.bound_s,
                                  extend=self._extend, lost=self._lost,
                                  expired=self._expired, rejoined=self._rejoined)

    def terms(self) -> HostTerms:
        """What Zeus's thread is told of this lease."""
        keeper = self.keeper
        return HostTerms(self.store.host_id, lambda: keeper.child_deadline(keeper.until),
                         self.remote.watch)

    @property
    def lost(self) -> str | None:
        """Why this host's lease was lost, once it is."""
        return self.keeper.lost

    def start(self) -> None:
        """Bound the children by the lease from the first one on, then keep it."""
        self.keeper.start()

    def watch(self, delegation_id: str) -> DelegationFuture:
        """A future of another host's delegation, set once the store says it settled."""
        future = DelegationFuture()
        self.remote.watch(delegation_id, future)
        return future

    def stop(self) -> None:
        """Renew no more and watch no more (Zeus stops; the store then releases the lease)."""
        self.keeper.stop()
        self.remote.close("Zeus stopped before the delegation's host settled it")
        self.lease.close()

    # -- the keeper's callbacks (its thread) ----------------------------------------------

    def _extend(self, until: float | None) -> None:
        for backend in list(self._backends.values()):
            backend.extend_lease(until)

    def _lost(self, why: str) -> None:
        with contextlib.suppress(ZeusStopped):
            self._tell(LeaseLost(why))

    def _rejoined(self, joined: Joined) -> None:
        with contextlib.suppress(ZeusStopped):
            self._tell(Rejoined(joined))

    def _expired(self, hosts: Sequence[str]) -> None:
        with contextlib.suppress(ZeusStopped):
            self._tell(TakeOver(tuple(hosts), self._keep_handle))
