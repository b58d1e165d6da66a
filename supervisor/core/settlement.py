"""A settled delegation's summary as Zeus decided it, made into its `Summary` where it
is first read. Zeus's actor thread decides every field (`state.decide_summary`); the
reader's thread (the host's, for `handle.result()` and `await`) builds and validates the
model, once. An ended attempt's record likewise (`AttemptEnd`, `state.attempt_record`):
made into its `AttemptRecord` with the summary, or for a store's write or a snapshot.
And the result policy, carried out as the delegation settles (`shape_result`)."""

from __future__ import annotations

import importlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from actors import AttemptOutcome, AttemptRecord, Status, Summary, Usage
from supervisor.journal.private_files import safe_file_name, write_private
from supervisor.routing import ResultPolicy

__all__ = [
    "AttemptEnd",
    "Settlement",
    "ShapedResult",
    "as_record",
    "fallback_summary",
    "shape_result",
    "truncate",
]


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


# --------------------------------------------------------------------------------------
# The result policy carried out: truncation with a counted marker, overflow to an artifact
# file (written here, owner-only), schema checks (the schema imported here). Runs in Zeus's
# actor thread as a delegation settles.
# --------------------------------------------------------------------------------------


@dataclass(slots=True)
class ShapedResult:
    """Read-only by convention: not frozen, as a frozen one costs several times as much to
    build (`object.__setattr__` per field), and one is built for every settlement."""

    output: Any
    truncated_chars: int = 0
    artifact: str | None = None
    schema_error: str | None = None
    note: str | None = None  # what went wrong while shaping (kept among the summary's risks)


def truncate(text: str, max_chars: int) -> tuple[str, int]:
    """Cut `text` to at most `max_chars` characters, the marker included.

    Returns the text and how many characters of the original were omitted.
    """
    if len(text) <= max_chars:
        return text, 0
    omitted = len(text)
    while True:
        marker = f"…[{omitted} chars truncated]"
        keep = max(0, max_chars - len(marker))
        if len(text) - keep == omitted:
            break
        omitted = len(text) - keep
    if len(marker) > max_chars:  # a cap too small for the marker: keep the marker's head
        return marker[:max_chars], len(text)
    return text[:keep] + marker, omitted


def shape_result(
    output: Any, policy: ResultPolicy, *, delegation_id: str, artifact_dir: Path | None = None
) -> ShapedResult:
    """Apply `policy` to a delegation's output. A schema mismatch never fails the run."""
    schema_error = _check_schema(output, policy.schema_) if policy.schema_ else None
    if policy.max_chars is None or output is None:
        return ShapedResult(output, schema_error=schema_error)
    text = output if isinstance(output, str) else json.dumps(output, default=str)
    if len(text) <= policy.max_chars:
        return ShapedResult(output, schema_error=schema_error)
    artifact = note = None
    if policy.overflow == "artifact":
        folder = Path(policy.artifact_dir) if policy.artifact_dir else artifact_dir
        folder = folder or Path(".zeus") / "artifacts"
        path = folder / safe_file_name(delegation_id, ".txt")
        try:
            artifact = str(write_private(folder, path.name, text))
        except OSError as exc:  # the output is still truncated; the summary says why
            note = f"the full output could not be written to {path}: {exc.strerror or exc}"
    shaped, omitted = truncate(text, policy.max_chars)
    return ShapedResult(shaped, omitted, artifact, schema_error, note)


def _check_schema(output: Any, schema: str) -> str | None:
    try:
        module_name, _, attr = schema.partition(":")
        model = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        return f"schema {schema!r} cannot be imported: {exc}"
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return f"schema {schema!r} is not a pydantic model"
    try:
        model.model_validate(output)
    except ValidationError as exc:
        return f"output does not match {schema}: {exc.error_count()} error(s): " + "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors()
        )
    return None
