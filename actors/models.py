"""The data both halves speak: briefs, reports, usage, attempt records, summaries.

These live on the child side (`actors`) because a work function receives a
`Brief` and may return a `Report`, and `Context.delegate()` returns a `Summary`;
`supervisor` re-exports them.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Any, Literal, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from actors.limits import Seconds

__all__ = [
    "AttemptOutcome",
    "AttemptRecord",
    "Brief",
    "Report",
    "Status",
    "Summary",
    "Usage",
]


class Status(StrEnum):
    """How a delegation settled."""

    completed = "completed"
    partial = "partial"
    blocked = "blocked"
    timed_out = "timed_out"
    failed = "failed"
    cancelled = "cancelled"
    budget_exceeded = "budget_exceeded"


class AttemptOutcome(StrEnum):
    """How one attempt ended. `transient`, `timeout`, `stale` and `crash` can be retried."""

    completed = "completed"
    error = "error"
    transient = "transient"
    timeout = "timeout"
    stale = "stale"
    crash = "crash"
    budget_exceeded = "budget_exceeded"
    cancelled = "cancelled"


class Brief(BaseModel):
    """What is delegated. `None` means "as the agent's policy says"."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent: str = Field(min_length=1)
    scope: str = Field(min_length=1)
    inputs: Any = None
    expected_output: str | None = None
    constraints: str | None = None
    partial_ok: bool | None = None
    timeout_s: Seconds | None = Field(default=None, gt=0)
    session: str | None = None
    mode: Literal["subtask", "task"] = "subtask"

    @classmethod
    def parse(cls, text: str) -> Brief:
        """Read the first `SUBTASK BRIEF` block in `text` (surrounding text is skipped).

        Labels are case-insensitive; a line that is not a label continues the value
        above it. `ValueError` says what is missing or wrong.
        """
        return _parse_brief(text)

    def render(self) -> str:
        """The `SUBTASK BRIEF` block; `Brief.parse(brief.render()) == brief`."""
        lines = ["SUBTASK BRIEF", f"Agent: {_text(self.agent, avoid=_AT)}",
                 f"Scope: {_text(self.scope)}"]
        if self.inputs is not None:
            lines.append(f"Inputs: {_value(self.inputs)}")
        if self.expected_output is not None:
            lines.append(f"Expected output: {_text(self.expected_output)}")
        if self.constraints is not None:
            lines.append(f"Constraints: {_text(self.constraints)}")
        if self.partial_ok is not None:
            lines.append(f"Partial OK: {'true' if self.partial_ok else 'false'}")
        if self.timeout_s is not None:
            lines.append(f"Timeout: {_number(self.timeout_s)}s")
        if self.session is not None:
            lines.append(f"Session: {_text(self.session)}")
        if self.mode != "subtask":
            lines.append(f"Mode: {self.mode}")
        return "\n".join(lines)


