"""Problems in a routing file: collected, placed on their line, and said plainly.

`Problems` gathers every problem of a file (once each, however many agents
inherit it from `defaults:`), places each on the line that spells it (`Origin`
maps a key path of the merged data back there), and raises them as one
`RoutingError`. `explain` says a pydantic error as `found X; allowed: Y`.
"""

from __future__ import annotations

import json
import re
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from difflib import get_close_matches
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from actors.limits import MAX_DURATION_S, MAX_DURATION_WORDS
from supervisor.errors import RoutingError
from supervisor.routing.lines import KeyPath, Lines, dotted
from supervisor.routing.policies import RetryOn

__all__ = [
    "WORDS",
    "Origin",
    "Problems",
    "allowed_list",
    "explain",
    "found",
    "mapping_or_none",
    "unknown_key",
]


# -- collecting problems ----------------------------------------------------------------------

_MAX_SHOWN = 10


@dataclass
class Origin:
    """Maps a key path of the merged, native data back to where the file spells it."""

    agents: Mapping[str, Any]  # each agent's own keys (before `defaults:`)
    defaults: Mapping[str, Any]
    explicit: dict[KeyPath, KeyPath] = field(default_factory=dict)  # native -> source

    def __call__(self, path: KeyPath) -> KeyPath:
        if len(path) >= 3 and path[0] == "agents" and isinstance(path[1], str):
            rest = path[2:]
            own = self.agents.get(path[1])
            if not _has(own, rest) and _has(self.defaults, rest):
                return ("defaults", *rest)
        for end in range(len(path), 0, -1):
            source = self.explicit.get(path[:end])
            if source is not None:
                return (*source, *path[end:])
        return path


def _has(data: Any, path: KeyPath) -> bool:
    """Whether `data` spells out `path` (a list is whole: merging never mixes two lists)."""
    for part in path:
        if isinstance(data, list | tuple):
            return True
        if not isinstance(data, Mapping) or part not in data:
            return False
        data = data[part]
    return True


@dataclass
class Problems:
    """The problems of one file (a routing file; `zeus run` uses it for plans too).

    `error`: what `raise_if_any` raises; `rerun`: the command to run again once they are
    fixed (default: `zeus validate FILE` for a file, else "again").
    """

    source: str
    lines: Lines | None
    origin: Callable[[KeyPath], KeyPath] = lambda path: path
    found: list[tuple[int | None, str]] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)
    error: Callable[[str], Exception] = RoutingError
    rerun: str | None = None

    def add(self, path: KeyPath, message: str, *, line: int | None = None) -> None:
        where = self.origin(path)
        text = f"{dotted(where)}: {message}" if where else message
        if text in self._seen:  # an error in `defaults:` shows once, not once per agent
            return
        self._seen.add(text)
        if line is None and self.lines is not None:
            line = self.lines.line(where)
        self.found.append((line, text))

    def raise_if_any(self) -> None:
        if not self.found:
            return
        ordered = sorted(self.found, key=lambda item: (item[0] is None, item[0] or 0))
        count = len(ordered)
        rerun = self.rerun or (f"zeus validate {self.source}" if self.lines else None)
        head = f"{self.source}: {count} problem{'s' if count > 1 else ''}; fix and run " + (
            f"`{rerun}`" if rerun else "again"
        )
        body = [
            f"{self.source}:{line}: {text}" if line is not None else f"{self.source}: {text}"
            for line, text in ordered[:_MAX_SHOWN]
        ]
        if count > _MAX_SHOWN:
            body.append(f"... and {count - _MAX_SHOWN} more")
        raise self.error("\n".join([head, *body]))


