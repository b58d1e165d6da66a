"""The `SUBTASK BRIEF` block: a `Brief` written as labelled lines, and read back.

`Brief.render` and `Brief.parse` call these. Reading is one pass over the lines.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from actors.models import Brief
from actors.textblocks.values import (
    AT,
    and_list,
    invalid,
    read_agent,
    read_label,
    read_seconds,
    read_text,
    read_value,
    split_lines,
    write_number,
    write_text,
    write_value,
)

_BRIEF_START = re.compile(r"[\W_]*subtask\s+brief[\W_]*", re.IGNORECASE)
_BRIEF_LABELS = {
    "agent": "agent",
    "scope": "scope",
    "inputs": "inputs",
    "input": "inputs",
    "expected output": "expected_output",
    "output format": "expected_output",
    "output": "expected_output",
    "constraints": "constraints",
    "partial ok": "partial_ok",
    "partial": "partial_ok",
    "timeout": "timeout_s",
    "timeout s": "timeout_s",
    "session": "session",
    "mode": "mode",
}
_TRUE = frozenset({"true", "yes", "y", "on", "1", "ok", "\u2705"})
_FALSE = frozenset({"false", "no", "n", "off", "0", "\u274c"})
_BRIEF_EXAMPLE = "SUBTASK BRIEF\nAgent: apollo\nScope: Scan all route files for auth patterns"


def parse_brief(text: str) -> Brief:
    lines = split_lines(text)
    starts = (i for i, line in enumerate(lines)
              if line.strip() and _BRIEF_START.fullmatch(line.strip()))
    start = next(starts, None)
    if start is None:
        raise ValueError(f"no SUBTASK BRIEF block found; a brief reads:\n{_BRIEF_EXAMPLE}")
    raw: dict[str, list[str]] = {}
    last: str | None = None
    after_blank = False  # blank lines end the block unless a label comes next
    for index in range(start + 1, len(lines)):
        line = lines[index].strip()
        if not line:
            after_blank = True
            continue
        if line.startswith("```") or _BRIEF_START.fullmatch(line):
            break
        found = read_label(line, _BRIEF_LABELS)
        if after_blank and found is None:
            break
        after_blank = False
        if found is not None:
            last = found[0]
            raw[last] = [found[1]] if found[1] else []
        elif last is not None:  # a value that goes on over several lines
            raw[last].append(line)
    missing = [label for key, label in (("agent", "Agent"), ("scope", "Scope"))
               if not "\n".join(raw.get(key, []))]
    if missing:
        raise ValueError(
            f"SUBTASK BRIEF has no {and_list(missing)}; a brief needs at least:\n{_BRIEF_EXAMPLE}"
        )
    fields: dict[str, Any] = {}
    for key, parts in raw.items():
        value = "\n".join(parts)
        if key == "agent":
            fields[key] = read_agent(value)
        elif key == "inputs":
            fields[key] = read_value(value)
        elif key == "partial_ok":
            word = value.lower()
            if word not in _TRUE | _FALSE:
                raise ValueError(f"Partial OK: {value!r} is not true or false")
            fields[key] = word in _TRUE
        elif key == "timeout_s":
            fields[key] = read_seconds(value, "Timeout")
        elif key == "mode":
            mode = value.lower().removeprefix("full ").strip()
            if mode not in ("subtask", "task"):
                raise ValueError(f"Mode: {value!r} is not subtask or task")
            fields[key] = mode
        else:
            fields[key] = read_text(value)
    try:
        return Brief(**fields)
    except ValidationError as exc:
        raise invalid("SUBTASK BRIEF", exc) from None


def render_brief(brief: Brief) -> str:
    """The `SUBTASK BRIEF` block; `Brief.parse(brief.render()) == brief`."""
    lines = ["SUBTASK BRIEF", f"Agent: {write_text(brief.agent, avoid=AT)}",
             f"Scope: {write_text(brief.scope)}"]
    if brief.inputs is not None:
        lines.append(f"Inputs: {write_value(brief.inputs)}")
    if brief.expected_output is not None:
        lines.append(f"Expected output: {write_text(brief.expected_output)}")
    if brief.constraints is not None:
        lines.append(f"Constraints: {write_text(brief.constraints)}")
    if brief.partial_ok is not None:
        lines.append(f"Partial OK: {'true' if brief.partial_ok else 'false'}")
    if brief.timeout_s is not None:
        lines.append(f"Timeout: {write_number(brief.timeout_s)}s")
    if brief.session is not None:
        lines.append(f"Session: {write_text(brief.session)}")
    if brief.mode != "subtask":
        lines.append(f"Mode: {brief.mode}")
    return "\n".join(lines)
