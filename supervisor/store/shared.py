"""The interface of a store that several live hosts share (docs/design.md, "Several
hosts"): `SharedStore` (a `Store` with hosts, leases and takeover), the lease a host keeps
from a thread of its own (`HostLease`, its `Renewal`), and the word of settlements that
the thread watching other hosts' delegations waits on (`SettledFeed`). PostgreSQL's
store fills it (supervisor/store/postgres.py)."""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from actors import Brief, Summary, Usage
from supervisor.store.base import OpenDelegation, Store

__all__ = ["ID_BLOCK", "HostLease", "Joined", "Renewal", "SettledFeed", "SharedStore"]


@dataclass(frozen=True, slots=True)
class Renewal:
    """One renewal of a host's lease: the seconds it has left by the database's clock,
    the hosts whose leases ended more than the asked margin ago and still own open
    delegations (what this host may take over), and when the next one will have."""

    left_s: float
    expired: tuple[str, ...] = ()
    # Seconds until the next other host's lease, plus the margin, ends (one that still
    # owns open delegations): when to look again, rather than a renewal period later.
    next_s: float | None = None


@dataclass(frozen=True, slots=True)
class Joined:
    """A fenced host registered again as a new incarnation (docs/design.md, "The
    database itself fails"): its new id, its number in the store (`hosts.n`), when it
    joined (wall-clock epoch seconds, the database's clock) and the seconds its new
    lease has."""

    host_id: str
    n: int
    since: float
    left_s: float


class SettledFeed(abc.ABC):
    """Word from a shared store that delegations settled (PostgreSQL's `LISTEN`), on a
    connection of its own: waited on by the thread that watches other hosts' delegations
    (supervisor/core/remote.py), which still polls the store as a backstop."""

    @abc.abstractmethod
    def wait(self, timeout_s: float) -> set[str] | None:
        """The delegations said to have settled within `timeout_s` (empty: none). None
        when there is no word to trust (the feed was lost or just made again): the
        caller looks at the store itself."""

    @abc.abstractmethod
    def close(self) -> None: ...


class HostLease(abc.ABC):
    """A host's lease on a shared store, on a connection of its own: the lease keeper's
    thread renews it, the thread that watches other hosts' delegations reads through it
    (each call takes the connection's lock), while the store serves Zeus's thread."""

    @abc.abstractmethod
    def keep(self, margin_s: float) -> Renewal | None:
        """Renew the lease and name the hosts to take over (their leases ended more than
        their own ladder's bound plus `margin_s` ago), in one statement; None when the
        lease is lost (it ended, or another host took it). `StoreError` when the
        database cannot be reached."""

    @abc.abstractmethod
    def summaries(self, delegation_ids: Sequence[str]) -> dict[str, Summary]:
        """The settled summaries among `delegation_ids` (any host's)."""

    @abc.abstractmethod
    def exists(self, delegation_id: str) -> bool:
        """Whether any host of the store dispatched `delegation_id` (recorded or claimed)."""

    @abc.abstractmethod
    def claim_key(self, key: str, delegation_id: str,
                  brief: Brief) -> tuple[str, Brief, bool]:
        """Claim `key` for the delegation about to be dispatched, committed at once: the
        key's delegation (this one, or the one another host claimed first), its brief,
        and whether this host dispatches it (its own claim, or a dead host's claim of the
        same brief that was never dispatched, taken over under that claim's id)."""

    def rejoin(self) -> Joined | None:
        """Register this host again as a new incarnation with a lease of its own, on this
        connection, once its lease was lost: the keeper renews that lease from then on,
        and the host takes over what its old incarnation left like any taker. None: the
        store gives no new incarnation. `StoreError` while the database does not answer."""
        return None

    def settled_feed(self) -> SettledFeed | None:
        """Word of settlements as they commit, on a connection of its own (called in the
        watching thread); None: the store gives none, so the watcher polls."""
        return None

    @abc.abstractmethod
    def close(self) -> None: ...


class SharedStore(Store):
    """A store that several live hosts share, each with a lease (PostgreSQL). Zeus's
    thread uses it as a `Store`; `lease()` is for the lease keeper's thread."""

    host_id: str
    lease_s: float
    bound_s: float  # its children's ladder's bound, as registered: a taker waits past it

    @abc.abstractmethod
    def take_claims(self, host_id: str, *, margin_s: float) -> list[tuple[str, str, Brief]]:
        """The keys the dead host `host_id` claimed and never dispatched, made this host's
        to dispatch under their claimed ids (key, id, brief)."""

    @abc.abstractmethod
    def lease(self) -> HostLease:
        """This host's lease, on a connection of its own (one per store)."""

    @abc.abstractmethod
    def take_over(self, host_id: str, limit: int, *, margin_s: float = 0.0) -> list[str]:
        """Claim at most `limit` open delegation trees of the expired host `host_id`
        (epochs bumped, committed at once); the ids claimed, parents first."""

    @abc.abstractmethod
    def open_delegations_of(self, ids: Iterable[str]) -> list[OpenDelegation]:
        """The open delegations among `ids`, as `open_delegations` gives them."""

    def unrecorded(self) -> dict[str, str | None]:
        """The delegations this host recorded that no commit has written (a fenced host's
        that no other host knows), each with its key."""
        return {}

    @abc.abstractmethod
    def become(self, joined: Joined) -> None:
        """Be the new incarnation `joined` of this fenced host (its lease keeper registered
        it): nothing held or buffered but its late charges, writable again."""

    # -- spend is a fact (docs/design.md, "Spend is a fact, not a decision") ----------------
    @abc.abstractmethod
    def keep_late(self) -> None:
        """This host is fenced: the charges buffered for commits that will never land are
        kept as late charges."""

    @abc.abstractmethod
    def charge_late(self, attempt_id: str, usage: Usage, progress: int) -> None:
        """A charge of an attempt this host lost with its lease (its child charged on): kept
        for `write_late`, which writes it whoever owns the delegation now, once."""

    @property
    @abc.abstractmethod
    def late_pending(self) -> bool:
        """Whether late charges wait for `write_late` (a fenced commit's charges too)."""

    @abc.abstractmethod
    def write_late(self) -> None:
        """Write the late charges, in a transaction of their own that no fence refuses
        (each counted once: only above its attempt's `charged_progress`); `StoreError`,
        keeping them, while the database cannot be reached."""

    @abc.abstractmethod
    def usage_of(self, attempt_ids: Iterable[str]) -> dict[str, Usage]:
        """What the store holds as charged by each of `attempt_ids` (a host that took them
        over counts what another host wrote late)."""

    @abc.abstractmethod
    def reclaim_key(self, key: str, delegation_id: str, was: str) -> bool:
        """Make this incarnation's the claim of `key` for `delegation_id` that its earlier
        incarnation `was` made and never recorded; False when a taker of `was` has it."""

    @abc.abstractmethod
    def next_ids(self, agent: str) -> int:
        """Where the next block of `agent`'s delegation numbers that no other host of the
        store uses starts (exclusive; `ID_BLOCK` of them), committed at once: a store's
        first host gives `<agent>-1` on, the next one `<agent>-100001` on."""


# Delegation numbers a host of a shared store reserves at a time: `<agent>-<n>` stays
# unique across hosts.
ID_BLOCK = 100_000
