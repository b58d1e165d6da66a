"""What runs inside Ray: the attempt's task body and the session actor (the reporter they
report to: `actors.backends.ray.reporter`).

Everything here runs in Ray worker processes (on any node), never in Zeus's
process; the backend (`actors.backends.ray.backend`) wraps these with `ray.remote`.

The channel back to Zeus is one `Reporter` actor per Zeus. An attempt's
messages (heartbeats, partials, charges, tool calls) are encoded as for a
process child (`_wire`) and batched by the attempt's `Outbox` thread: nothing
in the attempt's first `QUIET_S`, then as soon as the thread is free (a flood
goes in few posts), with a liveness beat every heartbeat interval; posted to
the reporter without waiting for an answer; Zeus long-polls the reporter (`drain`) and gets
everything posted since, from every child, in one answer. What is still
unposted when the work returns rides back with the task's result, together
with how many messages were posted, so Zeus delivers them all before the
attempt's `Finished`. A `ctx.delegate()` is the one round trip: it waits in
the reporter until Zeus answers.

Cancels travel the other way: a task asks the reporter, once it has run for
`QUIET_S`, to tell it when Zeus cancels it (`watch`); a cancel that came
earlier is kept there until asked for. A session actor takes its cancels
itself (a second method call, on its second thread). An owner's messages
(`ctx.receive`) come the same ways: `watch` answers a list of control items
(`frames.Cancel`, `frames.MailTo`), and the task watches again after a message;
a session actor takes them with its `mail` method.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import threading
import time
import traceback as tb
from collections.abc import Callable
from typing import Any

from actors import wire as _wire
from actors.backends import frames
from actors.clock import SystemClock
from actors.context import Context
from actors.mail import Inbox
from actors.models import AttemptOutcome
from actors.protocol import DelegateRequest, Finished, Heartbeat
from actors.run import run_work

__all__ = ["QUIET_S", "SessionWorker", "run_task"]

# An attempt that ends sooner costs no call to the reporter: it posts nothing and never
# asks to be told of cancels.
QUIET_S = 0.02
_CLOCK = SystemClock()
_REQUESTS = itertools.count(1)
_HANDLES: dict[str, Any] = {}  # reporter name -> its handle, in this worker


@functools.cache
def node_label() -> str:
    """The node this worker runs on: its IP and the start of its Ray node id."""
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    return f"{ray.util.get_node_ip_address()}/{node_id[:8]}"


class _Courier:
    """The one thread of a worker process that moves its outboxes' messages, beats and
    cancel watches (a worker runs one attempt at a time, a session actor too): an
    attempt costs no thread start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._outboxes: set[Outbox] = set()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, outbox: Outbox) -> None:
        with self._lock:
            self._outboxes.add(outbox)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="zeus-ray-courier",
                                                daemon=True)
                self._thread.start()
        self._wake.set()

    def discard(self, outbox: Outbox) -> None:
        with self._lock:
            self._outboxes.discard(outbox)

    def wake(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        """The courier thread: step every outbox, sleep until the next one is due."""
        while True:
            self._wake.clear()
            with self._lock:
                outboxes = list(self._outboxes)
            due = min((box.step(time.monotonic()) for box in outboxes), default=float("inf"))
            wait = due - time.monotonic()
            self._wake.wait(None if due == float("inf") else max(0.0, wait))


_COURIER = _Courier()


class Outbox:
    """An attempt's messages on their way to the reporter. `send` runs in the work's
    thread; the batching, beats and the cancel watch in this worker's courier thread."""

    def __init__(
        self,
        reporter: str,
        attempt_id: str,
        *,
        interval_s: float,
        cancel: threading.Event,
        inbox: InOrder,
        watch: bool,
    ) -> None:
        self._reporter_name = reporter
        self._attempt_id = attempt_id
        self._interval = interval_s
        self._cancel = cancel
        self._inbox = inbox
        self._watch = watch
        self._watching = False
        self._lock = threading.Lock()  # guards the batch and `posted`; held while posting
        self._batch: list[bytes] = []
        self._posted = 0
        self._ended = False
        self.ctx: Context | None = None
        self.crossing_error: str | None = None
        start = time.monotonic()
        # Nothing goes out in the first QUIET_S: what a short attempt reports rides back
        # with its result (a delegation request goes at once, from the work's thread).
        self._quiet_until = start + QUIET_S
        self._next_beat = start + interval_s
        self._watch_at = start + QUIET_S if watch else float("inf")
        _COURIER.add(self)

    def _reporter(self) -> Any:
        """The reporter's handle, looked up by name once per worker (a handle passed with
        each task would cost more than a no-op task's own work)."""
        handle = _HANDLES.get(self._reporter_name)
        if handle is None:
            import ray

            handle = _HANDLES[self._reporter_name] = ray.get_actor(self._reporter_name)
        return handle

    # -- the work's thread -----------------------------------------------------------
    def send(self, message: object) -> None:
        if isinstance(message, DelegateRequest):
            message.reply(self._delegate(message))
            return
        try:
            data = frames.report_frame(message)  # type: ignore[arg-type]
        except _wire.CrossingError as exc:
            self.crossing_error = self.crossing_error or str(exc)
            raise
        self.put(data)

    def put(self, data: bytes) -> None:
        with self._lock:
            if self._ended:
                return
            self._batch.append(data)
            first = len(self._batch) == 1
        if first:
            _COURIER.wake()

    def _delegate(self, request: DelegateRequest) -> Any:
        import ray

        try:
            brief = _wire.dumps(request.brief, "the brief to delegate")
        except _wire.CrossingError as exc:
            return exc
        self._flush()  # what it reported before comes first
        ref = self._reporter().delegate.remote(self._attempt_id, next(_REQUESTS), brief)
        return _wire.loads(ray.get(ref))

    def close(self) -> tuple[int, list[bytes]]:
        """The work returned: how many messages were posted, and those not yet posted."""
        with self._lock:
            self._ended = True
            tail, self._batch = self._batch, []
            posted = self._posted
        _COURIER.discard(self)
        if self._watching:
            self._reporter().release.remote(self._attempt_id)
        return posted, tail

    # -- the courier thread ----------------------------------------------------------
    def step(self, now: float) -> float:
        """Do what is due (start the watch, beat, post the batch); when to step it next."""
        if self._ended:
            return float("inf")
        if now < self._quiet_until:
            return self._quiet_until
        if now >= self._watch_at:
            self._watch_at = float("inf")
            self._start_watch()
        if now >= self._next_beat and self.ctx is not None:
            self._next_beat = now + self._interval
            beat = Heartbeat(self._attempt_id, self.ctx.progress, liveness=True)
            self.put(frames.report_frame(beat))
        self._flush()
        return min(self._next_beat, self._watch_at)

    def _flush(self) -> None:
        with self._lock:
            if not self._batch or self._ended:
                return
            batch, self._batch = self._batch, []
            self._posted += len(batch)
            self._reporter().post.remote(self._attempt_id, batch)

    def _start_watch(self) -> None:
        with self._lock:
            if self._ended:
                return
            self._watching = True
        ref = self._reporter().watch.remote(self._attempt_id)
        ref.future().add_done_callback(self._on_control)

    def _on_control(self, future: Any) -> None:
        """Runs in a Ray thread of this worker when the watch answers."""
        try:
            items = future.result()
        except Exception:  # noqa: BLE001 - the reporter is gone: Zeus's kill ladder remains
            return
        for item in items:
            if isinstance(item, frames.Cancel):
                self._cancel.set()
            elif isinstance(item, frames.MailTo):
                self._inbox.put(item)
        with self._lock:
            again = bool(items) and not self._ended and not self._cancel.is_set()
        if again:  # a message came: the next one, or the cancel, may follow
            ref = self._reporter().watch.remote(self._attempt_id)
            ref.future().add_done_callback(self._on_control)


class InOrder:
    """An attempt's mailbox (`ctx.receive()` reads `inbox`), fed the owner's messages in
    the order they were sent (`MailTo.seq`), whatever order Ray's calls ran in. Any thread."""

    def __init__(self) -> None:
        self.inbox = Inbox()
        self._lock = threading.Lock()
        self._next = 1
        self._early: dict[int, bytes] = {}

    def put(self, mail: frames.MailTo) -> None:
        with self._lock:
            self._early[mail.seq] = mail.data
            ready = []
            while self._next in self._early:
                ready.append(self._early.pop(self._next))
                self._next += 1
            for data in ready:  # one that cannot be read here was checked at the owner's call
                with contextlib.suppress(Exception):  # a class this worker cannot import
                    self.inbox.put(_wire.loads(data))


def _execute(
    job_data: bytes,
    cancel: threading.Event,
    inbox: InOrder,
    session_for: Callable[[str | None, dict[str, Any] | None], dict[str, Any]],
    *,
    watch: bool,
) -> tuple[int, list[bytes], bytes]:
    """One attempt in this worker: (messages posted, messages not posted, its Finished)."""
    pid = os.getpid()
    try:
        job = frames.read_ray_job(job_data)
        work = _wire.loads(job["work"])
        brief = _wire.brief_from_wire(job["brief"])
    except BaseException as exc:  # noqa: BLE001 - e.g. the work's module is not on this node
        finished = Finished(
            "?", AttemptOutcome.error,
            error="the attempt (its work function, brief, previous partial results or session) "
            f"could not be unpickled in the Ray worker: {type(exc).__name__}: {exc}",
            error_type=type(exc).__name__, traceback="".join(tb.format_exception(exc)), pid=pid,
        )
        return 0, [], frames.finished_frame(finished)
    attempt_id = job["attempt_id"]
    outbox = Outbox(job["reporter"], attempt_id, interval_s=job["interval_s"],
                    cancel=cancel, inbox=inbox, watch=watch)
    outbox.put(frames.placed_frame(pid, node_label()))
    ctx = Context(
        brief=brief, agent=job["agent"], delegation_id=job["delegation_id"],
        attempt=job["attempt"], attempt_id=attempt_id,
        deadline=time.monotonic() + job["remaining_s"], clock=_CLOCK, send=outbox.send,
        cancel_event=cancel, heartbeat_interval_s=job["interval_s"],
        session=session_for(job["session_key"], job["session"]),
        previous_partials=job["previous_partials"], depth=job["depth"], framing=job["framing"],
        inbox=inbox.inbox, epoch=job["epoch"], previous_error=job["previous_error"],
        reasoning_effort=job["reasoning_effort"], budget_left=job["budget_left"],
        previous_blocker=job["previous_blocker"], note=job["note"],
    )
    outbox.ctx = ctx
    finished = run_work(work, brief, ctx, pid=pid)
    if outbox.crossing_error is not None and finished.outcome is not AttemptOutcome.cancelled:
        finished = Finished(attempt_id, AttemptOutcome.error, error=outbox.crossing_error,
                            error_type="CrossingError", pid=pid, progress=finished.progress)
    posted, tail = outbox.close()
    try:
        data = frames.finished_frame(finished)
    except _wire.CrossingError as exc:
        data = frames.finished_frame(Finished(
            attempt_id, AttemptOutcome.error, error=str(exc), error_type="CrossingError",
            pid=pid, progress=finished.progress))
    return posted, tail, data


def _fresh_session(_key: str | None, initial: dict[str, Any] | None) -> dict[str, Any]:
    return initial if initial is not None else {}


def run_task(job: bytes) -> tuple[int, list[bytes], bytes]:
    """The body of an attempt's Ray task (runs in a Ray worker)."""
    return _execute(job, threading.Event(), InOrder(), _fresh_session, watch=True)


class SessionWorker:
    """A warm session: a Ray actor (two threads) that runs its session's attempts one at a
    time and keeps their `ctx.session` dict between them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancels: dict[str, threading.Event] = {}
        self._inboxes: dict[str, InOrder] = {}  # an attempt's mailbox (mail may overtake it)
        self._key: str | None = None
        self._session: dict[str, Any] = {}

    def run(
        self, attempt_id: str, job: bytes
    ) -> tuple[int, list[bytes], bytes]:
        with self._lock:
            cancel = self._cancels.setdefault(attempt_id, threading.Event())
            inbox = self._inboxes.setdefault(attempt_id, InOrder())
        try:
            return _execute(job, cancel, inbox, self._session_for, watch=False)
        finally:
            with self._lock:
                self._cancels.pop(attempt_id, None)
                self._inboxes.pop(attempt_id, None)

    def cancel(self, attempt_id: str) -> None:
        """Zeus's cooperative cancel (on the actor's second thread; may overtake `run`)."""
        with self._lock:
            self._cancels.setdefault(attempt_id, threading.Event()).set()

    def mail(self, mail: frames.MailTo) -> None:
        """The owner's message (on the actor's second thread; may overtake `run`)."""
        with self._lock:
            inbox = self._inboxes.setdefault(mail.attempt_id, InOrder())
        inbox.put(mail)

    def _session_for(self, key: str | None, initial: dict[str, Any] | None) -> dict[str, Any]:
        if key != self._key:
            self._key = key
            self._session = initial if initial is not None else {}
        return self._session
