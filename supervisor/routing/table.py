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

The policy models live in `policies`, the YAML line marks in `lines`, the
problem reports in `problems`, the Pantheon dialect in `pantheon`, the
entrypoint import in `entrypoints` and the checks of one agent that pydantic
cannot see in `checks`; this module holds `Routing` and the walk over a native
file, and re-exports the models.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError
from pydantic.json_schema import models_json_schema

from supervisor.errors import RoutingError, UnknownAgent, did_you_mean
from supervisor.routing.bounded import BoundExceeded, load_bounded, read_bounded
from supervisor.routing.checks import check_agent, check_heartbeat, speaks_cli
from supervisor.routing.entrypoints import (
    EntrypointError,
    import_entrypoint,
)
from supervisor.routing.lines import KeyPath, Lines, Loader, yaml_problem
from supervisor.routing.pantheon import from_pantheon
from supervisor.routing.policies import (
    AGENT_DEFAULT_KEYS,
    OWNER,
    AgentPolicy,
    Frozen,
    SupervisorPolicy,
    agent_name_problem,
)
from supervisor.routing.problems import (
    Origin,
    Problems,
    allowed_list,
    explain,
    found,
    mapping_or_none,
    unknown_key,
)

__all__ = ["Routing", "deep_merge"]

_FILE_KEYS = ("version", "defaults", "supervisor", "agents")


