"""What Zeus knows about each open delegation and its current attempt.

Owned by the actor's thread: nothing here is shared or locked. Also the pure
functions that turn that state into what the host sees: the summary, the
snapshot node, an attempt's error line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from actors import AttemptOutcome, AttemptRecord, Brief, Report, Status, Summary, Usage
from actors.backends import ChildHandle
from actors.clock import Timer
from actors.protocol import Finished
from supervisor.core.future import DelegationFuture
from supervisor.core.results import shape_result
from supervisor.core.settlement import AttemptEnd, Settlement
from supervisor.routing import AgentPolicy
from supervisor.rules.groups import Group, review_verdict
from supervisor.rules.settle import Settle
from supervisor.rules.stale import ProgressWatch

__all__ = [
    "MAX_PARTIALS",
    "Answer",
    "Attempt",
    "Delegation",
    "OpenTool",
    "attempt_error",
    "attempt_record",
    "decide_summary",
    "how_killed",
    "previous_error",
]


NO_USAGE = Usage()  # frozen: every delegation starts from this one


@dataclass(slots=True)
class OpenTool:
    """A tool call that started and has not ended: the child's id of it (None: it has
    none), its name, whether it writes, and when it started (Zeus's clock)."""

    call_id: str | None
    name: str
    side_effects: bool
    since: float


@dataclass(slots=True)
class Attempt:
    id: str
    number: int  # 1-based within the delegation
    agent: str
    policy: AgentPolicy
    started_at: float  # when its child began to run the work (till then: when Zeus decided)
    deadline: float  # its timeout; until its child runs, the bound on that wait
    watch: ProgressWatch
    run_s: float = float("inf")  # its timeout_s: the running time it gets once started
    # Until its child runs the work (docs/design.md, "An attempt's clock"): when it must
    # have started, else it ends `crash`; None once it runs (or for a child that runs as
    # it starts).
    start_by: float | None = None
    child: ChildHandle | None = None
    pid: int | None = None
    # Why Zeus asked the child to stop, in arrival order; the first starts the grace period.
    stop_causes: list[AttemptOutcome] = field(default_factory=list)
    stopping_since: float | None = None
    side_effects: bool = False
    grace: Timer | None = None  # once asked to stop: the end of its grace period
    due_at: float = float("inf")  # when its timer (`Timers.arm`) falls due
    last_logged_beat: float = float("-inf")
    # The evidence it leaves (docs/design.md, "What a summary says about a stopped attempt").
    tool_calls: int = 0
    last_tool: str | None = None
    last_note: str | None = None
    # The long tool calls in flight (`with ctx.tool(...)`, a CLI's), oldest first; `in_tool`
    # names the oldest (once asked to stop, it keeps the one it was in, as evidence).
    tools: list[OpenTool] = field(default_factory=list)
    in_tool: str | None = None  # a long tool call (`with ctx.tool(...)`) in progress
    tool_stored: bool = False  # `in_tool` is a side-effect call the store was told of
    agent_session: str | None = None  # the agent program's own session id, once it said
    # The progress count of its last charge counted: a charge at or below it was counted
    # already (a worker sends its charges again to the host that picks it up, since the
    # last may have died before it committed them).
    charged_progress: int = 0
    announced: bool = False  # `attempt.started` emitted (deferred until a Ray task is placed)

    def new_charge(self, progress: int) -> bool:
        """Whether its charge numbered `progress` is new (0: one not numbered, always);
        counted from now on (Zeus's thread)."""
        if progress and progress <= self.charged_progress:
            return False
        self.charged_progress = max(self.charged_progress, progress)
        return True

    # -- its child and its clock (Zeus's thread; docs/design.md, "An attempt's clock") ---
    def started_child(self, child: ChildHandle) -> None:
        """Its child, started (its pid, if a process of its own is known yet)."""
        self.child, self.pid = child, child.pid

    def reattached_to(self, child: ChildHandle, charged_progress: int) -> None:
        """Supervised on after a restart: its child picked up, announced already, and the
        charges up to `charged_progress` (what it sends again) counted already."""
        self.child, self.pid, self.announced = child, child.pid, True
        self.charged_progress = charged_progress

    def announced_now(self) -> None:
        """`attempt.started` said: once per attempt."""
        self.announced = True

    def waits_to_start(self, now: float, cap: float | None) -> None:
        """Its child runs the work later than it was started: until it does, its deadline
        is the bound on that wait, `spawn_timeout_s` from `now`, no later than `cap`."""
        self.start_by = now + self.policy.spawn_timeout_s
        self.deadline = self.start_by if cap is None else min(self.start_by, cap)

    def runs_from(self, start: float, cap: float | None) -> None:
        """Its child began to run the work at `start`: its deadline is `run_s` from then,
        no later than `cap`, and its stale clock starts there (its first sign of life)."""
        self.start_by = None
        self.started_at = start
        deadline = start + self.run_s
        self.deadline = deadline if cap is None else min(deadline, cap)
        if self.watch.progress < 0:
            self.watch = self.watch.observe(0, start)

    def nudge(self, now: float) -> None:
        """Not stale while it waits on a child of its own, which has its own watch."""
        self.watch = self.watch.nudge(now)

    def stopping(self, now: float) -> None:
        """Asked to stop at `now` (the first cause starts its grace period)."""
        self.stopping_since = now

    def grace_ends(self, timer: Timer | None) -> None:
        """The end of its grace period, `timer` (None: no timer could be set)."""
        self.grace = timer

    # -- what its child reports (Zeus's thread: `ChildReports`) ---------------------------
    def observe(self, progress: int, now: float) -> ProgressWatch:
        """Its child's progress count `progress` seen at `now`; its watch before that."""
        before, self.watch = self.watch, self.watch.observe(progress, now)
        return before

    def spawned_as(self, pid: int | None) -> None:
        """Its child's process (or its Ray worker's), once known."""
        self.pid = pid

    def noted(self, note: str) -> None:
        self.last_note = note

    def heartbeat_due(self, now: float) -> bool:
        """Whether a heartbeat at `now` is journalled (one per `heartbeat.interval_s`);
        counted as journalled if so."""
        if now - self.last_logged_beat < self.policy.heartbeat.interval_s:
            return False
        self.last_logged_beat = now
        return True

    def tool_began(self, call_id: str | None, name: str, *, side_effects: bool, now: float,
                   running: bool) -> None:
        """A tool call began (`running`: a long one, until it ends), or was seen only once
        it was over; one with side effects makes its attempt one that wrote."""
        self.tool_calls += 1
        self.last_tool = name
        if running:
            self.tools.append(OpenTool(call_id, name, side_effects, now))
            if self.in_tool is None:
                self.in_tool = name
        if side_effects:
            self.wrote()

    def tool_ended(self, call_id: str | None, name: str) -> OpenTool | None:
        """A long tool call ended: its start (by the child's id of it, else the latest of
        its name), taken off, or None if none was seen (a reattached child's). The call it
        is in moves on to the oldest in flight, unless it is stopping (it keeps the one it
        was in, as evidence)."""
        tools = self.tools
        at = next((i for i in range(len(tools) - 1, -1, -1) if tools[i].call_id == call_id
                   and (call_id is not None or tools[i].name == name)), None)
        began = tools.pop(at) if at is not None else None
        if self.stopping_since is None:
            self.in_tool = tools[0].name if tools else None
        return began

    def tool_told_to_store(self, told: bool) -> None:
        """Whether the store was told it is inside a side-effect call (`in_tool`)."""
        self.tool_stored = told

    def wrote(self) -> None:
        """It (or an attempt it delegated to) made a side-effect call."""
        self.side_effects = True

    def in_session(self, session_id: str) -> None:
        """The agent program's own session id, as it reported it."""
        self.agent_session = session_id

    @property
    def stale_after_s(self) -> float:
        """Its stale threshold now: longer inside a long tool call."""
        beat = self.policy.heartbeat
        return beat.in_tool_s if self.in_tool is not None else beat.stale_after_s


@dataclass(slots=True)
class Delegation:
    id: str
    brief: Brief
    parent_id: str | None
    depth: int
    settled: DelegationFuture
    dispatched_at: float
    agent: str
    policy: AgentPolicy
    deadline_cap: float | None = None  # the parent attempt's deadline, for nested delegations
    state: str = "queued"  # queued | running | backoff | settled
    # Each ended attempt's record: as decided (`AttemptEnd`), or as a store kept it.
    attempts: list[AttemptRecord | AttemptEnd] = field(default_factory=list)
    current: Attempt | None = None
    attempt_count: int = 0
    visited: list[str] = field(default_factory=list)
    retries_used: int = 0  # on the current agent
    partials: list[Any] = field(default_factory=list)
    partials_dropped: int = 0
    usage: Usage = NO_USAGE
    cancel_requested: bool = False
    cancel_reason: str | None = None
    forced: Settle | None = None  # set when the supervisor gives up (restart intensity)
    children: list[str] = field(default_factory=list)
    backoff_timer: Timer | None = None
    last_error: str | None = None
    last_traceback: str | None = None
    group: Group | None = None
    restart_pending: str | None = None  # why a group restart stops the current attempt
    performed: Any = None  # a task's performer result, while its review runs
    lost_output: Any = None  # a result that lost to a stop cause: kept in the summary
    review: Summary | None = None
    agent_session: str | None = None  # the last session id its agent program reported
    continues: str | None = None  # the CLI session its next attempt resumes (a retry's)
    tools_run: list[str] = field(default_factory=list)  # side-effect calls, `Name(detail)`
    answer: Answer | None = None  # a person resumed it once it was blocked (`zeus.resume`)
    # Its attempts that a host lost with its lease (taken over, their children stopped by
    # it), by id, with what the store held as charged by each: a lost host writes what its
    # children charged on late, which counts here (`Supervisor.look_elsewhere`).
    elsewhere: dict[str, Usage] | None = None

    def runs(self, a: Attempt) -> None:
        """`a` is its current attempt: a new one (numbered by `next_number`), or one
        picked up again after a restart."""
        self.current = a

    def next_number(self) -> int:
        """The number of its next attempt, counted."""
        self.attempt_count += 1
        return self.attempt_count

    def current_ended(self) -> None:
        self.current = None

    def waits_to_retry(self, continues: str | None) -> None:
        """A retry after a backoff: one retry used up, and `continues`, the agent CLI
        session it resumes (None: a new one)."""
        self.retries_used += 1
        self.continues = continues
        self.state = "backoff"

    def retried(self) -> None:
        """A retry with no backoff to wait (recovery's, after a restart): one retry used up."""
        self.retries_used += 1

    def backs_off_until(self, timer: Timer | None) -> None:
        """The end of its backoff, `timer` (None: no timer could be set)."""
        self.backoff_timer = timer

    def backoff_over(self) -> None:
        self.backoff_timer = None
        self.state = "running"

    def cancel(self, reason: str | None) -> None:
        """Its owner's cancel, which takes precedence over any cause that races it."""
        self.cancel_requested = True
        self.cancel_reason = reason

    def add_usage(self, usage: Usage) -> None:
        """Spend counted against it: its own, or a sub-delegation's."""
        self.usage = self.usage + usage

    def answered(self, answer: Answer, resumes: str | None) -> None:
        """A person's answer, told to its next attempts; `resumes`: the agent CLI session
        its next attempt resumes (None: a new one)."""
        self.answer = answer
        if resumes is not None:
            self.continues = resumes

    def keep_partial(self, item: Any) -> None:
        """A partial result: kept, up to `MAX_PARTIALS`; past that only counted."""
        if len(self.partials) < MAX_PARTIALS:
            self.partials.append(item)
        else:
            self.partials_dropped += 1

    def ran_tool(self, call: str) -> None:
        """A side-effect call of its attempts, `Name(detail)` (named to a fallback)."""
        if len(self.tools_run) < MAX_TOOLS_RUN:
            self.tools_run.append(call)

    def in_session(self, a: Attempt, session_id: str) -> None:
        """Its attempt `a`'s agent program reported its own session id."""
        a.in_session(session_id)
        self.agent_session = session_id

    def nested_in(self, parent: Delegation | None) -> None:
        """It was delegated from `parent`'s running attempt: it ends by that one's deadline."""
        if parent is not None and parent.current is not None:
            self.deadline_cap = parent.current.deadline

    def takes_continued(self) -> str | None:
        """The agent CLI session its next attempt resumes, once (None: a new one)."""
        continued, self.continues = self.continues, None
        return continued

    def dropped_partials(self, count: int) -> None:
        """Partial results its child never sent (over `MAX_PARTIALS_SENT`): only counted."""
        self.partials_dropped += count

    def keeps_lost_output(self, value: Any) -> None:
        """A result that lost to a stop cause (or a timed-out claim): kept in its summary."""
        self.lost_output = value

    def failed_with(self, error: str, traceback: str | None) -> None:
        """Its last attempt's error (and traceback), for its summary."""
        self.last_error, self.last_traceback = error, traceback

    def restarts_for(self, reason: str) -> None:
        """Its group restarts it: why its current attempt is being stopped."""
        self.restart_pending = reason

    def restart_reason(self, *, consumed: bool) -> str | None:
        """Why its group restarted it, if it did; `consumed`: told once, then forgotten."""
        reason = self.restart_pending
        if consumed:
            self.restart_pending = None
        return reason

    def gives_up(self, settle: Settle) -> None:
        """Its supervisor gives up on it (restart intensity): it settles with `settle`."""
        self.forced = settle

    def in_review(self, performed: Any) -> None:
        """A task's performer finished with `performed`; its reviewer runs next."""
        self.performed = performed

    def reviewed(self, review: Summary) -> None:
        """Its reviewer's summary."""
        self.review = review

    def may_charge_late(self, attempt_id: str, charged: Usage) -> None:
        """Its attempt was lost with its host's lease, its child maybe alive and charging:
        what the store held as charged by it, for the late charges that follow."""
        self.elsewhere = self.elsewhere or {}
        self.elsewhere[attempt_id] = charged

    def fall_back(self, agent: str, policy: AgentPolicy) -> None:
        """Its next attempt goes to its fallback `agent`, with no retry used there yet
        (Zeus's thread: after an attempt, or in recovery)."""
        self.agent, self.policy = agent, policy
        self.visited.append(agent)
        self.retries_used = 0


@dataclass(frozen=True, slots=True)
class Answer:
    """A person's answer to a blocked delegation (`zeus.resume(id, note=...)`): why it was
    blocked (the agent's own words where it said them), the note (None: none given), and
    how many attempts it had made: the next one is the attempt the answer resumes."""

    blocker: str | None
    note: str | None
    after: int


_TIMED_OUT = (Status.timed_out, Status.partial)
_BARE = Report()  # a work function's plain return value: its output, and no other section
MAX_PARTIALS = 10_000  # kept per delegation; a child that floods gets the rest counted, not kept
MAX_TOOLS_RUN = 50  # side-effect calls kept per delegation, named to a fallback


def decide_summary(d: Delegation, step: Settle, value: Any, now: float) -> Settlement:
    """The delegation's summary, decided: its result shaped by the result policy, and its
    story (Zeus's actor thread; the `Summary` is made where it is first read)."""
    status = Status.cancelled if d.cancel_requested else step.status
    report, output = (value, value.output) if isinstance(value, Report) else (_BARE, value)
    shaped = shape_result(output, d.policy.result, delegation_id=d.id)
    if report is _BARE and d.review is None and not shaped.note and not d.partials_dropped:
        sections: tuple[list[str], ...] | None = None  # none to tell (most delegations)
    else:
        sections = _sections(d, report, shaped.note)
    error = None
    if status is Status.cancelled:
        error = d.cancel_reason or step.reason
    elif status is not Status.completed:
        error = step.reason or d.last_error
        if step.reason and d.last_error:
            error = f"{d.last_error} ({step.reason})"
        if status is Status.failed and d.last_traceback:
            error = f"{error}\n{d.last_traceback.rstrip()}"
    findings, changes, validation, risks = sections or ((), (), (), ())
    return Settlement({
        "id": d.id,
        "agent": d.agent,
        "scope": d.brief.scope,
        "status": status,
        "output": shaped.output,
        "findings": findings,  # (a tuple where empty: the `Summary` makes each a list)
        "changes": changes,
        "validation": validation,
        "risks": risks,
        "partial_results": grouped(d.partials) if d.partials else (),
        "attempts": list(d.attempts),
        "usage": d.usage,
        "error": error,
        "timeout_kind": step.timeout_kind if status in _TIMED_OUT else None,
        "schema_error": shaped.schema_error,
        "truncated_chars": shaped.truncated_chars,
        "artifact": shaped.artifact,
        "duration_s": round(now - d.dispatched_at, 6),
        "session_alias": d.brief.session or report.session_alias,
    })


def _sections(d: Delegation, report: Report, note: str | None) -> tuple[list[str], ...]:
    """The summary's findings, changes, validation and risks: the report's, the review's,
    and the notes Zeus adds (a result cut to size, partial results dropped)."""
    risks = list(report.risks)
    findings = list(report.findings)
    validation = list(report.validation)
    if d.review is not None:
        _, why = review_verdict(d.review)
        validation.append(f"review {d.review.id}: {why}")
        findings += [f"review: {f}" for f in d.review.findings]
        risks += [f"review: {r}" for r in d.review.risks]
    if note:
        risks.append(note)
    if d.partials_dropped:
        risks.append(f"{d.partials_dropped} partial results dropped (more than {MAX_PARTIALS}"
                     " in the delegation, or in one attempt)")
    return findings, list(report.changes), validation, risks


def attempt_error(a: Attempt, outcome: AttemptOutcome, finished: Finished | None) -> str | None:
    """What went wrong in one attempt, in a line (the winning cause, then the child's error)."""
    if outcome is AttemptOutcome.completed:
        return None
    own = finished.error if finished is not None else None
    stopped = {
        AttemptOutcome.timeout: f"deadline of {a.deadline - a.started_at:g} s passed",
        AttemptOutcome.stale: f"no progress for {a.stale_after_s:g} s "
        + (f"(stale; heartbeat.stale_in_tool_s) inside tool {a.in_tool}" if a.in_tool
           else "(stale; heartbeat.stale_after_s)"),
        AttemptOutcome.budget_exceeded: "over budget",
        AttemptOutcome.crash: f"its child did not start within {a.policy.spawn_timeout_s:g}s",
        AttemptOutcome.cancelled: "cancelled",
    }.get(outcome) if outcome in a.stop_causes else None
    if stopped and own:
        return f"{stopped}; the child then reported {own}"
    return stopped or own or (None if finished else "the child never reported back")


def how_killed(a: Attempt, finished: Finished | None) -> str | None:
    """How the child was stopped, as the backend saw it; `cooperative` when it ended on its
    own once asked to stop; None when it was not stopped (or never reported back)."""
    killed = finished.killed if finished else None
    if finished is not None and a.stopping_since is not None and killed is None:
        killed = "cooperative"
    return killed


def attempt_record(
    a: Attempt,
    outcome: AttemptOutcome,
    finished: Finished | None,
    *,
    now: float,
    killed: str | None,
    fenced: bool,
    restart_pending: str | None,
) -> AttemptEnd:
    """The story of one ended attempt, as its delegation's summary keeps it: every field
    decided here (Zeus's actor thread), the `AttemptRecord` made where it is read."""
    error = attempt_error(a, outcome, finished)
    if restart_pending is not None and outcome is AttemptOutcome.cancelled:
        error = f"restarted: {restart_pending}"
    losing = [c.value for c in a.stop_causes if c is not outcome]
    if finished is not None and finished.outcome is not outcome:
        losing.append(f"child:{finished.outcome.value}")
    return AttemptEnd({
        "id": a.id,
        "agent": a.agent,
        "outcome": outcome,
        "duration_s": round(now - a.started_at, 6),
        "error": error if outcome is not AttemptOutcome.completed else None,
        "pid": finished.pid if finished and finished.pid else a.pid,
        "losing_causes": losing,
        "fenced": fenced,
        "killed": killed,
        "progress": max(a.watch.progress, finished.progress if finished else 0, 0),
        "tool_calls": a.tool_calls,
        "last_tool": a.last_tool,
        "last_note": a.last_note,
        "bad_lines": finished.bad_lines if finished is not None else 0,
        "session_id": a.agent_session,
        "usage_unknown": finished.usage_unknown if finished is not None else None,
    })


def grouped(values: Sequence[Any]) -> list[Any]:
    """`values` with equal ones side by side, in order of first appearance.

    A retry starts over and reports what the attempt before it had already found;
    side by side, the summary writes each such result once with a count.
    """
    if not values:
        return []
    groups: dict[str, list[Any]] = {}
    for value in values:
        try:
            key = json.dumps(value, sort_keys=True, default=repr)
        except (TypeError, ValueError):  # keys JSON cannot sort, circular values
            key = repr(value)
        groups.setdefault(key, []).append(value)
    return [value for group in groups.values() for value in group]


def previous_error(attempts: Sequence[AttemptRecord | AttemptEnd]) -> str | None:
    """How the delegation's last attempt ended, for the next one (`ctx.previous_error`)."""
    if not attempts:
        return None
    last = attempts[-1]
    return f"{last.outcome.value}: {last.error}" if last.error else last.outcome.value