class Usage(BaseModel):
    """Calls, tokens and cost charged by agent code (`Context.charge`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    calls: int = Field(default=0, ge=0)
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cost: float = Field(default=0.0, ge=0)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            calls=self.calls + other.calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost=self.cost + other.cost,
        )


class Report(BaseModel):
    """A structured result a work function may return (the summary's sections)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    output: Any = None
    findings: list[str] = Field(default_factory=list)
    changes: list[str] = Field(default_factory=list)
    validation: list[str] = Field(default_factory=list)
    risks: list[str] = Field(default_factory=list)


class AttemptRecord(BaseModel):
    """One attempt of a delegation, as the summary keeps it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    agent: str
    outcome: AttemptOutcome
    duration_s: float = 0.0
    error: str | None = None
    pid: int | None = None
    # Causes that raced the one that won (e.g. a budget overrun that lost to a cancel).
    losing_causes: list[str] = Field(default_factory=list)
    fenced: bool = False
    killed: str | None = None  # cooperative | terminate | kill, when Zeus stopped it
    # The evidence it left (DESIGN §15): its progress counter at the end, how many tool
    # calls it made, the last one, and its last heartbeat note.
    progress: int = 0
    tool_calls: int = 0
    last_tool: str | None = None
    last_note: str | None = None


class Summary(BaseModel):
    """The single, final settlement of a delegation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    agent: str
    scope: str
    status: Status
    output: Any = None
    findings: list[str] = Field(default_factory=list)
    changes: list[str] = Field(default_factory=list)
    validation: list[str] = Field(default_factory=list)
    risks: list[str] = Field(default_factory=list)
    partial_results: list[Any] = Field(default_factory=list)
    attempts: list[AttemptRecord] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    error: str | None = None
    timeout_kind: Literal["deadline", "stale"] | None = None
    schema_error: str | None = None
    truncated_chars: int = 0
    artifact: str | None = None
    duration_s: float = 0.0
    session_alias: str | None = None

    @property
    def ok(self) -> bool:
        """True when the delegation completed."""
        return self.status is Status.completed

    def render(self) -> str:
        """The `<subtask_summary>` block; `Summary.parse(summary.render()) == summary`.

        Ordinary values read as in the protocol (`Status: completed`, `- a finding`);
        a value that would not survive on one line (several lines, edge spaces, a
        leading quote) or is not text (an output, a partial result) is written as
        JSON on one line.
        """
        lines = [
            _OPEN,
            f"Status: {self.status.value}",
            f"Agent: {_text(self.agent, avoid=_AT)}",
            f"Scope: {_text(self.scope)}",
            f"Id: {_text(self.id)}",
        ]
        for title, items in (
            ("Changes", self.changes),
            ("Findings", self.findings),
            ("Validation", self.validation),
            ("Risks / Follow-up", self.risks),
        ):
            lines.append("")
            lines.extend([f"{title}:", *(f"- {_text(i)}" for i in items)] if items
                         else [f"{title}: none"])
        if self.partial_results:
            lines += ["", "Partial results:", *_counted(self.partial_results)]
        if self.attempts:
            lines += ["", "Attempts:", *(f"- {_attempt_line(a)}" for a in self.attempts)]
        lines.append("")
        if self.output is not None:
            lines.append(f"Output: {_value(self.output)}")
        if self.usage != Usage():
            u = self.usage
            lines.append(f"Usage: {u.calls} calls, {u.input_tokens} input tokens, "
                         f"{u.output_tokens} output tokens, cost {_number(u.cost)}")
        if self.error is not None:
            lines += _indented("Error", self.error)
        if self.timeout_kind is not None:
            lines.append(f"Timeout kind: {self.timeout_kind}")
        if self.schema_error is not None:
            lines += _indented("Schema error", self.schema_error)
        if self.truncated_chars:
            lines.append(f"Truncated chars: {self.truncated_chars}")
        if self.artifact is not None:
            lines.append(f"Artifact: {_text(self.artifact)}")
        lines.append(f"Duration: {_number(self.duration_s)}s")
        if self.session_alias is not None:
            lines.append(f"Session alias: {_text(self.session_alias)}")
        lines.append(_CLOSE)
        return "\n".join(lines)

    @classmethod
    def parse(cls, text: str) -> Summary:
        """Read the last `<subtask_summary>` block in `text` back into a Summary.

        Tolerant of surrounding text, label case, `**bold**` labels and the status
        words of other protocols (`complete`, `escalated`); a block without `Id:`
        gets an empty id. Without that tag, the reference table's markdown block is
        read: `## subtask_summary` then `**status:** complete | partial | escalated`
        (`complete` is `completed`, `escalated` is `blocked`), `**files_changed:**`
        (the changes), `**summary:**` (the output), `**tests:**` (the validation).
        `ValueError` says what is missing or wrong.
        """
        return _parse_summary(text)


# -- the text formats (references/001): one value per line, JSON when plain text would lie ----

# Characters that end a line for some reader (str.splitlines); never left raw in a value.
_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")
_AT = "@"  # "Agent: @apollo" names apollo, so an agent name starting with @ is quoted
_OPEN, _CLOSE = "<subtask_summary>", "</subtask_summary>"
_COUNT = re.compile(r" \(([1-9]\d*) times\)$")  # after a partial result repeated in a row
_INDENT = "    "  # the lines after the first of an indented value (`Error:`, `Schema error:`)
# A label's name; the line around it (`**Name**: value`) is split by hand, not by a regex
# that backtracks: `_label` stays linear in the line whatever the line holds.
_LABEL_NAME = re.compile(r"[A-Za-z][A-Za-z /_-]*")
# Possessive quantifiers (`++`, `*+`): a long run of digits or spaces is read once, never
# backtracked into, so a failed match costs one pass over the text.
_NUMBER = r"[-+]?(?:\d++(?:\.\d*+)?|\.\d++)(?:[eE][-+]?\d++)?|[-+]?inf"
_DURATION = re.compile(
    rf"({_NUMBER})\s*+(ms|s|secs?|seconds?|m|mins?|minutes?|h|hours?)?", re.IGNORECASE
)
_UNIT_S = {"ms": 0.001, "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
           "h": 3600.0, "hour": 3600.0, "hours": 3600.0}
_USAGE = re.compile(
    r"(\d+) calls?, (\d+) input tokens?, (\d+) output tokens?, cost (\S+)", re.IGNORECASE
)
_NONE_WORDS = frozenset({"none", "n/a", "-", "[]", ""})
_STATUS_WORDS = {
    "complete": Status.completed,
    "done": Status.completed,
    "escalated": Status.blocked,
    "timeout": Status.timed_out,
    "timed out": Status.timed_out,
    "timedout": Status.timed_out,
    "error": Status.failed,
    "canceled": Status.cancelled,
    "budget": Status.budget_exceeded,
}


def _plain(text: str, avoid: str = "") -> bool:
    """Whether `text` can stand on a line as itself and be read back unchanged."""
    return (
        bool(text)
        and text == text.strip()
        and not text.startswith(('"', *avoid))
        and _BREAKS.isdisjoint(text)
    )


def _json_line(value: Any) -> str:
    """JSON on one line; the line breaks JSON leaves raw (U+0085, U+2028/9) are escaped."""
    text = json.dumps(value, ensure_ascii=False, default=_jsonable)
    for char in ("\x85", "\u2028", "\u2029"):
        text = text.replace(char, f"\\u{ord(char):04x}")
    return text


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return repr(value)


def _indented(label: str, text: str) -> list[str]:
    """`Label: first line` with the other lines indented beneath it (a traceback reads as one).

    Text that would not come back the same that way (edge spaces, a line break
    other than \\n, a line that is a block tag) is one line of JSON instead.
    """
    first, *rest = text.split("\n")
    if not rest or not (
        _plain(first)
        and text == text.strip()
        and _BREAKS.isdisjoint(text.replace("\n", ""))
        and not any(line.strip().lower() in (_OPEN, _CLOSE) for line in rest)
    ):
        return [f"{label}: {_text(text)}"]
    return [f"{label}: {first}", *(_INDENT + line for line in rest)]


def _text(text: str, avoid: str = "") -> str:
    return text if _plain(text, avoid) else _json_line(text)


def _untext(raw: str) -> str:
    if raw.startswith('"'):
        try:
            value = json.loads(raw)
        except ValueError:
            return raw
        if isinstance(value, str):
            return value
    return raw


def _agent(raw: str) -> str:
    """`apollo`, `@apollo` (as the protocol writes it) or a quoted name."""
    return _untext(raw) if raw.startswith('"') else raw.removeprefix(_AT)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    except RecursionError:  # JSON too deep to read back: write it quoted, as text
        return True
    return True


def _value(value: Any) -> str:
    """Any JSON-able value: plain when it is text that JSON would not read otherwise."""
    if isinstance(value, str) and _plain(value) and not (_is_json(value) or _COUNT.search(value)):
        return value
    return _json_line(value)


def _counted(values: list[Any]) -> list[str]:
    """`- value` items; a value repeated in a row is written once, with ` (N times)` after it."""
    items: list[tuple[str, int]] = []
    for text in map(_value, values):
        if items and items[-1][0] == text:
            items[-1] = (text, items[-1][1] + 1)
        else:
            items.append((text, 1))
    return [f"- {text}" + (f" ({n} times)" if n > 1 else "") for text, n in items]


def _uncounted(items: list[str]) -> list[Any]:
    values: list[Any] = []
    for item in items:
        match = _COUNT.search(item)
        n = 1 if match is None else int(match.group(1))
        text = item if match is None else item[: match.start()]
        values += [_unvalue(text) for _ in range(n)]
    return values


def _loads(raw: str) -> Any:
    """`json.loads`, with JSON too deep for it refused by a `ValueError` like any bad JSON."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError(f"a value nested too deeply to read: {raw[:40]!r}...") from None


def _unvalue(raw: str) -> Any:
    """JSON when `raw` reads as JSON, else the text itself (also when too deep to read)."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw


def _number(value: float) -> str:
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _seconds(raw: str, label: str) -> float:
    match = _DURATION.fullmatch(raw.strip())
    if not match:
        raise ValueError(f"{label}: {raw!r} is not a duration; write e.g. `{label}: 60s`")
    unit = (match.group(2) or "s").lower()
    return float(match.group(1)) * _UNIT_S.get(unit, 1.0)


def _label(line: str, known: dict[str, str]) -> tuple[str, str] | None:
    """`(field, value)` when `line` is `Label: value` (or `**Label:** value`) for a known label.

    Linear in the line: the label ends at the first colon, and each part is checked once.
    """
    colon = line.find(":")
    if colon < 0:
        return None
    head = line[:colon].removeprefix("**").rstrip()
    head = head.removesuffix("**")
    if not _LABEL_NAME.fullmatch(head):
        return None
    name = re.sub(r"[\s_-]+", " ", head).strip().lower()
    key = known.get(name)
    if key is None:
        return None
    return key, line[colon + 1:].removeprefix("**").strip()


def _lines(text: str) -> list[str]:
    return [line.rstrip("\r") for line in text.split("\n")]


def _missing(names: Iterable[str]) -> str:
    names = list(names)
    return " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + f" and {names[-1]}"


def _invalid(what: str, exc: ValidationError) -> ValueError:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
    )
    return ValueError(f"{what} is not valid: {problems}")


