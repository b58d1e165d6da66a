"""Recovery's first step on a store whose children wait to be picked up (docs/design.md,
"Reattach"): find the workers that outlived the last Zeus and hand each to the
supervisor as the attempt it runs (`Supervisor.reattach`), or back to the warm pool
with the session it holds. Runs in Zeus's thread, inside recovery, before anything is
confirmed gone or run again; it calls the supervisor and the process backend, never the
other way round.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from actors.backends import ChildHandle, ChildSpec, ProcessBackend
from actors.backends.left_behind import Held, JobMark, LeftChild
from actors.backends.reattach import ReattachPlace, Waiting, find_waiting, wait_for_listener
from actors.osproc import process_running
from actors.protocol import Charge, Partial
from supervisor.core.state import Delegation
from supervisor.core.supervisor import Supervisor
from supervisor.errors import SupervisorError
from supervisor.rules.budget import priced
from supervisor.rules.recovery import ResumedCalls
from supervisor.store import OpenDelegation, StoredAttempt

__all__ = ["LISTEN_WAIT_S", "STOP_WAIT_S", "UNNAMED_WAIT_S", "Reattached", "count_left",
           "named_by_marks", "reattach_children"]

# A child that still runs but whose socket is not there yet has just seen its Zeus go
# (the last one died a moment ago): how long recovery waits for it to listen.
LISTEN_WAIT_S = 2.0
# How long recovery gives a worker whose pid the store never got (its Zeus died as it
# started) to listen, when one such attempt is not found at first.
UNNAMED_WAIT_S = 0.2
# How long a worker told to stop has to run its kill ladder and exit before recovery
# kills it (its term_s, and more).
STOP_WAIT_S = 10.0


@dataclass(slots=True)
class Reattached:
    """What the step found: attempt ids supervised on (`reattached`: still running;
    `adopted`: finished while no Zeus ran) and the sessions held by workers found."""

    reattached: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    sessions: set[tuple[str, str]] = field(default_factory=set)
    # What workers whose grace ran out left, by attempt id: adopted (a `Finished` among
    # it) or to be counted before the attempt ends lost; each file removed once committed.
    left: dict[str, Held] = field(default_factory=dict)

    def __contains__(self, attempt_id: str) -> bool:
        return attempt_id in self.reattached or attempt_id in self.adopted


def reattach_children(
    sup: Supervisor,
    candidates: Iterable[tuple[Delegation, StoredAttempt]],
    backend: ProcessBackend,
    place: ReattachPlace,
    held: dict[str, Held] | None = None,
) -> Reattached:
    """Reattach each candidate (an open delegation that may run on, and its open process
    attempt) whose worker waits; put idle workers holding a session back in the pool;
    stop every other waiting worker (nobody will supervise it)."""
    found = Reattached()
    stopped: list[Waiting] = []
    candidates = list(candidates)
    everyone = find_waiting(place)
    waiting = {w.attempt_id: w for w in everyone if w.attempt_id is not None}
    if any(stored.pid is None and stored.id not in waiting for _, stored in candidates):
        # A worker started just before its Zeus died has its job but no pid in the store:
        # only its socket can say it is there. Once more, after a moment to listen.
        time.sleep(UNNAMED_WAIT_S)  # Zeus's thread, before Zeus.start returns
        everyone += find_waiting(place, skip={w.pid for w in everyone})
        waiting = {w.attempt_id: w for w in everyone if w.attempt_id is not None}
    idle = [w for w in everyone if w.attempt_id is None]
    for d, stored in candidates:
        w = waiting.pop(stored.id, None)
        if w is None and stored.pid is not None and process_running(
                stored.pid, stored.pid_start_time):
            w = wait_for_listener(place, stored.pid, stored.pid_start_time,
                                  timeout_s=LISTEN_WAIT_S)
        left = (held or {}).get(stored.id)
        if w is None and left is not None:
            found.left[stored.id] = left
            if left.finished and sup.reattach(d, stored, _replay(sup, left), adopted=True):
                found.adopted.append(stored.id)  # it finished while no Zeus ran, and left
            continue  # else what it left counts, and it ends lost (it is gone)
        if w is None:
            continue  # confirmed gone (or killed) by recovery, then lost
        if (stored.pid is not None and w.pid != stored.pid) or w.attempt_id != stored.id:
            stopped.append(w)  # not the process the store names: never supervised as it
            continue
        if not _attach(sup, d, stored, w, backend):
            continue
        (found.adopted if w.finished else found.reattached).append(stored.id)
        if w.session_key is not None:
            found.sessions.add((w.agent, w.session_key))
    # Attempts the store does not hold open: a worker that finished one whose end the
    # last Zeus had committed is idle, like those that ran none.
    idle += [w for w in waiting.values() if w.finished]
    stopped += [w for w in waiting.values() if not w.finished]
    for w in idle:
        if (w.session_key is not None and _known_process_agent(sup, w.agent)
                and backend.reattach(w, None, sup.tell) is not None):
            found.sessions.add((w.agent, w.session_key))
        else:
            stopped.append(w)  # it holds nothing anybody will ask for
    _stop_and_see_gone(stopped)
    return found


def _replay(sup: Supervisor, left: Held) -> Callable[[ChildSpec], ChildHandle]:
    """What `Supervisor.reattach` attaches with for an attempt whose worker is gone but
    left its reports: they are put in the mailbox, its `Finished` last."""

    def attach(spec: ChildSpec) -> ChildHandle:
        del spec  # nothing runs: what it did is all in what it left
        return LeftChild(left).replay(sup.tell)

    return attach


def _stop_and_see_gone(workers: list[Waiting]) -> None:
    """Tell each worker to stop (it runs the kill ladder on its job and itself), and wait
    until each has exited: nothing runs again beside a job that is still stopping. One
    still there after `STOP_WAIT_S` is killed with its process group."""
    for w in workers:
        w.stop()
    left = [w for w in workers if process_running(w.pid, w.start_time) is not False]
    give_up = time.monotonic() + STOP_WAIT_S
    while left and time.monotonic() < give_up:
        time.sleep(0.01)  # Zeus's thread, inside recovery: nothing else runs yet
        left = [w for w in left if process_running(w.pid, w.start_time) is not False]
    for w in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(w.pid, signal.SIGKILL)  # a worker leads its own process group
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(w.pid, signal.SIGKILL)


def _attach(sup: Supervisor, d: Delegation, stored: StoredAttempt, w: Waiting,
            backend: ProcessBackend) -> bool:
    """Hand the waiting worker to the supervisor as the attempt `stored` of `d`."""
    ok = sup.reattach(d, stored, lambda spec: backend.reattach(w, spec, sup.tell),
                      adopted=w.finished)
    if ok and d.policy.kind == "orchestrator" and sup.durable is not None:
        sup.resumed_calls[d.id] = ResumedCalls(
            [(c.id, c.brief) for c in sup.durable.store.children(d.id)
             if c.created >= stored.started])
    return ok


def _known_process_agent(sup: Supervisor, agent: str) -> bool:
    try:
        return sup.registry.policy(agent).isolation == "process"
    except SupervisorError:
        return False


def named_by_marks(stored: OpenDelegation, marks: Mapping[str, JobMark]) -> OpenDelegation:
    """`stored` with each open attempt whose pid the store never got (its Zeus died as the
    worker took the job) named by the mark its worker left before the job ran
    (`actors.backends.left_behind`): from here on it is found, reattached, or confirmed
    gone by that pid like any other. `marks`: `read_marks` of the store's place."""
    if not any(a.open and a.pid is None and a.id in marks for a in stored.attempts):
        return stored
    return dataclasses.replace(stored, attempts=tuple(
        dataclasses.replace(a, pid=marks[a.id].pid, pid_start_time=marks[a.id].start_time,
                            pgid=marks[a.id].pgid)
        if a.open and a.pid is None and a.id in marks else a
        for a in stored.attempts))


def count_left(sup: Supervisor, d: Delegation, stored: OpenDelegation,
               found: Reattached) -> None:
    """What a worker whose grace ran out left for an attempt that then ends lost: its
    charges count (against the delegation, its ancestors and the tree, as spend made while
    no Zeus ran does) and its partial results are kept (it takes nothing with it)."""
    assert sup.durable is not None
    for a in stored.attempts:
        left = found.left.get(a.id)
        if left is None or not a.open or a.id in found:
            continue
        for message in left.messages():
            if isinstance(message, Charge):
                sup.spend(d, None, priced(message.usage, d.policy.pricing), a.id)
            elif isinstance(message, Partial):
                sup.durable.store.partial(d.id, a.id, message.item)
                d.partials.append(message.item)
