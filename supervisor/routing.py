"""routing.yml: the agents' policies, as frozen pydantic models.

`Routing.load(path)` and `Routing.from_dict(data)` merge `defaults:` into each
agent and validate everything. A bad file raises one `RoutingError` that lists
every problem found, each naming the file, the line, the key path, what was
found and what is allowed; a problem in a value that an agent took from
`defaults:` points at the defaults line.

A file with a top-level `delegation:` section is read as the Pantheon dialect
(the routing.yml of the Pantheon agent set): what has a meaning here is mapped
onto the same models, the rest is kept in `AgentPolicy.metadata`, and the
`Routing` says what was mapped and what was ignored.
"""

from __future__ import annotations

import functools
import importlib
import json
import re
import types
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from difflib import get_close_matches
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic.json_schema import models_json_schema

from supervisor.errors import RoutingError, UnknownAgent

__all__ = [
    "AgentPolicy",
    "Backoff",
    "BudgetPolicy",
    "HeartbeatPolicy",
    "IntensityPolicy",
    "ResultPolicy",
    "RetryOn",
    "RetryPolicy",
    "Routing",
    "ShutdownPolicy",
    "SupervisorPolicy",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Backoff(StrEnum):
    none = "none"
    fixed = "fixed"
    exponential = "exponential"


class RetryOn(StrEnum):
    transient = "transient"
    timeout = "timeout"
    stale = "stale"
    crash = "crash"


class RetryPolicy(_Frozen):
    max_retries: int = Field(default=0, ge=0, description="Retries on the same agent.")
    backoff: Backoff = Backoff.exponential
    initial_s: float = Field(default=1.0, ge=0, description="The first wait, in seconds.")
    factor: float = Field(default=2.0, ge=1, description="Each wait is the last one times this.")
    max_s: float = Field(default=30.0, gt=0, description="No wait is longer than this.")
    # Fraction of each wait drawn at random, +/- (0.2 means 80%..120% of the wait).
    jitter: float = Field(default=0.2, ge=0, le=1)
    on: tuple[RetryOn, ...] = Field(
        default=tuple(RetryOn), description="The attempt outcomes that are retried."
    )


class HeartbeatPolicy(_Frozen):
    # Invariant (checked when a file is loaded): stale_after_s > interval_s.
    interval_s: float = Field(default=1.0, gt=0, description="Seconds between heartbeats.")
    stale_after_s: float = Field(
        default=10.0, gt=0, description="No progress for this long: the attempt is stale."
    )


class ShutdownPolicy(_Frozen):
    # Cooperative cancel -> grace_s -> SIGTERM -> term_s -> SIGKILL. 0 means "kill at once".
    grace_s: float = Field(default=2.0, ge=0)
    term_s: float = Field(default=0.5, ge=0)


class BudgetPolicy(_Frozen):
    max_calls: int | None = Field(default=None, ge=0)
    max_input_tokens: int | None = Field(default=None, ge=0)
    max_output_tokens: int | None = Field(default=None, ge=0)
    max_cost: float | None = Field(default=None, ge=0)


class ResultPolicy(_Frozen):
    max_chars: int | None = Field(default=None, gt=0)
    overflow: Literal["truncate", "artifact"] = "truncate"
    schema_: str | None = Field(
        default=None, alias="schema", description="A pydantic model, 'pkg.module:Model'."
    )
    artifact_dir: str | None = None

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class AgentPolicy(_Frozen):
    """One agent's effective policy (defaults already merged in)."""

    role: str | None = None
    kind: Literal["leaf", "orchestrator"] = Field(
        default="leaf", description="Only orchestrators may delegate (ctx.delegate)."
    )
    timeout_s: float = Field(default=120.0, gt=0, description="Each attempt's deadline.")
    retry: RetryPolicy = RetryPolicy()
    fallback: str | None = Field(
        default=None, description="An agent to try when retries are spent, or 'zeus' (the owner)."
    )
    partial_ok: bool = False
    reasoning_effort: Literal["low", "medium", "high"] | None = None
    session_max: int = Field(default=0, ge=0, description="Warm sessions kept for this agent.")
    isolation: Literal["thread", "process"] = "thread"
    heartbeat: HeartbeatPolicy = HeartbeatPolicy()
    shutdown: ShutdownPolicy = ShutdownPolicy()
    budget: BudgetPolicy = BudgetPolicy()
    result: ResultPolicy = ResultPolicy()
    retry_after_tool_calls: bool = False
    read_only: bool = False
    stateful: bool = False
    review_by: str | None = Field(default=None, description="The agent that reviews a `task`.")
    entrypoint: str | None = Field(default=None, description="The work function, 'pkg.module:fn'.")
    command: tuple[str, ...] | None = Field(
        default=None, min_length=1, description="A command agent: the program and its arguments."
    )
    can_delegate_to: tuple[str, ...] | None = None  # None: any agent
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_work_source(self) -> AgentPolicy:
        if self.entrypoint is not None and self.command is not None:
            raise ValueError("give either `entrypoint` or `command`, not both")
        return self


class IntensityPolicy(_Frozen):
    max_restarts: int = Field(default=20, ge=0)
    within_s: float = Field(default=60.0, gt=0)


class SupervisorPolicy(_Frozen):
    max_depth: int = Field(default=2, ge=1, description="Levels of delegation below the host.")
    max_concurrent: int = Field(default=64, ge=1)
    intensity: IntensityPolicy = IntensityPolicy()
    budget: BudgetPolicy = BudgetPolicy()


_AGENT_DEFAULT_KEYS = set(AgentPolicy.model_fields) - {"entrypoint", "command", "metadata"}
_FILE_KEYS = ("version", "defaults", "supervisor", "agents")
# `fallback: zeus` gives a failure back to the owner, so no agent may be called zeus.
OWNER = "zeus"


class Routing(_Frozen):
    """The whole routing file: supervisor limits and each agent's effective policy."""

    version: Literal[1] = 1
    supervisor: SupervisorPolicy = SupervisorPolicy()
    defaults: dict[str, Any] = Field(default_factory=dict)
    agents: dict[str, AgentPolicy] = Field(default_factory=dict)
    source: str | None = None
    dialect: Literal["native", "pantheon"] = "native"
    # What a Pantheon file's fields became here, and what had no meaning (empty when native).
    mapped: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str | None = None) -> Routing:
        """Validate a routing mapping; `defaults:` is merged into every agent."""
        return _build(data, source=source, lines=None)

    @classmethod
    def load(cls, path: str | Path) -> Routing:
        """Read and validate a routing.yml file (either dialect)."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise RoutingError(f"{path}: cannot read it: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise RoutingError(f"{path}: not UTF-8 text ({exc.reason})") from None
        try:
            root = yaml.compose(text, Loader=_Loader)
            data = yaml.load(text, Loader=_Loader)  # a SafeLoader: no arbitrary objects
        except yaml.MarkedYAMLError as exc:
            raise RoutingError(_yaml_problem(str(path), exc)) from None
        except yaml.YAMLError as exc:
            raise RoutingError(f"{path}: not valid YAML: {exc}") from None
        return _build({} if data is None else data, source=str(path), lines=_Lines(root))

    def agent(self, name: str) -> AgentPolicy:
        """The effective policy of agent `name`; `UnknownAgent` names the ones that exist."""
        try:
            return self.agents[name]
        except KeyError:
            raise UnknownAgent(
                f"unknown agent {name!r}: routing defines {sorted(self.agents) or 'no agents'}; "
                "add it to routing.yml or zeus.register() it"
            ) from None

    def with_agent(self, name: str, policy: AgentPolicy | None = None) -> Routing:
        """A copy with agent `name` added (the defaults' policy when `policy` is None)."""
        if policy is None:
            policy = AgentPolicy.model_validate(self.defaults)
        return self.model_copy(update={"agents": {**self.agents, name: policy}})

    def resolve_work(self, name: str) -> Callable[..., Any] | None:
        """The callable named by agent `name`'s `entrypoint`, imported once; None without one.

        `UnknownAgent` for an agent routing does not define; `RoutingError` when the
        entrypoint no longer imports.
        """
        spec = self.agent(name).entrypoint
        if spec is None:
            return None
        try:
            return _import_entrypoint(spec)
        except _EntrypointError as exc:
            raise RoutingError(
                f"{self.source or 'routing'}: agents.{name}.entrypoint: {exc}"
            ) from None

    @classmethod
    def file_schema(cls) -> dict[str, Any]:
        """The JSON Schema of a native routing.yml, for editors."""
        _, top = models_json_schema(
            [(AgentPolicy, "validation"), (SupervisorPolicy, "validation")],
            ref_template="#/$defs/{model}",
        )
        defs: dict[str, Any] = top["$defs"]
        agent = defs["AgentPolicy"]
        agent["properties"].pop("metadata", None)
        agent["properties"]["metadata"] = {
            "type": "object",
            "description": "Free-form data kept with the agent.",
        }
        defaults = json.loads(json.dumps(agent))
        defaults["title"] = "Defaults"
        defaults["description"] = "Merged into every agent; an agent's own keys win."
        for key in set(defaults["properties"]) - _AGENT_DEFAULT_KEYS:
            del defaults["properties"][key]
        defs["Defaults"] = defaults
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Zeus routing.yml",
            "description": "Agents and their supervision policies (timeouts, retries, "
            "fallbacks, budgets, isolation).",
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "version": {"const": 1, "description": "The file format version."},
                "defaults": {"$ref": "#/$defs/Defaults"},
                "supervisor": {"$ref": "#/$defs/SupervisorPolicy"},
                "agents": {
                    "type": "object",
                    "description": "Agent name -> policy.",
                    "propertyNames": {"not": {"const": OWNER}},
                    "additionalProperties": {
                        "anyOf": [{"$ref": "#/$defs/AgentPolicy"}, {"type": "null"}]
                    },
                },
            },
            "$defs": defs,
        }


