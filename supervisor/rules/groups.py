"""Group strategies and task reviews, as pure functions.

A group is briefs dispatched together. When a member's attempt fails:
`one_for_one` restarts nothing else; `one_for_all` restarts every sibling
still running; `rest_for_one` restarts the siblings after it (in brief order)
still running.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from actors import Brief, Report, Summary

__all__ = [
    "STRATEGIES",
    "Group",
    "Strategy",
    "review_brief",
    "review_verdict",
    "siblings_to_restart",
]

Strategy = Literal["one_for_one", "one_for_all", "rest_for_one"]
STRATEGIES: tuple[Strategy, ...] = ("one_for_one", "one_for_all", "rest_for_one")


@dataclass(slots=True)
class Group:
    id: str
    strategy: Strategy
    members: list[str] = field(default_factory=list)  # delegation ids, in brief order


def siblings_to_restart(
    strategy: Strategy, members: Sequence[str], failed: str, running: Collection[str]
) -> list[str]:
    """The members to restart because `failed` failed; only those in `running` qualify."""
    if strategy == "one_for_one":
        return []
    if strategy == "one_for_all":
        candidates = [m for m in members if m != failed]
    else:
        candidates = list(members[members.index(failed) + 1:])
    return [m for m in candidates if m in running]


def review_brief(
    reviewer: str, *, delegation_id: str, scope: str, performer: str, value: Any,
    partials: Sequence[Any],
) -> Brief:
    """A task's second stage: the brief that gives `reviewer` the performer's result."""
    report = value if isinstance(value, Report) else Report(output=value)
    return Brief(
        agent=reviewer,
        scope=f"Review the work of {delegation_id}: {scope}",
        inputs={
            "performer": performer,
            "output": report.output,
            "changes": report.changes,
            "findings": report.findings,
            "partial_results": list(partials[:100]),
        },
        expected_output="a verdict (approve or reject) and findings",
    )


_REJECTING = {"reject", "rejected", "changes_requested", "request_changes", "block", "blocked"}


def review_verdict(review: Summary) -> tuple[bool, str]:
    """Whether a review approves, and a line saying why.

    A review approves when it completed and its output does not name a rejecting
    verdict (`{"verdict": "reject"}`, or the text "reject"). A review that did not
    complete never approves.
    """
    if review.status != "completed":
        return False, f"the review did not complete ({review.status}): {review.error or ''}".rstrip(
            ": "
        )
    verdict: Any = review.output
    if isinstance(verdict, dict):
        verdict = verdict.get("verdict", "approve")
    text = str(verdict if verdict is not None else "approve").strip().lower()
    if text in _REJECTING:
        return False, f"{review.agent} rejected it"
    return True, f"{review.agent} approved it"
