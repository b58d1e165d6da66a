"""An agent's own `<subtask_summary>` block: read from its final text (with the line of what
does not read), and acted on as references/001's table says (`rules.settle.read_claim`), also
for a work function that returns a string holding one."""

from __future__ import annotations

from typing import Any

import pytest

from actors import AttemptOutcome, Report, Status
from actors.textblocks.agent_report import read_agent_report
from supervisor import Brief
from supervisor.rules.settle import read_claim

BLOCK = """I fixed it.

<subtask_summary>
Status: {status}
Agent: @hermes
Scope: Fix the failing test

Changes:
- src/app.py — guard the None case

Findings:
- the test failed on an empty input

Validation:
- pytest: 3 passed

Risks / Follow-up:
- {risk}

Partial results: [a.py, b.py]
Session alias: hermes-7
</subtask_summary>
"""


def block(status: str = "completed", risk: str = "none left") -> str:
    return BLOCK.format(status=status, risk=risk)


def test_the_block_is_read_with_every_section() -> None:
    report = read_agent_report(block())
    assert report is not None and report.status is Status.completed
    assert report.text == "I fixed it."
    assert report.changes == ["src/app.py — guard the None case"]
    assert report.findings == ["the test failed on an empty input"]
    assert report.validation == ["pytest: 3 passed"]
    assert report.partial_results == ["a.py", "b.py"]
    assert report.session_alias == "hermes-7" and report.problem is None


def test_the_last_block_counts_and_text_without_one_has_none() -> None:
    assert read_agent_report("no block here") is None
    text = block("blocked", "old") + "\n" + block("completed", "new")
    report = read_agent_report(text)
    assert report is not None and report.status is Status.completed and report.risks == ["new"]


@pytest.mark.parametrize(("text", "problem"), [
    (block("completed | blocked | partial | timed_out"), "line 4: Status:"),
    (block("done-ish"), "line 4: Status: 'done-ish' is not one of"),
    ("<subtask_summary>\nAgent: x\nScope: y\n</subtask_summary>",
     "line 1: the block has no Status"),
    ("<subtask_summary>\nStatus: completed\n", "line 1: the block opened here is never closed"),
])
def test_what_does_not_read_is_named_by_its_line(text: str, problem: str) -> None:
    report = read_agent_report(text)
    assert report is not None and report.problem is not None
    assert problem in report.problem


@pytest.mark.parametrize(("status", "outcome", "settles"), [
    ("completed", AttemptOutcome.completed, None),
    ("partial", AttemptOutcome.completed, "incomplete"),
    ("blocked", AttemptOutcome.completed, "blocked"),
    ("timed_out", AttemptOutcome.timeout, None),
    ("failed", AttemptOutcome.error, None),
])
def test_each_status_acts_as_the_protocol_says(
        status: str, outcome: AttemptOutcome, settles: str | None) -> None:
    claim = read_claim(block(status, "the token is missing"), require_summary=False)
    assert claim is not None and claim.outcome is outcome
    assert isinstance(claim.value, Report)
    assert claim.value.findings == ["the test failed on an empty input"]
    if settles is not None:
        said = getattr(claim.value, settles)
        assert said == f"the agent reported Status: {status}: the token is missing"
    if outcome is not AttemptOutcome.completed:
        assert claim.error is not None and f"Status: {status}" in claim.error
    assert claim.partials == ["a.py", "b.py"]


def test_a_block_that_does_not_parse_keeps_the_raw_text_and_says_which_line() -> None:
    text = block("maybe")
    claim = read_claim(text, require_summary=False)
    assert claim is not None and claim.outcome is AttemptOutcome.completed
    assert claim.value.output == text
    assert any("line 4" in risk for risk in claim.value.risks)


@pytest.mark.parametrize("value", ["plain text", {"a": 1}, None])
def test_require_summary_makes_a_result_without_a_block_an_error(value: Any) -> None:
    assert read_claim(value, require_summary=False) is None
    claim = read_claim(value, require_summary=True)
    assert claim is not None and claim.outcome is AttemptOutcome.error
    assert "require_summary" in (claim.error or "")


@pytest.mark.parametrize("require_summary", [False, True])
def test_a_run_the_cli_was_kept_from_going_on_stays_blocked_whatever_require_summary(
        require_summary: bool) -> None:
    """Claude refused a tool headless: its decoder's `Report(blocked=...)` is the claim
    (no block is needed to say so), and the run settles `blocked`, never `error`."""
    value = Report(output="I need to run rm.", blocked="needs permission for Bash(rm -rf x)")
    assert read_claim(value, require_summary=require_summary) is None
    # A report that is not blocked has no block, as before: an error where one is required.
    claim = read_claim(Report(output="done"), require_summary=True)
    assert claim is not None and claim.outcome is AttemptOutcome.error


@pytest.mark.parametrize(("status", "expected", "attempts"), [
    ("completed", Status.completed, 1),
    ("partial", Status.partial, 1),
    ("blocked", Status.blocked, 1),
    ("timed_out", Status.timed_out, 2),  # retried once, as a deadline is
])
def test_a_work_function_returning_a_block_is_read_the_same_way(
        make_zeus: Any, status: str, expected: Status, attempts: int) -> None:
    def work(brief: Brief, ctx: Any) -> str:
        return block(status, "needs a decision")

    zeus = make_zeus({"hermes": {"retry": {"max_retries": 1, "backoff": "none"}}},
                     works={"hermes": work})
    summary = zeus.dispatch(Brief(agent="hermes", scope="Fix it")).result(timeout=10)
    assert summary.status is expected
    assert len(summary.attempts) == attempts
    assert summary.findings == ["the test failed on an empty input"]
    # each attempt's block lists them (a retry's side by side with the first's)
    assert summary.partial_results == [p for p in ("a.py", "b.py") for _ in range(attempts)]
    if expected is not Status.completed:
        assert "needs a decision" in (summary.error or "")
    else:
        assert summary.output == "I fixed it." and summary.session_alias == "hermes-7"
