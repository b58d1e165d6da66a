"""What the process backend's hub thread does with what a worker sends, and with its end.

`WorkerWatch` registers each worker's pipe and sentinel with the hub and holds
the handlers the hub then calls: when the pipe is readable (its frames:
progress, a delegation, its `Finished`, read with `actors.backends.frames`) or
its sentinel fires (it was reaped: the attempt's `Finished` if it sent none, the
sweep of what it left). They run in the hub thread only, one at a time; what
they change is the worker table's (`actors.backends.process.worker_table`), through its
methods, and what they report goes to the attempt's owner.
"""

from __future__ import annotations

import dataclasses
import signal
import time

from actors import wire as _wire
from actors.backends import frames
from actors.backends.backstop import MARGIN_S
from actors.backends.hub import Hub
from actors.backends.process.child import ProcessChild, report
from actors.backends.process.worker_table import WorkerRecord, WorkerTable
from actors.errors import describe_error
from actors.models import AttemptOutcome
from actors.protocol import DelegateRequest, Finished, Started

__all__ = ["WorkerWatch", "death_of"]


class WorkerWatch:
    """The hub thread's handlers for the workers of one worker table."""

    def __init__(self, table: WorkerTable, hub: Hub) -> None:
        self._table = table
        self._hub = hub

    def watch(self, worker: WorkerRecord) -> None:
        """Watch a new worker's pipe and sentinel (any thread)."""
        self._hub.watch(worker.conn, lambda: self._on_readable(worker))
        self._hub.watch(worker.sentinel, lambda: self._on_sentinel(worker))

    def adopt(self, worker: WorkerRecord, caught: list[bytes]) -> None:
        """A reattached worker (the caller's thread, before the hub watches it): what it
        held and sent since (`reattach.catch_up`) is handled in order, as the hub would,
        before `watch` passes it to the hub."""
        for data in caught:
            self._on_frame(worker, data)
        self.watch(worker)

    def _on_readable(self, worker: WorkerRecord) -> None:
        """Read what the worker sent (one read) and handle the frames it completes."""
        try:
            messages = worker.reader.read()
        except BlockingIOError:
            return
        except OSError:
            messages = None
        if messages is None:
            # The child's end closed: its sentinel follows.
            self._hub.unwatch(worker.conn)
            return
        for data in messages:
            self._on_frame(worker, data)

    def _drain(self, worker: WorkerRecord) -> None:
        """Everything the worker sent before it ended (it is dead: nothing more comes)."""
        while True:
            try:
                messages = worker.reader.read()
            except OSError:  # BlockingIOError: a process it left behind holds the pipe
                return
            if messages is None:
                return
            for data in messages:
                self._on_frame(worker, data)

    def _on_frame(self, worker: WorkerRecord, data: bytes) -> None:
        child = worker.attempt  # one read; `_on_finished` looks again under the lock
        if child is None:
            return
        try:
            message = frames.read_report(data)
        except Exception as exc:  # noqa: BLE001 - e.g. a class the supervisor cannot import
            error = ("a message from the child process could not be read in the supervisor: "
                     f"{describe_error(exc)}")
            if self._table.abandon(worker, child, error):
                # It may have been its result: killed at once, and the attempt fails, with
                # the reason, when it is reaped, instead of waiting out its deadline.
                worker.ladder.escalate()
            return
        if isinstance(message, Finished):
            self._on_finished(worker, child, message)
        elif isinstance(message, frames.Delegate):
            self._on_delegate(worker, child, message)
        elif isinstance(message, frames.StartedAt):
            child.hard_stop = message.hard_stop  # its kill-by time, counted from its start
            if not child.finished:
                report(child, Started(child.attempt_id, message.at))
        elif not isinstance(message, frames.PlacedAt):
            child.progress = max(child.progress, message.progress)
            if not child.finished:
                report(child, message)

    def _on_finished(self, worker: WorkerRecord, child: ProcessChild, finished: Finished) -> None:
        now = time.monotonic()
        cancelled = finished.outcome is AttemptOutcome.cancelled  # never reused
        ended, cancel_t, evicted = self._table.end_attempt(worker, child, cancelled)
        if not ended:
            return
        killed = latency = None
        if cancel_t is not None and finished.outcome is AttemptOutcome.cancelled:
            killed, latency = "cooperative", now - cancel_t
        if child.read_error is not None:
            finished = Finished(
                child.attempt_id,
                AttemptOutcome.error,
                error=child.read_error,
                error_type="CrossingError",
                progress=finished.progress,
            )
        if killed is not None or finished.pid != worker.pid:
            finished = dataclasses.replace(
                finished, pid=worker.pid, killed=killed, kill_latency_s=latency
            )
        report(child, finished)
        for old in evicted:
            self._table.retire(old)

    def _on_delegate(
        self, worker: WorkerRecord, child: ProcessChild, request: frames.Delegate
    ) -> None:
        lock = self._table.lock
        request_id = request.request_id

        def reply(result: object) -> None:
            with lock:
                if worker.attempt is not child:
                    return  # the attempt has ended: nobody waits for this answer
            try:
                payload = _wire.dumps(
                    result, f"the delegation's result (a {_wire.type_name(result)})"
                )
            except _wire.CrossingError as exc:
                payload = _wire.dumps(exc)
            worker.post(frames.reply_frame(request_id, payload))

        report(child, DelegateRequest(child.attempt_id, request.brief, reply, request.ordinal))

    def _on_sentinel(self, worker: WorkerRecord) -> None:
        if not worker.end.ended():
            return
        self._drain(worker)  # what it sent before it ended comes first
        code = worker.end.exit_code()
        now = time.monotonic()
        child, finished = self._table.reaped(
            worker, lambda child: death_of(worker, child, code, now)
        )
        self._hub.unwatch(worker.conn)
        self._hub.unwatch(worker.sentinel)
        # Whatever the worker started dies with it, and what the ladder found below it.
        worker.ladder.sweep()
        worker.close()
        worker.end.release()
        if finished is not None and child is not None:
            report(child, finished)
        self._table.remove(worker)