# -- SUBTASK BRIEF ------------------------------------------------------------------------------

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


def _parse_brief(text: str) -> Brief:
    lines = _lines(text)
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
        found = _label(line, _BRIEF_LABELS)
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
            f"SUBTASK BRIEF has no {_missing(missing)}; a brief needs at least:\n{_BRIEF_EXAMPLE}"
        )
    fields: dict[str, Any] = {}
    for key, parts in raw.items():
        value = "\n".join(parts)
        if key == "agent":
            fields[key] = _agent(value)
        elif key == "inputs":
            fields[key] = _unvalue(value)
        elif key == "partial_ok":
            word = value.lower()
            if word not in _TRUE | _FALSE:
                raise ValueError(f"Partial OK: {value!r} is not true or false")
            fields[key] = word in _TRUE
        elif key == "timeout_s":
            fields[key] = _seconds(value, "Timeout")
        elif key == "mode":
            mode = value.lower().removeprefix("full ").strip()
            if mode not in ("subtask", "task"):
                raise ValueError(f"Mode: {value!r} is not subtask or task")
            fields[key] = mode
        else:
            fields[key] = _untext(value)
    try:
        return Brief(**fields)
    except ValidationError as exc:
        raise _invalid("SUBTASK BRIEF", exc) from None


# -- <subtask_summary> ---------------------------------------------------------------------------

