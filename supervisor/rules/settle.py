"""Settlement: how an attempt ended, and what happens next. Pure functions, tested by tables.
An attempt's end includes what its agent's own `<subtask_summary>` block claims
(`read_claim`, at the end of this module).

Precedence (docs/design.md, "Settlement precedence"): once the owner or an ancestor
asked to cancel, the delegation settles `cancelled`, whatever raced it, and nothing restarts.
Among causes that race without a cancel, `budget_exceeded` > `timed_out`
(deadline or stale) > `failed`. A result processed before any stop cause stays
`completed`: the delegation settled with it and later causes find nothing open.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from actors import AttemptOutcome, Report, Status
from actors.textblocks.agent_report import AgentReport, read_agent_report
from supervisor.routing import OWNER, AgentPolicy, RetryOn

__all__ = [
    "COMPLETED",
    "RESUMABLE",
    "Claim",
    "Fallback",
    "NextStep",
    "Retry",
    "Settle",
    "StopCause",
    "agent_words",
    "completed_step",
    "decide_next",
    "read_claim",
    "resolve_outcome",
]

StopCause = Literal[
    AttemptOutcome.cancelled,
    AttemptOutcome.budget_exceeded,
    AttemptOutcome.timeout,
    AttemptOutcome.stale,
]

# Higher wins. Deadline and stale rank equal: the first of them to arrive wins.
_RANK = {
    AttemptOutcome.cancelled: 3,
    AttemptOutcome.budget_exceeded: 2,
    AttemptOutcome.timeout: 1,
    AttemptOutcome.stale: 1,
    AttemptOutcome.crash: 1,  # its child did not start within spawn_timeout_s
    AttemptOutcome.lost: 1,  # its worker stopped it when its host's lease ended
}


def resolve_outcome(
    exit_outcome: AttemptOutcome | None,
    stop_causes: Sequence[AttemptOutcome],
    *,
    cancel_requested: bool,
) -> AttemptOutcome:
    """The outcome of an attempt from what its child reported and why Zeus stopped it.

    `stop_causes` are the reasons Zeus asked the child to stop, in arrival order;
    `exit_outcome` is what the child itself reported (None if it never did: fenced
    or killed). A child's own ending only counts when no stop cause came first.
    """
    if cancel_requested:
        return AttemptOutcome.cancelled
    if stop_causes:
        best = stop_causes[0]
        for cause in stop_causes[1:]:
            if _RANK[cause] > _RANK[best]:
                best = cause
        return best
    if exit_outcome is None:
        return AttemptOutcome.crash
    return exit_outcome


@dataclass(frozen=True, slots=True)
class Settle:
    status: Status
    timeout_kind: Literal["deadline", "stale"] | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Retry:
    """Another attempt on the same agent, after the backoff for retry `number`."""

    number: int  # which retry this is (1-based), for the backoff schedule
    follow_up: bool = False  # a stateful performer's one follow-up in its session
    # It continues the stopped attempt's CLI session (`retry.resume_session`): not blind,
    # the agent has its own history of what it did, so side effects do not forbid it.
    resume: bool = False


@dataclass(frozen=True, slots=True)
class Fallback:
    agent: str


NextStep = Settle | Retry | Fallback
COMPLETED = Settle(Status.completed)



def completed_step(value: object) -> Settle:
    """How a delegation settles when its attempt returned `value`: `completed`; `blocked`
    with the blocker when the work said it cannot go on (`Report.blocked`); or `partial`
    with the reason when it said it stopped short (`Report.incomplete`)."""
    if isinstance(value, Report):
        if value.blocked:
            return Settle(Status.blocked, reason=value.blocked)
        if value.incomplete:
            return Settle(Status.partial, reason=value.incomplete)
    return COMPLETED


# What each timing-out outcome is called in a summary's `timeout_kind`: the one table.
TIMEOUT_KIND: dict[AttemptOutcome, Literal["deadline", "stale"]] = {
    AttemptOutcome.timeout: "deadline",
    AttemptOutcome.stale: "stale",
}


# The outcomes after which a CLI's session is continued rather than started again.
RESUMABLE = frozenset({AttemptOutcome.timeout, AttemptOutcome.stale, AttemptOutcome.transient,
                       AttemptOutcome.crash})


def decide_next(
    outcome: AttemptOutcome,
    policy: AgentPolicy,
    *,
    retries_used: int,
    has_partials: bool,
    partial_ok: bool,
    side_effects: bool,
    visited: Sequence[str],
    fenced_writer: bool,
    resumable: bool = False,
    fallback_told: bool = False,
) -> NextStep:
    """What follows an attempt that ended with `outcome` (never called after a cancel wins).

    `retries_used`: retries already made on the current agent. `side_effects`: the
    attempt made a tool call that was not read-only. `fenced_writer`: the attempt's
    thread could not be confirmed stopped and the agent is not `read_only`.
    `resumable`: its CLI session can be continued (it printed a session id, and
    `retry.resume_session` allows it). `fallback_told`: the fallback's prompt names the
    earlier attempts' tool calls (a CLI fallback's does), so it is not blind either.
    Side effects forbid only a blind restart (docs/agent-clis.md, "When the agent cannot
    serve"): a fresh retry, or a fallback told nothing of them.
    """
    if outcome is AttemptOutcome.completed:
        return COMPLETED
    if outcome is AttemptOutcome.cancelled:
        return Settle(Status.cancelled)
    if outcome is AttemptOutcome.budget_exceeded:
        return Settle(Status.budget_exceeded)
    kind = TIMEOUT_KIND.get(outcome)
    if kind is not None and partial_ok and has_partials:
        return Settle(Status.partial, timeout_kind=kind)
    final = Settle(Status.timed_out, timeout_kind=kind) if kind else Settle(Status.failed)
    if outcome is AttemptOutcome.error:
        return final  # permanent: no retry, no fallback
    if outcome is AttemptOutcome.unavailable:  # no retry: straight to the fallback
        restart: Retry | Fallback | Settle | None = _fallback(policy, visited)
    else:
        restart = _restart(outcome, policy, retries_used, visited,
                           resumable and outcome in RESUMABLE)
    if isinstance(restart, Settle):
        return Settle(restart.status if restart.status is Status.blocked else final.status,
                      kind, restart.reason)
    if restart is None:
        return final
    # A restart would follow; two things forbid it.
    blind = (not restart.resume if isinstance(restart, Retry) else not fallback_told)
    if side_effects and blind and not policy.retry_after_tool_calls:
        return _with_reason(final, "the attempt ran tools with side effects; not restarted "
                            "(set retry_after_tool_calls to allow it)")
    if fenced_writer:
        return Settle(
            Status.blocked,
            timeout_kind=kind,
            reason="the previous attempt's thread is still running and the agent is not "
            "read_only: a new attempt would be a second writer",
        )
    return restart


def _restart(
    outcome: AttemptOutcome, policy: AgentPolicy, retries_used: int, visited: Sequence[str],
    resume: bool,
) -> Retry | Fallback | Settle | None:
    """The restart the policy asks for after a failed attempt, if any (a Settle says why not)."""
    if policy.stateful:
        # A stateful performer is never replaced: one follow-up in its session, then blocked.
        if retries_used == 0:
            return Retry(1, follow_up=True, resume=resume)
        return Settle(Status.blocked,
                      reason="the stateful performer failed again after its one follow-up")
    if RetryOn(outcome.value) in policy.retry.on and retries_used < policy.retry.max_retries:
        return Retry(retries_used + 1, resume=resume)
    return _fallback(policy, visited)


def _fallback(policy: AgentPolicy, visited: Sequence[str]) -> Fallback | Settle | None:
    """The policy's fallback, if it has one not yet visited (a Settle: back to the owner)."""
    if policy.fallback == OWNER:
        return Settle(Status.failed,
                      reason="retries spent; fallback is zeus: returned to the owner")
    if policy.fallback is not None and policy.fallback not in visited:
        return Fallback(policy.fallback)
    return None


def _with_reason(step: Settle, reason: str) -> Settle:
    return Settle(step.status, step.timeout_kind, reason)


# --------------------------------------------------------------------------------------
# What an agent's own `<subtask_summary>` block makes of its attempt (the status
# table of docs/formats.md): a pure function of the attempt's value and the agent's
# `require_summary`.
#
# | the block says | the attempt | the delegation |
# | --- | --- | --- |
# | `completed` | completed, the block's sections its report | settles `completed` |
# | `partial` | completed, its report `incomplete` | settles `partial`, results kept |
# | `blocked` | completed, its report `blocked` (the blocker) | settles `blocked`, no retry |
# | `timed_out` | outcome `timeout` | retried and fallen back as a deadline is |
# | another status (`failed`, ...) | outcome `error` | fails, as a permanent error |
# | nothing that reads | completed, the raw text its output, the problem among its risks | |
# | no block | unchanged (`require_summary: true`: outcome `error`) | |
# | (a CLI kept from going on) | unchanged, whatever `require_summary` | settles `blocked` |
# --------------------------------------------------------------------------------------


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
