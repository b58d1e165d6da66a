"""`Zeus`: the host's facade over the root supervisor actor, and its `Outbox`, which
coalesces the host's dispatches into one wake of Zeus's thread per burst."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import pykka

from actors import Brief, Status, Summary
from actors.backends import Backend, ThreadBackend
from actors.backends.base import as_backend
from actors.clock import Clock, SystemClock
from actors.mail import Mail
from supervisor.core.actor import ZeusActor
from supervisor.core.durable import Durable, MemoryDurable
from supervisor.core.handle import (
    AWAITER_CANCELLED,
    DelegationFuture,
    GroupHandle,
    Handle,
    HandleBook,
)
from supervisor.core.keys import Keys
from supervisor.core.messages import (
    Burst,
    Cancel,
    Dispatch,
    ForceSettle,
    Hold,
    OwnerMessage,
    Ping,
    Recover,
    Resolve,
    Resume,
    RetryStore,
    Snapshot,
    StopAll,
    StoredLookup,
    StoredSummary,
)
from supervisor.core.registry import Registry
from supervisor.core.shared_host import SharedHost
from supervisor.core.startup import (
    open_store,
    prestart,
    process_backends,
    ray_backend,
    ray_backends,
    wanted_backends,
)
from supervisor.core.verbs import operator
from supervisor.errors import (
    DelegationRefused,
    NotBlocked,
    StoreError,
    SupervisorError,
    UnknownDelegation,
    ZeusStopped,
)
from supervisor.journal.events import EventLog, LogTarget
from supervisor.journal.streams import EventStream
from supervisor.routing import AgentPolicy, Routing
from supervisor.routing.ray_policy import wants_ray
from supervisor.rules.delegation import key_refusal, writer_partial_refusal
from supervisor.rules.groups import STRATEGIES, Group, Strategy
from supervisor.rules.recovery import verbs_hint
from supervisor.store import ID_BLOCK, Recovery, SharedStore, StoredDelegation

__all__ = ["BACKSTOP_S", "Outbox", "Zeus", "running_loop"]

# How long a dispatch waits for one more commit while the store cannot be written.
_RETRY_ASK_S = 1.0


class Zeus:
    """The root of the supervision tree, as the host sees it. Thread-safe."""

    def __init__(
        self,
        routing: Routing,
        *,
        log: LogTarget = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        backends: Mapping[str, Backend] | None = None,
        store: str | Path | None = None,
        agents: Mapping[str, Callable[..., Any]] | None = None,
    ) -> None:
        self._owns_clock = clock is None
        self._clock: Clock = clock if clock is not None else SystemClock(self._timer_failed)
        self._registry = Registry(routing)
        # The store first of all: a busy or bad one is refused before anything starts.
        self._store = open_store(routing, store, self._clock)
        self._shared = self._store if isinstance(self._store, SharedStore) else None
        self._own_id = uuid.uuid4().hex[:16]  # the host's id without a shared store
        self._host: SharedHost | None = None
        try:
            self._start(routing, log, rng, backends)
        except BaseException:
            if self._store is not None:
                self._store.close()  # given up: a refused start keeps no store owned
            raise
        # With a store, the backends are readied after recovery, which readying would slow.
        self._recovering = self._store is not None
        self._wanted: set[str] = set()  # backends of agents registered meanwhile
        if self._store is None:
            prestart(self._backends, wanted_backends(routing.agents.values()))
        for name, work in (agents or {}).items():  # before recovery: it may run them again
            self.register(name, work)
        self.recovered = Recovery()
        """What this start found in its store and did with it (empty without a store)."""
        if self._host is not None:  # children bounded by the lease from the first one on
            self._host.start()
        if self._store is not None:
            try:
                self.recovered = self._ask(Recover(self._kept_handle))
            except BaseException:
                self.stop()  # nothing is left running, and the store is given up
                raise
            self._recovering = False
            prestart(self._backends,
                     self._wanted | wanted_backends(self._registry.routing.agents.values()))

    def _start(self, routing: Routing, log: LogTarget, rng: random.Random | None,
               backends: Mapping[str, Backend] | None) -> None:
        """Everything `__init__` starts after the store: backends, the journal, the actor."""
        if self._shared is not None:  # ids from blocks no other host of the store uses
            self._registry.use_blocks(self._shared.next_ids, ID_BLOCK)
        elif self._store is not None:
            self._registry.continue_from(self._store.issued())
        self._keys = Keys(None if self._store is None else self._stored_key)
        # Ray first: it may refuse to start (not installed, unreachable), and nothing else
        # has been started then.
        ray = {} if (backends and "ray" in backends) else ray_backends(routing)
        self._events = EventLog(log, self._clock.wall)
        self._backends: dict[str, Backend] = {"thread": ThreadBackend(), **ray}
        if backends:
            self._backends.update({name: as_backend(b) for name, b in backends.items()})
        else:
            self._backends.update(process_backends(routing, self._store))
        self._stopped = threading.Event()
        self._stop_lock = threading.Lock()
        self._book = HandleBook(routing.supervisor.keep_settled, self._settled_handle)
        durable = (MemoryDurable() if self._store is None
                   else Durable(self._store, self._clock, self._events))
        if self._shared is not None:
            self._host = SharedHost(self._shared, backends=self._backends,
                                    tell=lambda message: self._put(message),
                                    keep_handle=self._kept_handle)
        self._ref = ZeusActor.start(
            registry=self._registry,
            clock=self._clock,
            events=self._events,
            backends=self._backends,
            rng=rng if rng is not None else random.Random(),
            durable=durable,
            host=None if self._host is None else self._host.terms(),
        )
        self._outbox = Outbox(self._put)
        self._flush = self._outbox.flush  # bound once: every loop dispatch's `before_wait`
        self._on_cancel = self._awaiter_cancelled  # bound once: every handle's `on_cancel`
        self._events.emit("zeus.started", pid=os.getpid(), routing=routing.source,
                          store=None if self._store is None else self._store.path)

    @classmethod
    def start(
        cls,
        routing: Routing | str | Path | None = None,
        *,
        agents: Mapping[str, Callable[..., Any]] | None = None,
        log: LogTarget = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        backends: Mapping[str, Backend] | None = None,
        store: str | Path | None = None,
    ) -> Zeus:
        """Start the root actor.

        `routing`: a `Routing`, a path to routing.yml, or None for an empty routing
        (agents registered with `agents=` or `register()` then get the default policy).
        `log`: a path for the JSON-lines journal, an open text file, a structlog
        logger, or a callable taking each event dict; or a list of these.
        `store`: a SQLite file where delegations outlive this process (or
        `supervisor.store.path` in routing.yml); a start on it first recovers what the
        last Zeus left open (`zeus.recovered`), so give the agents it may run again
        here (`agents=`, or entrypoints), not by `register()` after it returns.
        `StoreBusy` when a live Zeus owns it,
        `StoreError` when it is not a usable store (the file is then not changed).
        `clock` and `rng` are for tests.
        """
        if routing is None:
            routing = Routing.from_dict({"version": 1, "agents": {}})
        elif not isinstance(routing, Routing):
            routing = Routing.load(routing)
        return cls(routing, log=log, clock=clock, rng=rng, backends=backends, store=store,
                   agents=agents)

    # -- the host's calls --------------------------------------------------------------

    def register(
        self, agent: str, work: Callable[..., Any], policy: AgentPolicy | None = None
    ) -> None:
        """Use `work(brief, ctx)` for `agent` (its routing policy, or the defaults).

        Registering an agent starts readying its backend on a thread of its own (the
        process backend's fork server), so that neither the host's thread (an event
        loop, say) nor, mostly, its first attempt waits for it.
        """
        self._registry.register(agent, work, policy)
        if "ray" not in self._backends and wants_ray([self._registry.policy(agent)]):
            self._backends["ray"] = ray_backend(self._registry.routing)
        wanted = wanted_backends([self._registry.policy(agent)])
        if self._recovering:  # readied once recovery is done
            self._wanted |= wanted
        else:
            prestart(self._backends, wanted)

    @property
    def host_id(self) -> str:
        """This host incarnation (new at every start): on a shared store, its row there,
        new again whenever this host, fenced, joins the store again."""
        return self._shared.host_id if self._shared is not None else self._own_id

    @property
    def routing(self) -> Routing:
        return self._registry.routing

    def dispatch(
        self, brief: Brief | Mapping[str, Any], *, key: str | None = None, watch: bool = False
    ) -> Handle:
        """Dispatch one brief; returns at once. `UnknownAgent` if nobody defines the agent.

        `key`: the delegation already dispatched under `key` (open, resumed or settled,
        in the store or in this Zeus) is returned instead of starting another;
        `KeyConflict` when its brief differs, naming the fields. `watch=True`: the
        handle's first `events()` stream is opened before Zeus hears of the delegation,
        so it holds every event from `delegation.dispatched` on (a stream opened after
        `dispatch` returns may miss the first ones). With a store that cannot be
        written, `StoreError`: nothing starts that the store does not record. A key that
        no store could keep (empty, a NUL, over 1024 bytes): `ValueError`, nothing
        changed.
        """
        checked = self._check(brief)
        if key is None:
            return self._dispatch(checked, None, watch=watch)
        if (refusal := key_refusal(key)) is not None:
            raise ValueError(refusal)
        with self._keys.lock:  # one dispatch per key, whichever thread asks first
            found = self._keys.find(key, checked)
            mine = None
            if found is None and self._host is not None:
                found, mine = self._claim_key(key, checked)  # whichever host asks first
            if found is not None:
                return self._blocked_says_verbs(self.handle(found))
            handle = self._dispatch(checked, None, watch=watch, key=key, delegation_id=mine)
            self._keys.add(key, handle.id, checked)
            return handle

    def _claim_key(self, key: str, brief: Brief) -> tuple[str | None, str | None]:
        """On a shared store, claim `key` for a new delegation: (None, the id it is claimed
        for, which the dispatch that follows uses), or (the id of the delegation another
        host claimed it for, None); `KeyConflict` when that one's brief differs. Called
        with the keys' lock held."""
        assert self._host is not None
        self._check_writable()  # a claim that no dispatch follows would hold the key
        mine = self._registry.next_id(brief.agent)
        claimed, first, ours = self._host.lease.claim_key(key, mine, brief)
        if ours:  # (a dead host's claim never dispatched runs here, under its id)
            return None, claimed
        self._keys.add(key, claimed, first)
        return self._keys.find(key, brief), None

    def _blocked_says_verbs(self, handle: Handle) -> Handle:
        """A key's delegation that settled blocked, with a store: its summary's reason says
        which verb a person uses (`zeus resume`, `zeus resolve`)."""
        if self._store is None or not handle.done():
            return handle
        summary = handle.result()
        if summary.status is not Status.blocked or "zeus resume" in (summary.error or ""):
            return handle
        hint = verbs_hint(self._store.path, handle.id, self._registry.routing.source)
        said = f"{summary.error}; check it, {hint}" if summary.error else f"check it, {hint}"
        return self._settled_handle(handle.id, summary.model_copy(update={"error": said}))

    def resume(self, delegation_id: str, *, note: str | None = None) -> Handle:
        """Run a `blocked` delegation again, as a new attempt, once a person has checked
        its changes or answered its blocker: the same id and key, its attempts and spend
        kept (`delegation.resumed`, with who and `note`). Its agent is told why it was
        blocked and the note (`ctx.previous_blocker`, `ctx.note`; an agent CLI resumes the
        session it was blocked in, its prompt quoting both). With a store, the store's
        delegation; without, one of the last `supervisor.keep_settled` blocked ones this
        Zeus dispatched. `NotBlocked` when it does not wait for a person (it runs, or
        settled otherwise), `UnknownDelegation` when there is no such delegation."""
        if self._stopped.is_set():
            raise ZeusStopped("Zeus is stopped; start a new one on the store to resume")
        if self._store is None:
            found = self.handle(delegation_id)  # UnknownDelegation: never dispatched here
            if found.done() and (status := found.result().status) is not Status.blocked:
                raise NotBlocked(f"cannot resume {delegation_id}: it settled {status.value}, "
                                 "not blocked, and a settled result is never changed; "
                                 "dispatch new work")
        why = note or "its changes were checked"
        handle: Handle = self._ask(Resume(delegation_id, operator(), why, self._kept_handle,
                                          note=note))
        return handle

    def resolve(self, delegation_id: str, status: Status | str, note: str) -> Summary:
        """Settle a `blocked` delegation of the store by hand: `status` (a `Status` or its
        word) and `note` (what the person found, kept in the summary's risks and, unless
        it completed, its error; `delegation.resolved`, with who). `zeus.handle(id)` gives
        the new summary. `NotBlocked` as for `resume`; `ValueError` for an unknown status."""
        try:
            status = Status(status)
        except ValueError:
            raise ValueError(f"unknown status {status!r}; use one of "
                             f"{', '.join(s.value for s in Status)}") from None
        if self._stopped.is_set():
            raise ZeusStopped("Zeus is stopped; start a new one on the store to resolve")
        summary: Summary = self._ask(Resolve(delegation_id, status, operator(), note))
        settled = DelegationFuture()
        self._book.add(Handle(delegation_id, self, settled), settled)
        settled.set(summary)  # kept in the book as settled: zeus.handle(id) gives it
        return summary

    def _stored_key(self, key: str) -> tuple[str, Brief] | None:
        """(id, brief) of the stored delegation of `key` (asked of Zeus's thread)."""
        stored: StoredDelegation | None = self._ask(StoredLookup(key=key))
        return None if stored is None else (stored.id, stored.brief)

    def dispatch_group(
        self, briefs: Iterable[Brief | Mapping[str, Any]], strategy: Strategy = "one_for_one"
    ) -> GroupHandle:
        """Dispatch briefs together under a restart strategy.

        `one_for_one`: a member's failure restarts nothing else; `one_for_all`: it
        restarts every sibling still running; `rest_for_one`: it restarts the siblings
        after it. `.results()` gives the summaries in brief order.
        """
        if strategy not in STRATEGIES:
            raise SupervisorError(
                f"unknown strategy {strategy!r}; use one of {', '.join(STRATEGIES)}"
            )
        checked = [self._check(b) for b in briefs]  # all or nothing: refuse before dispatching
        group = Group(self._registry.next_id("group"), strategy)
        handles = [self._dispatch(b, group) for b in checked]
        return GroupHandle(group.id, handles)

    def _check(self, brief: Brief | Mapping[str, Any]) -> Brief:
        if not isinstance(brief, Brief):
            brief = Brief.model_validate(brief)
        refusal = writer_partial_refusal(brief, self._registry.policy(brief.agent))
        if refusal is not None:
            raise DelegationRefused(refusal)
        if self._stopped.is_set():
            raise ZeusStopped("Zeus is stopped; start a new one to dispatch")
        return brief

    def _dispatch(
        self, brief: Brief, group: Group | None, *, watch: bool = False, key: str | None = None,
        delegation_id: str | None = None,
    ) -> Handle:
        self._check_writable()
        if delegation_id is None:
            delegation_id = self._registry.next_id(brief.agent)
        settled = DelegationFuture()
        first = self._events.subscriptions.subscribe(delegation_id) if watch else None
        handle = self._kept_handle(delegation_id, settled, first)
        self._events.dispatching(delegation_id)
        message = Dispatch(delegation_id, brief, settled, group=group, key=key)
        loop = running_loop()
        if loop is None:
            self._tell(message)
        else:  # Zeus's thread takes the loop's whole step of dispatches in one turn
            settled.before_wait = self._flush
            self._outbox.post(message, loop)
        return handle

    def _check_lease(self) -> None:
        """`StoreError` while this host has lost its lease on a shared store: nothing
        starts until it joins the store again."""
        if self._host is not None and self._host.lost is not None:
            raise StoreError(
                f"{self._shared.path if self._shared else 'the store'}: this host lost its "
                f"lease ({self._host.lost}), so nothing new starts here until it joins the "
                "store again, as soon as the database answers; what it ran goes on on the "
                "hosts that take it over (this one among them, once it has joined)"
            )

    def _check_writable(self) -> None:
        """`StoreError` while this host's store cannot be written (after one more try),
        saying why: nothing starts that the store does not record."""
        self._check_lease()
        if self._store is not None and not self._store.writable and not self._retry_store():
            raise StoreError(self._store.why_unwritable())

    def _retry_store(self) -> bool:
        """One more commit of what the store could not take, answered within a second:
        Zeus's thread may be waiting for a shared store's database to come back (an
        attempt's record waits out a restart within the lease), and a dispatch is refused
        meanwhile rather than kept waiting."""
        self._outbox.flush()
        try:
            return self._ref.ask(RetryStore(), timeout=_RETRY_ASK_S) is True
        except pykka.Timeout:
            return False

    def _kept_handle(
        self, delegation_id: str, settled: DelegationFuture, first: EventStream | None = None
    ) -> Handle:
        """The host's handle on a delegation of its own, kept in the handle book; a task
        cancelled while it awaits cancels the delegation. Made as the host dispatches, or
        in Zeus's thread for a delegation recovered from the store."""
        settled.on_cancel = self._on_cancel
        handle = Handle(delegation_id, self, settled, first_stream=first)
        self._book.add(handle, settled)
        return handle

    def _awaiter_cancelled(self, delegation_id: str) -> None:
        """A handle's future was cancelled (a task awaiting it, say): cancel the delegation."""
        self.cancel(delegation_id, AWAITER_CANCELLED)

    def _settled_handle(self, delegation_id: str, summary: Summary) -> Handle:
        """A new handle on a settled delegation whose first handle the host let go."""
        settled = DelegationFuture()
        settled.set(summary)
        return Handle(delegation_id, self, settled)

    def cancel(self, delegation_id: str, reason: str | None = None) -> None:
        """Owner cancellation: wins over any cause racing it; a no-op once settled.

        `UnknownDelegation` for an id Zeus never had.
        """
        self._known(delegation_id)
        if not self._stopped.is_set():
            with contextlib.suppress(ZeusStopped):  # stopped meanwhile: everything is settled
                self._tell(Cancel(delegation_id, reason))

    def handle(self, delegation_id: str) -> Handle:
        """The handle of an open or recently settled delegation the host dispatched.

        Zeus keeps the last `supervisor.keep_settled` settled ones (oldest dropped
        first). `UnknownDelegation` otherwise, naming the nearest ids it knows.
        """
        handle = self._book.get(delegation_id)
        if handle is not None:
            return handle
        if self._host is None:
            self._known(delegation_id)
        if self._store is not None and not self._stopped.is_set():
            summary: Summary | None = self._ask(StoredSummary(delegation_id))
            if summary is not None:
                return self._settled_handle(delegation_id, summary)
            if self._host is not None and self._host.lease.exists(delegation_id):
                # another host's: it resolves when that host settles it
                return Handle(delegation_id, self, self._host.watch(delegation_id))
        if self._host is not None:
            self._known(delegation_id)
        raise UnknownDelegation(
            f"no handle for {delegation_id!r}: it was delegated by a child, or it settled "
            f"before the last {self._book.keep} kept (supervisor.keep_settled)"
        )

    def send(self, delegation_id: str, message: object) -> bool:
        """Put `message` in the delegation's running child's mailbox (`ctx.receive()`).

        False once settled, and for an agent CLI, which reads no mail (its standard input
        is /dev/null; the journal's `delegation.mail_refused` says so). A message sent
        between attempts goes to the next one. `TypeError` at once if it cannot cross to
        the child: a process child needs a picklable object, a command agent a JSON-able
        one (a line on its stdin).
        """
        handle = self._book.get(delegation_id)
        if handle is None:
            self._known(delegation_id)
        if self._stopped.is_set() or (handle is not None and handle.done()):
            return False
        policy = self._registry.policy(delegation_id.rpartition("-")[0])
        if policy.speaks_cli:  # Zeus journals the refusal; nothing reaches the CLI
            with contextlib.suppress(ZeusStopped, pykka.ActorDeadError):
                self._tell(OwnerMessage(delegation_id, Mail(message).encode("thread")))
            return False
        mail = Mail(message).encode("command" if policy.runs_program else policy.isolation)
        try:
            if handle is None:  # a child's delegation: only Zeus knows whether it is open
                return bool(self._ask(OwnerMessage(delegation_id, mail)))
            self._tell(OwnerMessage(delegation_id, mail))
        except (ZeusStopped, pykka.ActorDeadError):
            return False
        return True

    def _known(self, delegation_id: str) -> None:
        """`UnknownDelegation` unless Zeus gave out `delegation_id` (or took it over)."""
        if not self._registry.issued(delegation_id) and self._book.get(delegation_id) is None:
            nearest = self._book.nearest(delegation_id)
            hint = f"; did you mean {' or '.join(map(repr, nearest))}?" if nearest else ""
            raise UnknownDelegation(f"Zeus never had a delegation {delegation_id!r}{hint}")

    def events(self, delegation_id: str) -> EventStream:
        """The delegation's events from now on (`handle.events()`); iterate, sync or
        async, until it settles. A settled one's stream is closed: nothing more comes.

        `UnknownDelegation` for an id Zeus never had.
        """
        self._known(delegation_id)
        stream = self._events.subscriptions.subscribe(delegation_id)
        handle = self._book.get(delegation_id)
        if handle is not None and handle.done():
            stream.close()
        return stream

    def tree(self) -> dict[str, Any]:
        """A JSON-able snapshot of the live tree (open delegations, their attempts, counts)."""
        if self._stopped.is_set():
            return {"delegations": [], "open": 0, "queued": 0, "stopped": True}
        snapshot: dict[str, Any] = self._ask(Snapshot())
        return snapshot

    def _sync(self) -> None:
        """Wait until Zeus has handled every message sent before this call (for tests)."""
        if not self._stopped.is_set():
            self._ask(Ping())

    @contextlib.contextmanager
    def _held(self) -> Iterator[None]:
        """Hold Zeus's mailbox for the duration of the block (for tests and benchmarks).

        Messages sent meanwhile queue up in order and are handled once the block ends.
        """
        release, is_held = threading.Event(), threading.Event()
        self._tell(Hold(release, is_held))
        is_held.wait()
        try:
            yield
        finally:
            release.set()

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel and settle everything still open, kill what does not stop, leak nothing.

        Waits up to `timeout` seconds of real time for cooperative stops and the
        kill ladder; whatever is still open then is settled `cancelled` at once.
        """
        with self._stop_lock:
            if self._stopped.is_set():
                return
            pending: list[DelegationFuture] = self._ask(StopAll("zeus is stopping"))
            deadline = time.monotonic() + timeout
            for settled in pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not settled.wait_done(remaining):
                    break
            self._ask(ForceSettle("zeus stopped before it settled"))
            self._outbox.close()  # what a loop dispatched meanwhile: settled as it stops
            self._stopped.set()
            if self._host is not None:
                self._host.stop()
            for backend in self._backends.values():
                backend.close()
            self._events.emit("zeus.stopped")
            self._ref.stop()
            if self._host is not None and self._host.lost is not None:
                # Its delegations are another host's, which may have ended its sessions:
                # nothing of it is written, and nothing more is said.
                with contextlib.suppress(StoreError):
                    if self._store is not None:
                        self._store.close()
            elif self._store is not None:
                self._store.close()  # every summary committed; ownership given up
            if self._owns_clock:
                self._clock.close()
            self._events.close()

    async def astop(self, timeout: float | None = None) -> None:
        """`stop()` without blocking the event loop: it runs in a thread of its own.

        `timeout` as for `stop()` (None: its default). Cancelling the awaiting task
        does not cancel the stop.
        """
        done: concurrent.futures.Future[None] = concurrent.futures.Future()

        def stop() -> None:  # the zeus-stop thread
            try:
                self.stop() if timeout is None else self.stop(timeout)
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
                done.set_exception(exc)
            else:
                done.set_result(None)

        threading.Thread(target=stop, name="zeus-stop", daemon=True).start()
        await asyncio.shield(asyncio.wrap_future(done))

    def __enter__(self) -> Zeus:
        return self

    async def __aenter__(self) -> Zeus:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.astop()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _timer_failed(self, exc: BaseException) -> None:
        """Runs in the timer thread: a timer callback raised (the timers go on regardless)."""
        self._events.emit("zeus.internal_error", message="timer",
                          error=f"{type(exc).__name__}: {exc}")

    def _ask(self, message: object) -> Any:
        """Ask the actor; what its handler raised is raised here (it comes back as a value).
        What the outbox holds goes first: Zeus hears of every dispatch made before."""
        self._outbox.flush()
        answer = self._ref.ask(message)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def _tell(self, message: object) -> None:
        self._outbox.flush()  # the dispatches made before, first
        self._put(message)

    def _put(self, message: object) -> None:
        try:
            self._ref.tell(message)
        except pykka.ActorDeadError:
            raise ZeusStopped("Zeus is stopped; start a new one") from None


# --------------------------------------------------------------------------------------
# The host's dispatches to Zeus, coalesced: one wake of Zeus's thread per burst.
#
# On a thread that runs an event loop, `Zeus.dispatch()` does not put its
# `Dispatch` in Zeus's mailbox: it queues it here, and the first one queued in
# a step of the loop schedules a single flush for the end of that step
# (`loop.call_soon`). The flush puts the whole burst in the mailbox as one
# `Burst`, which Zeus's thread takes in one turn. A thousand dispatches in one
# step of the loop then cost the host no wait for the GIL while Zeus's thread
# handles the first ones, and Zeus's thread one wake-up instead of a thousand.
#
# What makes the order hold: every other message the host sends (`_tell`,
# `_ask`, from any thread) flushes what is queued before it is sent, so Zeus
# hears of a dispatch before anything sent after it (a cancel right after the
# dispatch, a snapshot, the stop). A host that blocks on a handle right after
# dispatching (`handle.result()`, `handle.future.result()`) flushes first. And
# a loop that blocks in anything else, so that its step does not end, is
# flushed by a backstop thread after `BACKSTOP_S`: a dispatch is never left
# unstarted because its loop stopped turning.
# --------------------------------------------------------------------------------------


# How long a burst may wait for its loop's step to end before the backstop sends it.
BACKSTOP_S = 0.005

# The running event loop of the calling thread, or None (asyncio's own C helper).
running_loop: Callable[[], asyncio.AbstractEventLoop | None] = asyncio._get_running_loop


class Outbox:
    """Dispatches queued on event loops' threads, until their step ends. Thread-safe."""

    def __init__(self, put: Callable[[object], None]) -> None:
        self._put = put  # one message into Zeus's mailbox (ZeusStopped once it is gone)
        self._pending: list[object] = []
        self._lock = threading.Lock()
        self._loops: set[asyncio.AbstractEventLoop] = set()  # with a flush scheduled
        self._closed = False
        self._count = 0  # dispatches posted so far: the backstop waits while it grows
        self._backstop = _Backstop(self._unstick, lambda: self._count)

    def post(self, message: object, loop: asyncio.AbstractEventLoop) -> None:
        """`loop`'s thread: queue `message` for the end of the loop's current step.
        `ZeusStopped` once the outbox is closed (Zeus stopped)."""
        with self._lock:
            if self._closed:
                raise ZeusStopped("Zeus is stopped; start a new one")
            self._pending.append(message)
            self._count += 1
            if loop in self._loops:
                return
            self._loops.add(loop)
        loop.call_soon(self._end_of_step, loop)
        self._backstop.arm()

    def flush(self) -> None:
        """Any thread: put what is queued in the mailbox now, as one message, in order."""
        if not self._pending:  # the common case, without the lock
            return
        with self._lock:  # held while putting: bursts reach the mailbox in the order taken
            pending, self._pending = self._pending, []
            if pending:
                self._put(Burst(pending))

    def close(self) -> None:
        """Flush, then refuse what comes after (Zeus is stopping); stops the backstop."""
        self.flush()
        with self._lock:
            self._closed = True
            self._loops.clear()
        self._backstop.close()
        self.flush()  # queued between the first flush and the lock

    def _unstick(self) -> None:
        """The backstop's flush. It forgets which loops have a flush scheduled: one closed
        before its step ended would be held here for good (a loop whose flush is still to
        come schedules another on its next dispatch, and flushes twice, harmlessly)."""
        with self._lock:
            self._loops.clear()
        self.flush()

    def _end_of_step(self, loop: asyncio.AbstractEventLoop) -> None:
        """`loop`'s thread, once the step that queued the burst is done."""
        with self._lock:
            self._loops.discard(loop)
        with contextlib.suppress(ZeusStopped):  # gone: its stop settled what it had
            self.flush()


class _Backstop:
    """A thread that flushes a burst its loop did not flush within `BACKSTOP_S`.

    Armed once per burst; it wakes, waits until `BACKSTOP_S` pass with no dispatch
    posted (a loop still dispatching is not stuck, and a flush in the middle of its
    burst would wake Zeus's thread beside it), and flushes: nothing, as a rule, the
    loop's step having ended first. Started on the first burst, so a Zeus
    whose host has no event loop has no such thread."""

    def __init__(self, flush: Callable[[], None], posted: Callable[[], int]) -> None:
        self._flush = flush
        self._posted = posted
        self._cv = threading.Condition(threading.Lock())
        self._armed = False
        self._closed = False
        self._thread: threading.Thread | None = None

    def arm(self) -> None:
        with self._cv:
            if self._armed or self._closed:
                return
            self._armed = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="zeus-outbox",
                                                daemon=True)
                self._thread.start()
            else:
                self._cv.notify()

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        cv = self._cv
        while True:
            with cv:
                while not self._armed and not self._closed:
                    cv.wait()
                seen = -1
                while not self._closed and self._posted() != seen:  # still dispatching
                    seen = self._posted()
                    cv.wait(BACKSTOP_S)  # woken early only by `close`
                if self._closed:
                    return
                self._armed = False  # a burst armed from here on arms it again
            with contextlib.suppress(ZeusStopped):
                self._flush()