_LIST_FIELDS = ("changes", "findings", "validation", "risks", "partial_results", "attempts")
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
    lines = _lines(text)
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


def _markdown_block(text: str) -> list[str] | None:
    """The lines under the last `## subtask_summary` heading (references/000), if any."""
    lines = _lines(text)
    starts = [i for i, line in enumerate(lines) if _MD_HEADING.fullmatch(line.strip())]
    if not starts:
        return None
    block = []
    for line in lines[starts[-1] + 1:]:
        if line.lstrip().startswith(("#", "```")):
            break
        block.append(line)
    return block


def _parse_markdown_summary(block: list[str]) -> Summary:
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
        found = _label(line, _MD_LABELS)
        if found is None:
            continue
        key, value = found
        if key in _LIST_FIELDS:
            section = key
            items = [] if value.lower() in _NONE_WORDS else _md_items(value)
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
            id=_untext(scalars.get("id", "")),
            agent=_agent(scalars["agent"]) if "agent" in scalars else "",
            scope=_untext(scalars.get("scope", "")),
            status=_status(scalars["status"]),
            output=None if output is None or output.lower() in _NONE_WORDS else output,
            changes=lists.get("changes", []),
            validation=lists.get("validation", []),
            findings=lists.get("findings", []),
            risks=lists.get("risks", []),
        )
    except ValidationError as exc:
        raise _invalid("the ## subtask_summary block", exc) from None


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