def death_of(worker: WorkerRecord, child: ProcessChild, code: int | None, now: float) -> Finished:
    """The `Finished` of an attempt whose worker died (exit code `code`), in this order: a
    message it sent could not be read, it was killed, its own backstop fired past its
    kill-by time, else a crash. Called with the worker table's lock held."""
    if child.read_error is not None:
        return Finished(
            child.attempt_id,
            AttemptOutcome.error,
            error=child.read_error,
            error_type="CrossingError",
            pid=worker.pid,
            progress=child.progress,
            exit_code=code,
        )
    if child.kill_t is not None:
        return Finished(
            child.attempt_id,
            AttemptOutcome.cancelled,
            pid=worker.pid,
            killed="kill" if worker.ladder.sigkill_sent else "terminate",
            kill_latency_s=now - child.kill_t,
            progress=child.progress,
            exit_code=code,
        )
    backstop = code in (-signal.SIGKILL, -signal.SIGALRM)
    if backstop and child.hard_stop is not None and now >= child.hard_stop:
        # Its own backstop: the supervisor did not stop it in time (it was frozen).
        return Finished(
            child.attempt_id,
            AttemptOutcome.timeout,
            error="killed by its own backstop at deadline + grace_s + term_s + "
            f"{MARGIN_S:g} s: the supervisor had not stopped it by then",
            error_type="Backstop",
            pid=worker.pid,
            killed="kill",
            progress=child.progress,
            exit_code=code,
        )
    return Finished(
        child.attempt_id,
        AttemptOutcome.crash,
        error=f"{worker.end.describe(code)} before reporting a result",
        error_type="ChildProcessDied",
        pid=worker.pid,
        progress=child.progress,
        exit_code=code,
    )
