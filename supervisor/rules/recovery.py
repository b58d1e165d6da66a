"""Recovery of a store a dead Zeus left: what to do with each open delegation, and the
replay of an orchestrator's `ctx.delegate` calls. Pure; tested by tables.

`recover` decides one open delegation, first that applies wins:
1. an open attempt whose child is not confirmed gone: wait (nothing may overlap it);
2. every open attempt ends `lost` (their children are gone), then:
3. a lost attempt of a stateful performer, or of a writer (neither `read_only` nor
   `idempotent`) whose child had started the work: it settles blocked, saying why, even
   when its deadline passed or its budget ran out while no Zeus ran (something may have
   been written: a person checks); a writer whose children never started runs on below;
4. the delegation's deadline passed while no Zeus ran: it settles timed out (partial
   when partial results are OK and it has some);
5. its spend is over its budget: it settles budget_exceeded;
6. nothing was lost: a scheduled retry or fallback is resumed; a delegation with no
   attempt starts its first; one whose last attempt ended decides as after it;
7. otherwise it was lost in a host crash, which is not the agent's failure: it runs
   again (`Rerun`) without using up `retry.max_retries`, while `lost` is in `retry.on`
   and it has been lost in no more than `supervisor.max_recoveries` host crashes; past
   that it settles failed, "lost in N host crashes". An attempt whose child never
   started the work (`AttemptFacts.started` False) is not counted: nothing ran.

`Replay` matches an orchestrator's calls after a restart to its stored
sub-delegations: the k-th call gets the k-th stored one when the brief is the same;
the first that differs ends the matching, and the stored ones left are cancelled.
"""

from __future__ import annotations

import itertools
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from actors import AttemptOutcome, Brief, Status, Usage
from supervisor.routing import AgentPolicy, RetryOn
from supervisor.rules.budget import budget_overrun
from supervisor.rules.settle import Fallback, Retry, Settle, decide_next

__all__ = [
    "BLOCKED_REASON",
    "IN_TOOL_REASON",
    "NOT_ASKED_AGAIN",
    "STATEFUL_REASON",
    "AttemptFacts",
    "Plan",
    "Replay",
    "ReplayAnswer",
    "Rerun",
    "Resume",
    "ResumedCalls",
    "Start",
    "Step",
    "Wait",
    "brief_differences",
    "is_writer",
    "losses",
    "recover",
    "retries_made",
    "split_verbs_hint",
    "verbs_hint",
]

BLOCKED_REASON = (
    "its outcome is unknown: its supervisor stopped while it ran, and its child is "
    "confirmed stopped; check its changes"
)
STATEFUL_REASON = (
    "a stateful performer whose supervisor stopped while it ran cannot be replaced; "
    "its child is confirmed stopped: check its changes"
)
IN_TOOL_REASON = (
    "its thread child was inside the tool call {tool!r}, which has side effects, when "
    "its host's lease ended; a thread cannot be stopped, so it may still be writing: "
    "check its changes"
)
NOT_ASKED_AGAIN = "not asked again after the restart"


@dataclass(frozen=True, slots=True)
class AttemptFacts:
    """One stored attempt: `open` it had not ended; `gone` its child is confirmed gone."""

    id: str
    open: bool
    gone: bool = True
    outcome: AttemptOutcome | None = None  # how it ended, when it did
    # Whether its child had started the work when its host died (an open attempt, or
    # one that ended `lost`): one whose process was never spawned had not.
    started: bool = True
    # An open attempt's thread child was inside this tool call with side effects, as
    # its host last committed (a shared store's).
    in_tool: str | None = None


@dataclass(frozen=True, slots=True)
class Wait:
    """Children not yet confirmed gone: decide again once they are."""

    attempts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Resume:
    """Start the retry or fallback that was scheduled before the crash, when it is due."""


@dataclass(frozen=True, slots=True)
class Start:
    """Recorded, never started: start its first attempt."""


@dataclass(frozen=True, slots=True)
class Rerun:
    """Lost in a host crash: run it again as a new attempt on the same agent, at once,
    using up none of its retries. `losses`: the host crashes it has been lost in."""

    losses: int


Step = Wait | Resume | Start | Rerun | Settle | Retry | Fallback


@dataclass(frozen=True, slots=True)
class Plan:
    """The attempts to end `lost` (in order), then the step."""

    lost: tuple[str, ...]
    step: Step


def is_writer(policy: AgentPolicy) -> bool:
    """Neither `read_only` nor `idempotent`: its side effects forbid running it again
    after a loss, unless its old child is known stopped."""
    return not (policy.read_only or policy.idempotent)


