"""Reading files and JSON a user hands to Zeus, with bounds on what they may cost.

A routing file or a plan is read whole, so its size is capped (`MAX_FILE_BYTES`);
its nesting is capped (`MAX_DEPTH`) so that no reader recurses past Python's
limit; and YAML aliases may repeat at most `MAX_ALIAS_NODES` nodes in all, so a
file of a few hundred bytes cannot expand to a billion values ("billion
laughs"). `--inputs` JSON has the same depth cap. Each bound is refused with a
message that names it; callers add the file name and turn it into their own
error (exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "MAX_ALIAS_NODES",
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "BoundExceeded",
    "BoundedLoader",
    "json_depth",
    "load_bounded",
    "loads_json_bounded",
    "read_bounded",
]

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 64
MAX_ALIAS_NODES = 100_000


class BoundExceeded(yaml.MarkedYAMLError):
    """A file or value over one of the bounds above; `problem_mark` is where, when known."""

    def __init__(self, problem: str, mark: yaml.Mark | None = None) -> None:
        super().__init__(problem=problem, problem_mark=mark)

    @property
    def line(self) -> int | None:
        """The 1-based line of the problem, when it is in a YAML file."""
        return None if self.problem_mark is None else self.problem_mark.line + 1

    def __str__(self) -> str:
        return str(self.problem)


def read_bounded(path: Path) -> str:
    """The text of `path` when it is at most `MAX_FILE_BYTES` of UTF-8.

    `OSError` and `UnicodeDecodeError` as `Path.read_text` raises them; `BoundExceeded`
    for a larger file (read no further than the cap, so a device or a pipe ends too).
    """
    with path.open("rb") as file:
        data = file.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise BoundExceeded(
            f"the file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB, the most Zeus reads; "
            "split it or move large inputs into files the agents read"
        )
    return data.decode("utf-8")


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses nesting deeper than `MAX_DEPTH` while it composes."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise BoundExceeded(
                    f"nested deeper than {MAX_DEPTH} levels, the most Zeus reads; "
                    "flatten the structure",
                    self.peek_event().start_mark,  # type: ignore[no-untyped-call]
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def load_bounded(
    text: str, loader: type[BoundedLoader] = BoundedLoader
) -> tuple[Any, yaml.Node | None]:
    """The data of a one-document YAML `text` and its node tree, within the bounds.

    The text is parsed once: the node tree is composed (depth-checked), its alias
    expansion counted, then built into Python values. Raises `yaml.YAMLError`
    (`BoundExceeded` for a bound).
    """
    reader = loader(text)
    try:
        root = reader.get_single_node()
        if root is None:
            return None, None
        _check_alias_expansion(root)
        return reader.construct_document(root), root
    finally:
        reader.dispose()


def _check_alias_expansion(root: yaml.Node) -> None:
    """Refuse a tree whose aliases, expanded, repeat more than `MAX_ALIAS_NODES` nodes.

    Counts with one visit per distinct node (sizes memoized), so the check itself is
    linear in the file even when the expansion is astronomically large.
    """
    size: dict[int, int] = {}
    distinct = 0
    # Iterative post-order walk; a node met again while open is an alias inside its own
    # anchor (a loop), counted once here and reported by the routing checks.
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_ids: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_ids.discard(key)
            size[key] = 1 + sum(size.get(id(c), 1) for c in _children(node))
            continue
        if key in size or key in open_ids:
            continue
        distinct += 1
        open_ids.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node))
    if size[id(root)] - distinct > MAX_ALIAS_NODES:
        raise BoundExceeded(
            f"its aliases (*name) expand to more than {MAX_ALIAS_NODES:,} repeated values, "
            "the most Zeus reads; write the values out or use fewer levels of anchors",
            root.start_mark,
        )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def json_depth(value: Any) -> int:
    """How deeply lists and mappings nest in a JSON value (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
            deepest = max(deepest, depth + 1)
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
            deepest = max(deepest, depth + 1)
    return deepest


def loads_json_bounded(text: str) -> Any:
    """`json.loads(text)`, refusing nesting deeper than `MAX_DEPTH` with `BoundExceeded`.

    `ValueError` (as `json.loads`) for text that is not JSON.
    """
    problem = f"nested deeper than {MAX_DEPTH} levels, the most Zeus reads; flatten it"
    try:
        value = json.loads(text)
    except RecursionError:
        raise BoundExceeded(problem) from None
    if json_depth(value) > MAX_DEPTH:
        raise BoundExceeded(problem)
    return value
