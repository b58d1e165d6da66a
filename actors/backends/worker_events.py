"""What the process backend's hub thread does with what a worker sends, and with its end.

`WorkerEvents` is the hub thread's half of `ProcessBackend`
(`actors.backends.process`): the handlers the hub calls when a worker's pipe is
readable (its messages: progress, a delegation, its `Finished`) or its sentinel
fires (it was reaped: the attempt's `Finished` if it sent none, the sweep of
what it left). They run in the hub thread only, one at a time; the state they
share with the backend is guarded by the backend's lock.
"""

from __future__ import annotations

import dataclasses
import signal
import threading
import time
from typing import Any

from actors import wire as _wire
from actors.backends.backstop import MARGIN_S
from actors.backends.base import ChildSpec
from actors.backends.forkserver import close_process, exit_code, sentinel_ready
from actors.backends.hub import Hub
from actors.backends.pool import WarmPool
from actors.backends.records import ProcessChild, WorkerRecord, deliver
from actors.errors import describe_error
from actors.models import AttemptOutcome
from actors.osproc import describe_exit
from actors.protocol import DelegateRequest, Finished

__all__ = ["WorkerEvents", "death_of"]


class WorkerEvents:
    """The hub thread's handlers for worker processes; mixed into `ProcessBackend`, which
    sets the state below and decides what becomes of a worker once its attempt ends."""

    _lock: threading.Lock
    _ended: threading.Condition
    _hub: Hub
    _pool: WarmPool[WorkerRecord]
    _workers: set[WorkerRecord]
    _closed: bool

    def _session_limit(self, spec: ChildSpec) -> int:
        """How many idle workers the agent keeps (`ProcessBackend` says)."""
        raise NotImplementedError

    def _retire(self, worker: WorkerRecord) -> None:
        """Tell an idle worker to exit (`ProcessBackend` does it)."""
        raise NotImplementedError

    def _on_readable(self, worker: WorkerRecord) -> None:
        """Read what the worker sent (one read) and handle the messages it completes."""
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
            self._on_message(worker, data)

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
                self._on_message(worker, data)

    def _on_message(self, worker: WorkerRecord, data: bytes) -> None:
        child = worker.attempt  # one read; `_on_finished` looks again under the lock
        if child is None:
            return
        try:
            packed = _wire.loads(data)
            message = None if packed[0] == _wire.DELEGATE else _wire.unpack(packed)
        except Exception as exc:  # noqa: BLE001 - e.g. a class the supervisor cannot import
            with self._lock:
                first = child.read_error is None
                if first:
                    child.read_error = (
                        "a message from the child process could not be read in the supervisor: "
                        f"{describe_error(exc)}"
                    )
            if first:
                self._abandon(worker, child)
            return
        if message is None:
            _, request_id, brief = packed
            self._on_delegate(worker, child, request_id, brief)
        elif isinstance(message, Finished):
            self._on_finished(worker, child, message)
        else:
            child.progress = max(child.progress, message.progress)
            if not child.finished:
                deliver(child, message)

    def _abandon(self, worker: WorkerRecord, child: ProcessChild) -> None:
        """Runs in the hub thread: what the worker sends can no longer be read (it may have
        been its result), so it is killed at once and the attempt fails, with the reason,
        when it is reaped, instead of waiting out its deadline."""
        with self._lock:
            if child.finished or worker.dead or worker.attempt is not child:
                return
            worker.retiring = True
            if child.kill_t is None:
                child.kill_t = time.monotonic()
        worker.ladder.escalate()

    def _on_finished(self, worker: WorkerRecord, child: ProcessChild, finished: Finished) -> None:
        now = time.monotonic()
        evicted: list[WorkerRecord] = []
        with self._lock:
            if child.finished or worker.attempt is not child:
                return
            if child.kill_t is not None:
                return  # it is being killed: its Finished follows the reaping
            child.finished = True
            worker.attempt = None
            killed = latency = None
            if child.cancel_t is not None and finished.outcome is AttemptOutcome.cancelled:
                killed, latency = "cooperative", now - child.cancel_t
            if child.read_error is not None:
                finished = Finished(
                    child.attempt_id,
                    AttemptOutcome.error,
                    error=child.read_error,
                    error_type="CrossingError",
                    progress=finished.progress,
                )
            reuse = child.cancel_t is None and not self._closed and not worker.retiring
            if reuse:
                limit = self._session_limit(child.spec)
                evicted = self._pool.put(worker.agent, worker, worker.session_key, limit)
            else:
                evicted = [worker]
        if killed is not None or finished.pid != worker.pid:
            finished = dataclasses.replace(
                finished, pid=worker.pid, killed=killed, kill_latency_s=latency
            )
        deliver(child, finished)
        for old in evicted:
            self._retire(old)

    def _on_delegate(
        self, worker: WorkerRecord, child: ProcessChild, request_id: int, brief: Any
    ) -> None:
        def reply(result: object) -> None:
            with self._lock:
                if worker.attempt is not child:
                    return  # the attempt has ended: nobody waits for this answer
            try:
                payload = _wire.dumps(
                    result, f"the delegation's result (a {_wire.type_name(result)})"
                )
            except _wire.CrossingError as exc:
                payload = _wire.dumps(exc)
            worker.post(b"R" + request_id.to_bytes(8, "big") + payload)

        deliver(child, DelegateRequest(child.attempt_id, brief, reply))

    def _on_sentinel(self, worker: WorkerRecord) -> None:
        if not sentinel_ready(worker.sentinel):
            return
        self._drain(worker)  # what it sent before it ended comes first
        code = exit_code(worker.process)
        now = time.monotonic()
        finished = None
        with self._lock:
            worker.ladder.reaped = True
            self._pool.discard(worker.agent, worker)
            child, worker.attempt = worker.attempt, None
            if child is not None and not child.finished:
                child.finished = True
                finished = death_of(worker, child, code, now)
        self._hub.unwatch(worker.conn)
        self._hub.unwatch(worker.sentinel)
        # Whatever the worker started dies with it, and what the ladder found below it.
        worker.ladder.sweep()
        worker.close()
        close_process(worker.process)
        if finished is not None and child is not None:
            deliver(child, finished)
        with self._lock:
            self._workers.discard(worker)
            self._ended.notify_all()


def death_of(worker: WorkerRecord, child: ProcessChild, code: int | None, now: float) -> Finished:
    """The `Finished` of an attempt whose worker died (exit code `code`), in this order: a
    message it sent could not be read, it was killed, its own backstop fired past its
    kill-by time, else a crash. Called with the backend's lock held."""
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
        error=f"{describe_exit(code)} before reporting a result",
        error_type="ChildProcessDied",
        pid=worker.pid,
        progress=child.progress,
        exit_code=code,
    )
