"""Everything Zeus's actor thread keeps, each part the owner of its own changes: what it
knows about each open delegation and its current attempt (`Delegation`, `Attempt`), and
the parts the supervisor holds, in this order below: the open tree (`OpenTree`), the
owner's mail between attempts (`PendingMail`), the spending (`Spending`), the agents'
thread-side sessions (`Sessions`, `AgentSessions`), the restart governor
(`RestartGovernor`), the timers (`Timers`: each attempt's deadline and stale moment),
the `ChildSpec` an attempt starts with (`child_spec`), and a person's answer to a
blocked delegation (`answer`, and `BlockedKept` for a Zeus with no store).

Owned by the actor's thread: nothing here is shared or locked. Also the pure
functions that turn that state into what the host sees: the summary, the
snapshot node, an attempt's error line.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from actors import AttemptOutcome, AttemptRecord, Brief, Report, Status, Summary, Usage
from actors.backends import ChildHandle, ChildSpec
from actors.clock import Clock, Timer, check_when
from actors.mail import Mail
from actors.protocol import Finished
from actors.speaks import Invocation, Pricing, SessionTotals
from supervisor.core.handle import DelegationFuture
from supervisor.core.messages import AttemptDue, AttemptsDue
from supervisor.core.registry import Registry
from supervisor.core.settlement import AttemptEnd, Settlement, shape_result
from supervisor.errors import SupervisorError
from supervisor.journal.events import EventLog
from supervisor.routing import AgentPolicy, BudgetPolicy, IntensityPolicy
from supervisor.rules.budget import budget_left, budget_overrun, capped
from supervisor.rules.circuit import admit_restart, circuit_reason
from supervisor.rules.delegation import FramingHeads, role_framing
from supervisor.rules.groups import Group, review_verdict
from supervisor.rules.intensity import RestartWindow
from supervisor.rules.lag import WARN_S as LAG_WARN_S
from supervisor.rules.lag import MailboxLag
from supervisor.rules.recovery import split_verbs_hint
from supervisor.rules.settle import Settle, agent_words
from supervisor.rules.stale import ProgressWatch

__all__ = [
    "MAX_PARTIALS",
    "AgentSessions",
    "Answer",
    "Attempt",
    "BlockedKept",
    "Delegation",
    "OpenTool",
    "OpenTree",
    "PendingMail",
    "RestartGovernor",
    "RestartVerdict",
    "Sessions",
    "Spending",
    "Timers",
    "answer",
    "attempt_error",
    "attempt_record",
    "backend_name",
    "blocker_of",
    "child_spec",
    "decide_summary",
    "how_killed",
    "isolation_of",
    "previous_error",
    "taken_back",
    "work_of",
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


# --------------------------------------------------------------------------------------
# The open tree: every open delegation, the attempts running now, the host's queue
# and the threads fenced off. Owned by Zeus's actor thread: nothing here is locked.
# --------------------------------------------------------------------------------------


class OpenTree:
    """What is open now, and the walks over it. Every method runs in the actor's thread."""

    def __init__(self) -> None:
        self.delegations: dict[str, Delegation] = {}  # open ones, by id, in dispatch order
        self.live: dict[str, tuple[Delegation, Attempt]] = {}  # attempt id -> its owner
        self.queue: deque[str] = deque()  # the host's delegations waiting for a slot
        self.running_roots = 0  # the host's delegations holding a slot (max_concurrent)
        # attempt id -> its delegation: threads that did not stop, still running
        self.fenced: dict[str, Delegation] = {}
        # attempt id -> its owner: attempts let go when the host's lease was lost, whose
        # charges still count (written late) until their child's end comes
        self.lease_lost: dict[str, tuple[Delegation, Attempt]] = {}
        self.settled_count = 0

    def get(self, delegation_id: str) -> Delegation | None:
        return self.delegations.get(delegation_id)

    def owner(self, attempt_id: str) -> tuple[Delegation, Attempt] | None:
        """The delegation and attempt of a running attempt id; None once it ended."""
        return self.live.get(attempt_id)

    def add(self, d: Delegation) -> None:
        """A new delegation (under its parent, if it has one that is open)."""
        parent = self.delegations.get(d.parent_id) if d.parent_id else None
        if parent is not None:
            parent.children.append(d.id)
        self.delegations[d.id] = d

    def begin(self, d: Delegation) -> None:
        """`d` leaves the queue (or never entered it) and runs."""
        if d.depth == 1 and d.state == "queued":
            self.running_roots += 1
        d.state = "running"

    def next_queued(self, limit: int) -> Delegation | None:
        """The next queued delegation that may take a slot now, taken off the queue."""
        while self.queue and self.running_roots < limit:
            d = self.delegations.get(self.queue.popleft())
            if d is not None and d.state == "queued":
                return d
        return None

    def remove(self, d: Delegation) -> None:
        """`d` settled: off the queue or out of its slot, and out of the tree."""
        if d.state == "queued":
            with contextlib.suppress(ValueError):
                self.queue.remove(d.id)
        elif d.depth == 1:
            self.running_roots -= 1
        d.state = "settled"
        self.delegations.pop(d.id, None)
        self.settled_count += 1

    def ancestors(self, d: Delegation) -> Iterator[Delegation]:
        """`d`'s open ancestors, nearest first (a settled one ends the walk)."""
        parent_id = d.parent_id
        while parent_id is not None:
            parent = self.delegations.get(parent_id)
            if parent is None:
                return
            yield parent
            parent_id = parent.parent_id

    def open_children(self, d: Delegation) -> list[Delegation]:
        """What `d` delegated that is still open, in dispatch order."""
        found = (self.delegations.get(child_id) for child_id in d.children)
        return [child for child in found if child is not None]

    def waiting_on_children(self, d: Delegation) -> bool:
        """Whether `d`'s current attempt has a delegation of its own still open: it is
        waiting on it (in `ctx.delegate()`), and that child is watched by its own clock."""
        return any(child_id in self.delegations for child_id in d.children)

    def nudge_ancestors(self, d: Delegation, now: float) -> None:
        """Progress in `d`'s subtree is progress of every ancestor waiting on it."""
        for parent in self.ancestors(d):
            if parent.current is not None:
                parent.current.watch = parent.current.watch.nudge(now)


