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
from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from actors._limits import Seconds

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
            lines += ["", "Partial results:", *(f"- {_value(i)}" for i in self.partial_results)]
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
            lines.append(f"Error: {_text(self.error)}")
        if self.timeout_kind is not None:
            lines.append(f"Timeout kind: {self.timeout_kind}")
        if self.schema_error is not None:
            lines.append(f"Schema error: {_text(self.schema_error)}")
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
        gets an empty id. `ValueError` says what is missing or wrong.
        """
        return _parse_summary(text)


# -- the text formats (references/001): one value per line, JSON when plain text would lie ----

# Characters that end a line for some reader (str.splitlines); never left raw in a value.
_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")
_AT = "@"  # "Agent: @apollo" names apollo, so an agent name starting with @ is quoted
_OPEN, _CLOSE = "<subtask_summary>", "</subtask_summary>"
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
_TOKEN = r"[\w.@/+-]+"
_ATTEMPT = re.compile(
    rf"(?P<id>{_TOKEN}) (?P<agent>{_TOKEN}) (?P<outcome>\w+) (?P<duration>[-+0-9.eE]+)s"
    rf"(?P<extras>(?: pid=-?\d+| killed={_TOKEN}| fenced| losing={_TOKEN}(?:,{_TOKEN})*)*)"
    r"(?: error: (?P<error>.*))?"
)
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
    if isinstance(value, str) and _plain(value) and not _is_json(value):
        return value
    return _json_line(value)


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


def _parse_summary(text: str) -> Summary:
    scalars: dict[str, str] = {}
    lists: dict[str, list[str]] = {}
    section: str | None = None
    for raw_line in _summary_block(text):
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
    fields["partial_results"] = [_unvalue(item) for item in lists.get("partial_results", [])]
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
    """`<id> <agent> <outcome> <duration>s [pid=N] [killed=how] [fenced] [losing=a,b] [error: ...]`.

    Falls back to the record as JSON when a name does not fit in a token.
    """
    tokens: Sequence[str | None] = (record.id, record.agent, record.killed, *record.losing_causes)
    if not (
        all(t is None or re.fullmatch(_TOKEN, t) for t in tokens)
        and math.isfinite(record.duration_s)
    ):
        return _json_line(record.model_dump(mode="json", exclude_defaults=True))
    line = f"{record.id} {record.agent} {record.outcome.value} {_number(record.duration_s)}s"
    if record.pid is not None:
        line += f" pid={record.pid}"
    if record.killed is not None:
        line += f" killed={record.killed}"
    if record.fenced:
        line += " fenced"
    if record.losing_causes:
        line += f" losing={','.join(record.losing_causes)}"
    if record.error is not None:
        line += f" error: {_text(record.error)}"
    return line


def _parse_attempt(raw: str) -> AttemptRecord:
    try:
        if raw.startswith("{"):
            return AttemptRecord.model_validate(_loads(raw))
        match = _ATTEMPT.fullmatch(raw)
        if not match:
            raise ValueError(
                f"Attempts: {raw!r} is not `<id> <agent> <outcome> <duration>s [error: ...]`"
            )
        fields: dict[str, Any] = {
            "id": match["id"],
            "agent": match["agent"],
            "outcome": match["outcome"],
            "duration_s": float(match["duration"]),
        }
        for extra in match["extras"].split():
            name, _, value = extra.partition("=")
            if name == "pid":
                fields["pid"] = int(value)
            elif name == "killed":
                fields["killed"] = value
            elif name == "fenced":
                fields["fenced"] = True
            else:
                fields["losing_causes"] = value.split(",")
        if match["error"] is not None:
            fields["error"] = _untext(match["error"])
        return AttemptRecord(**fields)
    except ValidationError as exc:
        raise _invalid(f"the attempt {raw!r}", exc) from None


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
