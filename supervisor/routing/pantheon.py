"""The Pantheon dialect: a routing.yml with a top-level `delegation:` section.

`from_pantheon` translates such a file to the native shape: what has a meaning
for supervision is mapped onto the same models, the rest is kept in an agent's
`metadata`, and it says what was mapped and what was ignored. `explicit` maps a
native key path back to where the Pantheon file spells it, so that a problem
points at the Pantheon line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from actors.limits import MAX_DURATION_S, MAX_DURATION_WORDS
from supervisor.routing.lines import KeyPath, dotted
from supervisor.routing.policies import OWNER, AgentPolicy
from supervisor.routing.problems import Problems, allowed_list, found, mapping_or_none

__all__ = ["Pantheon", "from_pantheon"]

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
class Pantheon:
    """A Pantheon file translated to the native shape, with what went where."""

    data: dict[str, Any] = field(default_factory=dict)
    explicit: dict[KeyPath, KeyPath] = field(default_factory=dict)
    mapped: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


@dataclass
class _Kept:
    """Fields with no meaning for supervision, kept in metadata; each says so in `ignored`.

    A field of Pantheon's schema (`known`) is named once, in the summary `say`
    adds; any other field is named where it stands.
    """

    known: tuple[str, ...]
    out: Pantheon
    seen: set[str] = field(default_factory=set)

    def keep(self, into: dict[str, Any], key: Any, value: Any, at: KeyPath) -> None:
        into[str(key)] = value
        if key in self.known:
            self.seen.add(key)
        else:
            self.out.ignored.append(f"{dotted((*at, str(key)))}: not in Pantheon's schema; "
                                    "kept in metadata")

    def say(self, where: str, note: str = "") -> None:
        if self.seen:
            names = [k for k in self.known if k in self.seen]
            self.out.ignored.append(f"{where}.{{{', '.join(names)}}}: kept in metadata{note}")


def from_pantheon(data: Mapping[str, Any], problems: Problems) -> Pantheon:
    out = Pantheon()
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
    data: Mapping[str, Any], problems: Problems, out: Pantheon
) -> dict[str, dict[str, Any]]:
    raw_agents = mapping_or_none(data, "agents", problems, "a mapping of agent name -> fields")
    agents: dict[str, dict[str, Any]] = {}
    counts: Counter[str] = Counter()
    kept = _Kept(_PANTHEON_AGENT_KEPT, out)
    for raw_name, raw in raw_agents.items():
        name = str(raw_name)
        at: KeyPath = ("agents", name)
        if name == OWNER:
            out.ignored.append("agents.zeus: the root orchestrator, which Zeus itself plays")
            continue
        if raw is not None and not isinstance(raw, dict):
            problems.add(at, f"found {found(raw)}; allowed: a mapping of the agent's fields")
            continue
        agent: dict[str, Any] = {}
        metadata: dict[str, Any] = {}
        for key, value in (raw or {}).items():
            if key == "role":
                agent["role"] = value
                counts["role"] += 1
            elif key == "can_delegate":
                if not isinstance(value, bool):
                    problems.add((*at, key), f"found {found(value)}; allowed: true or false")
                    continue
                agent["kind"] = "orchestrator" if value else "leaf"
                out.explicit[(*at, "kind")] = (*at, key)
                counts["orchestrator" if value else "leaf"] += 1
            elif key == "subagent_can_delegate_to":
                _pantheon_targets(value, at, agent, problems, out)
                counts["targets"] += "can_delegate_to" in agent
            else:
                kept.keep(metadata, key, value, at)
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
    kept.say("agents.*")
    return agents


def _pantheon_targets(
    value: Any, at: KeyPath, agent: dict[str, Any], problems: Problems, out: Pantheon
) -> None:
    key = "subagent_can_delegate_to"
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        problems.add((*at, key), f"found {found(value)}; allowed: a list of agent names")
        return
    targets: list[str] = []
    for index, target in enumerate(value):
        if target == OWNER:
            out.ignored.append(f"{dotted((*at, key, index))}: zeus, the owner, gets every "
                               "result anyway")
            continue
        out.explicit[(*at, "can_delegate_to", len(targets))] = (*at, key, index)
        targets.append(target)
    out.explicit[(*at, "can_delegate_to")] = (*at, key)
    agent["can_delegate_to"] = targets


def _pantheon_delegation(
    data: Mapping[str, Any],
    agents: dict[str, dict[str, Any]],
    problems: Problems,
    out: Pantheon,
) -> None:
    lists = mapping_or_none(
        data, "delegation", problems, "a mapping of orchestrator name -> list of entries"
    )
    # The host's own list (zeus) decides first; other orchestrators' lists in file order.
    ordered = sorted(lists.items(), key=lambda item: item[0] != OWNER)
    first: dict[tuple[str, tuple[str, ...]], KeyPath] = {}
    counts: Counter[str] = Counter()
    handbacks: list[str] = []
    kept = _Kept(_PANTHEON_ENTRY_KEPT, out)
    for orchestrator, entries in ordered:
        at: KeyPath = ("delegation", str(orchestrator))
        if orchestrator != OWNER and orchestrator not in agents:
            problems.add(at, f"unknown orchestrator {orchestrator!r}; allowed: zeus, "
                         f"{allowed_list(agents)}")
            continue
        if entries is None:
            continue
        if not isinstance(entries, list):
            problems.add(at, f"found {found(entries)}; allowed: a list of entries "
                         "(- target: <agent> ...)")
            continue
        for index, entry in enumerate(entries):
            here = (*at, index)
            if not isinstance(entry, dict):
                problems.add(here, f"found {found(entry)}; allowed: a mapping with a target")
                continue
            target = entry.get("target")
            if target == OWNER:
                handbacks.append(dotted(here))
                continue
            if not isinstance(target, str) or target not in agents:
                problems.add((*here, "target"), f"found {found(target)}; allowed: an agent "
                             f"name ({allowed_list(agents)}) or zeus")
                continue
            agent = agents[target]
            extras: dict[str, Any] = {}
            for key, value in entry.items():
                if key == "target":
                    continue
                if key not in _PANTHEON_ENTRY_MAPPED:
                    kept.keep(extras, key, value, here)
                    continue
                converted = _pantheon_value(key, value, (*here, key), problems)
                if converted is _SKIP:
                    continue
                dest = _PANTHEON_ENTRY_MAPPED[key]
                earlier = first.get((target, dest))
                if earlier is not None:
                    if _get(agent, dest) != converted:
                        out.ignored.append(
                            f"{dotted((*here, key))}: {value!r} for {target}; "
                            f"{dotted(earlier)} set it first"
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
    kept.say("delegation.*[]", " (under `delegation`)")
    if handbacks:
        shown = ", ".join(handbacks[:3]) + (", ..." if len(handbacks) > 3 else "")
        out.ignored.append(f"{len(handbacks)} entries that hand back to zeus ({shown}): "
                           "the owner gets every result anyway")


def _pantheon_value(key: str, value: Any, at: KeyPath, problems: Problems) -> Any:
    """A delegation entry's value in Zeus's terms, or `_SKIP` (after reporting a problem)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if key == "timeout":
        if number and 0 < value <= MAX_DURATION_S * 1000:  # also refuses nan
            return value / 1000
        problems.add(at, f"found {found(value)}; allowed: milliseconds > 0 (60000 is a minute) "
                     f"and at most {MAX_DURATION_S * 1000:.0f} ({MAX_DURATION_WORDS})")
    elif key in ("retry_count", "session_max"):
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        problems.add(at, f"found {found(value)}; allowed: an integer >= 0")
    elif key == "retry_backoff":
        if value in ("exponential", "fixed"):
            return value
        problems.add(at, f"found {found(value)}; allowed: 'exponential' or 'fixed'")
    elif key == "fallback_agent":
        if value is None:
            return _SKIP
        if isinstance(value, str):
            return value
        problems.add(at, f"found {found(value)}; allowed: an agent name, zeus, or null")
    return _SKIP


def _get(data: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    for part in path:
        data = data.get(part, {})
    return data


def _put(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for part in path[:-1]:
        data = data.setdefault(part, {})
    data[path[-1]] = value
