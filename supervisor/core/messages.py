"""The messages Zeus's mailbox takes from the host and from its timers.

(What children send is `actors`' protocol.) Slotted dataclasses, read-only by
convention: not frozen, as a frozen one costs about four times as much to build
(`object.__setattr__` per field), and `Dispatch` is built for every delegation.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from actors import Brief, Status, Summary
from actors.mail import Mail
from supervisor.core.handle import DelegationFuture
from supervisor.rules.groups import Group
from supervisor.store.shared import Joined

__all__ = [
    "AttemptDue",
    "AttemptsDue",
    "BackoffOver",
    "Burst",
    "Cancel",
    "Dispatch",
    "ForceSettle",
    "GraceOver",
    "Hold",
    "LeaseLost",
    "LookElsewhere",
    "OwnerMessage",
    "Ping",
    "Recover",
    "Rejoined",
    "Resolve",
    "Resume",
    "RetryStore",
    "ReviewDone",
    "Snapshot",
    "StopAll",
    "StoredLookup",
    "StoredSummary",
    "TakeOver",
]


@dataclass(slots=True)
class Dispatch:
    delegation_id: str
    brief: Brief
    settled: DelegationFuture
    parent_id: str | None = None
    group: Group | None = None
    key: str | None = None  # the host's idempotency key (`dispatch(brief, key=...)`)


@dataclass(slots=True)
class Burst:
    """The host's dispatches of one step of its event loop, taken in one turn, in order
    (`Outbox`, `core/zeus.py`)."""

    messages: list[object]


@dataclass(slots=True)
class Cancel:
    delegation_id: str
    reason: str | None = None


@dataclass(slots=True)
class OwnerMessage:
    """The owner's message for the delegation's running child (`handle.send`)."""

    delegation_id: str
    mail: Mail


@dataclass(slots=True)
class AttemptDue:
    """The attempt's timer: check its deadline and whether it went stale."""

    attempt_id: str
    due_at: float | None = None  # when the timer fell due (clock time): the lag is measured


@dataclass(slots=True)
class AttemptsDue:
    """The clock's one timer for the attempts' timers (`Timers`) rang: some fell due."""


@dataclass(slots=True)
class GraceOver:
    attempt_id: str


@dataclass(slots=True)
class BackoffOver:
    delegation_id: str


@dataclass(slots=True)
class ReviewDone:
    """A task's review settled (sent by the review delegation's settle callback)."""

    delegation_id: str
    review: Summary


@dataclass(slots=True)
class Snapshot:
    pass


@dataclass(slots=True)
class Ping:
    pass


@dataclass(slots=True)
class Hold:
    """Hold the mailbox until `release` is set (tests and benchmarks queue messages behind it)."""

    release: threading.Event
    held: threading.Event


@dataclass(slots=True)
class Recover:
    """Recover what the store's last Zeus left open (once, as Zeus starts);
    `keep_handle(id, future)` gives the host a handle on each recovered root."""

    keep_handle: Callable[[str, DelegationFuture], object]


@dataclass(slots=True)
class LeaseLost:
    """This host's lease on a shared store is lost (from the lease keeper's thread): fence
    every child, write nothing more."""

    why: str


@dataclass(slots=True)
class Rejoined:
    """This fenced host registered again as a new incarnation (from the lease keeper's
    thread, after its `LeaseLost`): write and take over again under the new id."""

    joined: Joined


@dataclass(slots=True)
class TakeOver:
    """Hosts whose leases ended (from the lease keeper's thread): claim and recover what
    they left open; `keep_handle` as for `Recover`."""

    hosts: tuple[str, ...]
    keep_handle: Callable[[str, DelegationFuture], object]


@dataclass(slots=True)
class Resume:
    """A person runs a blocked delegation again (`zeus.resume`), with `note` (None: none
    given) for its agent; `keep_handle` as for `Recover`. Answers the host's new handle."""

    delegation_id: str
    who: str
    why: str
    keep_handle: Callable[[str, DelegationFuture], object]
    note: str | None = None


@dataclass(slots=True)
class Resolve:
    """A person settles a blocked stored delegation by hand (`zeus.resolve`). Answers the
    new summary."""

    delegation_id: str
    status: Status
    who: str
    note: str


@dataclass(slots=True)
class StoredLookup:
    """The stored delegation of a dispatch key (`StoredDelegation`, or None)."""

    key: str


@dataclass(slots=True)
class StoredSummary:
    """The stored summary of a settled delegation the host holds no handle on (or None)."""

    delegation_id: str


@dataclass(slots=True)
class LookElsewhere:
    """Count what the store holds as charged late by the attempts other hosts lost, of the
    delegations taken over here (`Supervisor.look_elsewhere`)."""


@dataclass(slots=True)
class RetryStore:
    """Try the store's buffered writes again (a dispatch while it could not be written)."""


@dataclass(slots=True)
class StopAll:
    reason: str


@dataclass(slots=True)
class ForceSettle:
    reason: str
