"""The shape of `zeus.tree()` (`supervisor.rules.tree_shape.nest`)."""

from __future__ import annotations

from typing import Any

from supervisor.rules.tree_shape import nest


def node(id_: str, parent: str | None) -> dict[str, Any]:
    return {"id": id_, "parent_id": parent, "children": []}


def test_children_nest_under_their_parent_in_order_and_orphans_become_roots() -> None:
    nodes = {n["id"]: n for n in (node("a", None), node("a.1", "a"), node("b", None),
                                   node("a.2", "a"), node("a.1.x", "a.1"),
                                   node("lost", "settled-parent"))}
    roots = nest(nodes)
    assert [r["id"] for r in roots] == ["a", "b", "lost"]
    assert [c["id"] for c in roots[0]["children"]] == ["a.1", "a.2"]
    assert [c["id"] for c in roots[0]["children"][0]["children"]] == ["a.1.x"]
    assert roots[1]["children"] == []


def test_nothing_open_is_an_empty_tree() -> None:
    assert nest({}) == []