# -- where things are in the file ------------------------------------------------------------

KeyPath = tuple[str | int, ...]
_MERGE_TAG = "tag:yaml.org,2002:merge"
_BOOL_TAG, _STR_TAG = "tag:yaml.org,2002:bool", "tag:yaml.org,2002:str"


class _Loader(yaml.SafeLoader):
    """SafeLoader, except that a key spelled like a YAML 1.1 boolean stays a string.

    YAML 1.1 reads `on`, `off`, `yes` and `no` as booleans, which would turn
    `retry: {on: [timeout]}` into a key `True`. Values are left as YAML reads them.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag == _BOOL_TAG:
                key_node.tag = _STR_TAG
        return super().construct_mapping(node, deep)


# YAML 1.1 wants a dot in a float, so `timeout_s: 1e3` would be the text "1e3"; read it as 1000.0.
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _dotted(path: Sequence[str | int]) -> str:
    """`agents.apollo.retry.max_retries`, `delegation.zeus[2].timeout`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class _Lines:
    """Key path -> 1-based line of the key, from the YAML node tree; and duplicate keys."""

    def __init__(self, root: yaml.Node | None) -> None:
        self._lines: dict[KeyPath, int] = {}
        self.duplicates: list[tuple[KeyPath, int, int]] = []  # path, line, line of the first
        if root is not None:
            self._lines[()] = root.start_mark.line + 1
            self._walk(root, (), frozenset())

    def _walk(self, node: yaml.Node, path: KeyPath, active: frozenset[int]) -> None:
        if id(node) in active:  # a recursive alias
            return
        active = active | {id(node)}
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            merged: list[yaml.Node] = []
            for key_node, value_node in node.value:
                if key_node.tag == _MERGE_TAG:
                    merged.append(value_node)
                    continue
                if not isinstance(key_node, yaml.ScalarNode):
                    continue
                key, line = str(key_node.value), key_node.start_mark.line + 1
                if key in seen:
                    self.duplicates.append(((*path, key), line, seen[key]))
                    continue
                seen[key] = line
                self._lines[(*path, key)] = line
                self._walk(value_node, (*path, key), active)
            for value_node in merged:  # `<<: *base`: its keys, where the agent has none
                for base in value_node.value if isinstance(value_node, yaml.SequenceNode) else [
                    value_node
                ]:
                    self._walk_defaults(base, path, active)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self._lines[(*path, index)] = item.start_mark.line + 1
                self._walk(item, (*path, index), active)

    def _walk_defaults(self, node: yaml.Node, path: KeyPath, active: frozenset[int]) -> None:
        inner = _Lines(None)
        inner._walk(node, path, active)
        for key, line in inner._lines.items():
            self._lines.setdefault(key, line)

    def line(self, path: KeyPath) -> int | None:
        """The line of `path`, or of its nearest ancestor that the file spells out."""
        for end in range(len(path), -1, -1):
            line = self._lines.get(path[:end])
            if line is not None:
                return line
        return None


