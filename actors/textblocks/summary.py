"""The `<subtask_summary>` block: a `Summary` written as labelled lines, and read back.

`Summary.render` and `Summary.parse` call these; a text without the tag but with
a `## subtask_summary` heading is read by `markdown`. Reading is one pass over
the lines.
"""

from __future__ import annotations

import bisect
import json
import re
from typing import Any

from pydantic import ValidationError

from actors.models import Status, Summary, Usage
from actors.textblocks.attempts import attempt_line, parse_attempt
from actors.textblocks.markdown import markdown_block, parse_markdown_summary
from actors.textblocks.values import (
    AT,
    BREAKS,
    LIST_FIELDS,
    NONE_WORDS,
    and_list,
    invalid,
    is_plain,
    json_line,
    read_agent,
    read_counted,
    read_label,
    read_seconds,
    read_status,
    read_text,
    read_value,
    split_lines,
    write_counted,
    write_number,
    write_text,
    write_value,
)

_OPEN, _CLOSE = "<subtask_summary>", "</subtask_summary>"
_INDENT = "    "  # the lines after the first of an indented value (`Error:`, `Schema error:`)
_USAGE = re.compile(
    r"(?:at least )?(\d+) calls?, (\d+) input tokens?, (\d+) output tokens?, cost (\S+)",
    re.IGNORECASE,
)


def _many(n: int, word: str) -> str:
    """`1 call`, `2 calls` (the reader takes either)."""
    return f"{n} {word}" + ("" if n == 1 else "s")


def render_summary(summary: Summary) -> str:
    """The `<subtask_summary>` block; `parse_summary(render_summary(s)) == s`.

    Ordinary values read as in the protocol (`Status: completed`, `- a finding`);
    a value that would not survive on one line (several lines, edge spaces, a
    leading quote) or is not text (an output, a partial result) is written as
    JSON on one line.
    """
    lines = [
        _OPEN,
        f"Status: {summary.status.value}",
        f"Agent: {write_text(summary.agent, avoid=AT)}",
        f"Scope: {write_text(summary.scope)}",
        f"Id: {write_text(summary.id)}",
    ]
    for title, items in (
        ("Changes", summary.changes),
        ("Findings", summary.findings),
        ("Validation", summary.validation),
        ("Risks / Follow-up", summary.risks),
    ):
        lines.append("")
        lines.extend([f"{title}:", *(f"- {write_text(i)}" for i in items)] if items
                     else [f"{title}: none"])
    if summary.partial_results:
        lines += ["", "Partial results:", *write_counted(summary.partial_results)]
    if summary.attempts:
        lines += ["", "Attempts:", *(f"- {attempt_line(a)}" for a in summary.attempts)]
    lines.append("")
    if summary.output is not None:
        lines.append(f"Output: {write_value(summary.output)}")
    at_least = any(a.usage_unknown for a in summary.attempts)
    if summary.usage != Usage() or at_least:
        # "at least": an attempt spent what its CLI never reported (its record says why)
        u = summary.usage
        lines.append(f"Usage: {'at least ' if at_least else ''}{_many(u.calls, 'call')}, "
                     f"{_many(u.input_tokens, 'input token')}, "
                     f"{_many(u.output_tokens, 'output token')}, cost {write_number(u.cost)}")
    if summary.error is not None:  # a partial one did not fail: it says why it stopped short
        lines += _indented("Stopped short" if summary.status is Status.partial else "Error",
                           summary.error)
    if summary.timeout_kind is not None:
        lines.append(f"Timeout kind: {summary.timeout_kind}")
    if summary.schema_error is not None:
        lines += _indented("Schema error", summary.schema_error)
    if summary.truncated_chars:
        lines.append(f"Truncated chars: {summary.truncated_chars}")
    if summary.artifact is not None:
        lines.append(f"Artifact: {write_text(summary.artifact)}")
    lines.append(f"Duration: {write_number(summary.duration_s)}s")
    if summary.session_alias is not None:
        lines.append(f"Session alias: {write_text(summary.session_alias)}")
    lines.append(_CLOSE)
    return "\n".join(lines)


def _indented(label: str, text: str) -> list[str]:
    """`Label: first line` with the other lines indented beneath it (a traceback reads as one).

    Text that would not come back the same that way (edge spaces, a line break
    other than \\n, a line that is a block tag) is one line of JSON instead.
    """
    first, *rest = text.split("\n")
    if not rest or not (
        is_plain(first)
        and text == text.strip()
        and BREAKS.isdisjoint(text.replace("\n", ""))
        and not any(line.strip().lower() in (_OPEN, _CLOSE) for line in rest)
    ):
        return [f"{label}: {write_text(text)}"]
    return [f"{label}: {first}", *(_INDENT + line for line in rest)]