def _parse_summary(text: str) -> Summary:
    if not any(line.strip().lower() == _OPEN for line in _lines(text)):
        block = _markdown_block(text)
        if block is not None:
            return _parse_markdown_summary(block)
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
        found = _label(line, _SUMMARY_LABELS)
        if found is None:
            continue  # prose around the fields
        key, value = found
        if key in _LIST_FIELDS:
            section = key
            lists[key] = [] if value.lower() in _NONE_WORDS else _inline_items(value)
        else:
            section = None
            scalars[key] = value
            if key in _INDENTED_FIELDS:
                indented = beneath[key] = []
    missing = [label for key, label in (("status", "Status"), ("agent", "Agent"),
                                        ("scope", "Scope")) if key not in scalars]
    if missing:
        raise ValueError(f"the <subtask_summary> block has no {_missing(missing)} line; "
                         f"it reads:\n{_SUMMARY_EXAMPLE}")
    fields: dict[str, Any] = {
        "status": _status(scalars.pop("status")),
        "id": _untext(scalars.pop("id", "")),
        "agent": _agent(scalars.pop("agent")),
    }
    for key in ("changes", "findings", "validation", "risks"):
        fields[key] = [_untext(item) for item in lists.get(key, [])]
    fields["partial_results"] = _uncounted(lists.get("partial_results", []))
    fields["attempts"] = [_parse_attempt(item) for item in lists.get("attempts", [])]
    for key, value in scalars.items():
        if key == "output":
            fields[key] = _unvalue(value)
        elif key == "usage":
            fields[key] = _parse_usage(value)
        elif key == "duration_s":
            fields[key] = _seconds(value, "Duration")
        elif key == "truncated_chars":
            if not re.fullmatch(r"-?\d+", value):
                raise ValueError(f"Truncated chars: {value!r} is not a whole number")
            fields[key] = int(value)
        elif key == "timeout_kind":
            fields[key] = value.lower()
        elif beneath.get(key):
            fields[key] = "\n".join([value, *beneath[key]])
        else:
            fields[key] = _untext(value)
    try:
        return Summary(**fields)
    except ValidationError as exc:
        raise _invalid("the <subtask_summary> block", exc) from None


def _inline_items(value: str) -> list[str]:
    """`Partial results: [a, b]` on the header line: a JSON list, else one item."""
    if value.startswith("["):
        try:
            items = json.loads(value)
        except (ValueError, RecursionError):
            return [value]
        if isinstance(items, list):
            return [_json_line(item) for item in items]
    return [value]


def _status(raw: str) -> Status:
    word = re.sub(r"[\s-]+", "_", raw.strip().lower())
    try:
        return Status(word)
    except ValueError:
        pass
    status = _STATUS_WORDS.get(word.replace("_", " ")) or _STATUS_WORDS.get(word)
    if status is None:
        raise ValueError(f"Status: {raw!r} is not one of {', '.join(Status)}")
    return status


def _attempt_line(record: AttemptRecord) -> str:
    """`<id> <agent> <outcome> <duration>s [key=value ...] [error: text]`, always this shape.

    After the four head fields comes every other field that differs from its
    default, in the model's order, as `key=value` (`fenced` alone when true,
    `losing=a,b` for the losing causes), so a field added to `AttemptRecord`
    shows up here with no change. A name or value that is not a plain token is
    written as JSON (a quoted string, a list), never the whole line.
    """
    parts = [
        _token(record.id),
        _token(record.agent),
        record.outcome.value,
        f"{_number(record.duration_s)}s",
    ]
    for name, field in AttemptRecord.model_fields.items():
        value = getattr(record, name)
        if name in _ATTEMPT_HEAD or value == field.get_default(call_default_factory=True):
            continue
        key = _ATTEMPT_KEYS.get(name, name)
        parts.append(key if value is True else f"{key}={_attempt_value(value)}")
    if record.error is not None:
        parts.append(f"error: {_text(record.error)}")
    return " ".join(parts)


