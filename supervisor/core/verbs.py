"""The operator's verbs on a blocked delegation (docs/design.md, "The store"): what
recovery, or the agent, could not decide, a person does. `resume` runs it again as a new
attempt (the same id and key, its attempts and spend kept), its agent told the blocker
and the person's note (`supervisor.core.state`), on a store's delegation or, without
a store, on one this Zeus kept; `resolve` settles a store's by hand with a status and a
note. Each is journalled with who and why (`delegation.resumed`, `delegation.resolved`).
Runs in Zeus's actor thread; it calls the supervisor, never the other way round.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable

from actors import Status, Summary
from supervisor.core.handle import DelegationFuture
from supervisor.core.reattach import Reattached, stored_child
from supervisor.core.recovery import current_agent
from supervisor.core.state import Delegation, answer, blocker_of, taken_back
from supervisor.core.supervisor import Supervisor
from supervisor.errors import NotBlocked, UnknownDelegation
from supervisor.store import StoredDelegation, resolved_by_hand

__all__ = ["operator", "resolve", "resume"]


def operator() -> str:
    """Who runs this process (the OS user), for the journal."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())  # a uid with no name


def _blocked(sup: Supervisor, delegation_id: str, verb: str) -> StoredDelegation:
    """The stored delegation, settled blocked; `NotBlocked` saying why not."""
    store = sup.durable.required(f"cannot {verb} {delegation_id}",
                                 "only a store's blocked delegations wait for a person")
    stored = store.delegation(delegation_id)
    if stored is None:
        raise UnknownDelegation(f"the store {store.path} holds no delegation "
                                f"{delegation_id!r}; `zeus blocked STORE` lists the blocked ones")
    if stored.status is None or sup.tree.get(delegation_id) is not None:
        raise NotBlocked(f"cannot {verb} {delegation_id}: it is open (it runs, or waits its "
                         "turn), not blocked; only a blocked delegation waits for a person "
                         "(cancel it, or wait for its summary)")
    if stored.status is not Status.blocked:
        raise NotBlocked(f"cannot {verb} {delegation_id}: it settled {stored.status.value}, "
                         "not blocked, and a settled result is never changed; dispatch new "
                         "work with a new key")
    return stored


def resume(sup: Supervisor, delegation_id: str, *, who: str, why: str, note: str | None,
           keep_handle: Callable[[str, DelegationFuture], object]) -> object:
    """Run the blocked delegation again as a new attempt, its blocker and the person's
    `note` told to it (`supervisor.core.state`); what `keep_handle` gives back (the
    host's handle) once it is under way (or queued for its turn). With a store, the
    store's delegation; without, one this Zeus keeps (`BlockedKept`)."""
    if sup.durable.store is None:
        d, summary = _kept_blocked(sup, delegation_id)
        blocker = blocker_of(summary.error, d.attempts)
    else:
        d, blocker = _stored_blocked(sup, delegation_id, note)
    answer(d, blocker, note)
    sup.events.emit("delegation.resumed", delegation_id=d.id, parent_id=None, agent=d.agent,
                    who=who, why=why, attempt=d.attempt_count + 1)
    handle = keep_handle(d.id, d.settled)
    sup.rerun(d)
    return handle


def _kept_blocked(sup: Supervisor, delegation_id: str) -> tuple[Delegation, Summary]:
    """The blocked delegation a Zeus without a store kept, open again, and its blocked
    summary; `NotBlocked` saying why there is none."""
    if sup.tree.get(delegation_id) is not None:
        raise NotBlocked(f"cannot resume {delegation_id}: it is open (it runs, or waits its "
                         "turn), not blocked; only a blocked delegation waits for a person")
    old = sup.blocked.get(delegation_id)
    if old is None:
        raise NotBlocked(f"cannot resume {delegation_id}: this Zeus keeps no blocked "
                         f"delegation of that id (without a store it keeps its last "
                         f"{sup.blocked.keep} blocked ones, not a sub-delegation's)")
    d = taken_back(old, sup.registry.policy(old.agent))  # UnknownAgent: it cannot run
    sup.blocked.forget(delegation_id)
    sup.take_back(d)
    return d, old.settled.result()


def _stored_blocked(sup: Supervisor, delegation_id: str,
                    note: str | None) -> tuple[Delegation, str | None]:
    """The store's blocked delegation, open again, and why it was blocked; the person's
    answer (that and `note`) kept with it in the store, for a restart too."""
    stored = _blocked(sup, delegation_id, "resume")
    if stored.parent_id is not None:
        raise NotBlocked(f"cannot resume {delegation_id}: it is a sub-delegation of "
                         f"{stored.parent_id}, whose run was given its blocked summary; "
                         f"resolve it, or run {stored.parent_id} again")
    store = sup.durable.required("resume")
    found = store.delegation_as_open(delegation_id)
    assert found is not None
    policy = sup.registry.policy(current_agent(found))  # UnknownAgent: it could not run again
    for a in found.attempts:  # one whose child recovery could not confirm stopped
        if not a.open or a.pid is None:
            continue
        # its agent's backend (an agent that left the routing: the current agent's)
        backend = sup.backend_of(a.agent) or sup.backend_for(policy)
        if not backend.child_gone(stored_child(a)):
            raise NotBlocked(f"cannot resume {delegation_id}: the child of its attempt {a.id} "
                             f"(pid {a.pid}) still runs, and nothing may overlap it; stop it "
                             f"(`zeus sweep {store.path}`), then resume")
    summary = store.summary(delegation_id)
    assert summary is not None  # a settled delegation has its summary
    blocker = blocker_of(summary.error, [a.record for a in found.attempts if a.record])
    # StoreError: nothing changed, nothing runs
    store.reopen(delegation_id, {"blocker": blocker, "note": note})
    rebuilt = sup.recovery.rebuild(found)
    sup.recovery.end_lost(rebuilt, Reattached())  # those children are gone now: ended `lost`
    return rebuilt.d, blocker


def resolve(sup: Supervisor, delegation_id: str, status: Status, *, who: str,
            note: str) -> Summary:
    """Settle the blocked delegation by hand: its summary with `status`, the note in its
    risks (and its error, unless it completed), committed at once."""
    stored = _blocked(sup, delegation_id, "resolve")
    if status is Status.blocked:
        raise NotBlocked(f"cannot resolve {delegation_id} as blocked: it is blocked already; "
                         "give the status it ends with (completed, failed, cancelled, ...)")
    if not note.strip():
        raise NotBlocked(f"cannot resolve {delegation_id} without a note: say what you found "
                         "(it is kept in its summary)")
    store = sup.durable.required("resolve")
    old = store.summary(delegation_id)
    assert old is not None  # a settled delegation has its summary
    said = resolved_by_hand(status.value, who, note)
    risks = [*old.risks, said]
    if old.error:
        risks.append(f"it had been blocked: {old.error}")
    summary = old.model_copy(update={
        "status": status, "risks": risks,
        "error": None if status is Status.completed else said,
    })
    store.claim_settled(delegation_id)  # StoreError: nothing changed
    store.settled(delegation_id, status=status, summary=summary, at=sup.clock.wall())
    store.commit()  # StoreError: kept, and written by the next commit that works
    sup.events.emit("delegation.resolved", delegation_id=delegation_id,
                    parent_id=stored.parent_id, agent=stored.agent, status=status.value,
                    who=who, why=note)
    return summary