_SUMMARY_LABELS = {
    "status": "status",
    "agent": "agent",
    "scope": "scope",
    "id": "id",
    "changes": "changes",
    "findings": "findings",
    "validation": "validation",
    "risks / follow up": "risks",
    "risks/follow up": "risks",
    "risks": "risks",
    "follow up": "risks",
    "partial results": "partial_results",
    "attempts": "attempts",
    "output": "output",
    "usage": "usage",
    "error": "error",
    "stopped short": "error",  # a partial summary's error
    "timeout kind": "timeout_kind",
    "schema error": "schema_error",
    "truncated chars": "truncated_chars",
    "artifact": "artifact",
    "duration": "duration_s",
    "session alias": "session_alias",
}
_INDENTED_FIELDS = frozenset({"error", "schema_error"})
_SUMMARY_EXAMPLE = f"{_OPEN}\nStatus: completed\nAgent: apollo\nScope: ...\n{_CLOSE}"


def _summary_block(text: str) -> list[str]:
    """The lines of the last complete block (else of the last opened one, else all)."""
    lines = split_lines(text)
    tags = [(i, line.strip().lower()) for i, line in enumerate(lines) if "<" in line]
    opens = [i for i, tag in tags if tag == _OPEN]
    if not opens:
        return lines  # no tags: read the labels wherever they are
    closes = [i for i, tag in tags if tag == _CLOSE]
    # The last open tag with a close tag after it, else the last open tag (both sorted).
    complete = opens[: bisect.bisect_left(opens, closes[-1])] if closes else []
    start = complete[-1] if complete else opens[-1]
    after = bisect.bisect_right(closes, start)
    end = closes[after] if after < len(closes) else len(lines)
    return lines[start + 1:end]



def parse_summary(text: str) -> Summary:
    if not any(line.strip().lower() == _OPEN for line in split_lines(text)):
        block = markdown_block(text)
        if block is not None:
            return parse_markdown_summary(block)
    scalars: dict[str, str] = {}
    lists: dict[str, list[str]] = {}
    section: str | None = None
    indented: list[str] | None = None  # the lines beneath the last `Error:` read so far
    beneath: dict[str, list[str]] = {}
    for raw_line in _summary_block(text):
        if indented is not None and raw_line.startswith(_INDENT):
            indented.append(raw_line[len(_INDENT):])
            continue
        indented = None
        line = raw_line.strip()
        if not line:
            continue
        if section is not None and (line.startswith(("- ", "* ")) or line in ("-", "*")):
            lists[section].append(line[2:])
            continue
        found = read_label(line, _SUMMARY_LABELS)
        if found is None:
            continue  # prose around the fields
        key, value = found
        if key in LIST_FIELDS:
            section = key
            lists[key] = [] if value.lower() in NONE_WORDS else _inline_items(value)
        else:
            section = None
            scalars[key] = value
            if key in _INDENTED_FIELDS:
                indented = beneath[key] = []
    missing = [label for key, label in (("status", "Status"), ("agent", "Agent"),
                                        ("scope", "Scope")) if key not in scalars]
    if missing:
        raise ValueError(f"the <subtask_summary> block has no {and_list(missing)} line; "
                         f"it reads:\n{_SUMMARY_EXAMPLE}")
    fields: dict[str, Any] = {
        "status": read_status(scalars.pop("status")),
        "id": read_text(scalars.pop("id", "")),
        "agent": read_agent(scalars.pop("agent")),
    }
    for key in ("changes", "findings", "validation", "risks"):
        fields[key] = [read_text(item) for item in lists.get(key, [])]
    fields["partial_results"] = read_counted(lists.get("partial_results", []))
    fields["attempts"] = [parse_attempt(item) for item in lists.get("attempts", [])]
    for key, value in scalars.items():
        if key == "output":
            fields[key] = read_value(value)
        elif key == "usage":
            fields[key] = _parse_usage(value)
        elif key == "duration_s":
            fields[key] = read_seconds(value, "Duration")
        elif key == "truncated_chars":
            if not re.fullmatch(r"-?\d+", value):
                raise ValueError(f"Truncated chars: {value!r} is not a whole number")
            fields[key] = int(value)
        elif key == "timeout_kind":
            fields[key] = value.lower()
        elif beneath.get(key):
            fields[key] = "\n".join([value, *beneath[key]])
        else:
            fields[key] = read_text(value)
    try:
        return Summary(**fields)
    except ValidationError as exc:
        raise invalid("the <subtask_summary> block", exc) from None


def _inline_items(value: str) -> list[str]:
    """`Partial results: [a, b]` on the header line: a JSON list, else one item."""
    if value.startswith("["):
        try:
            items = json.loads(value)
        except (ValueError, RecursionError):
            return [value]
        if isinstance(items, list):
            return [json_line(item) for item in items]
    return [value]


def _parse_usage(raw: str) -> Usage:
    match = _USAGE.fullmatch(raw)
    if not match:
        raise ValueError(
            f"Usage: {raw!r} is not `N calls, N input tokens, N output tokens, cost X`"
        )
    try:
        return Usage(calls=int(match[1]), input_tokens=int(match[2]),
                     output_tokens=int(match[3]), cost=float(match[4]))
    except ValueError as exc:
        raise ValueError(f"Usage: {raw!r}: {exc}") from None
