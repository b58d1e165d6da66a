"""A settled delegation's summary as Zeus decided it, made into its `Summary` where it
is first read. Zeus's actor thread decides every field (`state.decide_summary`); the
reader's thread (the host's, for `handle.result()` and `await`) builds and validates the
model, once. An ended attempt's record likewise (`AttemptEnd`, `state.attempt_record`):
made into its `AttemptRecord` with the summary, or for a store's write or a snapshot."""

from __future__ import annotations

import threading
from typing import Any

from actors import AttemptOutcome, AttemptRecord, Status, Summary, Usage

__all__ = ["AttemptEnd", "Settlement", "as_record", "fallback_summary"]


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
            summary = Summary(**{**fields, "attempts": [as_record(r) for r in fields["attempts"]]})
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
        attempts=[as_record(r) for r in fields["attempts"]], usage=fields["usage"],
        error=f"its summary could not be built: {type(exc).__name__}: {exc}",
    )


class AttemptEnd:
    """An ended attempt's record as Zeus decided it (`state.attempt_record`, every field
    in Zeus's actor thread), made into its `AttemptRecord` where it is first read
    (`record()`, any thread): with the summary, by its reader; in Zeus's thread for a
    store's write or a snapshot. Its fields read as the record's do (`end.error`)."""

    __slots__ = ("_made", "error", "fields", "outcome")

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields  # the record's, by name (read-only)
        self._made: AttemptRecord | None = None
        # What Zeus reads again (the next attempt's `previous_error`, the summary's error).
        self.outcome: AttemptOutcome = fields["outcome"]
        self.error: str | None = fields["error"]

    def __getattr__(self, name: str) -> Any:
        """Any other field of the record, as decided (only names the slots lack come here)."""
        if name.startswith("_") or name == "fields":  # (not set yet: a copy being made)
            raise AttributeError(name)
        try:
            return self.fields[name]
        except KeyError:
            raise AttributeError(name) from None

    def record(self) -> AttemptRecord:
        """The `AttemptRecord`, made on the first call. Two threads reading it first at once
        may each make one: equal records (the summary's own is made once, with it)."""
        made = self._made
        if made is None:
            fields = self.fields
            try:
                made = AttemptRecord(**fields)
            except Exception as exc:  # noqa: BLE001 - e.g. a child's note that is not text
                made = AttemptRecord(
                    id=fields["id"], agent=fields["agent"], outcome=fields["outcome"],
                    duration_s=fields["duration_s"],
                    error=f"its record could not be built: {type(exc).__name__}: {exc}")
            self._made = made
        return made


def as_record(record: AttemptRecord | AttemptEnd) -> AttemptRecord:
    """`record` as an `AttemptRecord` (one taken back from a store is one already)."""
    return record.record() if isinstance(record, AttemptEnd) else record
