"""Reading routing.yml: a loader that keeps `on:` a key, and where each key is.

`Lines` maps a key path (`("agents", "apollo", "timeout_s")`) to the line the
file spells it on, and lists duplicate keys; `dotted` writes a key path the way
a problem names it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import yaml

from supervisor.routing.bounded import BoundedLoader

__all__ = ["KeyPath", "Lines", "Loader", "dotted", "yaml_problem"]

KeyPath = tuple[str | int, ...]
_MERGE_TAG = "tag:yaml.org,2002:merge"
_BOOL_TAG, _STR_TAG = "tag:yaml.org,2002:bool", "tag:yaml.org,2002:str"


class Loader(BoundedLoader):
    """SafeLoader (bounded), except that a key spelled like a YAML 1.1 boolean stays a string.

    YAML 1.1 reads `on`, `off`, `yes` and `no` as booleans, which would turn
    `retry: {on: [timeout]}` into a key `True`. Values are left as YAML reads them.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag == _BOOL_TAG:
                key_node.tag = _STR_TAG
        return super().construct_mapping(node, deep)


# YAML 1.1 wants a dot in a float, so `timeout_s: 1e3` would be the text "1e3"; read it as 1000.0.
Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]+")


def dotted(path: Sequence[str | int]) -> str:
    """`agents.apollo.retry.max_retries`, `delegation.zeus[2].timeout`, `agents["../x"]`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _PLAIN_KEY.fullmatch(part):  # a key that would read as something else
            out += f"[{json.dumps(part)}]"
        else:
            out += f".{part}" if out else part
    return out


class Lines:
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
        inner = Lines(None)
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


def yaml_problem(source: str, exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    where = f"{source}:{mark.line + 1}" if mark is not None else source
    column = f" (column {mark.column + 1})" if mark is not None else ""
    what = " ".join(str(p) for p in (exc.context, exc.problem) if p)
    return f"{where}: not valid YAML: {what}{column}"
