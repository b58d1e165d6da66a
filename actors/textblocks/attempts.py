"""One attempt on one line: `<id> <agent> <outcome> <duration>s [key=value ...] [(words)]
[error: ...]`.

The `Attempts:` items of a `<subtask_summary>` block, written and read back. The
`(words)` say how the attempt was stopped and what lost the race to stop it
("ignored the cancel; stopped by SIGTERM"); they are made from the fields
before them, so a reader skips them. `stop_words` and `losing_words` are the
same words for the CLI's attempt rows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, get_origin

from pydantic import ValidationError

from actors.models import AttemptOutcome, AttemptRecord
from actors.textblocks.values import (
    invalid,
    is_json,
    json_line,
    loads,
    read_text,
    write_number,
    write_text,
)


def attempt_line(record: AttemptRecord) -> str:
    """`<id> <agent> <outcome> <duration>s [key=value ...] [(words)] [error: text]`, always
    this shape.

    After the four head fields comes every other field that differs from its
    default, in the model's order, as `key=value` (`fenced` alone when true,
    `losing=a,b` for the losing causes), so a field added to `AttemptRecord`
    shows up here with no change. A name or value that is not a plain token is
    written as JSON (a quoted string, a list), never the whole line. Then, when
    the attempt was stopped, how (`stop_words`, `losing_words`), in parentheses.
    """
    parts = [
        _token(record.id),
        _token(record.agent),
        record.outcome.value,
        f"{write_number(record.duration_s)}s",
    ]
    for name, field in AttemptRecord.model_fields.items():
        value = getattr(record, name)
        if name in _ATTEMPT_HEAD or value == field.get_default(call_default_factory=True):
            continue
        key = _ATTEMPT_KEYS.get(name, name)
        parts.append(key if value is True else f"{key}={_attempt_value(value)}")
    words = [w for w in (stop_words(record.killed, fenced=record.fenced),
                         *losing_words(record.outcome.value, record.losing_causes)) if w]
    if words:
        parts.append(f"({'; '.join(words)})")
    if record.error is not None:
        parts.append(f"error: {write_text(record.error)}")
    return " ".join(parts)


# How Zeus stopped an attempt (`killed`), in words.
_STOPPED = {
    "cooperative": "stopped when asked",
    "terminate": "ignored the cancel; stopped by SIGTERM",
    "kill": "ignored the cancel and SIGTERM; killed by SIGKILL",
}
# A stop cause, as the thing that happened, and as the thing that won.
_CAUSE = {
    "timeout": ("the deadline passed", "deadline"),
    "stale": ("it went stale", "stale stop"),
    "budget_exceeded": ("the budget ran out", "budget stop"),
    "cancelled": ("a cancel came", "cancel"),
}


def stop_words(killed: str | None, *, fenced: bool = False) -> str | None:
    """How the attempt was stopped: "ignored the cancel; stopped by SIGTERM" (None: it was not)."""
    if fenced:
        return "its thread did not stop: fenced, its late messages dropped"
    return _STOPPED.get(killed) if killed else None


def losing_words(outcome: str, losing: Sequence[str]) -> list[str]:
    """What raced the outcome and lost, in words: "the budget ran out too, which lost to the
    cancel". The child's own acknowledgement of a stop (`child:cancelled`) says nothing new."""
    words = []
    for cause in losing:  # words only for the causes Zeus writes: any other text is skipped
        ended = cause.removeprefix("child:")
        if ended == cause:
            if cause in _CAUSE and outcome in _CAUSE:
                words.append(f"{_CAUSE[cause][0]} too, which lost to the {_CAUSE[outcome][1]}")
        elif ended == AttemptOutcome.completed:
            words.append("its result came after the stop (kept in the output)")
        elif ended in _ENDINGS:
            words.append(f"it then ended {ended} itself")
    return words


_ENDINGS = frozenset(AttemptOutcome) - {AttemptOutcome.completed, AttemptOutcome.cancelled}


_ATTEMPT_HEAD = frozenset({"id", "agent", "outcome", "duration_s", "error"})
_ATTEMPT_KEYS = {"losing_causes": "losing"}  # fields an attempt line writes under a short key
_ATTEMPT_FIELDS = {_ATTEMPT_KEYS.get(name, name): name for name in AttemptRecord.model_fields}
# A plain token: no spaces, quotes, `=` or `,`; a colon only between two parts ("child:cancelled").
_BARE = re.compile(r"[\w.@/+-]+(?::[\w.@/+-]+)*")
_KEY = re.compile(r"(\w+)(=?)")
_JSON = json.JSONDecoder()


def _token(text: str) -> str:
    """`text` bare when it is a plain token JSON would not read as a number, bool or null."""
    return text if _BARE.fullmatch(text) and not is_json(text) else json_line(text)


def _attempt_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return write_number(value)
    if isinstance(value, str):
        return _token(value)
    if isinstance(value, list) and value and all(
        isinstance(v, str) and _token(v) == v for v in value
    ):
        return ",".join(value)
    return json_line(value)


def parse_attempt(raw: str) -> AttemptRecord:
    try:
        if raw.startswith("{"):  # how attempts that did not fit in tokens were once written
            return AttemptRecord.model_validate(loads(raw))
        return AttemptRecord(**_attempt_fields(raw))
    except ValidationError as exc:
        raise invalid(f"the attempt {raw!r}", exc) from None


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
            fields["error"] = read_text(raw[at + len("error: "):])
            break
        if raw.startswith("(", at):  # the words, made from the fields: nothing to read
            end = raw.find(")", at)
            if end < 0:
                raise ValueError(f"Attempts: {raw!r}: a `(` that no `)` closes")
            at = _next(raw, end + 1, raw)
            continue
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
    if is_json(token):
        return json.loads(token)
    is_list = get_origin(AttemptRecord.model_fields[name].annotation) is list
    return token.split(",") if is_list else token
