"""Process children: each attempt runs in a worker process with a process group of its own.

`ProcessBackend.start()` hands the attempt to a warm worker of the agent when
one is idle, or starts a new one (a few ms), and returns at once; the work runs
in the worker (see `actors.backends.worker`), forked from a fork server
(`actors.backends.forkserver`). Everything that comes back is read by one `Hub`
thread for all workers and commands, turned into protocol messages
(`actors.backends.worker_events`) and passed to `send`; exactly one `Finished`
per attempt, sent once the attempt's code no longer runs: after it returned or
raised, or after its process was reaped.

A warm attempt costs one message each way. The work function is pickled once
per function object and sent in full once per worker, then named by a token
(`_wire.WorkCache`); the brief goes as its pickling state; messages are framed
on the pipes' fds directly (`_wire.write_frame`). Jobs go down a pipe of their
own, read by the worker's main thread, which runs them: no hand-over between
threads in the worker (cancels and delegation replies take a second pipe). A
worker holds four fds here: those two pipes, the one back, its sentinel.

Isolation guarantees:

- `kill()` returns at once; the hub then runs the kill ladder
  (`actors.backends.ladder`, shared with command agents): SIGTERM to the
  worker's process group, `spec.term_s`, SIGKILL to the group; `Finished`
  (outcome cancelled, `killed` "terminate" or "kill", `kill_latency_s` from
  `kill()` to reaped) follows the reaping. Grandchildren share the group and
  die with it; whatever is left of a group after its worker ends is swept
  with SIGKILL. A worker is a child subreaper, and each step also reaches
  what runs below it outside its group (`actors.osproc.ProcessTree`). Once `kill()`
  is called, the attempt's `Finished` is the kill's, even if the work returned
  meanwhile (the supervisor has decided by then).
- A new worker, or a command's program, is started in the backend's spawner
  thread, never in the caller's (Zeus's mailbox); its pid follows as `Spawned`.
- A worker that dies without a result (a signal, `os._exit`, the OOM killer) is
  a `crash`, seen at once from its sentinel, not at a deadline.
- A work function, brief or result that cannot be pickled (even by dill) fails
  the attempt with an error naming its type; it is checked before it is sent.
- A killed, crashed or cancelled worker is never reused.
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from typing import Any

from actors import wire as _wire
from actors.backends.base import ChildSpec, Send
from actors.backends.command import CommandChild
from actors.backends.forkserver import ensure_ready, start_worker
from actors.backends.hub import Hub
from actors.backends.jobs import encode_job
from actors.backends.pool import WarmPool
from actors.backends.records import ProcessChild, WorkerRecord, WorkName, deliver
from actors.backends.spawner import Spawner
from actors.backends.worker_events import WorkerEvents
from actors.models import AttemptOutcome
from actors.protocol import Finished, Spawned

__all__ = ["ProcessBackend", "ProcessChild"]

# Work functions, pickled once each (see `_wire.WorkCache`), and how many a
# worker keeps before it is told to forget them.
_WORKS = _wire.WorkCache()
_WORKS_KEPT = 64
# The record's older name, by which tests reach it.
_Worker = WorkerRecord


_LIVE: weakref.WeakSet[ProcessBackend] = weakref.WeakSet()


@atexit.register
def _close_live_backends() -> None:
    # Registered after multiprocess's own exit hook, so it runs first: workers are
    # not daemonic (agent code may start processes), and that hook would join them.
    for backend in list(_LIVE):
        backend.close()


class ProcessBackend(WorkerEvents):
    """Runs attempts in worker processes (forkserver, a process group each) and command agents.

    `session_max` is how many idle workers are kept per agent when the spec
    does not say (`ChildSpec.session_max`). `retire_s` bounds how long a worker
    told to stop may take before it is killed.
    """

    def __init__(self, *, session_max: int = 1, retire_s: float = 2.0) -> None:
        self._session_max = session_max
        self._retire_s = retire_s
        self._lock = threading.Lock()
        self._ended = threading.Condition(self._lock)  # a worker or command went away
        self._hub = Hub()
        self._spawner = Spawner()
        self._pool: WarmPool[WorkerRecord] = WarmPool()
        self._workers: set[WorkerRecord] = set()
        self._commands: set[CommandChild] = set()
        self._closed = False
        self._ready = False  # prestart() done
        _LIVE.add(self)

    def prestart(self) -> None:
        """Start the fork server now and wait until it is ready to fork workers.

        Called from the host's thread when Zeus starts. Otherwise the first
        `start()` would block Zeus's mailbox until the fork server has imported
        `actors` (about 0.5 s here): one child that does nothing is forked and
        reaped, which returns only once the server is ready.
        """
        if self._ready:
            return
        ensure_ready()
        self._ready = True

    # -- Zeus's thread ---------------------------------------------------------------
    def start(self, spec: ChildSpec, send: Send) -> ProcessChild | CommandChild:
        """Start the attempt and return its handle; never waits for the work."""
        if spec.command is not None:
            return self._start_command(spec, send)
        if spec.work is None:
            raise ValueError(f"agent {spec.agent!r} has neither a work function nor a command")
        child = ProcessChild(self, spec, send)
        try:
            token, work = _WORKS.get(spec.work, WorkName(spec.work))
            job, child.hard_stop = encode_job(spec)
        except _wire.CrossingError as exc:
            return self._refuse(child, str(exc), AttemptOutcome.error, "CrossingError")
        head = b"J" + spec.attempt_id.encode() + b"\0"
        while True:
            with self._lock:
                worker = None if self._closed else self._take_warm(spec)
                if worker is not None:
                    self._bind(worker, child)
            if worker is None:
                break
            if worker.post(head + worker.work_header(token, work, _WORKS_KEPT) + job, job=True):
                return child
            # The worker died while idle (its sentinel not yet handled): the job
            # never reached it, so the attempt may go to another worker.
            with self._lock:
                if child.finished or child.kill_t is not None or child.cancel_t is not None:
                    return child  # the hub reports it with the worker's death
                worker.retiring = True
                worker.attempt = None
                child.worker = None
        # No warm worker: a new one is started in the spawner thread, never in this one
        # (Zeus's mailbox); the attempt's pid follows as a `Spawned` message.
        if self._closed or not self._spawner.submit(
            lambda: self._start_cold(child, head, token, work, job)
        ):
            return self._refuse(child, "the process backend is closed", AttemptOutcome.error)
        return child

    def _start_cold(
        self, child: ProcessChild, head: bytes, token: int | None, work: bytes, job: bytes
    ) -> None:
        """Runs in the spawner thread: start a worker for `child` and hand it the job.

        A kill or cancel that came first ends the attempt without a process; one that
        comes while the worker starts is carried out once it is bound.
        """
        with self._lock:
            stopped = child.kill_t is not None or child.cancel_t is not None or self._closed
            if stopped:
                child.finished = True
        if stopped:
            deliver(child, Finished(child.attempt_id, AttemptOutcome.cancelled,
                                     error="stopped before its process started"))
            return
        try:
            worker = self._spawn(child.spec.agent)
        except Exception as exc:  # noqa: BLE001 - no fds, no memory, no fork server
            self._refuse(
                child,
                f"could not start a child process: {type(exc).__name__}: {exc}",
                AttemptOutcome.crash,
                type(exc).__name__,
            )
            return
        with self._lock:
            self._workers.add(worker)
            self._bind(worker, child)
            closed = self._closed
            killed = child.kill_t is not None
            cancelled = child.cancel_t is not None
            if killed:
                worker.retiring = True
        self._hub.watch(worker.conn, lambda: self._on_readable(worker))
        self._hub.watch(worker.sentinel, lambda: self._on_sentinel(worker))
        deliver(child, Spawned(child.attempt_id, worker.pid, worker.start_time))
        if killed:
            worker.ladder.escalate()  # it never got the job; its Finished follows the reaping
            return
        if closed:  # close() ran while this worker was starting
            child.kill()
            return
        # If the worker died meanwhile, the post fails and its sentinel reports a crash.
        worker.post(head + worker.work_header(token, work, _WORKS_KEPT) + job, job=True)
        if cancelled:
            worker.post(b"C" + child.attempt_id.encode())

    def close(self) -> None:
        """Stop every worker and command, wait until they are reaped, and stop the hub.

        Running attempts get the kill ladder (and their `Finished`); idle workers
        are told to stop; after `retire_s` whatever is left gets SIGKILL. When
        this returns no worker, command or process in their groups is left.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        # What is still queued to start ends without a process; a start under way ends
        # with its worker bound (and killed), so it is in `_workers` below.
        self._spawner.close()
        with self._lock:
            workers = list(self._workers)
            commands = list(self._commands)
        for worker in workers:
            child = worker.attempt
            if child is not None:
                child.kill()
            else:
                self._retire(worker)
        for command in commands:
            command.kill()
        if not self._hub.in_hub_thread:
            with self._lock:
                done = self._ended.wait_for(self._all_ended, self._retire_s)
                left = list(self._workers)
            if not done:
                for worker in left:
                    worker.ladder.escalate()
                with self._lock:
                    self._ended.wait_for(self._all_ended, 5.0)
        self._hub.close()
        _LIVE.discard(self)

    # -- attempts --------------------------------------------------------------------
    def _refuse(
        self,
        child: ProcessChild,
        error: str,
        outcome: AttemptOutcome,
        error_type: str | None = None,
    ) -> ProcessChild:
        child.finished = True
        deliver(child, Finished(child.attempt_id, outcome, error=error, error_type=error_type))
        return child

    def _take_warm(self, spec: ChildSpec) -> WorkerRecord | None:
        """Called with the lock held.

        One that died while idle may come out: its sentinel is not looked at
        here (a system call, hence a hand-over of the GIL to the hub thread, on
        every attempt); posting the job to it fails instead, and `start()` takes
        another.
        """
        while (worker := self._pool.take(spec.agent, spec.session_key)) is not None:
            if not worker.dead and not worker.retiring:
                return worker
        return None

    def _bind(self, worker: WorkerRecord, child: ProcessChild) -> None:
        """Called with the lock held."""
        worker.attempt = child
        worker.session_key = child.spec.session_key
        child.worker = worker
        for frame in child.early_mail:  # the worker keeps mail that overtakes its job
            worker.post(frame)
        child.early_mail.clear()

    def _spawn(self, agent: str) -> WorkerRecord:
        process, pipes = start_worker(agent)
        return WorkerRecord(agent, process, pipes, self._hub, self._lock)

    def _session_limit(self, spec: ChildSpec) -> int:
        return self._session_max if spec.session_max is None else spec.session_max

    def _cancel(self, child: ProcessChild) -> None:
        with self._lock:
            worker = child.worker
            if child.finished or child.cancel_t is not None:
                return
            child.cancel_t = time.monotonic()  # still starting: the spawner carries it out
        if worker is not None:
            worker.post(b"C" + child.attempt_id.encode())

    def _kill(self, child: ProcessChild) -> None:
        with self._lock:
            worker = child.worker
            if child.finished or child.kill_t is not None:
                return
            if worker is None:
                child.kill_t = time.monotonic()  # still starting: the spawner carries it out
                return
            if worker.dead:
                return
            child.kill_t = time.monotonic()
            worker.retiring = True
        term_s = child.spec.term_s
        self._in_hub(lambda: worker.ladder.terminate(term_s))

    def _in_hub(self, step: Any) -> None:
        """Run `step` in the hub thread: now if this is it, else as soon as it wakes."""
        if self._hub.in_hub_thread:
            step()
        else:
            self._hub.call_later(0.0, step)

    def _retire(self, worker: WorkerRecord) -> None:
        """Tell an idle worker to exit; SIGKILL after `retire_s` if it has not."""
        with self._lock:
            if worker.dead:
                return
            worker.retiring = True
            self._pool.discard(worker.agent, worker)
        worker.post(b"S", job=True)
        self._hub.call_later(self._retire_s, worker.ladder.escalate)

    def _start_command(self, spec: ChildSpec, send: Send) -> CommandChild:
        command = CommandChild(spec, send, self._hub, self._command_ended)
        with self._lock:
            closed = self._closed
            if not closed:
                self._commands.add(command)
        # Its `Popen` (a fork and an exec) runs in the spawner thread, not in Zeus's mailbox.
        if closed or not self._spawner.submit(command.start):
            command.fail("the process backend is closed")
        return command

    def _command_ended(self, command: CommandChild) -> None:
        with self._lock:
            self._commands.discard(command)
            self._ended.notify_all()

    def _all_ended(self) -> bool:
        return not self._workers and not self._commands
