"""A run as rows: indented lines at a chosen level of detail, fitted to a screen.

`rows` lays a run out at a level of detail (`DETAIL_LEAST`..`DETAIL_FULL`), `fit`
picks the richest level that fits a screen's height, and `tree_of` /
`plain_lines` turn the rows into a rich tree or plain text. Each row is cut with
an ellipsis rather than wrapped. Pure functions; nothing here prints. The words
in each row come from `supervisor.cli.render`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.text import Text
from rich.tree import Tree

from supervisor.cli.render import attempt_label, delegation_label, delegation_status, status_mark
from supervisor.journal.runs import ReplayedAttempt, ReplayedDelegation, Run

__all__ = [
    "DETAIL_FULL",
    "DETAIL_LEAST",
    "Row",
    "fit",
    "plain_attempt",
    "plain_lines",
    "rows",
    "settled_label",
    "tree_of",
]

DETAIL_FULL = 2  # every attempt of every delegation
# 1: settled delegations that completed show no attempts; 0: no settled one does;
DETAIL_LEAST = -1  # and settled subtrees under a delegation fold into one row


@dataclass(frozen=True)
class Row:
    """One line of a tree: how deep it sits and what it says."""

    depth: int
    text: Text
    bullet: bool = False  # an attempt: a "- " in plain text


def _fitted(text: Text) -> Text:
    """A row that never wraps: what does not fit the width ends in an ellipsis."""
    text.no_wrap = True
    text.overflow = "ellipsis"
    return text


def settled_label(d: ReplayedDelegation, run: Run, extras: Sequence[str] = ()) -> Text:
    """A settled delegation's row: its status mark, then its label, in the status's colour."""
    label, status = delegation_label(d, run, extras)
    mark, style = status_mark(status)
    return Text(f"{mark} {label}", style=style)


def plain_attempt(a: ReplayedAttempt, d: ReplayedDelegation, now: float | None = None) -> Text:
    """An attempt's row as the journal tells it (dim; dim red when it did not complete);
    `now`, the run's time, says how long it has been in the tool it is in."""
    style = "dim" if not a.ended or a.outcome == "completed" else "dim red"
    return Text(attempt_label(a, now), style=style)


def _all_settled(d: ReplayedDelegation) -> bool:
    return d.settled and all(_all_settled(c) for c in d.children)


def _folded(children: Sequence[ReplayedDelegation], run: Run) -> Text:
    text = Text(f"{len(children)} settled:")
    counts: dict[str, int] = {}
    for child in children:
        status = delegation_status(child, run)
        counts[status] = counts.get(status, 0) + 1
    for status, count in counts.items():
        mark, style = status_mark(status)
        text.append(f" {count} ")
        text.append(mark, style=style)
    text.append("  " + ", ".join(c.id for c in children), style="dim")
    return text


def rows(
    run: Run,
    detail: int = DETAIL_FULL,
    *,
    label: Callable[[ReplayedDelegation], Text] | None = None,
    attempt: Callable[[ReplayedAttempt, ReplayedDelegation], Text] | None = None,
) -> list[Row]:
    """`run`'s delegations and attempts as rows at `detail` (`DETAIL_LEAST`..`DETAIL_FULL`);
    an attempt's row is `plain_attempt` as of where the run's time stands, unless given."""
    label_of = label or (lambda d: settled_label(d, run))
    attempt_of = attempt or functools.partial(plain_attempt, now=run.open_until(time.time()))
    out: list[Row] = []

    def shows_attempts(d: ReplayedDelegation) -> bool:
        if not d.settled or detail >= DETAIL_FULL:
            return True
        return detail == 1 and d.status != "completed"

    def walk(d: ReplayedDelegation, depth: int) -> None:
        out.append(Row(depth, _fitted(label_of(d))))
        if shows_attempts(d):
            out.extend(Row(depth + 1, _fitted(attempt_of(a, d)), True) for a in d.attempts)
        done = [c for c in d.children if _all_settled(c)]
        if detail <= DETAIL_LEAST and len(done) > 1:
            out.append(Row(depth + 1, _fitted(_folded(done, run))))
            children = [c for c in d.children if c not in done]
        else:
            children = d.children
        for child in children:
            walk(child, depth + 1)

    for d in run.roots:
        walk(d, 1)
    return out


def fit(count: Callable[[int], int], height: int | None) -> int:
    """The richest detail whose row count (`count(detail)`) fits `height` (None: any)."""
    if height is None:
        return DETAIL_FULL
    for detail in range(DETAIL_FULL, DETAIL_LEAST, -1):
        if count(detail) <= height:
            return detail
    return DETAIL_LEAST


def tree_of(head: Text, body: Sequence[Row]) -> Tree:
    """The rows under `head` as a rich tree (depth 1 hangs from the head)."""
    root = Tree(_fitted(head))
    stack: list[Tree] = [root]
    for row in body:
        del stack[row.depth:]
        stack.append(stack[-1].add(row.text))
    return root


def plain_lines(head: Text, body: Sequence[Row]) -> list[str]:
    """The rows under `head` as indented plain lines; attempts (dim rows) bulleted."""
    return [
        head.plain,
        *("  " * row.depth + ("- " if row.bullet else "") + row.text.plain for row in body),
    ]