# --------------------------------------------------------------------------------------
# The owner's messages for a delegation's child (`handle.send`), on Zeus's side.
#
# A message goes to the running attempt at once; one sent between attempts
# waits here for the next attempt. Owned by the actor's thread.
# --------------------------------------------------------------------------------------


class PendingMail:
    """Messages waiting for a delegation's next attempt, by delegation id."""

    def __init__(self) -> None:
        self._waiting: dict[str, list[Mail]] = {}

    def post(self, delegation_id: str, child: ChildHandle | None, mail: Mail) -> None:
        """Hand `mail` to the running `child`, or keep it for the next attempt (child None)."""
        if child is None:
            self._waiting.setdefault(delegation_id, []).append(mail)
        else:
            child.put_mail(mail)  # a backend without a mailbox drops it (the base's default)

    def flush(self, delegation_id: str, child: ChildHandle) -> None:
        """A new attempt started: it gets what waited for it, in order."""
        for mail in self._waiting.pop(delegation_id, ()):
            child.put_mail(mail)

    def drop(self, delegation_id: str) -> int:
        """The delegation settled, or its next attempt reads no mail (an agent CLI): what
        still waits is dropped. How many messages were."""
        return len(self._waiting.pop(delegation_id, ()))


# --------------------------------------------------------------------------------------
# The spending: charges counted against a delegation, its open ancestors and the whole
# tree, and which budgets they break. Owned by Zeus's actor thread; it reports the
# overruns and leaves stopping the attempts to its caller.
# --------------------------------------------------------------------------------------


