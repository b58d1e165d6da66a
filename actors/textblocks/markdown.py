"""The reference table's `## subtask_summary` markdown block (docs/formats.md), read.

`**status:** complete | partial | escalated`, `**files_changed:** [paths]`,
`**summary:**` (the output), `**tests:**` (the validation). Only read, never written.
"""

from __future__ import annotations

import json
import re

from pydantic import ValidationError

from actors.models import Summary
from actors.textblocks.values import (
    LIST_FIELDS,
    NONE_WORDS,
    invalid,
    read_agent,
    read_label,
    read_status,
    read_text,
    split_lines,
)

_MD_HEADING = re.compile(r"#{1,6}\s*subtask_summary\s*:?", re.IGNORECASE)
_MD_LABELS = {
    "status": "status",
    "agent": "agent",
    "scope": "scope",
    "id": "id",
    "files changed": "changes",
    "changes": "changes",
    "summary": "output",
    "tests": "validation",
    "findings": "findings",
    "risks": "risks",
}


def markdown_block(text: str) -> list[str] | None:
    """The lines under the last `## subtask_summary` heading (docs/formats.md), if any."""
    lines = split_lines(text)
    starts = [i for i, line in enumerate(lines) if _MD_HEADING.fullmatch(line.strip())]
    if not starts:
        return None
    block = []
    for line in lines[starts[-1] + 1:]:
        if line.lstrip().startswith(("#", "```")):
            break
        block.append(line)
    return block


def parse_markdown_summary(block: list[str]) -> Summary:
    """The reference table's block: `**status:** complete | partial | escalated`,
    `**files_changed:** [paths]`, `**summary:**`, `**tests:**`. It names no agent or
    scope; those stay empty unless given."""
    scalars: dict[str, str] = {}
    lists: dict[str, list[str]] = {}
    section: str | None = None
    for raw_line in block:
        line = raw_line.strip()
        if not line:
            continue
        if section is not None and line.startswith(("- ", "* ")):
            lists[section].append(line[2:].strip())
            continue
        found = read_label(line, _MD_LABELS)
        if found is None:
            continue
        key, value = found
        if key in LIST_FIELDS:
            section = key
            items = [] if value.lower() in NONE_WORDS else _md_items(value)
            lists[key] = items
        else:
            section = None
            scalars[key] = value
    if "status" not in scalars:
        raise ValueError("the ## subtask_summary block has no **status:** line "
                         "(complete, partial or escalated)")
    output = scalars.get("output")
    try:
        return Summary(
            id=read_text(scalars.get("id", "")),
            agent=read_agent(scalars["agent"]) if "agent" in scalars else "",
            scope=read_text(scalars.get("scope", "")),
            status=read_status(scalars["status"]),
            output=None if output is None or output.lower() in NONE_WORDS else output,
            changes=lists.get("changes", []),
            validation=lists.get("validation", []),
            findings=lists.get("findings", []),
            risks=lists.get("risks", []),
        )
    except ValidationError as exc:
        raise invalid("the ## subtask_summary block", exc) from None


def _md_items(value: str) -> list[str]:
    """`[a.py, b.py]`, `a.py, b.py` or a JSON list: the items."""
    if value.startswith("["):
        try:
            items = json.loads(value)
        except ValueError:
            value = value.strip("[]")
        else:
            if isinstance(items, list):
                return [str(item) for item in items]
    return [item.strip().strip("`") for item in value.split(",") if item.strip()]
