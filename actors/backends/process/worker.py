"""The entry of a process child: everything here runs inside the worker process.

The fork server imports this module once (it is preloaded), so every worker
starts with it, and the `actors` modules it needs, already in memory; it
imports nothing else.

A worker serves attempts one at a time over its own pipes to the supervisor
process, and stays up between them (a warm worker) until told to stop. Three
threads: the main thread reads the jobs pipe (jobs, stop) and runs each job's
work function; a receiver thread reads the control pipe (cancels, delegation
replies), which an attempt may need while the main thread is busy with it; a
heartbeat thread sends `Heartbeat(liveness=True)` with the current progress
every `heartbeat_interval_s` while an attempt runs (the first one an interval
after it starts). A job thus costs no hand-over between threads, and neither
other thread wakes for it: the heartbeat thread is woken only when an attempt's
first beat is due before it would look anyway.

A work function arrives in full once per worker, with a token; later jobs
carry the token alone and the worker runs the function it unpickled then (see
`_wire.WorkCache`). Like a module function's globals, what such a function keeps
lives on across this worker's attempts.

A job of a host that holds a lease names the file its deadline is in, which the backstop
thread watches (`actors.backends.process.worker_lease`).

Its `Link` (`actors.backends.process.worker_link`) says where reports go and jobs come from:
the pipes; once they are gone, what it holds while it waits to be picked up (if the
job said how); then the socket of the supervisor that attached.

The frames between a worker and the supervisor are drawn in `actors.backends.frames`.
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import math
import os
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn

from actors import wire as _wire
from actors.backends import frames
from actors.backends.backstop import Backstop
from actors.backends.jobs import WorkStore, decode_job
from actors.backends.process.left_behind import leave_mark
from actors.backends.process.worker_attempt import RunningAttempt, crossing_failed, unreadable
from actors.backends.process.worker_lease import LEASE_ENDED, LeaseWatch
from actors.backends.process.worker_link import Link
from actors.backends.process.worker_wait import exit_now, stop_now
from actors.clock import SystemClock
from actors.models import AttemptOutcome
from actors.osproc import become_subreaper, kill_descendants
from actors.protocol import Charge, DelegateRequest, Finished, Heartbeat
from actors.run import run_work

__all__ = ["main"]

# The child only reads this clock (`now()`), so it never starts a timer thread.
_CLOCK = SystemClock()


def ready() -> None:
    """A child that does nothing: forking one proves the fork server has finished its imports."""


def main(jobs: Any, control: Any, outbox: Any) -> NoReturn:
    """The worker process's target; ends the process with `os._exit`.

    `jobs` and `control` are the read ends of the supervisor's two pipes to this
    worker (jobs and stop, read by the main thread; cancels and delegation
    replies, read by the receiver thread), `outbox` the write end of its pipe
    back (one-way pipes, which cost less per round trip than one socketpair:
    benchmarks/README.md, process children).
    """
    # Its own session, hence its own process group, before anything else: the
    # supervisor signals the whole group, so what the agent code starts dies
    # with it; and a terminal's Ctrl-C reaches only the supervisor, which decides.
    os.setsid()
    # And it adopts its orphaned descendants: a daemon that double-forked or left the
    # group with setsid stays below this process, where the kill ladder finds it.
    become_subreaper()
    # What the fork server loaded is there for good: the collector need not
    # look at it again (each pass over it would also copy its pages).
    gc.freeze()
    _Child(jobs, control, outbox).serve()


class _Child:
    def __init__(self, jobs: Any, control: Any, outbox: Any) -> None:
        # The Connections own the fds; only their fds are used.
        self._pipes = (jobs, control, outbox)
        self._link = Link(jobs.fileno(), outbox.fileno(), self)
        self._control = _wire.FrameReader(control.fileno())
        self._pid = os.getpid()
        self._send_lock = self._link.lock  # one writer at a time, wherever frames go
        # Guards the fields below; never held while doing I/O. `_current` is
        # written with both locks held, so either one is enough to read it.
        self._state_lock = threading.Lock()
        self._current: RunningAttempt | None = None
        self._cancel_early: dict[str, str | None] = {}  # cancels that overtook their job
        self._mail_early: dict[str, list[bytes]] = {}  # messages that overtook their job
        self._replies: dict[int, tuple[RunningAttempt, Callable[[Any], None]]] = {}
        self._request_ids = itertools.count(1)
        self._beat_event = threading.Event()  # wakes the heartbeat thread early
        self._beat_wake_at = math.inf  # when the heartbeat thread wakes up by itself
        self._session_key: str | None = None
        self._session: dict[str, Any] = {}
        self._works = WorkStore()  # work functions received, by token (`_wire.WorkCache`)
        self._started = 0  # attempts started (the heartbeat thread watches it)
        self._last_interval = math.inf  # the heartbeat interval of the last attempt started
        self._backstop = Backstop()  # the attempt's hard kill-by time, kept by this process
        # Its host's lease, watched by the backstop's thread.
        self._lease = LeaseWatch(self._lease_cancel, self._link.stop_for_lease, self._backstop)

    # -- main thread -----------------------------------------------------------------
    def serve(self) -> NoReturn:
        threading.Thread(target=self._receive, name="zeus-child-receiver", daemon=True).start()
        threading.Thread(target=self._beat, name="zeus-child-heartbeat", daemon=True).start()
        link = self._link
        while True:
            for data in link.next_jobs():
                frame = frames.read_job(data)
                if isinstance(frame, frames.Stop):
                    kill_descendants()  # what its attempts left running goes with it
                    exit_now(0)
                self._run(frame)

    def _run(self, frame: frames.Run) -> None:
        attempt_id = frame.attempt_id
        att = RunningAttempt(attempt_id)
        with self._send_lock, self._state_lock:
            self._current = att
            cancelled = attempt_id in self._cancel_early
            att.told_why(self._cancel_early.get(attempt_id))
            early_mail = self._mail_early.pop(attempt_id, [])
            # The others came too late for attempts already over: the next job is
            # sent only after this one's Finished.
            self._cancel_early.clear()
            self._mail_early.clear()
        if cancelled:
            att.cancel.set()
        for data in early_mail:
            self._put_mail(att, data)
        try:
            work = self._works.get(frame.flush, frame.token, frame.work)
            job = decode_job(frame.job)
        except BaseException as exc:  # noqa: BLE001 - e.g. the work's module fails to import here
            self._finish(att, unreadable(attempt_id, exc, self._pid))
            return
        if not self._link.takes_job(job.orphan, job.agent):
            stop_now()  # its supervisor went first, and nothing waits: it never runs
        if (job.lease is not None or self._lease.path is not None) and (
                refused := self._lease.take(job.lease, attempt_id, self._pid)) is not None:
            self._finish(att, refused)  # its host's lease ran out: the worker is stopping
            return
        # It takes the job now: its deadline and kill-by time start from here, not from
        # when Zeus sent it (a new worker's start, its imports), and Zeus is told first.
        taken = time.monotonic()
        job = job.started(taken)
        self._post(att, frames.started_frame(taken, job.hard_stop))
        if job.orphan is not None:  # found by its mark before its work runs
            leave_mark(job.orphan[1], attempt_id)
        ctx = job.context(
            attempt_id,
            clock=_CLOCK,
            send=self._sender(att),
            cancel_event=att.cancel,
            session=self._session_for(job.session_key, job.session),
            inbox=att.inbox,
        )
        interval = job.interval
        with self._state_lock:
            att.loaded(ctx, interval, time.monotonic())
            self._started += 1
            self._last_interval = interval
            if att.next_beat < self._beat_wake_at:
                self._beat_event.set()
        self._backstop.arm(job.hard_stop)
        finished = run_work(work, job.brief, ctx, pid=self._pid)
        if finished.outcome is AttemptOutcome.cancelled:
            # Why it stopped, for a Zeus that reattaches it: what its Zeus said with the
            # cancel, or its own budget running out (Zeus stops it for that too).
            cause = att.stop_cause or (
                AttemptOutcome.budget_exceeded.value if ctx.over_budget else None)
            if cause is not None:
                finished = dataclasses.replace(finished, stop_cause=cause)
            elif att.lease_ended:  # its host is lost: a cause of no person's asking
                finished = dataclasses.replace(finished, error=LEASE_ENDED,
                                               stop_cause=AttemptOutcome.lost.value)
        if att.crossing_error is not None and finished.outcome is not AttemptOutcome.cancelled:
            finished = crossing_failed(attempt_id, att.crossing_error, self._pid, finished)
        self._finish(att, finished)

    def _session_for(self, key: str | None, initial: dict[str, Any] | None) -> dict[str, Any]:
        """The worker's session dict for `key` (kept across attempts), or a fresh dict."""
        if key is None:
            return initial if initial is not None else {}
        if key != self._session_key:
            self._session_key = key
            self._session = initial if initial is not None else {}
        return self._session

    def _finish(self, att: RunningAttempt, finished: Finished) -> None:
        """Send the attempt's one `Finished`; a result that cannot cross fails the attempt."""
        try:
            data = frames.finished_frame(finished)
        except _wire.CrossingError as exc:
            data = frames.finished_frame(
                crossing_failed(att.attempt_id, str(exc), self._pid, finished))
        self._backstop.disarm()
        with self._send_lock:
            with self._state_lock:
                self._current = None
                att.unloaded()
            self._link.send(data)
            self._link.finished(att.attempt_id, data)

    # -- the work's thread (through its Context) -------------------------------------
    def _sender(self, att: RunningAttempt) -> Callable[[object], None]:
        def send(message: object) -> None:
            if isinstance(message, DelegateRequest):
                self._delegate(att, message)
                return
            # Otherwise one of the messages `frames.pack` knows (Context sends nothing else).
            try:
                data = frames.report_frame(message)  # type: ignore[arg-type]
            except _wire.CrossingError as exc:
                att.cannot_cross(str(exc))
                raise
            self._post(att, data, charge=isinstance(message, Charge))

        return send

    def _delegate(self, att: RunningAttempt, request: DelegateRequest) -> None:
        """The request is numbered (its ordinal) and sent under the send lock, so that the
        attempt's requests leave in their order; it is kept until it is answered."""
        error: BaseException | None = None
        with self._send_lock:
            if self._current is not att:
                error = RuntimeError(f"attempt {att.attempt_id} has ended")
            else:
                request_id = next(self._request_ids)
                try:
                    data = frames.delegate_frame(request_id, request.brief, att.delegated + 1)
                except _wire.CrossingError as exc:
                    error = exc  # it never leaves: no ordinal taken
                else:
                    with self._state_lock:
                        self._replies[request_id] = (att, request.reply)
                        att.asked(request_id, data)
                    self._link.send_request(data)
        if error is not None:
            request.reply(error)

    def _post(self, att: RunningAttempt, data: bytes, beat: bool = False,
              charge: bool = False) -> bool:
        """Send for `att`; dropped (False) once it has ended, e.g. from a thread it left behind."""
        with self._send_lock:
            if self._current is not att:
                return False
            self._link.send(data, beat, charge)
            return True

    # -- what its link asks (`worker_link.Holder`; any thread) -----------------------
    def holding(self) -> tuple[str | None, str | None]:
        att = self._current  # the link asks with the send lock held
        return (att.attempt_id if att is not None else None), self._session_key

    def unanswered(self) -> list[bytes]:
        with self._state_lock:
            att = self._current
            pending = att.pending if att is not None else None
            return [pending[k] for k in sorted(pending)] if pending else []

    def on_stop(self) -> None:
        if (att := self._current) is not None:  # one read: either lock would do
            att.cancel.set()

    def lease_path(self) -> str | None:
        return self._lease.path

    def _lease_cancel(self) -> bool:
        """Its host's lease ran out (the backstop thread): cancel the running attempt;
        whether one runs."""
        with self._state_lock:
            att = self._current
            if att is None:
                return False
            att.lease_ran_out()
        att.cancel.set()  # outside the lock: it may run the async work's cancel callback
        return True

    # -- heartbeat thread ------------------------------------------------------------
    def _beat(self) -> None:
        """Beats for the current attempt when its beat is due.

        It sleeps until then and looks again; it is not woken when an attempt
        ends or the next one begins (back-to-back attempts cost it nothing), only
        when a new attempt's first beat is due before it would wake up by itself.
        Finding the worker idle after an attempt, it sleeps one more interval
        (the next attempt's first beat is due no sooner, at the same interval),
        then, still idle, until woken.
        """
        seen = 0  # `_started` when it last found the worker idle
        while True:
            with self._state_lock:
                att, now = self._current, time.monotonic()
                ctx = att.ctx if att is not None else None
                if att is None or not att.beat_due(now):
                    if att is not None:
                        self._beat_wake_at = att.next_beat
                    elif self._started != seen:
                        seen = self._started
                        self._beat_wake_at = now + self._last_interval
                    else:
                        self._beat_wake_at = math.inf
                    self._beat_event.clear()
                    ctx = None
            if att is not None and ctx is not None:
                beat = Heartbeat(att.attempt_id, ctx.progress, liveness=True)
                self._post(att, frames.report_frame(beat), beat=True)
            else:
                wake_at = self._beat_wake_at
                self._beat_event.wait(None if wake_at == math.inf else wake_at - now)

    # -- receiver thread -------------------------------------------------------------
    def _receive(self) -> None:
        while True:
            try:
                messages = self._control.read()
            except OSError:
                messages = None
            if messages is None:
                self._link.pipes_gone()
                return  # the waiting thread, or the main thread, goes on
            for data in messages:
                self.on_control(data)

    def on_control(self, data: bytes) -> None:
        """A control frame (this thread, or the waiting thread once a supervisor attached)."""
        frame = frames.read_control(data)
        if isinstance(frame, frames.Cancel):
            self._cancel(frame.attempt_id, frame.cause)
        elif isinstance(frame, frames.Reply):
            self._reply(frame)
        elif isinstance(frame, frames.MailTo):
            self._mail(frame)

    def _cancel(self, attempt_id: str, cause: str | None) -> None:
        with self._state_lock:
            att = self._current
            if att is None or att.attempt_id != attempt_id:
                self._cancel_early[attempt_id] = cause
                return
            att.told_why(cause)
        att.cancel.set()  # outside the lock: it may run the async work's cancel callback

    def _mail(self, mail: frames.MailTo) -> None:
        with self._state_lock:
            att = self._current
            if att is None or att.attempt_id != mail.attempt_id:
                self._mail_early.setdefault(mail.attempt_id, []).append(mail.data)
                return
        self._put_mail(att, mail.data)

    @staticmethod
    def _put_mail(att: RunningAttempt, data: bytes) -> None:
        try:
            message = _wire.loads(data)
        except Exception:  # noqa: BLE001 - checked at the owner's call; a class missing here
            return
        att.inbox.put(message)

    def _reply(self, frame: frames.Reply) -> None:
        request_id = frame.request_id
        result: Any
        try:
            result = _wire.loads(frame.payload)
        except Exception as exc:  # noqa: BLE001 - the waiting agent gets the reason
            result = RuntimeError(f"the delegation's reply could not be read in the child: {exc}")
        with self._state_lock:
            entry = self._replies.pop(request_id, None)
            if entry is not None and entry[0].pending is not None:
                entry[0].pending.pop(request_id, None)
        if entry is not None:
            entry[1](result)
