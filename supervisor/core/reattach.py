"""Recovery's first step (docs/design.md, "Reattach"): each backend looks for its children
that outlived the last Zeus (`Backend.find_waiting`), and each one found is handed to the
supervisor as the attempt it runs (`Supervisor.reattach`), or back to its backend with
the session it holds; the backend then stops whatever nobody took (`stop_left`). Runs
in Zeus's thread, inside recovery, before anything is confirmed gone or run again; it
calls the supervisor and the backends, never the other way round.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from actors.backends import ChildHandle, ChildSpec
from actors.backends.base import Backend, Found, StoredChild, WaitingChild
from actors.protocol import Charge, Partial
from supervisor.core.state import Delegation
from supervisor.rules.budget import priced
from supervisor.rules.recovery import ResumedCalls
from supervisor.store import OpenDelegation, Store, StoredAttempt

if TYPE_CHECKING:
    from supervisor.core.supervisor import Supervisor

__all__ = ["Reattached", "count_left", "named", "reattach_found", "stored_child"]


@dataclass(slots=True)
class Reattached:
    """What the step found: attempt ids supervised on (`reattached`: still running;
    `adopted`: finished while no Zeus ran) and the sessions held by children found."""

    reattached: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    sessions: set[tuple[str, str]] = field(default_factory=set)
    # What children that are gone left, by attempt id: adopted (a `Finished` among it) or
    # counted before the attempt ends lost; each released once committed.
    left: dict[str, WaitingChild] = field(default_factory=dict)

    def __contains__(self, attempt_id: str) -> bool:
        return attempt_id in self.reattached or attempt_id in self.adopted


def stored_child(a: StoredAttempt) -> StoredChild:
    """What the store knows of the attempt's child, as its backend is told it."""
    return StoredChild(a.id, a.agent, a.pid, a.pid_start_time, a.pgid, a.node)


def named(stored: OpenDelegation, found: Mapping[str, StoredChild]) -> OpenDelegation:
    """`stored` with each open attempt whose pid the store never got (its Zeus died as the
    worker took the job) named as its backend found it (the mark its worker left before
    the job ran): from here on it is found, reattached, or confirmed gone by that pid like
    any other."""
    if not any(a.open and a.pid is None and a.id in found for a in stored.attempts):
        return stored
    return dataclasses.replace(stored, attempts=tuple(
        dataclasses.replace(a, pid=found[a.id].pid, pid_start_time=found[a.id].pid_start_time,
                            pgid=found[a.id].pgid)
        if a.open and a.pid is None and a.id in found else a
        for a in stored.attempts))


def reattach_found(
    sup: Supervisor,
    store: Store,
    backend: Backend,
    found: Found,
    candidates: list[tuple[Delegation, StoredAttempt]],
    into: Reattached,
) -> None:
    """Hand each candidate (an open delegation that may run on, and its open attempt on
    `backend`) whose child `found` holds to the supervisor; keep idle children holding a
    session of an agent of `backend`; then the backend stops every other child it found
    (nobody will supervise it)."""
    for d, stored in candidates:
        child = found.waiting.get(stored.id)
        if child is None:
            continue  # confirmed gone (or killed) by recovery, then lost
        if child.gone:
            into.left[stored.id] = child
            if child.finished and sup.reattach(d, stored, _attach(sup, backend, child),
                                               adopted=True):
                into.adopted.append(stored.id)  # it finished while no Zeus ran, and left
            continue  # else what it left counts, and it ends lost (it is gone)
        resumed = None
        if d.policy.kind == "orchestrator":
            resumed = ResumedCalls([(c.id, c.brief) for c in store.children(d.id)
                                    if c.created >= stored.started])
        if not sup.reattach(d, stored, _attach(sup, backend, child), adopted=child.finished,
                            resumed=resumed):
            continue
        (into.adopted if child.finished else into.reattached).append(stored.id)
        if child.session_key is not None:
            into.sessions.add((child.agent, child.session_key))
    for child in found.idle:
        if (child.session_key is not None and sup.backend_of(child.agent) is backend
                and backend.reattach(child, None, sup.tell)):
            into.sessions.add((child.agent, child.session_key))
    backend.stop_left()


def _attach(sup: Supervisor, backend: Backend,
            child: WaitingChild) -> Callable[[ChildSpec], ChildHandle | None]:
    """What `Supervisor.reattach` attaches with: the backend picks `child` up for the
    rebuilt attempt's spec."""
    return lambda spec: backend.reattach(child, spec, sup.tell)


def count_left(sup: Supervisor, d: Delegation, stored: OpenDelegation,
               found: Reattached) -> None:
    """What a child that is gone left for an attempt that then ends lost: its charges count
    (against the delegation, its ancestors and the tree, as spend made while no Zeus ran
    does) and its partial results are kept (it takes nothing with it)."""
    for a in stored.attempts:
        left = found.left.get(a.id)
        if left is None or not a.open or a.id in found:
            continue
        counted = a.charged_progress
        for message in left.left():
            if isinstance(message, Charge):
                if message.progress and message.progress <= counted:
                    continue  # it was committed before its host died
                counted = max(counted, message.progress)
                sup.spend(d, None, priced(message.usage, d.policy.pricing), a.id,
                          progress=counted)
            elif isinstance(message, Partial):
                sup.keep_partial(d, a.id, message.item)
