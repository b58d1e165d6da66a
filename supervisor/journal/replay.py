"""The supervision tree rebuilt from a journal's events, one event at a time.

`Journal` holds one `Run` per `zeus.started` (a journal file may hold several
runs; the records are in `runs`). `Journal.apply(event)` folds in one event,
so a live view can follow: it finds the records the event names and tells each what
happened (`on_<event>`, one per pinned event); the records change themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from supervisor.journal.runs import (
    Event,
    ReplayedAttempt,
    ReplayedDelegation,
    Run,
    num,
    str_of,
)

if TYPE_CHECKING:
    from actors import Summary

__all__ = ["Journal"]


class Journal:
    """A journal's runs, rebuilt one event at a time. The last run is `journal.run`."""

    def __init__(self, notes: Iterable[str] = ()) -> None:
        self.notes: list[str] = list(notes)
        self.runs: list[Run] = [Run(index=1)]

    @property
    def run(self) -> Run:
        return self.runs[-1]

    @property
    def events(self) -> int:
        return sum(r.events for r in self.runs)

    def apply(self, event: Event, *, line: int | None = None) -> None:
        """Fold one event into the tree. Unknown events are counted and otherwise ignored."""
        name = str(event.get("event"))
        run = self.run
        if name == "zeus.started" and run.events:
            run = Run(index=len(self.runs) + 1)
            self.runs.append(run)
        ts = num(event.get("ts"))
        run.on_event(ts, line)
        if name == "zeus.started":
            run.on_started(event, ts)
            return
        if name == "zeus.stopped":
            run.on_stopped(ts)
            return
        if name == "supervisor.intensity_exceeded":
            run.on_intensity_exceeded(event)
            return
        delegation_id = str_of(event.get("delegation_id"))
        if delegation_id is None:
            return
        d = self._delegation(run, delegation_id, event)
        d.on_event(ts)
        attempt_id = str_of(event.get("attempt_id"))
        a = self._attempt(run, d, attempt_id, event) if attempt_id else None
        if a is not None:
            a.on_event(ts)
        if (told := _DELEGATION.get(name)) is not None:
            told(self, run, d, a, event, ts)
        elif a is not None and (told_attempt := _ATTEMPT.get(name)) is not None:
            told_attempt(self, run, d, a, event, ts)

    def earlier_record(self, attempt_id: str) -> ReplayedAttempt | None:
        """What an earlier run said of the attempt (one a later run reattached)."""
        return next((r.attempts[attempt_id] for r in reversed(self.runs[:-1])
                     if attempt_id in r.attempts), None)

    def settled_before(self, summary: Summary) -> None:
        """A delegation that settled before this run, as its summary tells it: a store
        gave it back (`dispatch(key=K)` of a settled key), so no event of this run is
        its. Nothing when the run knows it already."""
        run = self.run
        if summary.id in run.delegations:
            return
        d = self._delegation(run, summary.id, {"agent": summary.agent})
        for record in summary.attempts:
            self._attempt(run, d, record.id, {"agent": record.agent}).on_settled_before(record)
        d.on_settled_before(summary)

    def _delegation(self, run: Run, delegation_id: str, event: Event) -> ReplayedDelegation:
        d = run.delegations.get(delegation_id)
        if d is not None:
            return d
        d = ReplayedDelegation(id=delegation_id, agent=str_of(event.get("agent")),
                               parent_id=str_of(event.get("parent_id")))
        parent_id = d.parent_id or ""
        parent = run.delegations.get(parent_id)
        if parent is None and parent_id in run.attempts:  # a parent named by its attempt
            parent = run.delegations.get(run.attempts[parent_id].delegation_id)
        run.add_delegation(d, parent if parent_id != delegation_id else None)
        return d

    def _attempt(
        self, run: Run, d: ReplayedDelegation, attempt_id: str, event: Event
    ) -> ReplayedAttempt:
        a = run.attempts.get(attempt_id)
        if a is None:
            a = ReplayedAttempt(id=attempt_id, delegation_id=d.id,
                                agent=str_of(event.get("agent")))
            run.add_attempt(d, a)
        return a


# What each pinned event tells the records it names: a delegation (the attempt it names,
# if any, beside it) ...
_Told = Callable[
    ["Journal", Run, ReplayedDelegation, "ReplayedAttempt | None", Event, "float | None"], None]
_ToldAttempt = Callable[
    ["Journal", Run, ReplayedDelegation, ReplayedAttempt, Event, "float | None"], None]


def _settled(j: Journal, run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None, e: Event,
             ts: float | None) -> None:
    d.on_settled(e, ts)
    run.then(d, f"settled {d.status}")


def _resolved(j: Journal, run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None,
              e: Event, ts: float | None) -> None:
    d.on_resolved(e, ts)
    run.then(d, f"settled {d.status} by hand")


def _retry(j: Journal, run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None, e: Event,
           ts: float | None) -> None:
    backoff = num(e.get("backoff_s"))
    step = f"retry in {backoff:.2f}s" if backoff is not None else "retry"
    nxt = str_of(e.get("next_attempt_id"))
    if a is not None:
        a.on_next(f"{step} as {nxt}" if nxt else step)
    run.then(d, step)


def _fallback(j: Journal, run: Run, d: ReplayedDelegation, a: ReplayedAttempt | None, e: Event,
              ts: float | None) -> None:
    step = f"fallback {e.get('from')} -> {e.get('to')}"
    if a is not None:
        a.on_next(step)
    run.then(d, step)


_DELEGATION: dict[str, _Told] = {
    "delegation.dispatched": lambda j, run, d, a, e, ts: d.on_dispatched(e, ts),
    "delegation.cancel_requested": lambda j, run, d, a, e, ts: d.on_cancel_requested(e),
    "delegation.settled": _settled,
    "delegation.resolved": _resolved,
    "retry.scheduled": _retry,
    "fallback.dispatched": _fallback,
}

# ... or one attempt (an event that names none changes nothing).
_ATTEMPT: dict[str, _ToldAttempt] = {
    "attempt.started": lambda j, run, d, a, e, ts: a.on_started(e, ts),
    "attempt.spawned": lambda j, run, d, a, e, ts: a.on_spawned(e),
    "attempt.session": lambda j, run, d, a, e, ts: a.on_session(e),
    # the same attempt, supervised on by a later run
    "attempt.reattached": lambda j, run, d, a, e, ts: a.on_reattached(
        e, ts, j.earlier_record(a.id)),
    "attempt.heartbeat": lambda j, run, d, a, e, ts: a.on_heartbeat(e),
    "attempt.tool": lambda j, run, d, a, e, ts: a.on_tool(e, ts),
    "attempt.timed_out": lambda j, run, d, a, e, ts: run.on_out_of_time(d, a, e, ts),
    "attempt.stale": lambda j, run, d, a, e, ts: run.on_out_of_time(d, a, e, ts),
    "attempt.budget_exceeded": lambda j, run, d, a, e, ts: a.on_budget_exceeded(),
    "attempt.killed": lambda j, run, d, a, e, ts: a.on_killed(e),
    "attempt.fenced": lambda j, run, d, a, e, ts: a.on_fenced(e),
    "attempt.completed": lambda j, run, d, a, e, ts: a.on_ended(e, ts),
    "attempt.failed": lambda j, run, d, a, e, ts: a.on_ended(e, ts),
    "attempt.lost": lambda j, run, d, a, e, ts: a.on_lost(e, ts),
}
