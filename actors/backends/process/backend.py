"""Process children: each attempt runs in a worker process with a process group of its own.

`ProcessBackend.start()` hands the attempt to a warm worker of the agent when
one is idle, or starts a new one (a few ms), and returns at once; the work runs
in the worker (see `actors.backends.process.worker`), forked from a fork server
(`actors.backends.process.forkserver`). Everything that comes back is read by one `Hub`
thread for all workers and commands, turned into protocol messages
(`actors.backends.process.worker_watch`) and passed to `send`; exactly one `Finished`
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
  With `commands_in_workers`, a command's program is started and read by a
  worker instead (`actors.backends.command.work`), so that it lives as long as
  its worker, whose pid the attempt then has.
- A worker that dies without a result (a signal, `os._exit`, the OOM killer) is
  a `crash`, seen at once from its sentinel, not at a deadline.
- A work function, brief or result that cannot be pickled (even by dill) fails
  the attempt with an error naming its type; it is checked before it is sent.
- A killed, crashed or cancelled worker is never reused.

With a store (`reattach`, a `ReattachPlace`), every job says how its worker waits to
be picked up if this process dies (docs/design.md, "Reattach";
`actors.backends.process.worker_link`), and `reattach()` picks up a worker that waited for
this one (`actors.backends.process.reattach.find_waiting`): over one socket instead of its
pipes, its end watched through a pidfd (it is not this process's child); from then
on it is a worker like the others.

A host on a shared store holds a lease and tells the backend after each renewal until
when it holds it (`extend_lease`): the time goes into a file each worker maps
(`actors.backends.process.lease_deadline`), and a worker that finds it passed with no
extension stops its work and exits by itself (`actors.backends.process.worker_lease`), even if
this process is frozen and can signal nothing.
"""

from __future__ import annotations

import atexit
import weakref
from collections.abc import Sequence
from typing import overload

from actors import wire as _wire
from actors.backends import frames
from actors.backends.base import (
    Backend,
    ChildHandle,
    ChildSpec,
    Found,
    Send,
    StoredChild,
    WaitingChild,
)
from actors.backends.command.child import CommandChild
from actors.backends.command.work import as_worker_job
from actors.backends.hub import Hub
from actors.backends.jobs import encode_job, real_deadline
from actors.backends.process.child import ProcessChild, report
from actors.backends.process.forkserver import Forked, ensure_ready, start_worker
from actors.backends.process.found import LeftWorker, WorkerSearch
from actors.backends.process.lease_deadline import HostLease
from actors.backends.process.left_behind import LeftChild
from actors.backends.process.reattach import (
    Adopted,
    ReattachPlace,
    SocketPipes,
    Waiting,
    catch_up,
    runtime_dir,
)
from actors.backends.process.spawner import Spawner
from actors.backends.process.worker_table import WorkerRecord, WorkerTable
from actors.backends.process.worker_watch import WorkerWatch
from actors.models import AttemptOutcome
from actors.protocol import Finished, Spawned

__all__ = ["ProcessBackend", "ProcessChild"]

# Work functions, pickled once each (see `_wire.WorkCache`), and how many a
# worker keeps before it is told to forget them.
_WORKS = _wire.WorkCache()
_WORKS_KEPT = 64


_LIVE: weakref.WeakSet[ProcessBackend] = weakref.WeakSet()

CATCH_UP_S = 2.0  # the most a reattached worker may take to send what it held


@atexit.register
def _close_live_backends() -> None:
    # Registered after multiprocess's own exit hook, so it runs first: workers are
    # not daemonic (agent code may start processes), and that hook would join them.
    for backend in list(_LIVE):
        backend.close()


