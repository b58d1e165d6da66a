"""A settled delegation's summary as Zeus decided it, made into its `Summary` where it
is first read. Zeus's actor thread decides every field (`state.decide_summary`); the
reader's thread (the host's, for `handle.result()` and `await`) builds and validates the
model, once."""

from __future__ import annotations

import threading
from typing import Any

from actors import Status, Summary, Usage

__all__ = ["Settlement", "fallback_summary"]


_MAKING = threading.Lock()  # taken only as a settlement's summary is kept, never held long


class Settlement:
    """A delegation's summary as Zeus decided it at settlement, made into its `Summary`
    where it is first read (`summary()`, any thread, once).

    Every field, the status first, is decided in Zeus's actor thread (`decide_summary`);
    what is left for the reader is the model's construction and validation: the host's
    thread for `handle.result()` and `await`, Zeus's for a done-callback or a store's
    write. The fields the journal's `delegation.settled` says are kept as attributes.
    """

    __slots__ = ("_fields", "_made", "duration_s", "error", "status", "timeout_kind", "usage")

    def __init__(self, fields: dict[str, Any]) -> None:
        self._fields: dict[str, Any] | None = fields
        self._made: Summary | None = None
        self.status: Status = fields["status"]
        self.error: str | None = fields["error"]
        self.duration_s: float = fields["duration_s"]
        self.timeout_kind: str | None = fields["timeout_kind"]
        self.usage: Usage = fields["usage"]

    def summary(self) -> Summary:
        """The `Summary`, made on the first call (in the calling thread); the same one to
        every caller. One that fails validation is the summary that says so, with the
        status and attempts decided."""
        made = self._made
        if made is not None:
            return made
        fields = self._fields
        if fields is None:  # another thread made it just now (`_made` is set first)
            assert self._made is not None
            return self._made
        try:
            summary = Summary(**fields)
        except Exception as exc:  # noqa: BLE001 - a delegation settles exactly once, whatever
            summary = fallback_summary(fields, exc)
        with _MAKING:  # two first readers at once: both get the one kept first
            if self._made is None:
                self._made = summary
                self._fields = None  # what it refers to now lives in the summary alone
            return self._made


def fallback_summary(fields: dict[str, Any], exc: BaseException) -> Summary:
    """The summary of a delegation whose own could not be built: its status, attempts and
    spend as decided, and why."""
    return Summary(
        id=fields["id"], agent=fields["agent"], scope=fields["scope"], status=fields["status"],
        attempts=fields["attempts"], usage=fields["usage"],
        error=f"its summary could not be built: {type(exc).__name__}: {exc}",
    )
