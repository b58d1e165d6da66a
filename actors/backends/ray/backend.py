"""Ray children (`isolation: ray`): each attempt runs as a Ray task, or in a warm session
actor when its brief names a session, on any node of a Ray cluster.

`RayBackend.start()` submits the attempt and returns at once (it never waits
for a node). What the child reports comes back through one `Reporter` actor
per backend (see `actors.backends.ray.child`), drained by one pump thread here, which
also receives each attempt's end (a callback on its result) and turns both
into protocol messages for `send`, in order: a child's messages, then its one
`Finished`.

The stop ladder: `cancel()` reaches the child's `Context` (through the
reporter, or the session actor itself), as does an owner's message (`put_mail()`,
read by `ctx.receive()`); `kill()` is `ray.cancel(force=True)`
for a task and `ray.kill` for a session actor. Either way the attempt's
`Finished` follows only once Ray says the task ended (its result raised
`TaskCancelledError` or `ActorDiedError`), so a retry never overlaps it. Once
`kill()` is called the `Finished` is the kill's, as for a process child.

A worker or node that dies mid-attempt is a `crash` with the cause named
(`ray.causes.describe_ray_failure`). An attempt that was never placed on a
node when it was killed (its `Placed` never came) ends with an error saying
its resources were never granted, and whether any node could ever grant them.

Ray is imported only by the Ray backend's modules; the rest of `actors` runs without it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import threading
import time
import traceback
from collections.abc import Mapping
from typing import Any

import ray

from actors import wire as _wire
from actors.backends import frames
from actors.backends.base import Backend, ChildSpec, Send
from actors.backends.pool import WarmPool
from actors.backends.ray.causes import task_options
from actors.backends.ray.child import SessionWorker, run_task
from actors.backends.ray.handle import RayChild, Session, ended_by_ray, returned
from actors.backends.ray.place import confirmed_gone, connect, gone, new_reporter, seen_gone
from actors.models import AttemptOutcome
from actors.protocol import DelegateRequest, Finished, Placed

__all__ = ["RayBackend", "RayChild"]

_WORKS = _wire.WorkCache()


class RayBackend(Backend):
    """Runs attempts on Ray (one reporter actor, one pump thread); the `RayStops` of its handles.

    `address` and `init` are `supervisor.ray`'s; Ray is shut down at `close()`
    only if this backend started it. `park_s` bounds how long an attempt's end
    waits for messages it posted that the reporter has not yet handed over.
    """

    def __init__(
        self,
        *,
        address: str | None = None,
        init: Mapping[str, Any] | None = None,
        connect_timeout_s: float = 10.0,
        park_s: float = 2.0,
    ) -> None:
        self._owns_ray = connect(address, init or {}, connect_timeout_s)
        self._park_s = park_s
        self._lock = threading.Lock()
        self._ended = threading.Condition(self._lock)
        self._children: dict[str, RayChild] = {}
        self._pool: WarmPool[Session] = WarmPool()
        self._events: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        # Held by whichever thread turns Ray's answers into messages (the pump, or a Ray
        # thread ending a short attempt), so that one child's messages keep their order.
        self._pump_lock = threading.Lock()
        self._local_ip = ray.util.get_node_ip_address()
        context = ray.get_runtime_context()
        self.journal_fields = {"ray_address": str(context.gcs_address),
                               "ray_job": context.get_job_id()}
        self._closed = False
        try:
            self._reporter, self._reporter_name = new_reporter()
            self._task = ray.remote(max_retries=0, retry_exceptions=False)(run_task)
            self._session_class = ray.remote(
                max_restarts=0, max_task_retries=0, max_concurrency=2
            )(SessionWorker)
        except BaseException:
            if self._owns_ray:
                ray.shutdown()
            raise
        self._pump = threading.Thread(target=self._run_pump, name="zeus-ray-pump", daemon=True)
        self._pump.start()

    # -- Zeus's thread ---------------------------------------------------------------
    def start(self, spec: ChildSpec, send: Send) -> RayChild:
        """Submit the attempt and return its handle; never waits for a node."""
        child = RayChild(self, spec, send, self.journal_fields)
        if spec.work is None:
            return self._refuse(child, f"agent {spec.agent!r} has no work function for Ray")
        try:
            _, work = _WORKS.get(spec.work, _wire.TypeNamed("the work function (a {})", spec.work))
            job = frames.ray_job(spec, work, self._reporter_name)
        except _wire.CrossingError as exc:
            return self._refuse(child, str(exc), "CrossingError")
        options = task_options(spec.resources)
        try:
            with self._lock:
                if self._closed:
                    return self._refuse(child, "the Ray backend is closed")
                self._children[child.attempt_id] = child
            if spec.session_key is not None and spec.session is not None:
                session = self._session(spec, options)
                child.submitted(session.handle.run.remote(child.attempt_id, job), session)
            else:
                task = self._task.options(**options) if options else self._task
                child.submitted(task.remote(job))
        except Exception as exc:  # noqa: BLE001 - bad resources, a Ray that went away
            with self._lock:
                self._children.pop(child.attempt_id, None)
            return self._refuse(child, f"Ray refused the attempt: {type(exc).__name__}: {exc}")
        child.ref.future().add_done_callback(lambda f: self._on_result(child, f))
        return child

    def close(self) -> None:
        """Kill every running attempt, wait until Ray confirms each ended, kill the warm
        sessions and the reporter, and shut Ray down if this backend started it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            running = list(self._children.values())
        for child in running:
            child.kill()
        with self._lock:
            self._ended.wait_for(lambda: not self._children, 10.0)
            sessions = self._pool.idle()
        for session in sessions:
            with contextlib.suppress(Exception):
                ray.kill(session.handle, no_restart=True)
        with contextlib.suppress(Exception):
            ray.kill(self._reporter, no_restart=True)
        self._events.put(("stop",))
        if threading.current_thread() is not self._pump:
            self._pump.join(timeout=5)
        if self._owns_ray:
            ray.shutdown()

    confirm_gone = staticmethod(confirmed_gone)  # Ray's word on a stored attempt's worker
    child_gone = staticmethod(seen_gone)  # the same, now, for a person's resume

    def _session(self, spec: ChildSpec, options: dict[str, Any]) -> Session:
        """The warm actor of the brief's session, or a new one (started by Ray, not waited for)."""
        with self._lock:
            session = self._pool.take(spec.agent, spec.session_key)
        if session is None:
            session = Session(self._session_class.options(**options).remote())
        return session

    def _refuse(self, child: RayChild, error: str, error_type: str | None = None) -> RayChild:
        child.ends()
        _report(child, Finished(child.attempt_id, AttemptOutcome.error, error=error,
                                 error_type=error_type))
        return child

    def cancel_attempt(self, child: RayChild) -> None:
        with self._lock:
            if not child.asks_cancel(time.monotonic()):
                return
        # Sent by the pump: a kill that follows at once (grace_s 0) makes it moot, and a
        # worker busy taking a cancel is slower to die.
        self._events.put(("cancel", child))

    def _send_cancel(self, child: RayChild) -> None:
        """The pump thread: the cooperative cancel, unless the child is gone or being killed."""
        if child.finished or child.kill_t is not None:
            return
        if child.session is not None:
            child.session.handle.cancel.remote(child.attempt_id)
        else:
            self._reporter.control.remote(child.attempt_id, frames.Cancel(child.attempt_id))

    def mail_attempt(self, child: RayChild, data: bytes) -> None:
        with self._lock:
            mail = child.next_mail(data)
        if mail is None:
            return
        # Sent by the pump, after what was asked before it (a cancel): Zeus's thread
        # never waits on Ray.
        self._events.put(("mail", child, mail))

    def _send_mail(self, child: RayChild, mail: frames.MailTo) -> None:
        """The pump thread: the owner's message, unless the child is gone or being killed.
        Ray may run actor calls out of order: the child puts them back in order (`seq`)."""
        if child.finished or child.kill_t is not None:
            return
        if child.session is not None:
            child.session.handle.mail.remote(mail)
        else:
            self._reporter.control.remote(child.attempt_id, mail)

    def kill_attempt(self, child: RayChild) -> None:
        with self._lock:
            if not child.asks_kill(time.monotonic()):
                return
        with contextlib.suppress(Exception):  # already ended: its result is on its way
            if child.session is not None:
                ray.kill(child.session.handle, no_restart=True)
            else:
                ray.cancel(child.ref, force=True)

    # -- a Ray thread ----------------------------------------------------------------
    def _on_result(self, child: RayChild, future: Any) -> None:
        """The attempt's result is in. A task that ended on its own and posted nothing to
        the reporter ends here, with no hand-over; anything else goes to the pump."""
        if child.session is None and child.kill_t is None and future.exception() is None:
            posted, tail, data = future.result()
            if posted == 0:
                with self._pump_lock:
                    for message in tail:
                        self._on_message(child, message)
                    self._finish(child, returned(child, data, time.monotonic()))
                return
        self._events.put(("ended", child, future))

    # -- the pump thread -------------------------------------------------------------
    def _drain(self) -> None:
        ref = self._reporter.drain.remote()
        ref.future().add_done_callback(lambda f: self._events.put(("drain", f)))

    def _run_pump(self) -> None:
        """The one thread that delivers what Ray children report, in order."""
        self._drain()
        held: dict[str, RayChild] = {}
        while True:
            try:
                event = self._events.get(timeout=0.002 if held else None)
            except queue.Empty:
                event = ("tick",)
            if event[0] == "stop":
                return
            try:
                with self._pump_lock:
                    if event[0] == "drain":
                        self._on_drained(event[1])
                    elif event[0] == "ended":
                        self._on_ended(event[1], event[2], held)
                    elif event[0] == "cancel":
                        self._send_cancel(event[1])
                    elif event[0] == "mail":
                        self._send_mail(event[1], event[2])
                    self._release(held)
            except Exception:  # noqa: BLE001 - a bug here must not stop every child's reports
                traceback.print_exc()

    def _on_drained(self, future: Any) -> None:
        try:
            items = future.result()
        except Exception:  # noqa: BLE001 - the reporter died with its node
            if not self._closed:
                # Attempts that report to the dead one still end through their results.
                self._reporter, self._reporter_name = new_reporter()
                self._drain()
            return
        for item in items:
            with self._lock:
                child = self._children.get(item[1])
            if child is None:
                continue  # a late message of an attempt that has ended
            if item[0] == "d":
                self._on_delegate(child, item[2], item[3])
            else:
                for data in item[2]:
                    child.drained()
                    self._on_message(child, data)
        if not self._closed:
            self._drain()

    def _on_message(self, child: RayChild, data: bytes) -> None:
        try:
            frame = frames.read_report(data)
            if isinstance(frame, frames.PlacedAt):
                child.placed_at(frame.pid, frame.node)
                message: object = Placed(child.attempt_id, frame.pid, frame.node)
            elif isinstance(frame, frames.Delegate | frames.StartedAt):
                raise TypeError(f"a {type(frame).__name__} frame in the reporter's messages")
            else:
                message = frame
                child.reported(frame.progress)
        except Exception as exc:  # noqa: BLE001 - e.g. a class Zeus's process cannot import
            child.unreadable("a message from the Ray child could not be read in the supervisor: "
                             f"{type(exc).__name__}: {exc}")
            return
        if not child.finished:
            _report(child, message)

    def _on_delegate(self, child: RayChild, request_id: int, brief_data: bytes) -> None:
        reporter = self._reporter

        def reply(result: object) -> None:
            try:
                what = f"the delegation's result (a {_wire.type_name(result)})"
                payload = _wire.dumps(result, what)
            except _wire.CrossingError as exc:
                payload = _wire.dumps(exc)
            reporter.reply.remote(request_id, payload)

        try:
            brief = _wire.loads(brief_data)
        except Exception as exc:  # noqa: BLE001 - the child gets the reason
            reply(RuntimeError(f"the brief to delegate could not be read in the supervisor: {exc}"))
            return
        _report(child, DelegateRequest(child.attempt_id, brief, reply))

    def _on_ended(self, child: RayChild, future: Any, held: dict[str, RayChild]) -> None:
        """Ray says the attempt's task or actor call ended: hold its `Finished` until it may go."""
        now = time.monotonic()
        posted = 0
        try:
            posted, tail, data = future.result()
        except BaseException as exc:  # noqa: BLE001 - every way Ray says the attempt ended
            finished = ended_by_ray(child, exc, now)
        else:
            for message in tail:
                self._on_message(child, message)
            finished = returned(child, data, now)
        child.hold(finished, posted, now)
        held[child.attempt_id] = child

    def _release(self, held: dict[str, RayChild]) -> None:
        """Send the `Finished` of each held attempt whose messages have all arrived (a few
        may still be in the reporter) and whose worker, if it was stopped by force or died
        on this host, is gone: Ray reports a cancel before the process has exited."""
        now = time.monotonic()
        for attempt_id, child in list(held.items()):
            assert child.held is not None
            finished, posted, since = child.held
            if child.kill_t is not None and finished.killed != "kill":
                finished = ended_by_ray(child, None, now)  # once killed, the end is the kill's
            messages_due = child.received < posted and now - since < self._park_s
            if messages_due or (self._may_still_run(child, finished) and now - since < 10.0):
                continue
            del held[attempt_id]
            child.let_go()
            if finished.killed == "kill" and child.kill_t is not None:
                finished = dataclasses.replace(finished, kill_latency_s=now - child.kill_t)
            self._finish(child, finished)

    def _may_still_run(self, child: RayChild, finished: Finished) -> bool:
        """Whether the worker of an attempt that Ray stopped or lost is still alive here."""
        stopped = finished.killed == "kill" or finished.outcome is AttemptOutcome.crash
        if not stopped or child.pid is None or child.node is None:
            return False
        return child.node.startswith(f"{self._local_ip}/") and not gone(child.pid)

    def _finish(self, child: RayChild, finished: Finished) -> None:
        evicted: list[Session] = []
        with self._lock:
            if not child.ends():
                return
            self._children.pop(child.attempt_id, None)
            session = child.session
            if session is not None:
                reuse = (child.kill_t is None and child.cancel_t is None and not self._closed
                         and finished.outcome in (AttemptOutcome.completed,
                                                  AttemptOutcome.error,
                                                  AttemptOutcome.transient))
                if reuse:
                    evicted = self._pool.put(child.spec.agent, session, child.spec.session_key,
                                             child.spec.session_max or 1)
                elif child.kill_t is None:
                    evicted = [session]
            self._ended.notify_all()
        _report(child, finished)
        if (child.cancel_t is not None or child.mailed) and session is None:
            self._reporter.release.remote(child.attempt_id)
        for old in evicted:
            with contextlib.suppress(Exception):
                ray.kill(old.handle, no_restart=True)


def _report(child: RayChild, message: object) -> None:
    """Pass `message` up to the attempt's owner; a failing receiver is printed, never raised."""
    try:
        child.send(message)
    except Exception:  # noqa: BLE001 - a failing receiver must not stop the pump
        traceback.print_exc()
