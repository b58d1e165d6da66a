"""A person's answer to a blocked delegation (docs/guide.md, "When something is blocked"):
`zeus.resume(id, note=...)` gives the delegation's next attempts why it was blocked and
the note (`ctx.previous_blocker`, `ctx.note`; an agent CLI's prompt quotes both), and an
agent CLI that reported itself blocked resumes the session it was blocked in. A Zeus
without a store keeps its blocked root delegations here (`BlockedKept`), so that a
person can answer them there too. All of it runs in Zeus's actor thread.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from actors import AttemptOutcome, AttemptRecord, Status
from supervisor.core.handle import DelegationFuture
from supervisor.core.settlement import AttemptEnd
from supervisor.core.state import Answer, Delegation
from supervisor.routing import AgentPolicy
from supervisor.rules.agent_report import agent_words
from supervisor.rules.recovery import split_verbs_hint

__all__ = ["BlockedKept", "answer", "blocker_of", "taken_back"]


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