def recover(
    attempts: Sequence[AttemptFacts],
    policy: AgentPolicy,
    *,
    deadline: float | None,
    now: float,
    spent: Usage,
    has_partials: bool,
    partial_ok: bool,
    retries_used: int,
    visited: Sequence[str],
    retry_pending: bool,
    max_recoveries: int = 10,
    writers_stopped: bool = False,
) -> Plan:
    """What to do with one open delegation a dead Zeus left (the order is the module's).

    `deadline` and `now` are wall-clock times; `spent` is what its attempts charged;
    `retries_used` the retries already made on its current agent (attempts run again
    after a loss not counted, `retries_made`); `retry_pending` a retry or fallback was
    scheduled after its last attempt; `max_recoveries` the routing's
    `supervisor.max_recoveries`. `writers_stopped`: the open attempts' children were
    stopped by their host's lease (a takeover), so a writer lost with them may run again
    like a reader, unless a thread child of it was inside a tool call with side effects
    (no lease stops a thread); a stateful agent's session is still gone with them.
    """
    waiting = tuple(a.id for a in attempts if a.open and not a.gone)
    if waiting:
        return Plan((), Wait(waiting))
    lost = tuple(a.id for a in attempts if a.open)
    writer = is_writer(policy)
    expired = deadline is not None and now >= deadline
    overrun = budget_overrun(spent, policy.budget)
    in_tool = next((a.in_tool for a in attempts if a.open and a.in_tool), None)
    # a writer none of whose lost children started the work wrote nothing: it runs again
    wrote = any(a.started for a in attempts if a.open)
    if lost and (policy.stateful or (writer and wrote and (not writers_stopped or in_tool))):
        reason = (STATEFUL_REASON if policy.stateful else BLOCKED_REASON
                  if not writers_stopped else IN_TOOL_REASON.format(tool=in_tool))
        if expired:
            reason += " (its deadline passed while no supervisor ran)"
        elif overrun is not None:
            reason += f" (spent before the restart: {overrun})"
        return Plan(lost, Settle(Status.blocked, None, reason))
    if expired:
        status = Status.partial if partial_ok and has_partials else Status.timed_out
        return Plan(lost, Settle(status, "deadline",
                                 "the deadline passed while no supervisor ran"))
    if overrun is not None:
        return Plan(lost, Settle(Status.budget_exceeded, None, f"spent before the restart: "
                                                                f"{overrun}"))
    last = attempts[-1].outcome if attempts and not lost else None
    if not lost and (retry_pending or not attempts or last is not AttemptOutcome.lost):
        if retry_pending:
            return Plan((), Resume())
        if not attempts:
            return Plan((), Start())
        last = last or AttemptOutcome.crash
        if last is AttemptOutcome.completed:
            return Plan((), Settle(Status.failed, None, "its last attempt completed but its "
                                   "result was not stored before the supervisor stopped"))
        return Plan((), _next(last, policy, retries_used, has_partials, partial_ok, visited))
    # Lost in a host crash (now, or in one before whose rerun had not started).
    n = losses(attempts)
    if RetryOn.lost not in policy.retry.on:
        return Plan(lost, _next(AttemptOutcome.lost, policy, retries_used, has_partials,
                                partial_ok, visited))
    if n > max_recoveries:
        return Plan(lost, Settle(Status.failed, None, (
            f"lost in {n} host crashes (supervisor.max_recoveries: {max_recoveries}): "
            "its supervisor stopped while it ran, each time; a brief that brings its host "
            "down is not run again")))
    return Plan(lost, Rerun(n))


def losses(attempts: Sequence[AttemptFacts]) -> int:
    """The host crashes a delegation was lost in: its attempts that ended `lost` or are
    open now, each one whose child had started the work (nothing ran in the others)."""
    return sum(1 for a in attempts if a.started and (a.open or a.outcome is AttemptOutcome.lost))


def retries_made(attempts: Sequence[tuple[str, str | None]], agent: str) -> int:
    """The retries made on `agent`, from the stored attempts' (agent, outcome) in order:
    each attempt on it that followed one of its own that ended other than `lost` (one
    that followed a loss ran again after a host crash, which is not a retry)."""
    return sum(1 for (before, outcome), (now, _) in itertools.pairwise(attempts)
               if before == now == agent and outcome != AttemptOutcome.lost.value)


def verbs_hint(store: str, delegation_id: str, routing: str | None = None) -> str:
    """What a person does with a blocked delegation: the CLI's verbs, for its reason. The
    verbs open the store as its host does, with its routing (`routing`, its file; None:
    the host has none, so the hint says which to give). Paths are made absolute: the
    reason is read later, from another directory (`zeus blocked`)."""
    def path(p: str) -> str:
        return shlex.quote(p if p.startswith(("postgresql://", "postgres://"))
                           else os.path.abspath(p))

    where = f"{path(store)} {shlex.quote(delegation_id)}"
    flag = f" --routing {path(routing)}" if routing else " --routing F"
    return (f"then `zeus resume {where}{flag}` to run it again, or `zeus resolve {where}{flag} "
            "--status completed --note ...` to settle it by hand"
            + ("" if routing else " (F: a routing file that defines its agent)"))