class ProcessBackend(Backend):
    """Runs attempts in worker processes (forkserver, a process group each) and command agents.

    `session_max` is how many idle workers are kept per agent when the spec
    does not say (`ChildSpec.session_max`). `retire_s` bounds how long a worker
    told to stop may take before it is killed. `reattach`: where the workers wait to
    be picked up should this process die (a store's place); None: they stop at once.
    `commands_in_workers`: a command agent's program runs under a worker, which holds
    its pipes, rather than under this process (`actors.backends.command.work` says what
    differs); with `reattach`, so that it can wait too; and on a shared store, so that
    it is bounded by the host's lease (`extend_lease` turns it on).

    It owns its parts, each knowing only those below it: the hub thread, the
    spawner thread, the worker table (workers, warm pool, commands, their lock)
    and the hub's handlers for workers (`WorkerWatch`, which works on the table).
    """

    def __init__(
        self, *, session_max: int = 1, retire_s: float = 2.0,
        reattach: ReattachPlace | None = None, commands_in_workers: bool = False,
    ) -> None:
        self._retire_s = retire_s
        self._place = (reattach.grace_s, reattach.directory, reattach.key) if reattach else None
        self.reattach_place = reattach  # where its workers wait, and are found (recovery)
        self._search = WorkerSearch(reattach)
        self._commands_in_workers = commands_in_workers
        self._hub = Hub()
        self._spawner = Spawner()
        self._table = WorkerTable(self._hub, session_max=session_max, retire_s=retire_s)
        self._watch = WorkerWatch(self._table, self._hub)
        self._ready = False  # prestart() done
        self._lease = HostLease()  # the host's lease (`extend_lease`)
        _LIVE.add(self)

    readies = True  # the fork server: about 0.5 s of imports

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

    def extend_lease(self, until_monotonic: float | None) -> None:
        """Say that the host's lease holds until `until_monotonic` (a `time.monotonic()`
        time; None: there is no lease, nothing is bounded). Any thread; one 8-byte write
        into a shared file, no message to any worker; `ValueError` for a time that is not
        finite and above 0.

        Every process child of this backend then stops its own work and exits once that
        time has passed with no later extension: its attempt is cancelled, then `grace_s`
        and `term_s` of the kill ladder (`actors.backends.process.worker_lease`), so none runs
        past the last extension plus `grace_s + term_s + worker_lease.POLL_S`. The
        first call with a time makes the file (before it nothing is bounded, and nothing
        changes for a host without a lease) and turns on `commands_in_workers`: a command
        started by the hub thread, a thread of this process, would be frozen with it.
        Workers learn the file with their next job, so a host calls this before its
        first `start()`; an attempt or a hub-run command started before the first
        extension is not bounded. A worker picked up from an earlier host (`reattach`)
        reads that host's file, which this backend writes from then on.
        """
        if self._lease.extend(until_monotonic, self._lease_dir):
            self._commands_in_workers = True

    def _lease_dir(self) -> str:
        return self.reattach_place.directory if self.reattach_place else runtime_dir()

    @property
    def lease_path(self) -> str | None:
        """The file the lease's deadline is written to (None: no lease was given yet)."""
        return self._lease.path

    # -- Zeus's thread ---------------------------------------------------------------
    def start(self, spec: ChildSpec, send: Send) -> ProcessChild | CommandChild:
        """Start the attempt and return its handle; never waits for the work."""
        if spec.command is not None or spec.invocation is not None:
            if not self._commands_in_workers:
                return self._start_command(spec, send)
            spec = as_worker_job(spec)
        if spec.work is None:
            raise ValueError(f"agent {spec.agent!r} has neither a work function nor a command")
        table = self._table
        child = ProcessChild(table, spec, send)
        try:
            token, work = _WORKS.get(spec.work, WorkName(spec.work))
            job, child.hard_stop = encode_job(spec, self._place, self._lease.path)
        except _wire.CrossingError as exc:
            return _refuse(child, str(exc), AttemptOutcome.error, "CrossingError")
        while (worker := table.bind_warm(child)) is not None:
            frame = frames.run_frame(spec.attempt_id, worker.work_part(token, work, _WORKS_KEPT),
                                     job)  # fmt: skip
            if worker.post(frame, job=True):
                return child
            # The worker died while idle (its sentinel not yet handled): the job
            # never reached it, so the attempt may go to another worker.
            if not table.unbind(worker, child):
                return child  # the hub reports it with the worker's death
        # No warm worker: a new one is started in the spawner thread, never in this one
        # (Zeus's mailbox); the attempt's pid follows as a `Spawned` message.
        if table.closed or not self._spawner.submit(
            lambda: self._start_cold(child, token, work, job)
        ):
            return _refuse(child, "the process backend is closed", AttemptOutcome.error)
        return child

    def _start_cold(self, child: ProcessChild, token: int | None, work: bytes, job: bytes) -> None:
        """Runs in the spawner thread: start a worker for `child` and hand it the job.

        A kill or cancel that came first ends the attempt without a process; one that
        comes while the worker starts is carried out once it is bound.
        """
        if self._table.end_unstarted(child):
            report(child, Finished(child.attempt_id, AttemptOutcome.cancelled,
                                   error="stopped before its process started",
                                   stop_cause=child.stop_cause))
            return
        try:
            worker = self._spawn(child.spec.agent)
        except Exception as exc:  # noqa: BLE001 - no fds, no memory, no fork server
            _refuse(
                child,
                f"could not start a child process: {type(exc).__name__}: {exc}",
                AttemptOutcome.crash,
                type(exc).__name__,
            )
            return
        closed, killed, cancelled = self._table.add_bound(worker, child)
        self._watch.watch(worker)
        report(child, Spawned(child.attempt_id, worker.pid, worker.start_time))
        if killed:
            worker.ladder.escalate()  # it never got the job; its Finished follows the reaping
            return
        if closed:  # close() ran while this worker was starting
            child.kill()
            return
        # If the worker died meanwhile, the post fails and its sentinel reports a crash.
        frame = frames.run_frame(child.attempt_id, worker.work_part(token, work, _WORKS_KEPT), job)
        worker.post(frame, job=True)
        if cancelled:
            worker.post(frames.cancel_frame(child.attempt_id, child.stop_cause))

    def _spawn(self, agent: str) -> WorkerRecord:
        """Start a worker process for `agent` (the spawner thread)."""
        process, pipes = start_worker(agent)
        return WorkerRecord(agent, Forked(process), pipes, self._hub, self._table.lock)

    # -- after a crash (recovery, Zeus's thread) ---------------------------------------
    def find_waiting(self, children: Sequence[StoredChild]) -> Found:
        """The workers that waited for this Zeus in the store's place (`reattach`), and
        those that left what they held (`actors.backends.process.found`)."""
        return self._search.find(children)

    @overload
    def reattach(self, child: WaitingChild, spec: ChildSpec, send: Send) -> ChildHandle | None:
        ...
    @overload
    def reattach(self, child: WaitingChild, spec: None, send: Send) -> bool: ...
    def reattach(self, child: WaitingChild, spec: ChildSpec | None,
                 send: Send) -> ChildHandle | bool | None:
        """Pick up a worker that waited (Zeus's thread): it is sent `Attach`, and what it
        held is read (at most `CATCH_UP_S`) and passed to `send` in order, as the hub
        passes a live worker's, before this returns; the hub then watches it. A worker
        that is gone (a `LeftWorker`) has what it left put in the mailbox instead, its
        `Finished` last.

        `spec`: the attempt `child.attempt_id`, rebuilt by the caller (same attempt id;
        its deadline on the caller's clock): its handle is returned, bound to the worker
        (its pid is the worker's). None: an idle worker holding a session, which joins
        the warm pool under its agent and session key (True is returned). None (False
        for an idle one) when it cannot be attached (it died meanwhile, or did not catch
        up) or the backend is closed: it is then told to stop, and `stop_left` waits
        until it is gone.
        """
        if isinstance(child, LeftWorker):
            return False if spec is None else LeftChild(child.held).replay(send)
        if not isinstance(child, Waiting):
            raise TypeError(f"not a worker this backend found: {child!r}")
        waiting = child
        if spec is not None and spec.attempt_id != waiting.attempt_id:
            raise ValueError(f"the spec is of attempt {spec.attempt_id!r}; the worker "
                             f"{waiting.pid} holds {waiting.attempt_id!r}")  # fmt: skip
        if spec is None and waiting.attempt_id is not None and not waiting.finished:
            raise ValueError(f"the worker {waiting.pid} runs attempt {waiting.attempt_id!r}: "
                             "reattach it with that attempt's spec")  # fmt: skip
        if waiting.lease is not None:  # extended before it is attached: it may be due
            self._lease.adopt(waiting.lease)
        end = None if self._table.closed else Adopted.open(waiting.pid, waiting.start_time)
        pipes = SocketPipes(waiting.conn)
        caught = catch_up(waiting, pipes.reader, CATCH_UP_S) if end is not None else None
        if end is None or caught is None:
            if end is not None:
                end.release()
            waiting.stop()  # nobody supervises it: `stop_left` sees it gone
            return None if spec is not None else False
        self._search.picked(waiting)
        worker = WorkerRecord(waiting.agent, end, pipes, self._hub, self._table.lock)
        worker.session_key = waiting.session_key
        if spec is None:
            if not self._table.add_idle(worker):
                worker.post(frames.STOP_FRAME, job=True)
                worker.close()
                end.release()
                return False
            self._watch.adopt(worker, [])  # what it sent for an attempt nobody asks about
            return True
        bound = ProcessChild(self._table, spec, send)
        _, bound.hard_stop = real_deadline(spec)
        closed, _, _ = self._table.add_bound(worker, bound)
        self._watch.adopt(worker, caught)
        if closed:  # close() ran meanwhile
            bound.kill()
        return bound

    def stop_left(self) -> None:
        """Stop every worker `find_waiting` found that was not picked up (an idle one that
        holds no session anybody asks for, one whose attempt recovery does not take back)
        with the kill ladder, and return once each has exited (Zeus's thread, inside
        recovery; `actors.backends.process.found`)."""
        self._search.stop_left()

    def close(self) -> None:
        """Stop every worker and command, wait until they are reaped, and stop the hub.

        Running attempts get the kill ladder (and their `Finished`); idle workers
        are told to stop; after `retire_s` whatever is left gets SIGKILL. When
        this returns no worker, command or process in their groups is left.
        """
        if not self._table.close():
            return
        # What is still queued to start ends without a process; a start under way ends
        # with its worker bound (and killed), so it is in the table below.
        self._spawner.close()
        workers, commands = self._table.running()
        for worker in workers:
            child = worker.attempt
            if child is not None:
                child.kill()
            else:
                self._table.retire(worker)
        for command in commands:
            command.kill()
        if not self._hub.in_hub_thread:
            done, left = self._table.wait_ended(self._retire_s)
            if not done:
                for worker in left:
                    worker.ladder.escalate()
                self._table.wait_ended(5.0)
        self._hub.close()
        self._lease.close()
        _LIVE.discard(self)

    def _start_command(self, spec: ChildSpec, send: Send) -> CommandChild:
        command = CommandChild(spec, send, self._hub, self._table.command_ended)
        # Its `Popen` (a fork and an exec) runs in the spawner thread, not in Zeus's mailbox.
        if not self._table.add_command(command) or not self._spawner.submit(command.start):
            command.fail("the process backend is closed")
        return command


def _refuse(
    child: ProcessChild, error: str, outcome: AttemptOutcome, error_type: str | None = None
) -> ProcessChild:
    """End an attempt that never reached a worker."""
    child.finished = True
    report(child, Finished(child.attempt_id, outcome, error=error, error_type=error_type))
    return child


class WorkName:
    """Names a work function in an error, computed only if there is one."""

    def __init__(self, work: object) -> None:
        self.work = work

    def __str__(self) -> str:
        name = getattr(self.work, "__qualname__", None) or repr(self.work)
        return f"the work function {name} (a {_wire.type_name(self.work)})"