class Spending:
    """The tree's total, under the supervisor's budget."""

    def __init__(self, tree_budget: BudgetPolicy) -> None:
        self.tree_budget = tree_budget
        self.tree_usage = Usage()

    def charge(
        self, chain: Sequence[Delegation], usage: Usage
    ) -> tuple[list[tuple[Delegation, str]], str | None]:
        """Count `usage` against every delegation of `chain` and the tree. Returns the
        delegations of the chain now over their budget while an attempt runs, each with
        the cap it broke, and the tree budget's cap it broke (or None)."""
        overruns: list[tuple[Delegation, str]] = []
        for node in chain:
            node.usage = node.usage + usage
            overrun = budget_overrun(node.usage, node.policy.budget)
            if overrun is not None and node.current is not None:
                overruns.append((node, overrun))
        self.tree_usage = self.tree_usage + usage
        return overruns, budget_overrun(self.tree_usage, self.tree_budget)

    def left(self, d: Delegation, ancestors: Iterable[Delegation]) -> dict[str, float] | None:
        """What an attempt of `d` may spend before its own, an ancestor's (`ancestors`:
        its open ones, walked only when needed) or the tree's budget is over."""
        if d.parent_id is None and not (capped(d.policy.budget) or capped(self.tree_budget)):
            return None  # a root with no cap above it: most delegations
        return budget_left([*((n.usage, n.policy.budget) for n in (d, *ancestors)),
                            (self.tree_usage, self.tree_budget)])


# --------------------------------------------------------------------------------------
# The thread-side sessions of the agents: one dict per session key a brief names, kept
# per agent, least recently used dropped first. Used only in Zeus's actor thread.
# --------------------------------------------------------------------------------------


class Sessions:
    """At most `limit` session dicts per agent (the policy's `session_max`), LRU."""

    def __init__(self) -> None:
        self._by_agent: dict[str, OrderedDict[str, dict[str, Any]]] = {}

    def get(self, agent: str, key: str | None, limit: int) -> dict[str, Any] | None:
        """The session dict for `key` (a fresh one if new); None without a key or a limit."""
        if key is None or limit == 0:
            return None
        sessions = self._by_agent.setdefault(agent, OrderedDict())
        if key in sessions:
            sessions.move_to_end(key)
        else:
            sessions[key] = {}
            while len(sessions) > limit:
                sessions.popitem(last=False)
        return sessions[key]


class AgentSessions:
    """The agent programs' own session ids (an agent CLI's conversation), by the agent and
    the session a brief names: a follow-up brief in that session resumes it. The most
    recent `limit` are kept."""

    def __init__(self, limit: int = 10_000) -> None:
        self._ids: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._limit = limit
        # What each CLI session's charges added (tokens, cached tokens, cost): a CLI whose
        # totals run across its session's runs is told what its earlier runs were charged.
        self._totals: OrderedDict[str, SessionTotals] = OrderedDict()

    def counted(self, session_id: str, charge: SessionTotals) -> None:
        """`charge` was charged by an attempt in `session_id`."""
        self.known(session_id, self._totals.pop(session_id, SessionTotals()) + charge)

    def known(self, session_id: str, totals: SessionTotals) -> None:
        """`session_id`'s charges so far are `totals` (as its store keeps them)."""
        self._totals[session_id] = totals
        self._totals.move_to_end(session_id)
        while len(self._totals) > self._limit:
            self._totals.popitem(last=False)

    def totals(self, session_id: str | None) -> SessionTotals | None:
        """What `session_id`'s runs were charged so far, if any were counted here."""
        return self._totals.get(session_id) if session_id is not None else None

    def bind(self, agent: str, session: str | None, session_id: str) -> None:
        """`session_id` is what the brief's `session` now continues (None: no session)."""
        if session is None:
            return
        key = (agent, session)
        self._ids[key] = session_id
        self._ids.move_to_end(key)
        while len(self._ids) > self._limit:
            self._ids.popitem(last=False)

    def resume(self, agent: str, session: str | None, *, stateful_follow_up: str | None
               ) -> str | None:
        """The session id an attempt of `agent` continues: the one its brief's session is
        bound to, else a stateful performer's own from its failed attempt (its one
        follow-up is that resume); None to start a new one."""
        if session is not None:
            return self._ids.get((agent, session))
        return stateful_follow_up