_ATTEMPT_HEAD = frozenset({"id", "agent", "outcome", "duration_s", "error"})
_ATTEMPT_KEYS = {"losing_causes": "losing"}  # fields an attempt line writes under a short key
_ATTEMPT_FIELDS = {_ATTEMPT_KEYS.get(name, name): name for name in AttemptRecord.model_fields}
# A plain token: no spaces, quotes, `=` or `,`; a colon only between two parts ("child:cancelled").
_BARE = re.compile(r"[\w.@/+-]+(?::[\w.@/+-]+)*")
_KEY = re.compile(r"(\w+)(=?)")
_JSON = json.JSONDecoder()


def _token(text: str) -> str:
    """`text` bare when it is a plain token JSON would not read as a number, bool or null."""
    return text if _BARE.fullmatch(text) and not _is_json(text) else _json_line(text)


def _attempt_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, str):
        return _token(value)
    if isinstance(value, list) and value and all(
        isinstance(v, str) and _token(v) == v for v in value
    ):
        return ",".join(value)
    return _json_line(value)


def _parse_attempt(raw: str) -> AttemptRecord:
    try:
        if raw.startswith("{"):  # how attempts that did not fit in tokens were once written
            return AttemptRecord.model_validate(_loads(raw))
        return AttemptRecord(**_attempt_fields(raw))
    except ValidationError as exc:
        raise _invalid(f"the attempt {raw!r}", exc) from None


def _attempt_fields(raw: str) -> dict[str, Any]:
    """The fields of an attempt line; `ValueError` shows the shape it should have."""
    shape = "`<id> <agent> <outcome> <duration>s [key=value ...] [error: ...]`"
    head: list[Any] = []
    at = 0
    while len(head) < 4:
        value, at = _word(raw, at, raw)
        head.append(value)
    duration = str(head[3])
    try:
        if not duration.endswith("s") or not isinstance(head[2], str):
            raise ValueError
        seconds = float(duration[:-1])
    except ValueError:
        raise ValueError(f"Attempts: {raw!r} is not {shape}") from None
    fields: dict[str, Any] = {
        "id": head[0], "agent": head[1], "outcome": head[2], "duration_s": seconds,
    }
    while at < len(raw):
        if raw.startswith("error: ", at):
            fields["error"] = _untext(raw[at + len("error: "):])
            break
        key = _KEY.match(raw, at)
        name = None if key is None else _ATTEMPT_FIELDS.get(key.group(1))
        if key is None or name is None or name in _ATTEMPT_HEAD:
            raise ValueError(f"Attempts: {raw!r}: cannot read {raw[at:].split(' ', 1)[0]!r}; "
                             f"an attempt reads {shape}")
        if key.group(2):
            quoted = raw.startswith(('"', "["), key.end())
            value, at = _word(raw, key.end(), raw)
            fields[name] = value if quoted else _attempt_unvalue(name, value)
        else:
            fields[name] = True
            at = _next(raw, key.end(), raw)
    return fields


def _word(text: str, at: int, raw: str) -> tuple[Any, int]:
    """The token or JSON value at `at`, and where the next one starts."""
    if text.startswith(('"', "["), at):
        try:
            value, end = _JSON.raw_decode(text, at)
        except ValueError:
            raise ValueError(f"Attempts: {raw!r}: not valid JSON at column {at + 1}") from None
        return value, _next(text, end, raw)
    end = text.find(" ", at)
    end = len(text) if end < 0 else end
    if end == at:
        raise ValueError(
            f"Attempts: {raw!r} is not `<id> <agent> <outcome> <duration>s [key=value ...] "
            "[error: ...]`"
        )
    return text[at:end], _next(text, end, raw)


def _next(text: str, end: int, raw: str) -> int:
    if end < len(text) and text[end] != " ":
        raise ValueError(f"Attempts: {raw!r}: expected a space at column {end + 1}")
    return end + 1 if end < len(text) else end


def _attempt_unvalue(name: str, token: str) -> Any:
    """A bare token: a number, bool or null as JSON reads it, a list split at commas, else text."""
    if _is_json(token):
        return json.loads(token)
    is_list = get_origin(AttemptRecord.model_fields[name].annotation) is list
    return token.split(",") if is_list else token


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
