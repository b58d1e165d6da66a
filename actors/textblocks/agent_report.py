"""An agent's own `<subtask_summary>` block, read from its final text (docs/formats.md: every
worker ends its reply with one). Lenient where agents are (any label case, `**bold**`
labels, `@agent`, prose around the block) and exact about what it cannot read: the
problem names its line. One pass over the text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from actors.models import Status
from actors.textblocks.values import (
    LIST_FIELDS,
    NONE_WORDS,
    read_counted,
    read_label,
    read_status,
    read_text,
    split_lines,
)

__all__ = ["AgentReport", "read_agent_report"]

_OPEN, _CLOSE = "<subtask_summary>", "</subtask_summary>"
_LABELS = {
    "status": "status",
    "agent": "agent",
    "scope": "scope",
    "changes": "changes",
    "findings": "findings",
    "validation": "validation",
    "risks / follow up": "risks",
    "risks/follow up": "risks",
    "risks": "risks",
    "follow up": "risks",
    "blocker": "risks",
    "partial results": "partial_results",
    "duration": "duration",
    "session alias": "session_alias",
}


@dataclass(frozen=True, slots=True)
class AgentReport:
    """What the block says. `status` is None when the block has none that reads; then
    `problem` says which line did not parse (as it does for any other line that did not)."""

    status: Status | None
    text: str  # the reply before the block (the agent's prose), stripped
    changes: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    validation: list[str] = field(default_factory=list)
    risks: list[str] = field(default_factory=list)
    partial_results: list[Any] = field(default_factory=list)
    session_alias: str | None = None
    problem: str | None = None


def read_agent_report(text: str) -> AgentReport | None:
    """The last `<subtask_summary>` block in `text`, or None when it holds none."""
    lines = split_lines(text)
    opens = [i for i, line in enumerate(lines) if line.strip().lower() == _OPEN]
    if not opens:
        return None
    start = opens[-1]
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].strip().lower() == _CLOSE), len(lines))
    problems: list[str] = []
    if end == len(lines):
        problems.append(f"line {start + 1}: the block opened here is never closed "
                        f"with {_CLOSE}")
    status: Status | None = None
    alias: str | None = None
    lists: dict[str, list[str]] = {}
    section: str | None = None
    for number in range(start + 1, end):
        line = lines[number].strip()
        if not line:
            continue
        if section is not None and (line.startswith(("- ", "* ")) or line in ("-", "*")):
            lists[section].append(line[2:])
            continue
        found = read_label(line, _LABELS)
        if found is None:
            continue  # prose between the fields
        key, value = found
        section = None
        if key in LIST_FIELDS or key == "partial_results":
            section = key
            lists.setdefault(key, [])
            if value.lower() not in NONE_WORDS:
                lists[key].extend(_inline(value))
        elif key == "status":
            try:
                status = read_status(value)
            except ValueError as exc:
                problems.append(f"line {number + 1}: {exc}")
        elif key == "session_alias" and value.lower() not in NONE_WORDS:
            alias = read_text(value)
    if status is None and not any("Status:" in p for p in problems):
        problems.append(f"line {start + 1}: the block has no Status: line")
    return AgentReport(
        status=status,
        text="\n".join(lines[:start]).strip(),
        changes=[read_text(i) for i in lists.get("changes", [])],
        findings=[read_text(i) for i in lists.get("findings", [])],
        validation=[read_text(i) for i in lists.get("validation", [])],
        risks=[read_text(i) for i in lists.get("risks", [])],
        partial_results=read_counted(lists.get("partial_results", [])),
        session_alias=alias,
        problem="; ".join(problems) or None,
    )


def _inline(value: str) -> list[str]:
    """Items written on the label's line: `[a.py, b.py]` (JSON, or words between commas),
    else the one item."""
    if not (value.startswith("[") and value.endswith("]")):
        return [value]
    try:
        items = json.loads(value)
    except ValueError:
        items = None
    if isinstance(items, list):
        return [item if isinstance(item, str) else json.dumps(item) for item in items]
    return [part.strip() for part in value[1:-1].split(",") if part.strip()]