# --------------------------------------------------------------------------------------
# The restart governor: restart intensity, as each agent's circuit (`scope: agent`) or
# as the supervisor's storm limit (`scope: supervisor`). It counts restarts and *returns*
# a verdict; acting on it (settling, stopping siblings) is its caller's. Owned by Zeus's
# actor thread.
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RestartVerdict:
    """Whether one more restart may start; if not, why, and what the refusal means."""

    allowed: bool
    reason: str | None = None  # why it was refused, in a sentence
    tripped: bool = False  # this refusal opened the circuit, or exceeded the storm limit
    restarts: int = 0  # restarts inside the window, for `supervisor.intensity_exceeded`
    give_up: bool = False  # scope supervisor: give up on every delegation under it


ALLOWED = RestartVerdict(True)


class RestartGovernor:
    """Restart windows by agent (scope agent) or by supervising delegation (scope
    supervisor, keyed by its id, None for the host's delegations)."""

    def __init__(self) -> None:
        self._windows: dict[str | None, RestartWindow] = {}
        self._open_circuits: set[str] = set()  # agents whose restarts are refused for now

    def admit(
        self, agent: str, parent_id: str | None, now: float, intensity: IntensityPolicy
    ) -> RestartVerdict:
        """Count one restart of a delegation of `agent` under `parent_id`."""
        if intensity.scope == "supervisor":
            return self._storm(agent, parent_id, now, intensity)
        admission = admit_restart(self._windows.get(agent, RestartWindow()), now, intensity,
                                  was_open=agent in self._open_circuits)
        self._windows[agent] = admission.window
        if admission.allowed:
            self._open_circuits.discard(agent)
            return ALLOWED
        self._open_circuits.add(agent)
        return RestartVerdict(False, circuit_reason(agent, intensity), admission.tripped,
                              len(admission.window.restarts))

    def _storm(
        self, agent: str, parent_id: str | None, now: float, intensity: IntensityPolicy
    ) -> RestartVerdict:
        """OTP's escalation: the restart that exceeds the limit is recorded, the window
        starts over, and the supervisor gives up on what it supervises."""
        window = self._windows.get(parent_id, RestartWindow()).record(now, intensity)
        if not window.exceeded(intensity):
            self._windows[parent_id] = window
            return ALLOWED
        self._windows[parent_id] = RestartWindow()
        return RestartVerdict(False, circuit_reason(agent, intensity), tripped=True,
                              restarts=len(window.restarts), give_up=True)

    def forget(self, delegation_id: str) -> None:
        """A delegation settled: the window of the restarts under it goes with it."""
        self._windows.pop(delegation_id, None)


# --------------------------------------------------------------------------------------
# Zeus's timers: messages to its own mailbox later, each attempt's one timer at its
# deadline or stale moment, and how late the timers fall due (the mailbox's lag).
# Every method runs in Zeus's actor thread (the clock's timer thread only sends).
#
# The attempts' timers are kept here, not on the clock: a heap in Zeus's thread (no
# lock, no `Timer` and closure per attempt), and on the clock one timer at the soonest
# of them, whose message (`AttemptsDue`) hands Zeus those that fell due (`due()`).
# Most are never due (the attempt ends first): an ended attempt's entry is dropped
# when it comes up, or in bulk when they pile up, or all at once when none is left.
# The clock's timer is not cancelled when the last attempt ends: the next attempt, due
# later, needs no new one (a host that runs one or two at a time would otherwise set a
# clock timer and wake the clock's thread for each attempt), and if none comes it rings
# once, finds nothing due, and is not set again.
# --------------------------------------------------------------------------------------


