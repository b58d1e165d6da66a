"""The data both halves speak: briefs, reports, usage, attempt records, summaries.

These live on the child side (`actors`) because a work function receives a
`Brief` and may return a `Report`, and `Context.delegate()` returns a `Summary`;
`supervisor` re-exports them. The text blocks (`render`, `parse`) are written
and read by `actors.textblocks`, which imports these models; the methods import
it when called.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from actors.limits import Seconds

# Decimals a summed cost keeps: a billionth of a dollar is below any price per token.
COST_PLACES = 9

__all__ = [
    "AttemptOutcome",
    "AttemptRecord",
    "Brief",
    "Report",
    "Status",
    "Summary",
    "Usage",
]


class Status(StrEnum):
    """How a delegation settled."""

    completed = "completed"
    partial = "partial"
    blocked = "blocked"
    timed_out = "timed_out"
    failed = "failed"
    cancelled = "cancelled"
    budget_exceeded = "budget_exceeded"


class AttemptOutcome(StrEnum):
    """How one attempt ended. `transient`, `timeout`, `stale`, `crash` and `lost` can be
    retried. `lost`: the supervisor that ran it died, and its child was confirmed gone
    when a new supervisor recovered the store (docs/design.md, the store). `unavailable`:
    the agent cannot serve (an agent CLI not installed, its key refused, a folder it does
    not trust): never retried, straight to the fallback (docs/agent-clis.md)."""

    completed = "completed"
    error = "error"
    transient = "transient"
    timeout = "timeout"
    stale = "stale"
    crash = "crash"
    budget_exceeded = "budget_exceeded"
    cancelled = "cancelled"
    lost = "lost"
    unavailable = "unavailable"


class Brief(BaseModel):
    """What is delegated. `None` means "as the agent's policy says"."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent: str = Field(min_length=1)
    scope: str = Field(min_length=1)
    inputs: Any = None
    expected_output: str | None = None
    constraints: str | None = None
    partial_ok: bool | None = None
    timeout_s: Seconds | None = Field(default=None, gt=0)
    session: str | None = None
    mode: Literal["subtask", "task"] = "subtask"

    @classmethod
    def parse(cls, text: str) -> Brief:
        """Read the first `SUBTASK BRIEF` block in `text` (surrounding text is skipped).

        Labels are case-insensitive; a line that is not a label continues the value
        above it. `ValueError` says what is missing or wrong.
        """
        from actors.textblocks import parse_brief

        return parse_brief(text)

    def render(self) -> str:
        """The `SUBTASK BRIEF` block; `Brief.parse(brief.render()) == brief`."""
        from actors.textblocks import render_brief

        return render_brief(self)


class Usage(BaseModel):
    """Calls, tokens and cost charged by agent code (`Context.charge`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    calls: int = Field(default=0, ge=0)
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cost: float = Field(default=0.0, ge=0)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            calls=self.calls + other.calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            # Summed floats drift (0.0304 + ... = 0.030442999999999994): a sum keeps COST_PLACES.
            cost=round(self.cost + other.cost, COST_PLACES),
        )


class Report(BaseModel):
    """A structured result a work function may return (the summary's sections).

    `incomplete`: why the work stopped short of what the brief asked (a cap reached, a
    part skipped); the delegation then settles `partial` with it as the error, rather
    than `completed`. `blocked`: why the work cannot go on without its owner (a decision,
    something it lacks); the delegation settles `blocked` with it, and is not retried.
    `session_alias`: the name the agent gives its session, for a follow-up.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    output: Any = None
    findings: list[str] = Field(default_factory=list)
    changes: list[str] = Field(default_factory=list)
    validation: list[str] = Field(default_factory=list)
    risks: list[str] = Field(default_factory=list)
    incomplete: str | None = None
    blocked: str | None = None
    session_alias: str | None = None


class AttemptRecord(BaseModel):
    """One attempt of a delegation, as the summary keeps it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    agent: str
    outcome: AttemptOutcome
    duration_s: float = 0.0
    error: str | None = None
    pid: int | None = None
    # Causes that raced the one that won (e.g. a budget overrun that lost to a cancel).
    losing_causes: list[str] = Field(default_factory=list)
    fenced: bool = False
    killed: str | None = None  # cooperative | terminate | kill, when Zeus stopped it
    # The evidence it left (docs/design.md, "Stopping a child"): its progress counter at
    # the end, how many tool calls it made, the last one, and its last heartbeat note.
    progress: int = 0
    tool_calls: int = 0
    last_tool: str | None = None
    last_note: str | None = None
    # A command's event stream: lines that did not read (counted, never fatal), and the
    # agent program's own session id (docs/agent-clis.md).
    bad_lines: int = 0
    session_id: str | None = None
    # Why its spend is not all known (docs/agent-clis.md: a CLI that reports a turn's usage
    # only at its end, stopped before it): the summary's usage is then "at least".
    usage_unknown: str | None = None


class Summary(BaseModel):
    """The single, final settlement of a delegation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    agent: str
    scope: str
    status: Status
    output: Any = None
    findings: list[str] = Field(default_factory=list)
    changes: list[str] = Field(default_factory=list)
    validation: list[str] = Field(default_factory=list)
    risks: list[str] = Field(default_factory=list)
    partial_results: list[Any] = Field(default_factory=list)
    attempts: list[AttemptRecord] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    error: str | None = None
    timeout_kind: Literal["deadline", "stale"] | None = None
    schema_error: str | None = None
    truncated_chars: int = 0
    artifact: str | None = None
    duration_s: float = 0.0
    session_alias: str | None = None

    @property
    def ok(self) -> bool:
        """True when the delegation completed."""
        return self.status is Status.completed

    def render(self) -> str:
        """The `<subtask_summary>` block; `Summary.parse(summary.render()) == summary`.

        Ordinary values read as in the protocol (`Status: completed`, `- a finding`);
        a value that would not survive on one line (several lines, edge spaces, a
        leading quote) or is not text (an output, a partial result) is written as
        JSON on one line.
        """
        from actors.textblocks import render_summary

        return render_summary(self)

    @classmethod
    def parse(cls, text: str) -> Summary:
        """Read the last `<subtask_summary>` block in `text` back into a Summary.

        Tolerant of surrounding text, label case, `**bold**` labels and the status
        words of other protocols (`complete`, `escalated`); a block without `Id:`
        gets an empty id. Without that tag, the reference table's markdown block is
        read: `## subtask_summary` then `**status:** complete | partial | escalated`
        (`complete` is `completed`, `escalated` is `blocked`), `**files_changed:**`
        (the changes), `**summary:**` (the output), `**tests:**` (the validation).
        `ValueError` says what is missing or wrong.
        """
        from actors.textblocks import parse_summary

        return parse_summary(text)
