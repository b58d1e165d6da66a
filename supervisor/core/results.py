"""The result policy carried out: truncation with a counted marker, overflow to an artifact
file (written here, owner-only), schema checks (the schema imported here). Runs in Zeus's
actor thread as a delegation settles."""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from supervisor.journal.private_files import safe_file_name, write_private
from supervisor.routing import ResultPolicy

__all__ = ["ShapedResult", "shape_result", "truncate"]


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