class Timers:
    """Sets timers on `clock` whose messages go to the mailbox through `tell`."""

    def __init__(
        self,
        clock: Clock,
        tell: Callable[[object], None],
        events: EventLog,
        queued: Callable[[], int | None],
    ) -> None:
        self._clock = clock
        self._tell = tell
        self._events = events
        self._queued = queued  # how many messages wait in the mailbox, for the lag warning
        self.lag = MailboxLag()
        # The attempts' timers: (when, seq, attempt id), soonest first; the seq of each
        # attempt's live entry (others are dropped as they come up); the clock's one timer.
        self._due: list[tuple[float, int, str]] = []
        self._live: dict[str, int] = {}
        self._seq = itertools.count()
        self._ring: Timer | None = None
        self._ring_at = float("inf")
        self._rang = AttemptsDue()

    def after(self, delay: float, message: object) -> Timer | None:
        """`message` to the mailbox in `delay` s; at once (and an error event) if no timer
        can be set for that delay, so a wait that cannot be kept never stops a delegation."""
        tell = self._tell
        try:
            return self._clock.call_at(self._clock.now() + delay, lambda: tell(message))
        except Exception as exc:  # noqa: BLE001 - e.g. TimerError for a delay of inf or nan
            self.refused(exc, type(message).__name__)
            tell(message)
            return None

    def refused(self, exc: BaseException, what: str) -> None:
        """A timer could not be set: said in the journal."""
        self._events.emit("zeus.internal_error", message=what,
                          error=f"a timer could not be set: {type(exc).__name__}: {exc}")

    def arm(self, a: Attempt) -> None:
        """One timer per attempt, at its deadline or the moment it would go stale.

        Before its first sign of life it is due no later than `stale_after_s` from now
        (the soonest it could go stale), so that sign moves no timer: the timer checks
        and re-arms when it comes (`AttemptDue`). Arming again moves it. The timer holds
        the attempt's id, not the attempt: once ended it keeps nothing of the delegation
        alive. `TimerError` if its deadline or stale moment is not a finite time.
        """
        when = check_when(min(a.deadline, a.watch.stale_at(a.stale_after_s)))
        if a.watch.progress < 0:
            when = min(when, self._clock.now() + a.stale_after_s)
        seq = next(self._seq)
        heapq.heappush(self._due, (when, seq, a.id))
        self._live[a.id] = seq  # an earlier entry of the same attempt is one no more
        a.due_at = when
        if when < self._ring_at:
            self._ring_for(when)
        if len(self._due) > 64 and len(self._due) > 2 * len(self._live):
            live = self._live
            self._due = [e for e in self._due if live.get(e[2]) == e[1]]
            heapq.heapify(self._due)

    def disarm(self, a: Attempt) -> None:
        """The attempt ended: neither its timer nor its grace period's falls due."""
        if a.grace is not None:
            a.grace.cancel()
        if self._live.pop(a.id, None) is not None and not self._live:
            self._due.clear()  # nothing left to time (the clock's timer stays: see above)

    def due(self) -> list[AttemptDue]:
        """The clock's timer rang (`AttemptsDue`): each attempt whose timer fell due by
        now, soonest first, with when it did; the clock's timer moves to the next."""
        now = self._clock.now()
        heap, live = self._due, self._live
        out: list[AttemptDue] = []
        while heap and heap[0][0] <= now:
            when, seq, attempt_id = heapq.heappop(heap)
            if live.get(attempt_id) == seq:
                del live[attempt_id]
                out.append(AttemptDue(attempt_id, when))
        while heap and live.get(heap[0][2]) != heap[0][1]:
            heapq.heappop(heap)  # ended or moved since: not worth a ring
        if heap and (self._ring_at <= now or heap[0][0] < self._ring_at):
            self._ring_for(heap[0][0])  # (a ring still to come is kept: it comes sooner)
        elif not heap:
            self._stop_ring()
        return out

    def _stop_ring(self) -> None:
        """No attempt's timer is left: the clock's one timer for them goes."""
        if self._ring is not None:
            self._ring.cancel()
        self._ring, self._ring_at = None, float("inf")

    def _ring_for(self, when: float) -> None:
        """The clock's one timer for the attempts, moved to `when` (rung at once if that
        has passed: a fake clock runs a timer only as it moves past it)."""
        if self._ring is not None:
            self._ring.cancel()
        tell, message = self._tell, self._rang
        self._ring_at = when
        if when <= self._clock.now():
            self._ring = None
            tell(message)
            return
        self._ring = self._clock.call_at(when, lambda: tell(message))

    def observe_lag(self, due_at: float) -> None:
        """A timer fell due at `due_at` and is handled now: warn when the mailbox lags."""
        self.lag, warn = self.lag.observe(due_at, self._clock.now())
        if warn:
            self._events.emit("supervisor.mailbox_lag", lag_s=round(self.lag.last_s, 6),
                              threshold_s=LAG_WARN_S, queued=self._queued())


