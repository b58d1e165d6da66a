"""Every error Zeus raises, under one base class. Messages say what to fix."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from actors import DelegationRefused as _ChildDelegationRefused

__all__ = [
    "DelegationRefused",
    "KeyConflict",
    "NotBlocked",
    "RoutingError",
    "StoreBusy",
    "StoreError",
    "StoreFenced",
    "SupervisorError",
    "UnknownAgent",
    "UnknownDelegation",
    "ZeusStopped",
    "did_you_mean",
]


class SupervisorError(Exception):
    """Base class of the errors Zeus raises to its host."""


class RoutingError(SupervisorError):
    """routing.yml (or a routing dict) is invalid; the message names file, key path and line."""


class UnknownAgent(SupervisorError, KeyError):
    """A brief names an agent that routing.yml does not define and nobody registered."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class UnknownDelegation(SupervisorError, KeyError):
    """An id Zeus never had (or, for `zeus.handle`, one settled too long ago to keep)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DelegationRefused(SupervisorError, _ChildDelegationRefused):
    """A delegation was refused (a leaf delegating, max_depth, a target it may not use)."""


class ZeusStopped(SupervisorError):
    """The supervisor was stopped; it takes no new delegations."""


class StoreError(SupervisorError):
    """The store cannot be used: not a Zeus store, corrupt, of a newer schema, or not
    writable. The message names the file and what to do."""


class StoreBusy(StoreError):
    """Another Zeus, still alive, owns the store; the message names it (pid, host, since)."""

    def __init__(self, message: str, *, pid: int, host: str, since: float) -> None:
        super().__init__(message)
        self.pid = pid
        self.host = host
        self.since = since


class StoreFenced(StoreError):
    """This host no longer owns what it tried to write (its lease was lost or taken over,
    or a delegation was claimed by another host): nothing of that commit was written.
    The host must stop its children and write nothing more; `host_id` names it."""

    def __init__(self, message: str, *, host_id: str) -> None:
        super().__init__(message)
        self.host_id = host_id


class NotBlocked(SupervisorError):
    """`zeus.resume` or `zeus.resolve` on a delegation that does not wait for a person (it
    runs, or settled otherwise); the message says what it is and what to do instead."""


class KeyConflict(SupervisorError):
    """A key was given again with a different brief; `fields` names the fields that differ."""

    def __init__(self, key: str, delegation_id: str, fields: tuple[str, ...]) -> None:
        super().__init__(
            f"key {key!r} already names delegation {delegation_id} with a different brief "
            f"({', '.join(fields)} differ): give the same brief to get that delegation "
            "back, or a new key for new work"
        )
        self.key = key
        self.delegation_id = delegation_id
        self.fields = fields


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the known name closest to `name`, else an empty string."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