def found(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        text = json.dumps(list(value), default=str, ensure_ascii=False)
        return f"a list {text}" if len(text) <= 40 else f"a list of {len(value)} items"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def allowed_list(names: Iterable[str]) -> str:
    return ", ".join(sorted(names))


def unknown_key(key: str, allowed: Iterable[str]) -> str:
    allowed = sorted(allowed)
    near = get_close_matches(key, allowed, n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return f"unknown key {key!r}{hint}; allowed: {', '.join(allowed)}"


def mapping_or_none(
    data: Mapping[str, Any], key: str, problems: Problems, allowed: str
) -> dict[str, Any]:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.add((key,), f"found {found(value)}; allowed: {allowed}")
        return {}
    return value


# -- pydantic errors, said plainly -------------------------------------------------------------

WORDS = {
    "command": "a non-empty list of strings: the program and its arguments, "
    "e.g. [python, -m, myagents.hotfix, '{scope}']",
    "entrypoint": "'pkg.module:function'",
    "can_delegate_to": "a list of agent names",
    "on": f"a list of {', '.join(RetryOn)}",
}


def _field_at(root: type[BaseModel], loc: Sequence[str | int]) -> tuple[Any, FieldInfo | None]:
    """Walk models, dicts and tuples along `loc`: (the type there, the last field passed)."""
    current: Any = root
    info: FieldInfo | None = None
    index = 0
    while index < len(loc):
        if isinstance(current, type) and issubclass(current, BaseModel):
            info = _model_field(current, loc[index])
            if info is None:
                return None, None
            current, index = info.annotation, index + 1
            continue
        origin, args = get_origin(current), get_args(current)
        if origin in (Union, types.UnionType):
            current = next((a for a in args if a is not type(None)), None)
        elif origin is dict and len(args) == 2:
            current, index = args[1], index + 1
        elif origin in (tuple, list) and args:
            current, index = args[0], index + 1
        else:
            return None, info
    return current, info


def _model_field(model: type[BaseModel], key: str | int) -> FieldInfo | None:
    for name, info in model.model_fields.items():
        if key in (name, info.alias):
            return info
    return None


def _unwrap_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType):
        for arg in get_args(annotation):
            model = _unwrap_model(arg)
            if model is not None:
                return model
    return None


def _file_keys(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _is_int_field(annotation: Any) -> bool:
    if annotation is int:
        return True
    return get_origin(annotation) in (Union, types.UnionType) and int in get_args(annotation)


def explain(root: type[BaseModel], err: Any) -> str:
    """One pydantic error as `found X; allowed: Y`."""
    loc: tuple[str | int, ...] = tuple(err["loc"])
    kind: str = err["type"]
    ctx: dict[str, Any] = err.get("ctx") or {}
    value = err["input"]
    if kind == "extra_forbidden":
        parent, _ = _field_at(root, loc[:-1])
        model = _unwrap_model(parent) or (root if len(loc) == 1 else None)
        keys = _file_keys(model) if model else []
        return unknown_key(str(loc[-1]), keys)
    if kind == "value_error":
        return str(err["msg"]).removeprefix("Value error, ")
    _, info = _field_at(root, loc)
    name = next((p for p in reversed(loc) if isinstance(p, str)), "")
    number = "an integer" if info is not None and _is_int_field(info.annotation) else "a number"
    seconds = " of seconds" if name.endswith("_s") and number == "a number" else ""
    if name in WORDS:
        allowed = WORDS[name]
    elif seconds and (kind == "finite_number" or ctx.get("le") == MAX_DURATION_S):
        allowed = f"a finite number of seconds <= {MAX_DURATION_S:g} ({MAX_DURATION_WORDS})"
    elif kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        sign = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<"}.get(kind, "<=")
        bound = next(iter(ctx.values()), "?")
        bound = f"{bound:g}" if isinstance(bound, int | float) else bound
        allowed = f"{number}{seconds} {sign} {bound}"
    elif kind in ("literal_error", "enum"):
        allowed = str(ctx.get("expected", "?"))
    elif kind.startswith("int_"):
        allowed = "an integer"
    elif kind.startswith("float_"):
        allowed = f"{number}{seconds}"
    elif kind.startswith("bool_"):
        allowed = "true or false"
    elif kind.startswith("string_"):
        allowed = "a string"
    elif kind in ("tuple_type", "list_type", "too_short"):
        allowed = "a non-empty list" if kind == "too_short" else "a list"
    elif kind in ("dict_type", "model_type", "model_attributes_type"):
        allowed = "a mapping (key: value lines)"
    else:
        return f"found {found(value)}: {err['msg']}"
    return f"found {found(value)}; allowed: {allowed}{_duration_hint(value)}"


def _duration_hint(value: Any) -> str:
    """`'60s'` -> ` (write 60 for '60s')`: durations are plain numbers of seconds."""
    match = isinstance(value, str) and re.fullmatch(
        r"\s*(\d+(?:\.\d*)?)\s*(ms|s|sec|secs|seconds|m|min|minutes)\s*", value
    )
    if not match:
        return ""
    scale = {"ms": 0.001, "m": 60.0, "min": 60.0, "minutes": 60.0}.get(match.group(2), 1.0)
    return f" (write {float(match.group(1)) * scale:g} for {value!r})"