# --------------------------------------------------------------------------------------
# What a backend needs to start an attempt: the `ChildSpec` built from the delegation,
# its new attempt and the routing. Built in Zeus's actor thread, before the child starts.
# --------------------------------------------------------------------------------------


WorkFn = Callable[..., Any]


def isolation_of(a: Attempt) -> str:
    """The backend an attempt runs on: a `command:` agent always runs as a process."""
    return backend_name(a.policy)


def backend_name(policy: AgentPolicy) -> str:
    """The backend an agent's attempts run on: its isolation's, but a `command:` agent
    always runs as a process."""
    return "process" if policy.runs_program else policy.isolation


def work_of(a: Attempt, registry: Registry) -> WorkFn | None:
    """What `a` runs in-process (None for a `command:` agent); `SupervisorError` if none."""
    if a.policy.runs_program:
        return None
    work = registry.work(a.agent)
    if work is None:
        raise SupervisorError(
            f"agent {a.agent!r} has no work function: zeus.register({a.agent!r}, fn) "
            "or give it an `entrypoint:` or `command:` in routing.yml"
        )
    return work


def child_spec(
    d: Delegation,
    a: Attempt,
    *,
    registry: Registry,
    clock: Clock,
    now: float,
    work: WorkFn | None,
    session: dict[str, Any] | None,
    budget_left: dict[str, float] | None,
    heads: FramingHeads | None = None,
    resume: str | None = None,
    continued: bool = False,
    prior: SessionTotals | None = None,
    epoch: int = 1,
) -> ChildSpec:
    """The spec of `d`'s attempt `a`, which runs `work` (None for a `command:` agent or an
    agent CLI; `resume`: the CLI's session id a follow-up continues, `prior` what that
    session was charged so far; `epoch`: the
    delegation's on its store, for `ctx.fence`)."""
    policy = a.policy
    answer = d.answer
    # The attempt that resumes a delegation a person answered: told of the blocker, not of
    # how its blocked attempt ended (it completed, saying it was blocked).
    answering = answer is not None and a.number == answer.after + 1
    previous = previous_error(d.attempts)
    if answering and d.attempts and d.attempts[-1].outcome is AttemptOutcome.completed:
        previous = None
    invocation = None
    if policy.speaks_cli:
        left = budget_left.get("cost") if budget_left else None
        invocation = Invocation(policy.speaks, program=policy.command or (), args=policy.args,
                                resume=resume, budget_usd=left, prior=prior)
    pricing = policy.pricing
    return ChildSpec(
        agent=d.agent,
        delegation_id=d.id,
        attempt=a.number,
        attempt_id=a.id,
        brief=d.brief if d.agent == d.brief.agent else d.brief.model_copy(
            update={"agent": d.agent}
        ),
        deadline=a.deadline,
        deadline_cap=d.deadline_cap,
        clock=clock,
        work=work,
        command=None if invocation is not None else policy.command,
        inputs_via=policy.inputs_via,
        speaks=policy.speaks,
        invocation=invocation,
        pricing=None if pricing is None else Pricing(
            pricing.input_per_mtok, pricing.output_per_mtok, pricing.cached_input_per_mtok),
        exit_grace_s=policy.exit_grace_s,
        env=policy.env or None,
        heartbeat_interval_s=policy.heartbeat.interval_s,
        term_s=policy.shutdown.term_s,
        grace_s=policy.shutdown.grace_s,
        session=session,
        session_key=d.brief.session,
        # Process agents keep at least one warm worker: no spawn per delegation.
        session_max=max(1, policy.session_max),
        resources=policy.resources,
        previous_partials=tuple(d.partials),
        depth=d.depth,
        framing=role_framing(d.agent, policy, registry.routing, d.depth,
                             a.deadline - now, d.usage, heads=heads),
        previous_error=previous,
        continues_session=continued and not answering,
        earlier_tools=tuple(d.tools_run),
        previous_blocker=None if answer is None else answer.blocker,
        note=None if answer is None else answer.note,
        reasoning_effort=policy.reasoning_effort,
        budget_left=budget_left,
        epoch=epoch,
    )


