"""One value on one line (docs/formats.md): plain when it reads back unchanged, else JSON.

The pieces both blocks are written and read with: a value, a number, a duration,
a `Label: value` line, a status word, an error that says what to fix. Every
reader here is linear in its input (tests/test_text_parsing_cost.py).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ValidationError

from actors.models import Status

# Characters that end a line for some reader (str.splitlines); never left raw in a value.
BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")
AT = "@"  # "Agent: @apollo" names apollo, so an agent name starting with @ is quoted
_COUNT = re.compile(r" \(([1-9]\d*) times\)$")  # after a partial result repeated in a row
# A label's name; the line around it (`**Name**: value`) is split by hand, not by a regex
# that backtracks: `read_label` stays linear in the line whatever the line holds.
_LABEL_NAME = re.compile(r"[A-Za-z][A-Za-z /_-]*")
# Possessive quantifiers (`++`, `*+`): a long run of digits or spaces is read once, never
# backtracked into, so a failed match costs one pass over the text.
_NUMBER = r"[-+]?(?:\d++(?:\.\d*+)?|\.\d++)(?:[eE][-+]?\d++)?|[-+]?inf"
_DURATION = re.compile(
    rf"({_NUMBER})\s*+(ms|s|secs?|seconds?|m|mins?|minutes?|h|hours?)?", re.IGNORECASE
)
_UNIT_S = {"ms": 0.001, "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
           "h": 3600.0, "hour": 3600.0, "hours": 3600.0}
# The summary's fields written as `- item` lists.
LIST_FIELDS = ("changes", "findings", "validation", "risks", "partial_results", "attempts")
NONE_WORDS = frozenset({"none", "n/a", "-", "[]", ""})
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


def is_plain(text: str, avoid: str = "") -> bool:
    """Whether `text` can stand on a line as itself and be read back unchanged."""
    return (
        bool(text)
        and text == text.strip()
        and not text.startswith(('"', *avoid))
        and BREAKS.isdisjoint(text)
    )


def json_line(value: Any) -> str:
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


def write_text(text: str, avoid: str = "") -> str:
    return text if is_plain(text, avoid) else json_line(text)


def read_text(raw: str) -> str:
    if raw.startswith('"'):
        try:
            value = json.loads(raw)
        except ValueError:
            return raw
        if isinstance(value, str):
            return value
    return raw


def read_agent(raw: str) -> str:
    """`apollo`, `@apollo` (as the protocol writes it) or a quoted name."""
    return read_text(raw) if raw.startswith('"') else raw.removeprefix(AT)


def is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    except RecursionError:  # JSON too deep to read back: write it quoted, as text
        return True
    return True


def write_value(value: Any) -> str:
    """Any JSON-able value: plain when it is text that JSON would not read otherwise."""
    if isinstance(value, str) and is_plain(value) and not (is_json(value) or _COUNT.search(value)):
        return value
    return json_line(value)


def write_counted(values: list[Any]) -> list[str]:
    """`- value` items; a value repeated in a row is written once, with ` (N times)` after it."""
    items: list[tuple[str, int]] = []
    for text in map(write_value, values):
        if items and items[-1][0] == text:
            items[-1] = (text, items[-1][1] + 1)
        else:
            items.append((text, 1))
    return [f"- {text}" + (f" ({n} times)" if n > 1 else "") for text, n in items]


def read_counted(items: list[str]) -> list[Any]:
    values: list[Any] = []
    for item in items:
        match = _COUNT.search(item)
        n = 1 if match is None else int(match.group(1))
        text = item if match is None else item[: match.start()]
        values += [read_value(text) for _ in range(n)]
    return values


def loads(raw: str) -> Any:
    """`json.loads`, with JSON too deep for it refused by a `ValueError` like any bad JSON."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError(f"a value nested too deeply to read: {raw[:40]!r}...") from None


def read_value(raw: str) -> Any:
    """JSON when `raw` reads as JSON, else the text itself (also when too deep to read)."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw


def write_number(value: float) -> str:
    """`value` as it reads back exactly, in plain decimals: `2`, `0.5`, `0.00008` (not `8e-05`).

    Python's shortest repr goes to an exponent below 1e-4; a person reads decimals, so
    the fewest decimals that read back as the same float are written instead.
    """
    if not math.isfinite(value) or abs(value) >= 1e15:
        return repr(float(value))
    if value == int(value):
        return str(int(value))
    text = repr(float(value))
    if "e" not in text:
        return text
    for places in range(1, _MAX_PLACES + 1):
        fixed = f"{value:.{places}f}"
        if float(fixed) == value:
            return fixed
    return text  # below 1e-30: no person reads that as decimals either


_MAX_PLACES = 30


def read_seconds(raw: str, label: str) -> float:
    match = _DURATION.fullmatch(raw.strip())
    if not match:
        raise ValueError(f"{label}: {raw!r} is not a duration; write e.g. `{label}: 60s`")
    unit = (match.group(2) or "s").lower()
    return float(match.group(1)) * _UNIT_S.get(unit, 1.0)


def read_label(line: str, known: dict[str, str]) -> tuple[str, str] | None:
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


def split_lines(text: str) -> list[str]:
    return [line.rstrip("\r") for line in text.split("\n")]


def and_list(names: Iterable[str]) -> str:
    names = list(names)
    return " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + f" and {names[-1]}"


def invalid(what: str, exc: ValidationError) -> ValueError:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
    )
    return ValueError(f"{what} is not valid: {problems}")


def read_status(raw: str) -> Status:
    word = re.sub(r"[\s-]+", "_", raw.strip().lower())
    try:
        return Status(word)
    except ValueError:
        pass
    status = _STATUS_WORDS.get(word.replace("_", " ")) or _STATUS_WORDS.get(word)
    if status is None:
        raise ValueError(f"Status: {raw!r} is not one of {', '.join(Status)}")
    return status
