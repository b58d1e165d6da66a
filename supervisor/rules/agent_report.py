"""What an agent's own `<subtask_summary>` block makes of its attempt (the status
table of docs/formats.md): a pure function of the attempt's value and the agent's `require_summary`.

| the block says | the attempt | the delegation |
| --- | --- | --- |
| `completed` | completed, the block's sections its report | settles `completed` |
| `partial` | completed, its report `incomplete` | settles `partial`, results kept |
| `blocked` | completed, its report `blocked` (the blocker) | settles `blocked`, no retry |
| `timed_out` | outcome `timeout` | retried and fallen back as a deadline is |
| another status (`failed`, ...) | outcome `error` | fails, as a permanent error |
| nothing that reads | completed, the raw text its output, the problem among its risks | |
| no block | unchanged (`require_summary: true`: outcome `error`) | |
| (a CLI kept from going on) | unchanged, whatever `require_summary` | settles `blocked` |
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from actors import AttemptOutcome, Report, Status
from actors.textblocks.agent_report import AgentReport, read_agent_report

__all__ = ["Claim", "agent_words", "read_claim"]

_REPORTED = "the agent reported Status: "  # what an error made of a block starts with


@dataclass(frozen=True, slots=True)
class Claim:
    """The attempt as its agent's block tells it: its outcome, its value (a `Report`), its
    error when it did not complete, and the partial results the block lists."""

    outcome: AttemptOutcome
    value: Any = None
    error: str | None = None
    partials: list[Any] = field(default_factory=list)


def read_claim(value: Any, *, require_summary: bool) -> Claim | None:
    """What `value` (a completed attempt's) says of itself; None when it says nothing (not
    text, or text with no block, where none is required)."""
    if isinstance(value, Report) and value.blocked is not None:
        return None  # the CLI itself was kept from going on (Claude's denied permissions)
    text = value if isinstance(value, str) else None
    report = read_agent_report(text) if text is not None else None
    if report is None:
        if not require_summary:
            return None
        what = "its final text has" if text is not None else "its result is not text, so it has"
        return Claim(AttemptOutcome.error, value, error=(
            f"{what} no <subtask_summary> block, and the agent has require_summary: true"))
    assert text is not None
    risks = list(report.risks)
    if report.status is None:
        return Claim(AttemptOutcome.completed, Report(
            output=text, risks=[*risks, f"its <subtask_summary> block did not parse: "
                                        f"{report.problem}"]), partials=report.partial_results)
    if report.problem:
        risks.append(f"its <subtask_summary> block: {report.problem}")
    said = _said(report)
    status = report.status
    if status is Status.timed_out:
        return Claim(AttemptOutcome.timeout, _report(report, risks), error=said,
                     partials=report.partial_results)
    if status not in (Status.completed, Status.partial, Status.blocked):
        return Claim(AttemptOutcome.error, _report(report, risks), error=said,
                     partials=report.partial_results)
    return Claim(AttemptOutcome.completed, _report(
        report, risks,
        incomplete=said if status is Status.partial else None,
        blocked=said if status is Status.blocked else None,
    ), partials=report.partial_results)


def _said(report: AgentReport) -> str:
    """`the agent reported Status: blocked: <its risks>`."""
    assert report.status is not None
    why = "; ".join(report.risks)
    return f"{_REPORTED}{report.status.value}" + (f": {why}" if why else "")


def agent_words(reason: str) -> str:
    """A blocked reason in the agent's own words: its block's risks, without the "the agent
    reported Status: blocked: " that `read_claim` puts before them (any other reason as
    it is)."""
    return reason.removeprefix(f"{_REPORTED}{Status.blocked.value}: ")


def _report(report: AgentReport, risks: list[str], *, incomplete: str | None = None,
            blocked: str | None = None) -> Report:
    return Report(output=report.text or None, findings=report.findings, changes=report.changes,
                  validation=report.validation, risks=risks, incomplete=incomplete,
                  blocked=blocked, session_alias=report.session_alias)