def _yaml_problem(source: str, exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    where = f"{source}:{mark.line + 1}" if mark is not None else source
    column = f" (column {mark.column + 1})" if mark is not None else ""
    what = " ".join(str(p) for p in (exc.context, exc.problem) if p)
    return f"{where}: not valid YAML: {what}{column}"


# -- collecting problems ----------------------------------------------------------------------

_MAX_SHOWN = 10


@dataclass
class _Origin:
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
class _Problems:
    source: str
    lines: _Lines | None
    origin: Callable[[KeyPath], KeyPath] = lambda path: path
    found: list[tuple[int | None, str]] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)

    def add(self, path: KeyPath, message: str, *, line: int | None = None) -> None:
        where = self.origin(path)
        text = f"{_dotted(where)}: {message}" if where else message
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
        head = f"{self.source}: {count} problem{'s' if count > 1 else ''}; fix and run " + (
            f"`zeus validate {self.source}`" if self.lines else "again"
        )
        body = [
            f"{self.source}:{line}: {text}" if line is not None else f"{self.source}: {text}"
            for line, text in ordered[:_MAX_SHOWN]
        ]
        if count > _MAX_SHOWN:
            body.append(f"... and {count - _MAX_SHOWN} more")
        raise RoutingError("\n".join([head, *body]))