# --------------------------------------------------------------------------------------
# A person's answer to a blocked delegation (docs/guide.md, "When something is blocked"):
# `zeus.resume(id, note=...)` gives the delegation's next attempts why it was blocked and
# the note (`ctx.previous_blocker`, `ctx.note`; an agent CLI's prompt quotes both), and an
# agent CLI that reported itself blocked resumes the session it was blocked in. A Zeus
# without a store keeps its blocked root delegations here (`BlockedKept`), so that a
# person can answer them there too. All of it runs in Zeus's actor thread.
# --------------------------------------------------------------------------------------


class BlockedKept:
    """The blocked root delegations of a Zeus without a store, each as it settled: the
    last `keep` of them (`supervisor.keep_settled`), for `zeus.resume`."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._kept: OrderedDict[str, Delegation] = OrderedDict()

    def settled(self, d: Delegation, status: Status) -> None:
        """`d` settled `status`: kept if it is a blocked root."""
        if status is not Status.blocked or d.parent_id is not None or self.keep <= 0:
            return
        self._kept[d.id] = d
        while len(self._kept) > self.keep:
            self._kept.popitem(last=False)

    def get(self, delegation_id: str) -> Delegation | None:
        """The blocked delegation `delegation_id` as it settled (None: none is kept)."""
        return self._kept.get(delegation_id)

    def forget(self, delegation_id: str) -> None:
        """`delegation_id` runs again: it is no longer kept."""
        self._kept.pop(delegation_id, None)


def taken_back(old: Delegation, policy: AgentPolicy) -> Delegation:
    """A kept blocked delegation, open again: its id, brief, attempts, spend, partial
    results and history as they were, to run under `policy` (its agent's, as now)."""
    return Delegation(id=old.id, brief=old.brief, parent_id=None, depth=old.depth,
                      settled=DelegationFuture(), dispatched_at=old.dispatched_at,
                      agent=old.agent, policy=policy, visited=list(old.visited),
                      attempt_count=old.attempt_count, attempts=list(old.attempts),
                      retries_used=old.retries_used, partials=list(old.partials),
                      partials_dropped=old.partials_dropped, usage=old.usage,
                      last_error=old.last_error, agent_session=old.agent_session,
                      tools_run=list(old.tools_run))


def blocker_of(error: str | None, attempts: Sequence[AttemptRecord | AttemptEnd]) -> str | None:
    """Why a blocked delegation waits, from its summary's `error`: the settlement's own
    reason (the summary puts an earlier attempt's error before it, as "E (reason)"),
    without the verbs' hint, in the agent's own words where its block gave them."""
    if not error:
        return None
    earlier = next((a.error for a in reversed(attempts) if a.error), None)
    if earlier and error.startswith(f"{earlier} (") and error.endswith(")"):
        error = error[len(earlier) + 2:-1]
    said, _ = split_verbs_hint(error)
    return agent_words(said).strip() or None


def answer(d: Delegation, blocker: str | None, note: str | None) -> None:
    """What `d`'s next attempts are told (`Answer`); an agent CLI whose last attempt
    reported it blocked resumes that attempt's session."""
    last = d.attempts[-1] if d.attempts else None
    resumes = (last.session_id if d.policy.speaks_cli and last is not None
               and last.agent == d.agent and last.outcome is AttemptOutcome.completed
               else None)
    d.answered(Answer(blocker, note, after=d.attempt_count), resumes)