def split_verbs_hint(reason: str) -> tuple[str, str | None]:
    """A blocked reason without the hint `verbs_hint` ended it with (a reader that names
    the store its own way says the verbs itself), and the routing file the hint named
    (None: it named none, or there was no hint)."""
    said, sep, hint = reason.partition("; then `zeus resume ")
    if not sep:
        return reason, None
    try:
        words = shlex.split(hint.split("`", 1)[0])
    except ValueError:
        return said, None
    flag = words.index("--routing") if "--routing" in words else None
    routing = words[flag + 1] if flag is not None and flag + 1 < len(words) else None
    return said, None if routing == "F" else routing


def _next(outcome: AttemptOutcome, policy: AgentPolicy, retries_used: int, has_partials: bool,
          partial_ok: bool, visited: Sequence[str]) -> Settle | Retry | Fallback:
    return decide_next(outcome, policy, retries_used=retries_used, has_partials=has_partials,
                       partial_ok=partial_ok, side_effects=False, visited=visited,
                       fenced_writer=False)


def brief_differences(a: Brief, b: Brief) -> tuple[str, ...]:
    """The fields in which two briefs differ, in the brief's field order (for KeyConflict)."""
    return tuple(name for name in Brief.model_fields if getattr(a, name) != getattr(b, name))


@dataclass(frozen=True, slots=True)
class ReplayAnswer:
    """`reuse`: the stored sub-delegation this call gets (None: start a new one);
    `cancel`: stored ones no longer reachable, to cancel with `NOT_ASKED_AGAIN`."""

    reuse: str | None
    cancel: tuple[str, ...] = ()


class Replay:
    """An orchestrator's stored sub-delegations, matched to its calls after a restart.

    Owned by the parent delegation; `ask` runs on Zeus's thread once per
    `ctx.delegate` call, in call order.
    """

    __slots__ = ("_matching", "_next", "_stored")

    def __init__(self, stored: Sequence[tuple[str, Brief]]) -> None:
        self._stored = tuple(stored)  # (id, brief) in the order of the calls that made them
        self._next = 0
        self._matching = True

    @property
    def matching(self) -> bool:
        return self._matching

    def ask(self, brief: Brief) -> ReplayAnswer:
        """The answer for the next call, which asks for `brief`."""
        if not self._matching:
            return ReplayAnswer(None)
        if self._next < len(self._stored) and self._stored[self._next][1] == brief:
            self._next += 1
            return ReplayAnswer(self._stored[self._next - 1][0])
        self._matching = False
        return ReplayAnswer(None, self._rest())

    def finish(self) -> tuple[str, ...]:
        """The parent's attempt ended: the stored ones it did not ask for again."""
        if not self._matching:
            return ()
        self._matching = False
        return self._rest()

    def _rest(self) -> tuple[str, ...]:
        rest = tuple(d_id for d_id, _ in self._stored[self._next:])
        self._next = len(self._stored)
        return rest


class ResumedCalls:
    """A reattached orchestrator's stored sub-delegations, matched to the calls its worker
    asks again by their ordinals (docs/design.md, "Reattach").

    Its process never restarted: its worker re-sends each `ctx.delegate` call that had
    no answer when its Zeus stopped, with the call's ordinal within the attempt, and
    never asks again for one answered before. The k-th call made the k-th stored
    sub-delegation of the attempt, unless an earlier call was refused (it made none):
    then the match is the nearest one before it, not yet taken, with the same brief. Owned by
    the parent delegation; `ask` runs on Zeus's thread.
    """

    __slots__ = ("_stored", "_taken")

    def __init__(self, stored: Sequence[tuple[str, Brief]]) -> None:
        self._stored = tuple(stored)  # (id, brief) in the order of the calls that made them
        self._taken: set[int] = set()

    def ask(self, ordinal: int, brief: Brief) -> str | None:
        """The stored sub-delegation of call `ordinal` (1-based) asking for `brief`, or
        None: a call the store never saw, to be dispatched as new."""
        i = ordinal - 1
        candidates = ([i] if 0 <= i < len(self._stored) else []) + list(
            range(min(i, len(self._stored)) - 1, -1, -1))
        for j in candidates:
            if j not in self._taken and self._stored[j][1] == brief:
                self._taken.add(j)
                return self._stored[j][0]
        return None
