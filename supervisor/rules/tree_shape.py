"""The shape of `zeus.tree()`: flat snapshot nodes nested under their parents. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["nest"]


def nest(nodes: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The roots of `nodes` (by id), each open node appended to its parent's `children`
    in the order given; a node whose parent is not among them is a root."""
    roots: list[dict[str, Any]] = []
    for node in nodes.values():
        parent = nodes.get(node["parent_id"]) if node["parent_id"] else None
        (parent["children"] if parent else roots).append(node)
    return roots
