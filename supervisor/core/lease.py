"""`LeaseKeeper`: this host's lease on a shared store, kept by a thread of its own.

Every `lease_s / 3` it renews the lease in one statement, which also names the
hosts whose leases ended more than the ladder's bound ago (docs/design.md,
"Several hosts"). The lease's end comes from the database's clock, as seconds
left; the keeper turns it into this machine's monotonic clock, measured from
before the statement was sent, so that the end it believes is never later than
the database's. It then pushes that end, less the ladder's bound, down to the
backends (`Backend.extend_lease`): a child that hears no extension by then stops
itself, so no child of a frozen or cut-off host is still running when its lease
ends.

A renewal the database refuses (the lease was taken), or no renewal before the
lease's end (the database away, this host cut off), is the lease lost: the keeper
says so once (`lost`) and renews that lease no more. Given `rejoined`, it then
registers the host again, as a new incarnation, once the database answers (tried
with backoff), says so (`rejoined`) and keeps the new lease from then on: no host
needs a restart after an outage (docs/design.md, "The database itself fails").
The callbacks run in the keeper's thread and must not block: Zeus hands them to
its actor as messages.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from supervisor.store import HostLease
from supervisor.store.shared import Joined

__all__ = ["TAKE_MARGIN_S", "LeaseKeeper"]

# How long past an expired host's lease and its own ladder's bound a taker waits more:
# the database's clock against the commits in flight when the lease ended.
TAKE_MARGIN_S = 0.25
# The longest wait between two tries while the database does not answer.
_RETRY_AT_MOST_S = 1.0


class LeaseKeeper:
    """Renews one host's lease, pushes its end to the children, and watches for expired
    leases of other hosts. `start()` runs it on the thread `zeus-lease`; tests call
    `tick()` themselves with a fake monotonic clock."""

    def __init__(
        self, lease: HostLease, *, lease_s: float, bound_s: float,
        extend: Callable[[float | None], None], lost: Callable[[str], None],
        expired: Callable[[Sequence[str]], None],
        rejoined: Callable[[Joined], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lease = lease
        self._rejoined = rejoined
        self.lease_s = lease_s
        self.bound_s = bound_s
        self._extend = extend
        self._lost = lost
        self._expired = expired
        self._monotonic = monotonic
        self.until = monotonic() + lease_s  # the lease's end as this host believes it
        self.lost: str | None = None  # why the lease was lost, once it is
        self.renewals = 0
        self._failures = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def every_s(self) -> float:
        return self.lease_s / 3

    def child_deadline(self, until: float) -> float:
        """When children must have begun to stop for a lease that ends at `until`: the
        ladder's bound before it, but never more than half the lease before it."""
        return until - min(self.bound_s, self.lease_s / 2)

    def tick(self) -> float | None:
        """One renewal (the keeper's thread). Seconds until the next; None once lost."""
        if self.lost is not None:
            return self._rejoin()
        sent = self._monotonic()
        try:
            renewal = self._lease.keep(TAKE_MARGIN_S)
        except Exception as exc:  # noqa: BLE001 - the database away: try again, within the lease
            self._failures += 1
            now = self._monotonic()
            if now >= self.until:
                self._lose(f"the lease could not be renewed before it ended ({exc})")
                return self._after_loss()
            backoff = min(_RETRY_AT_MOST_S, 0.05 * 2.0 ** self._failures, self.every_s)
            return max(0.0, min(backoff, self.until - now))
        if renewal is None:
            self._lose("the lease ended or another host took it over")
            return self._after_loss()
        self._failures = 0
        self.renewals += 1
        self.until = sent + renewal.left_s
        self._extend(self.child_deadline(self.until))
        if renewal.expired:
            self._expired(renewal.expired)
        if renewal.next_s is not None:  # another host's lease is about to be takeable
            return max(0.05, min(self.every_s, renewal.next_s + 0.05))
        return self.every_s

    def _after_loss(self) -> float | None:
        """Seconds until the first try to join again; None: no rejoining."""
        return None if self._rejoined is None else 0.05

    def _rejoin(self) -> float | None:
        """Once the lease is lost: the host registered again as a new incarnation (its
        lease begun, measured from before the statement was sent), said before the loss
        is taken back, so that Zeus's thread hears of the new host before any dispatch
        made under it. Seconds until the next try or renewal; None: no rejoining."""
        if self._rejoined is None:
            return None
        sent = self._monotonic()
        try:
            joined = self._lease.rejoin()
        except Exception:  # noqa: BLE001 - the database still away: try again
            self._failures += 1
            return min(_RETRY_AT_MOST_S, 0.05 * 2.0 ** self._failures, self.every_s)
        if joined is None:
            return None
        self._failures = 0
        self.until = sent + joined.left_s
        self._rejoined(joined)
        self.lost = None
        self._extend(self.child_deadline(self.until))
        return self.every_s

    def _lose(self, why: str) -> None:
        self.lost = why
        self._failures = 0  # the rejoin's backoff starts afresh
        self._extend(self._monotonic())  # every child: stop now
        self._lost(why)

    # -- the thread -----------------------------------------------------------------------

    def start(self) -> None:
        """Push the first lease's end to the children and run on a thread of its own."""
        self._extend(self.child_deadline(self.until))
        self._thread = threading.Thread(target=self._run, name="zeus-lease", daemon=True)
        self._thread.start()

    def _run(self) -> None:  # the zeus-lease thread
        wait: float | None = self.every_s
        while wait is not None and not self._stop.wait(wait):
            wait = self.tick()

    def stop(self) -> None:
        """Renew no more (Zeus stops: the store then releases the lease)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
