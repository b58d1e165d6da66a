"""What every part of Zeus's actor shares: its state, the timers, the events, and the
settlement of a delegation (the one final decision). All of it runs in the actor's thread.

The actor (`core/actor.py`) is assembled from parts, one module each: what children
report (`reports`), stopping an attempt (`stopping`), an attempt's end (`ending`) and
restarts, groups and reviews (`restarts`). A part calls another's methods through the
declarations at the end of `ActorShell`.
"""

from __future__ import annotations

import contextlib
import queue
import random
from collections import deque
from typing import Any

import pykka

from actors import AttemptOutcome, Status, Summary, Usage
from actors.backends import Backend
from actors.clock import Clock, Timer
from actors.protocol import Finished
from supervisor.core.mail import PendingMail
from supervisor.core.messages import Dispatch
from supervisor.core.registry import Registry
from supervisor.core.sessions import Sessions
from supervisor.core.state import Attempt, Delegation, build_summary
from supervisor.core.tree import ancestors, budget_left, capped
from supervisor.journal.events import EventLog
from supervisor.rules.framing import FramingHeads
from supervisor.rules.intensity import RestartWindow
from supervisor.rules.lag import MailboxLag
from supervisor.rules.settle import Settle

__all__ = ["ActorShell"]


class ActorShell(pykka.ThreadingActor):
    """The state and the shared steps of Zeus's actor. Every method runs in its thread."""

    # A host that forgets `zeus.stop()` must still be able to exit.
    use_daemon_thread = True

    @staticmethod
    def _create_actor_inbox() -> Any:
        """The mailbox: a `queue.SimpleQueue` (pykka uses only put, get, empty and we qsize),
        not pykka's `queue.Queue`, whose Condition costs a fifth of a no-op delegation's time
        in Zeus's thread (measured with yappi)."""
        return queue.SimpleQueue()

    def __init__(
        self,
        *,
        registry: Registry,
        clock: Clock,
        events: EventLog,
        backends: dict[str, Backend],
        rng: random.Random,
    ) -> None:
        super().__init__()
        self._registry = registry
        self._clock = clock
        self._events = events
        self._backends = backends
        self._rng = rng
        self._open: dict[str, Delegation] = {}
        self._live: dict[str, tuple[Delegation, Attempt]] = {}  # attempt id -> owner
        self._queue: deque[str] = deque()
        self._running_roots = 0
        self._tree_usage = Usage()
        self._windows: dict[str | None, RestartWindow] = {}  # by agent, or by supervisor
        self._open_circuits: set[str] = set()  # agents whose restarts are refused for now
        # attempt id -> its delegation, threads still running
        self._fenced: dict[str, Delegation] = {}
        self._sessions = Sessions()
        self._settled_count = 0
        self._dropped = 0
        self._lag = MailboxLag()
        self._accepting = True
        self._mail = PendingMail()
        self._framing_heads = FramingHeads()

    # -- messages, timers, events ----------------------------------------------------------

    def send(self, message: object) -> None:
        """What children call (from their own threads) to report; dropped once Zeus is gone."""
        try:  # noqa: SIM105 - not contextlib.suppress: the hot path of every child message
            self.actor_ref.tell(message)
        except pykka.ActorDeadError:
            pass

    def _after(self, delay: float, message: object) -> Timer | None:
        """`message` to the mailbox in `delay` s; at once (and an error event) if no timer
        can be set for that delay, so a wait that cannot be kept never stops a delegation."""
        try:
            return self._clock.call_at(self._clock.now() + delay, lambda: self.send(message))
        except Exception as exc:  # noqa: BLE001 - e.g. TimerError for a delay of inf or nan
            self._timer_refused(exc, type(message).__name__)
            self.send(message)
            return None

    def _timer_refused(self, exc: BaseException, what: str) -> None:
        self._events.emit("zeus.internal_error", message=what,
                          error=f"a timer could not be set: {type(exc).__name__}: {exc}")

    def _emit(self, event: str, d: Delegation, a: Attempt | None = None, **fields: Any) -> None:
        if self._events.enabled:
            self._events.emit(
                event,
                delegation_id=d.id,
                attempt_id=a.id if a else None,
                parent_id=d.parent_id,
                agent=a.agent if a else d.agent,
                **fields,
            )

    # -- the tree above a delegation ----------------------------------------------------

    def _nudge_ancestors(self, d: Delegation, now: float) -> None:
        """Progress in `d`'s subtree is progress of every ancestor waiting on it."""
        for parent in ancestors(d, self._open):
            if parent.current is not None:
                parent.current.watch = parent.current.watch.nudge(now)

    def _budget_left(self, d: Delegation) -> dict[str, float] | None:
        """What `d`'s attempt may spend before its, an ancestor's or the tree's budget is over."""
        tree_budget = self._registry.routing.supervisor.budget
        if d.parent_id is None and not (capped(d.policy.budget) or capped(tree_budget)):
            return None  # a root with no cap above it: most delegations
        chain = [d, *ancestors(d, self._open)]
        return budget_left([*((n.usage, n.policy.budget) for n in chain),
                            (self._tree_usage, tree_budget)])

    # -- cancellation and settlement ----------------------------------------------------

    def _cancel_children(self, d: Delegation, reason: str) -> None:
        """Cancel whatever `d` delegated that is still open."""
        for child_id in list(d.children):
            child = self._open.get(child_id)
            if child is not None:
                self._cancel(child, reason)

    def _cancel(self, d: Delegation, reason: str) -> None:
        if d.cancel_requested or d.state == "settled":
            return
        d.cancel_requested = True
        d.cancel_reason = reason
        self._emit("delegation.cancel_requested", d, d.current, reason=reason)
        self._cancel_children(d, f"its parent {d.id} was cancelled")
        if d.current is not None:
            self._request_stop(d, d.current, AttemptOutcome.cancelled)
        else:
            self._settle(d, Settle(Status.cancelled, reason=reason))

    def _settle(self, d: Delegation, step: Settle, *, value: Any = None) -> None:
        """The single, final decision of a delegation."""
        if d.state == "settled":
            return
        if d.backoff_timer is not None:
            d.backoff_timer.cancel()
        if d.state == "queued":
            with contextlib.suppress(ValueError):
                self._queue.remove(d.id)
        elif d.depth == 1:
            self._running_roots -= 1
        d.state = "settled"
        if value is None:
            value = d.lost_output
        try:
            summary = build_summary(d, step, value, self._clock.now())
        except Exception as exc:  # noqa: BLE001 - a delegation settles exactly once, whatever
            summary = Summary(
                id=d.id, agent=d.agent, scope=d.brief.scope,
                status=Status.cancelled if d.cancel_requested else step.status,
                attempts=list(d.attempts), usage=d.usage,
                error=f"its summary could not be built: {type(exc).__name__}: {exc}",
            )
        self._open.pop(d.id, None)
        self._windows.pop(d.id, None)  # its children's restart window goes with it
        self._mail.drop(d.id)
        self._settled_count += 1
        if self._events.enabled:  # its fields are built only for someone who listens
            self._emit("delegation.settled", d, None, status=summary.status.value,
                       duration_s=summary.duration_s, attempts=len(d.attempts),
                       timeout_kind=summary.timeout_kind,
                       error=(summary.error or "").split("\n")[0] or None,
                       usage=summary.usage.model_dump())
        d.settled.set(summary)
        self._cancel_children(d, f"its parent {d.id} settled")
        self._fill_slots()

    def _fill_slots(self) -> None:
        limit = self._registry.routing.supervisor.max_concurrent
        while self._queue and self._running_roots < limit and self._accepting:
            d = self._open.get(self._queue.popleft())
            if d is not None and d.state == "queued":
                self._start(d)

    # -- defined by the other parts of the actor --------------------------------------------

    def _announce(self, d: Delegation, a: Attempt) -> None:
        """Defined in `core/actor.py`."""
        raise NotImplementedError

    def _arm(self, a: Attempt) -> None:
        """Defined in `core/actor.py`."""
        raise NotImplementedError

    def _drop(self, message: Any) -> None:
        """Defined in `core/reports.py`."""
        raise NotImplementedError

    def _end_attempt(
        self, d: Delegation, a: Attempt, finished: Finished | None, *, fenced: bool = False
    ) -> None:
        """Defined in `core/ending.py`."""
        raise NotImplementedError

    def _on_dispatch(self, msg: Dispatch) -> None:
        """Defined in `core/actor.py`."""
        raise NotImplementedError

    def _request_stop(
        self, d: Delegation, a: Attempt, cause: AttemptOutcome, *, detail: str | None = None
    ) -> None:
        """Defined in `core/stopping.py`."""
        raise NotImplementedError

    def _start(self, d: Delegation) -> None:
        """Defined in `core/actor.py`."""
        raise NotImplementedError

    def _start_attempt(self, d: Delegation) -> None:
        """Defined in `core/actor.py`."""
        raise NotImplementedError