def _found(value: Any) -> str:
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


def _allowed_list(names: Iterable[str]) -> str:
    return ", ".join(sorted(names))


def _unknown_key(key: str, allowed: Iterable[str]) -> str:
    allowed = sorted(allowed)
    near = get_close_matches(key, allowed, n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return f"unknown key {key!r}{hint}; allowed: {', '.join(allowed)}"


# -- pydantic errors, said plainly -------------------------------------------------------------

_WORDS = {
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
            found = _unwrap_model(arg)
            if found is not None:
                return found
    return None


def _file_keys(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _is_int_field(annotation: Any) -> bool:
    if annotation is int:
        return True
    return get_origin(annotation) in (Union, types.UnionType) and int in get_args(annotation)


def _explain(root: type[BaseModel], err: Any) -> str:
    """One pydantic error as `found X; allowed: Y`."""
    loc: tuple[str | int, ...] = tuple(err["loc"])
    kind: str = err["type"]
    ctx: dict[str, Any] = err.get("ctx") or {}
    value = err["input"]
    if kind == "extra_forbidden":
        parent, _ = _field_at(root, loc[:-1])
        model = _unwrap_model(parent) or (root if len(loc) == 1 else None)
        keys = _file_keys(model) if model else []
        return _unknown_key(str(loc[-1]), keys)
    if kind == "value_error":
        return str(err["msg"]).removeprefix("Value error, ")
    _, info = _field_at(root, loc)
    name = next((p for p in reversed(loc) if isinstance(p, str)), "")
    number = "an integer" if info is not None and _is_int_field(info.annotation) else "a number"
    seconds = " of seconds" if name.endswith("_s") and number == "a number" else ""
    if name in _WORDS:
        allowed = _WORDS[name]
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
        return f"found {_found(value)}: {err['msg']}"
    return f"found {_found(value)}; allowed: {allowed}{_duration_hint(value)}"


def _duration_hint(value: Any) -> str:
    """`'60s'` -> ` (write 60 for '60s')`: durations are plain numbers of seconds."""
    match = isinstance(value, str) and re.fullmatch(
        r"\s*(\d+(?:\.\d*)?)\s*(ms|s|sec|secs|seconds|m|min|minutes)\s*", value
    )
    if not match:
        return ""
    scale = {"ms": 0.001, "m": 60.0, "min": 60.0, "minutes": 60.0}.get(match.group(2), 1.0)
    return f" (write {float(match.group(1)) * scale:g} for {value!r})"


# -- the native dialect ------------------------------------------------------------------------


def _json(value: Any) -> str:
    def fallback(obj: Any) -> Any:
        if isinstance(obj, BaseModel):
            return obj.model_dump(mode="json", by_alias=True, exclude_unset=True)
        if isinstance(obj, set | frozenset):
            return sorted(obj, key=str)
        return str(obj)

    return json.dumps(value, default=fallback)


def _strict_errors(model: type[BaseModel], data: Any) -> list[Any]:
    try:
        model.model_validate_json(_json(data), strict=True)
    except ValidationError as exc:
        return list(exc.errors())
    return []


def _mapping_or_none(
    data: Mapping[str, Any], key: str, problems: _Problems, allowed: str
) -> dict[str, Any]:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.add((key,), f"found {_found(value)}; allowed: {allowed}")
        return {}
    return value


def _check_native(
    data: Mapping[str, Any],
    problems: _Problems,
    explicit: dict[KeyPath, KeyPath] | None = None,
) -> dict[str, Any]:
    """Report every problem of a native mapping; return the payload for `Routing`."""
    for key in data:
        if key not in _FILE_KEYS:
            problems.add((str(key),), _unknown_key(str(key), _FILE_KEYS))
    defaults_in = _mapping_or_none(data, "defaults", problems, "a mapping of agent policy keys")
    defaults: dict[str, Any] = {}
    for key, value in defaults_in.items():
        if key in _AGENT_DEFAULT_KEYS:
            defaults[key] = value
        else:
            extra = " (entrypoint, command and metadata belong to one agent)" if key in (
                "entrypoint", "command", "metadata") else ""
            problems.add(("defaults", str(key)), _unknown_key(str(key), _AGENT_DEFAULT_KEYS)
                         + extra)
    agents_in = _mapping_or_none(data, "agents", problems, "a mapping of agent name -> policy")
    agents: dict[str, dict[str, Any]] = {}
    for name, raw in agents_in.items():
        if name == OWNER:
            problems.add(("agents", OWNER), "`zeus` is reserved: it names the supervisor "
                         "(`fallback: zeus` gives a failure back to the owner); rename the agent")
        elif raw is not None and not isinstance(raw, dict):
            problems.add(("agents", str(name)),
                         f"found {_found(raw)}; allowed: a mapping of the agent's policy keys")
        else:
            agents[str(name)] = raw or {}
    problems.origin = _Origin(agents, defaults, explicit or {})

    for err in _strict_errors(AgentPolicy, defaults):
        problems.add(("defaults", *err["loc"]), _explain(AgentPolicy, err))
    _check_heartbeat(defaults, ("defaults",), problems)

    supervisor = data.get("supervisor")
    payload: dict[str, Any] = {
        "version": data.get("version", 1),
        "defaults": defaults,
        "agents": {name: _deep_merge(defaults, raw) for name, raw in agents.items()},
    }
    if supervisor is not None:
        payload["supervisor"] = supervisor
    for err in _strict_errors(Routing, payload):
        problems.add(tuple(err["loc"]), _explain(Routing, err))
    names = set(agents)
    for name, merged in payload["agents"].items():
        _check_agent(name, merged, names, problems)
    return payload


def _check_agent(name: str, agent: Mapping[str, Any], names: set[str], problems: _Problems) -> None:
    """What pydantic cannot see: names of other agents, imports, and the heartbeat invariant."""
    at: KeyPath = ("agents", name)
    others = _allowed_list(names) or "none defined"
    fallback = agent.get("fallback")
    if isinstance(fallback, str) and fallback != OWNER and fallback not in names:
        problems.add((*at, "fallback"), f"unknown agent {fallback!r}; allowed: {others}, "
                     "or zeus (give the failure back to the owner)")
    review_by = agent.get("review_by")
    if isinstance(review_by, str) and review_by not in names:
        problems.add((*at, "review_by"), f"unknown agent {review_by!r}; allowed: {others}")
    targets = agent.get("can_delegate_to")
    if isinstance(targets, list | tuple):
        for index, target in enumerate(targets):
            if isinstance(target, str) and target not in names:
                problems.add((*at, "can_delegate_to", index),
                             f"unknown agent {target!r}; allowed: {others}")
    entrypoint = agent.get("entrypoint")
    if isinstance(entrypoint, str):
        try:
            _import_entrypoint(entrypoint)
        except _EntrypointError as exc:
            problems.add((*at, "entrypoint"), str(exc))
    command = agent.get("command")
    if isinstance(command, list | tuple) and command and command[0] == "":
        problems.add((*at, "command", 0), f"found ''; allowed: {_WORDS['command']}")
    _check_heartbeat(agent, at, problems)


def _check_heartbeat(policy: Mapping[str, Any], at: KeyPath, problems: _Problems) -> None:
    beat = policy.get("heartbeat")
    if not isinstance(beat, Mapping):
        return
    defaults = HeartbeatPolicy()
    interval = beat.get("interval_s", defaults.interval_s)
    stale = beat.get("stale_after_s", defaults.stale_after_s)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0
               for v in (interval, stale)) or stale > interval:
        return
    # Point at whichever of the two this agent sets itself; else at stale_after_s.
    key = "stale_after_s"
    if at[0] == "agents" and problems.origin((*at, "heartbeat", key))[0] == "defaults" and (
        problems.origin((*at, "heartbeat", "interval_s"))[0] != "defaults"
    ):
        key = "interval_s"
    problems.add((*at, "heartbeat", key),
                 f"stale_after_s {stale} is not greater than interval_s {interval}; allowed: "
                 "stale_after_s > interval_s (several heartbeats fit in the stale window)")


def _deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


# -- the Pantheon dialect ----------------------------------------------------------------------

_PANTHEON_SECTIONS = ("handoffs", "platforms", "artifacts", "routing_matrix")
_PANTHEON_AGENT_KEPT = (
    "model_tier", "user_invocable", "can_receive_delegation", "capabilities", "skills"
)
_PANTHEON_ENTRY_MAPPED: dict[str, tuple[str, ...]] = {
    "timeout": ("timeout_s",),
    "retry_count": ("retry", "max_retries"),
    "retry_backoff": ("retry", "backoff"),
    "fallback_agent": ("fallback",),
    "session_max": ("session_max",),
}
_PANTHEON_ENTRY_KEPT = (
    "when", "model_tier", "parallel", "prompt_hint", "pre_condition", "post_condition"
)
_SKIP = object()


@dataclass
class _Pantheon:
    """A Pantheon file translated to the native shape, with what went where."""

    data: dict[str, Any] = field(default_factory=dict)
    explicit: dict[KeyPath, KeyPath] = field(default_factory=dict)
    mapped: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


def _from_pantheon(data: Mapping[str, Any], problems: _Problems) -> _Pantheon:
    out = _Pantheon()
    native: dict[str, Any] = {"version": 1}
    for key in ("defaults", "supervisor"):
        if key in data:
            native[key] = data[key]
    if "defaults" in data or "supervisor" in data:
        out.mapped.append("defaults, supervisor: Zeus's own sections, read as in routing.yml")
    if "version" in data:
        out.ignored.append(f"version: {data['version']} is Pantheon's schema version")
    sections = [k for k in _PANTHEON_SECTIONS if k in data]
    if sections:
        out.ignored.append(f"{', '.join(sections)}: no meaning for supervision (not read)")
    for key in data:
        if key not in (*_PANTHEON_SECTIONS, "version", "agents", "delegation", "defaults",
                       "supervisor"):
            out.ignored.append(f"{key}: not a Pantheon v3.11 section (not read)")

    agents = _pantheon_agents(data, problems, out)
    native["agents"] = agents
    _pantheon_delegation(data, agents, problems, out)
    untimed = sorted(name for name in agents if "timeout_s" not in agents[name])
    if untimed:
        out.mapped.append(
            f"no entry sets a timeout for {', '.join(untimed)}: the default "
            f"{_seconds(_default_timeout(native))} applies"
        )
    out.data = native
    return out


def _default_timeout(native: Mapping[str, Any]) -> Any:
    defaults = native.get("defaults")
    if isinstance(defaults, Mapping) and "timeout_s" in defaults:
        return defaults["timeout_s"]
    return AgentPolicy().timeout_s


def _seconds(value: Any) -> str:
    return f"{value:g}s" if isinstance(value, int | float) else repr(value)


def _pantheon_agents(
    data: Mapping[str, Any], problems: _Problems, out: _Pantheon
) -> dict[str, dict[str, Any]]:
    raw_agents = _mapping_or_none(data, "agents", problems, "a mapping of agent name -> fields")
    agents: dict[str, dict[str, Any]] = {}
    counts: Counter[str] = Counter()
    kept: set[str] = set()
    for raw_name, raw in raw_agents.items():
        name = str(raw_name)
        at: KeyPath = ("agents", name)
        if name == OWNER:
            out.ignored.append("agents.zeus: the root orchestrator, which Zeus itself plays")
            continue
        if raw is not None and not isinstance(raw, dict):
            problems.add(at, f"found {_found(raw)}; allowed: a mapping of the agent's fields")
            continue
        agent: dict[str, Any] = {}
        metadata: dict[str, Any] = {}
        for key, value in (raw or {}).items():
            if key == "role":
                agent["role"] = value
                counts["role"] += 1
            elif key == "can_delegate":
                if not isinstance(value, bool):
                    problems.add((*at, key), f"found {_found(value)}; allowed: true or false")
                    continue
                agent["kind"] = "orchestrator" if value else "leaf"
                out.explicit[(*at, "kind")] = (*at, key)
                counts["orchestrator" if value else "leaf"] += 1
            elif key == "subagent_can_delegate_to":
                _pantheon_targets(value, at, agent, problems, out)
                counts["targets"] += "can_delegate_to" in agent
            else:
                metadata[str(key)] = value
                if key in _PANTHEON_AGENT_KEPT:
                    kept.add(key)
                else:
                    out.ignored.append(f"{_dotted((*at, str(key)))}: not in Pantheon's schema; "
                                       "kept in metadata")
        if metadata:
            agent["metadata"] = metadata
        agents[name] = agent
    if counts["role"]:
        out.mapped.append(f"agents.*.role -> role ({counts['role']} agents)")
    if counts["orchestrator"] or counts["leaf"]:
        out.mapped.append(f"agents.*.can_delegate -> kind ({counts['orchestrator']} "
                          f"orchestrator, {counts['leaf']} leaf)")
    if counts["targets"]:
        out.mapped.append(
            f"agents.*.subagent_can_delegate_to -> can_delegate_to ({counts['targets']} agents)"
        )
    if kept:
        names = [k for k in _PANTHEON_AGENT_KEPT if k in kept]
        out.ignored.append(f"agents.*.{{{', '.join(names)}}}: kept in metadata")
    return agents


def _pantheon_targets(
    value: Any, at: KeyPath, agent: dict[str, Any], problems: _Problems, out: _Pantheon
) -> None:
    key = "subagent_can_delegate_to"
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        problems.add((*at, key), f"found {_found(value)}; allowed: a list of agent names")
        return
    targets: list[str] = []
    for index, target in enumerate(value):
        if target == OWNER:
            out.ignored.append(f"{_dotted((*at, key, index))}: zeus, the owner, gets every "
                               "result anyway")
            continue
        out.explicit[(*at, "can_delegate_to", len(targets))] = (*at, key, index)
        targets.append(target)
    out.explicit[(*at, "can_delegate_to")] = (*at, key)
    agent["can_delegate_to"] = targets


def _pantheon_delegation(
    data: Mapping[str, Any],
    agents: dict[str, dict[str, Any]],
    problems: _Problems,
    out: _Pantheon,
) -> None:
    lists = _mapping_or_none(
        data, "delegation", problems, "a mapping of orchestrator name -> list of entries"
    )
    # The host's own list (zeus) decides first; other orchestrators' lists in file order.
    ordered = sorted(lists.items(), key=lambda item: item[0] != OWNER)
    first: dict[tuple[str, tuple[str, ...]], KeyPath] = {}
    counts: Counter[str] = Counter()
    handbacks: list[str] = []
    kept: set[str] = set()
    for orchestrator, entries in ordered:
        at: KeyPath = ("delegation", str(orchestrator))
        if orchestrator != OWNER and orchestrator not in agents:
            problems.add(at, f"unknown orchestrator {orchestrator!r}; allowed: zeus, "
                         f"{_allowed_list(agents)}")
            continue
        if entries is None:
            continue
        if not isinstance(entries, list):
            problems.add(at, f"found {_found(entries)}; allowed: a list of entries "
                         "(- target: <agent> ...)")
            continue
        for index, entry in enumerate(entries):
            here = (*at, index)
            if not isinstance(entry, dict):
                problems.add(here, f"found {_found(entry)}; allowed: a mapping with a target")
                continue
            target = entry.get("target")
            if target == OWNER:
                handbacks.append(_dotted(here))
                continue
            if not isinstance(target, str) or target not in agents:
                problems.add((*here, "target"), f"found {_found(target)}; allowed: an agent "
                             f"name ({_allowed_list(agents)}) or zeus")
                continue
            agent = agents[target]
            extras: dict[str, Any] = {}
            for key, value in entry.items():
                if key == "target":
                    continue
                if key not in _PANTHEON_ENTRY_MAPPED:
                    extras[str(key)] = value
                    if key in _PANTHEON_ENTRY_KEPT:
                        kept.add(key)
                    else:
                        out.ignored.append(f"{_dotted((*here, str(key)))}: not in Pantheon's "
                                           "schema; kept in metadata")
                    continue
                converted = _pantheon_value(key, value, (*here, key), problems)
                if converted is _SKIP:
                    continue
                dest = _PANTHEON_ENTRY_MAPPED[key]
                earlier = first.get((target, dest))
                if earlier is not None:
                    if _get(agent, dest) != converted:
                        out.ignored.append(
                            f"{_dotted((*here, key))}: {value!r} for {target}; "
                            f"{_dotted(earlier)} set it first"
                        )
                    continue
                _put(agent, dest, converted)
                first[(target, dest)] = (*here, key)
                out.explicit[("agents", target, *dest)] = (*here, key)
                counts[key] += 1
            if extras:
                metadata = agent.setdefault("metadata", {})
                metadata.setdefault("delegation", []).append({"from": orchestrator, **extras})
    for key, dest in _PANTHEON_ENTRY_MAPPED.items():
        if counts[key]:
            unit = " (ms)" if key == "timeout" else ""
            out.mapped.append(f"delegation.*[].{key}{unit} -> {'.'.join(dest)} "
                              f"({counts[key]} agents)")
    if kept:
        names = [k for k in _PANTHEON_ENTRY_KEPT if k in kept]
        out.ignored.append(f"delegation.*[].{{{', '.join(names)}}}: kept in metadata "
                           "(under `delegation`)")
    if handbacks:
        shown = ", ".join(handbacks[:3]) + (", ..." if len(handbacks) > 3 else "")
        out.ignored.append(f"{len(handbacks)} entries that hand back to zeus ({shown}): "
                           "the owner gets every result anyway")


def _pantheon_value(key: str, value: Any, at: KeyPath, problems: _Problems) -> Any:
    """A delegation entry's value in Zeus's terms, or `_SKIP` (after reporting a problem)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if key == "timeout":
        if number and value > 0:
            return value / 1000
        problems.add(at, f"found {_found(value)}; allowed: milliseconds > 0 (60000 is a minute)")
    elif key in ("retry_count", "session_max"):
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        problems.add(at, f"found {_found(value)}; allowed: an integer >= 0")
    elif key == "retry_backoff":
        if value in ("exponential", "fixed"):
            return value
        problems.add(at, f"found {_found(value)}; allowed: 'exponential' or 'fixed'")
    elif key == "fallback_agent":
        if value is None:
            return _SKIP
        if isinstance(value, str):
            return value
        problems.add(at, f"found {_found(value)}; allowed: an agent name, zeus, or null")
    return _SKIP


def _get(data: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    for part in path:
        data = data.get(part, {})
    return data


def _put(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for part in path[:-1]:
        data = data.setdefault(part, {})
    data[path[-1]] = value


# -- building ----------------------------------------------------------------------------------


def _build(data: Any, *, source: str | None, lines: _Lines | None) -> Routing:
    label = source or "routing"
    problems = _Problems(label, lines)
    try:
        _json(data)
    except ValueError:  # json's "Circular reference detected"
        problems.add((), "a value contains itself (an alias used inside its own anchor); "
                     "allowed: aliases that do not loop")
        problems.raise_if_any()
    if not isinstance(data, dict):
        problems.add((), f"found {_found(data)} at the top level; allowed: a mapping with "
                     f"{', '.join(_FILE_KEYS)}")
        problems.raise_if_any()
    for path, line, first_line in lines.duplicates if lines else ():
        problems.add(path, f"duplicate key (the first is on line {first_line}): YAML keeps "
                     "only the last, so say it once", line=line)
    dialect: Literal["native", "pantheon"] = "native"
    mapped: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()
    explicit: dict[KeyPath, KeyPath] = {}
    if "delegation" in data:
        dialect = "pantheon"
        translated = _from_pantheon(data, problems)
        data, explicit = translated.data, translated.explicit
        mapped, ignored = tuple(translated.mapped), tuple(translated.ignored)
    payload = _check_native(data, problems, explicit)
    problems.raise_if_any()
    payload.update(source=source, dialect=dialect, mapped=mapped, ignored=ignored)
    try:
        return Routing.model_validate_json(_json(payload), strict=True)
    except ValidationError as exc:  # every such case is reported above; this is a safety net
        raise RoutingError(f"{label}: {exc}") from None


# -- entrypoints -------------------------------------------------------------------------------

_ENTRYPOINT = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


class _EntrypointError(Exception):
    """Why an entrypoint does not resolve (the caller adds file and key path)."""


@functools.cache
def _import_entrypoint(spec: str) -> Callable[..., Any]:
    """Import `pkg.module:attr.attr` once (failures are not cached: a fixed module can retry)."""
    if not _ENTRYPOINT.fullmatch(spec):
        raise _EntrypointError(
            f"found {spec!r}; allowed: 'pkg.module:function' (a module, a colon, a callable in it)"
        )
    module_name, _, attrs = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 -- any import failure is reported as bad input
        raise _EntrypointError(
            f"found {spec!r}, but module {module_name!r} does not import "
            f"({type(exc).__name__}: {exc}); is it installed, or run from the project root?"
        ) from None
    for part in attrs.split("."):
        if not hasattr(target, part):
            raise _EntrypointError(
                f"found {spec!r}, but {getattr(target, '__name__', module_name)!r} has no "
                f"attribute {part!r}"
            )
        target = getattr(target, part)
    if not callable(target):
        raise _EntrypointError(
            f"found {spec!r}, which is a {type(target).__name__}; allowed: a callable "
            "(a work function taking a brief and a context)"
        )
    return target  # type: ignore[no-any-return]
