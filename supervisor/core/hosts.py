"""This host among several on a shared store: what it does when its lease is lost, when
it joins the store again as a new incarnation, and when it takes over the delegations
of a host whose lease ended (docs/design.md, "Several hosts"). Owned by Zeus's actor
thread; the lease keeper's thread only sends it messages (`LeaseLost`, `Rejoined`,
`TakeOver`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from actors import Brief
from supervisor.core.handle import DelegationFuture
from supervisor.core.lease import TAKE_MARGIN_S
from supervisor.core.messages import Dispatch, RetryStore
from supervisor.core.state import Delegation
from supervisor.errors import StoreError, StoreFenced, UnknownAgent
from supervisor.store import SharedStore
from supervisor.store.shared import Joined

if TYPE_CHECKING:
    from supervisor.core.supervisor import Supervisor

__all__ = ["COMMIT_AGAIN_S", "HostLife", "HostTerms"]

# How soon a commit that failed is tried again while settlements wait for it.
COMMIT_AGAIN_S = 0.25

KeepHandle = Callable[[str, DelegationFuture], object]
# Hands the futures of the host's own delegations to whoever resolves them from the
# store once the host that takes them over settles them.
WatchElsewhere = Callable[[str, DelegationFuture], None]


@dataclass(frozen=True, slots=True)
class HostTerms:
    """What Zeus's thread knows of its host's lease (made in the host's thread)."""

    host_id: str
    # When, as the keeper believes (monotonic), the children stop for want of a renewal:
    # from then on this host decides nothing for them.
    lease_ends: Callable[[], float]
    watch_elsewhere: WatchElsewhere


class HostLife:
    """This host's part in a shared store's life, run in Zeus's actor thread."""

    def __init__(self, sup: Supervisor, terms: HostTerms) -> None:
        self._sup = sup
        self.terms = terms
        self.host_id = terms.host_id
        self.lost: str | None = None  # why the lease was lost, once it is
        self.stopping = False  # Zeus stops: a new incarnation takes nothing on
        # Roots dispatched here that no commit wrote when the lease was lost (no child of
        # them started: an attempt starts only once committed), with their keys: they run
        # here again once this host joins the store again.
        self._unrecorded: list[tuple[Delegation, str | None]] = []
        sup.durable.on_fenced = self.lease_lost
        sup.durable.retry_later = lambda: sup.timers.after(COMMIT_AGAIN_S, RetryStore())
        sup.durable.lease_ends = terms.lease_ends  # an attempt's record waits no longer

    def _store(self, what: str) -> SharedStore:
        store = self._sup.durable.required(what)
        assert isinstance(store, SharedStore)  # only a shared store has a lease
        return store

    def check(self, now: float) -> None:
        """Before Zeus decides anything (its thread): a lease that ran out unrenewed (its
        children told to stop by it) is lost, whatever the keeper's thread has yet to say:
        a host that was frozen or cut off wakes with its children's ends in its mailbox,
        and decides nothing for them."""
        if self.lost is None and now >= self.terms.lease_ends():
            self.lease_lost("the lease ran out before it was renewed")

    # -- the lease lost ---------------------------------------------------------------------

    def lease_lost(self, why: str) -> None:
        """Fence everything: no child of this host runs on and nothing more is written.
        The host's handles resolve when the taker settles their delegations."""
        if self.lost is not None:
            return
        self.lost = why
        sup = self._sup
        sup.accepting = False
        uncommitted = sup.durable.fence()
        unrecorded = self._store("fence").unrecorded()
        roots = [d for d in [*sup.tree.delegations.values(), *uncommitted]
                 if d.parent_id is None]
        sup.events.emit("host.lease_lost", host=self.host_id, why=why,
                        delegations=len(sup.tree.delegations))
        sup.fence_all()
        for d in roots:
            if d.settled.done():
                continue
            if d.id in unrecorded:  # no other host knows it: it runs here again
                self._unrecorded.append((d, unrecorded[d.id]))
            else:
                self.terms.watch_elsewhere(d.id, d.settled)

    # -- joined again -----------------------------------------------------------------------

    def rejoined(self, joined: Joined) -> None:
        """This fenced host is the store's new incarnation `joined` (its lease keeper
        registered it once the database answered): it writes again, under the new id, and
        takes over what its old incarnation left like any taker, once that lease and its
        ladder's bound are past (the keeper names it then). What it dispatched that no
        commit wrote is dispatched again here, under its own id and key."""
        if self.lost is None:
            self.lease_lost("the lease was lost before this host joined again")
        sup = self._sup
        store = self._store("join again")
        was = self.host_id
        store.become(joined)
        sup.durable.unfence()
        self.host_id = joined.host_id
        self.lost = None
        sup.events.emit("host.rejoined", host=joined.host_id, was=was)
        if self.stopping:
            return
        sup.accepting = True
        unrecorded, self._unrecorded = self._unrecorded, []
        for d, key in unrecorded:
            try:
                ours = key is None or store.reclaim_key(key, d.id, was)
            except StoreError:
                ours = False
            if not ours:  # a taker of the old incarnation dispatches it: it resolves so
                self.terms.watch_elsewhere(d.id, d.settled)
                continue
            try:
                sup.on_dispatch(Dispatch(d.id, d.brief, d.settled, key=key))
            except UnknownAgent as exc:  # unregistered meanwhile: it settles so
                d.settled.set_exception(exc)

    # -- taking over ------------------------------------------------------------------------

    def _dispatch_claims(self, host: str, claims: Sequence[tuple[str, str, Brief]],
                         keep_handle: KeepHandle) -> None:
        """Dispatch here, under its own id, each key the dead `host` claimed and never
        dispatched: a handle another host took on that id resolves when it settles."""
        sup = self._sup
        for key, delegation_id, brief in claims:
            sup.events.emit("delegation.taken_over", delegation_id=delegation_id,
                            agent=brief.agent, from_host=host, by=self.host_id)
            settled = DelegationFuture()
            keep_handle(delegation_id, settled)
            try:
                sup.on_dispatch(Dispatch(delegation_id, brief, settled, key=key))
            except UnknownAgent as exc:  # the routing here lacks its agent: it settles so
                settled.set_exception(exc)

    def take_over(self, hosts: Sequence[str], keep_handle: KeepHandle) -> None:
        """Claim what each expired host left open, tree by tree, as many as there are free
        slots, and recover it as a restart would: its children are gone (the lease and the
        ladder's bound have passed), so writers run again too. What one batch leaves is
        claimed at a later renewal, here or by another host. The store claims nothing of a
        host before its lease's end plus that host's own ladder's bound."""
        sup = self._sup
        if self.lost is not None or not sup.accepting:
            return
        for host in hosts:
            free = sup.free_slots()
            if free <= 0:
                break
            store = sup.durable.required("take over")
            assert isinstance(store, SharedStore)  # only a shared store has other hosts
            try:
                ids = store.take_over(host, limit=free, margin_s=TAKE_MARGIN_S)
                claims = store.take_claims(host, margin_s=TAKE_MARGIN_S)
            except StoreFenced as exc:  # this host's own lease is gone meanwhile
                self.lease_lost(str(exc))
                break
            except StoreError as exc:
                sup.events.emit("zeus.internal_error", message="take_over", error=str(exc))
                continue
            self._dispatch_claims(host, claims, keep_handle)
            if not ids:
                continue
            opens = store.open_delegations_of(ids)
            for stored in opens:
                sd = stored.delegation
                sup.events.emit("delegation.taken_over", delegation_id=sd.id,
                                agent=sd.agent, from_host=host, by=self.host_id)
            sup.recovery.recover(opens, keep_handle, writers_stopped=True)
            sup.events.emit("host.taken_over", host=host, by=self.host_id,
                            delegations=len(ids))