class Routing(Frozen):
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
    def from_dict(
        cls,
        data: dict[str, Any],
        *,
        source: str | None = None,
        import_entrypoints: bool = True,
        registered: Collection[str] | None = None,
    ) -> Routing:
        """Validate a routing mapping; `defaults:` is merged into every agent.

        Each `entrypoint` is imported to check it (its module's code runs) unless
        `import_entrypoints` is False; then only its form is checked. `registered`: see
        `load`.
        """
        return _build(data, source=source, lines=None, import_entrypoints=import_entrypoints,
                      registered=registered)

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        import_entrypoints: bool = True,
        registered: Collection[str] | None = None,
    ) -> Routing:
        """Read and validate a routing.yml file (either dialect).

        A routing file is code: each `entrypoint` is imported to check it, which runs
        its module's import-time code. With `import_entrypoints=False` (`zeus validate
        --no-import`) only its form is checked, for a file not trusted yet.

        `registered` (the agents the host registers in code, `zeus.register`): when it
        is given, a native file must be able to run as it is: an agent outside it with
        neither `entrypoint:` nor `command:` is a problem, and so is a file with no
        agents. None (the default) checks neither: a host may register every agent.
        """
        path = Path(path)
        try:
            text = read_bounded(path)
            data, root = load_bounded(text, Loader)  # a SafeLoader: no arbitrary objects
        except OSError as exc:
            raise RoutingError(f"{path}: cannot read it: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise RoutingError(f"{path}: not UTF-8 text ({exc.reason})") from None
        except BoundExceeded as exc:
            where = f"{path}:{exc.line}" if exc.line is not None else str(path)
            raise RoutingError(f"{where}: {exc}") from None
        except yaml.MarkedYAMLError as exc:
            raise RoutingError(yaml_problem(str(path), exc)) from None
        except yaml.YAMLError as exc:
            raise RoutingError(f"{path}: not valid YAML: {exc}") from None
        return _build({} if data is None else data, source=str(path), lines=Lines(root),
                      import_entrypoints=import_entrypoints, registered=registered)

    def agent(self, name: str) -> AgentPolicy:
        """The effective policy of agent `name`; `UnknownAgent` names the ones that exist."""
        try:
            return self.agents[name]
        except KeyError:
            raise UnknownAgent(
                f"unknown agent {name!r}{did_you_mean(name, self.agents)}: routing defines "
                f"{sorted(self.agents) or 'no agents'}; "
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
            return import_entrypoint(spec)
        except EntrypointError as exc:
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
        for key in set(defaults["properties"]) - AGENT_DEFAULT_KEYS:
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


# -- building ----------------------------------------------------------------------------------


def _build(
    data: Any,
    *,
    source: str | None,
    lines: Lines | None,
    import_entrypoints: bool = True,
    registered: Collection[str] | None = None,
) -> Routing:
    label = source or "routing"
    problems = Problems(label, lines)
    try:
        _json(data)
    except ValueError:  # json's "Circular reference detected"
        problems.add((), "a value contains itself (an alias used inside its own anchor); "
                     "allowed: aliases that do not loop")
        problems.raise_if_any()
    if not isinstance(data, dict):
        problems.add((), f"found {found(data)} at the top level; allowed: a mapping with "
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
        translated = from_pantheon(data, problems)
        data, explicit = translated.data, translated.explicit
        mapped, ignored = tuple(translated.mapped), tuple(translated.ignored)
    payload = _check_native(data, problems, explicit, import_entrypoints=import_entrypoints)
    if registered is not None and dialect == "native":
        _check_runnable(payload["agents"], registered, problems)
    problems.raise_if_any()
    payload.update(source=source, dialect=dialect, mapped=mapped, ignored=ignored)
    try:
        return Routing.model_validate_json(_json(payload), strict=True)
    except ValidationError as exc:  # every such case is reported above; this is a safety net
        raise RoutingError(f"{label}: {exc}") from None


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


def _check_native(
    data: Mapping[str, Any],
    problems: Problems,
    explicit: dict[KeyPath, KeyPath] | None = None,
    *,
    import_entrypoints: bool = True,
) -> dict[str, Any]:
    """Report every problem of a native mapping; return the payload for `Routing`."""
    for key in data:
        if key not in _FILE_KEYS:
            problems.add((str(key),), unknown_key(str(key), _FILE_KEYS))
    defaults_in = mapping_or_none(data, "defaults", problems, "a mapping of agent policy keys")
    defaults: dict[str, Any] = {}
    for key, value in defaults_in.items():
        if key in AGENT_DEFAULT_KEYS:
            defaults[key] = value
        else:
            extra = " (entrypoint, command and metadata belong to one agent)" if key in (
                "entrypoint", "command", "metadata") else ""
            problems.add(("defaults", str(key)), unknown_key(str(key), AGENT_DEFAULT_KEYS)
                         + extra)
    agents_in = mapping_or_none(data, "agents", problems, "a mapping of agent name -> policy")
    agents: dict[str, dict[str, Any]] = {}
    for name, raw in agents_in.items():
        bad_name = agent_name_problem(str(name))
        if bad_name is not None:
            problems.add(("agents", str(name)), bad_name)
        elif name == OWNER:
            problems.add(("agents", OWNER), "`zeus` is reserved: it names the supervisor "
                         "(`fallback: zeus` gives a failure back to the owner); rename the agent")
        elif raw is not None and not isinstance(raw, dict):
            problems.add(("agents", str(name)),
                         f"found {found(raw)}; allowed: a mapping of the agent's policy keys")
        else:
            agents[str(name)] = raw or {}
    problems.origin = Origin(agents, defaults, explicit or {})

    for err in _strict_errors(AgentPolicy, defaults):
        problems.add(("defaults", *err["loc"]), explain(AgentPolicy, err))
    check_heartbeat(defaults, ("defaults",), problems)

    supervisor = data.get("supervisor")
    payload: dict[str, Any] = {
        "version": data.get("version", 1),
        "defaults": defaults,
        "agents": {name: cli_heartbeat(deep_merge(defaults, raw))
                   for name, raw in agents.items()},
    }
    if supervisor is not None:
        payload["supervisor"] = supervisor
    for err in _strict_errors(Routing, payload):
        problems.add(tuple(err["loc"]), explain(Routing, err))
    names = set(agents)

    @functools.cache  # once per file, not per agent: loading stays linear in the agents
    def others() -> str:
        return allowed_list(names) or "none defined"

    for name, merged in payload["agents"].items():
        check_agent(name, merged, names, others, problems, import_entrypoints)
    return payload


# What an agent CLI's heartbeat is when the routing sets none (docs/agent-clis.md): a model
# thinks in silence for a minute or two, and a test run is one long tool call.
CLI_HEARTBEAT = {"stale_after_s": 120.0, "stale_in_tool_s": 1800.0}


def cli_heartbeat(agent: dict[str, Any]) -> dict[str, Any]:
    """`agent` with an agent CLI's stale thresholds where its `heartbeat:` (or the
    defaults') sets none; any other agent as it is."""
    beat = agent.get("heartbeat", {})
    if not speaks_cli(agent) or not isinstance(beat, Mapping):
        return agent
    filled = {key: value for key, value in CLI_HEARTBEAT.items() if key not in beat}
    stale = beat.get("stale_after_s")
    if "stale_in_tool_s" in filled and isinstance(stale, int | float) and stale > 1800:
        filled["stale_in_tool_s"] = float(stale)  # never below the stale_after_s it has
    if not filled:
        return agent
    return {**agent, "heartbeat": {**beat, **filled}}


def _check_runnable(
    agents: Mapping[str, Mapping[str, Any]], registered: Collection[str], problems: Problems
) -> None:
    """A file that runs as it is: some agents, each with its work function or registered."""
    if not agents:
        problems.add(("agents",), "no agents; add an `agents:` section with at least one "
                     "(`zeus init` writes a routing.yml to start from)")
    for name, agent in agents.items():
        cli = agent.get("speaks", "lines") not in ("lines", "jsonl")  # Zeus builds its command
        if name not in registered and not (agent.get("entrypoint") or agent.get("command")
                                           or cli):
            problems.add(("agents", name), "no work function; give it `entrypoint: "
                         "pkg.module:function` or `command: [program, arg, ...]` (an agent "
                         "the host registers in code, zeus.register, is named with --registered)")


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `over` on top; mappings in both are merged key by key, the rest replaced."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out
