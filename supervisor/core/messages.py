"""The messages Zeus's mailbox takes from the host and from its timers.

(What children send is `actors`' protocol.) Frozen slotted dataclasses: few,
and not on the hot path.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from actors import Brief, Summary
from actors.mail import Mail
from supervisor.core.handle import Settled
from supervisor.rules.groups import Group

__all__ = [
    "AttemptDue",
    "BackoffOver",
    "Cancel",
    "Deliver",
    "Dispatch",
    "ForceSettle",
    "GraceOver",
    "Hold",
    "Ping",
    "ReviewDone",
    "Snapshot",
    "StopAll",
]


@dataclass(frozen=True, slots=True)
class Dispatch:
    delegation_id: str
    brief: Brief
    settled: Settled
    parent_id: str | None = None
    group: Group | None = None


@dataclass(frozen=True, slots=True)
class Cancel:
    delegation_id: str
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Deliver:
    """The owner's message for the delegation's running child (`handle.send`)."""

    delegation_id: str
    mail: Mail


@dataclass(frozen=True, slots=True)
class AttemptDue:
    """The attempt's timer: check its deadline and whether it went stale."""

    attempt_id: str
    due_at: float | None = None  # when the timer fell due (clock time): the lag is measured


@dataclass(frozen=True, slots=True)
class GraceOver:
    attempt_id: str


@dataclass(frozen=True, slots=True)
class BackoffOver:
    delegation_id: str


@dataclass(frozen=True, slots=True)
class ReviewDone:
    """A task's review settled (sent by the review delegation's settle callback)."""

    delegation_id: str
    review: Summary


@dataclass(frozen=True, slots=True)
class Snapshot:
    pass


@dataclass(frozen=True, slots=True)
class Ping:
    pass


@dataclass(frozen=True, slots=True)
class Hold:
    """Hold the mailbox until `release` is set (tests and benchmarks queue messages behind it)."""

    release: threading.Event
    held: threading.Event


@dataclass(frozen=True, slots=True)
class StopAll:
    reason: str


@dataclass(frozen=True, slots=True)
class ForceSettle:
    reason: str
