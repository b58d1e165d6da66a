"""A task's review stage as pure functions (`supervisor.rules.groups`)."""

from __future__ import annotations

from actors import Report
from supervisor.rules.groups import review_brief


def test_the_reviewer_gets_the_performers_report_and_at_most_100_partials() -> None:
    brief = review_brief("hera", delegation_id="ares-1", scope="fix the bug", performer="ares",
                         value=Report(output="done", changes=["a.py"], findings=["x"]),
                         partials=list(range(150)))
    assert brief.agent == "hera"
    assert brief.scope == "Review the work of ares-1: fix the bug"
    assert brief.inputs["performer"] == "ares"
    assert (brief.inputs["output"], brief.inputs["changes"], brief.inputs["findings"]) == (
        "done", ["a.py"], ["x"])
    assert brief.inputs["partial_results"] == list(range(100))


def test_a_plain_value_is_reviewed_as_a_report_of_that_output() -> None:
    brief = review_brief("hera", delegation_id="d-1", scope="s", performer="p",
                         value={"answer": 42}, partials=[])
    assert brief.inputs["output"] == {"answer": 42}
    assert brief.inputs["changes"] == [] and brief.inputs["partial_results"] == []
