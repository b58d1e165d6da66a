"""The process backend's worker table: its worker processes (`WorkerRecord`), the warm
pool, its command agents, and the lock that guards them and the attempts bound to them.

`WorkerTable` owns that state and every step that changes it under its lock:
binding an attempt to a worker, a cancel or kill of an attempt (the `AttemptStops`
a `ProcessChild` is given), an attempt's end and a worker's reaping (the
handlers of `actors.backends.process.worker_watch` ask, and act on what it returns),
retiring an idle worker. It calls nothing above it; steps that must run in the
hub thread (the kill ladder, a retired worker's deadline) go to the hub.

A worker is one of two kinds, told apart by what its record holds, not by probing
it: its `Endpoint` (how the hub learns it ended and reads its exit: a fork-server
child's sentinel, or a reattached worker's pidfd) and its `Channel` (three pipes,
or one socket).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from actors import wire as _wire
from actors.backends import frames
from actors.backends.command.child import CommandChild
from actors.backends.hub import Hub
from actors.backends.ladder import KillLadder
from actors.backends.pool import WarmPool
from actors.backends.process.child import ProcessChild
from actors.protocol import Finished

__all__ = ["Channel", "Endpoint", "WorkerRecord", "WorkerTable"]


class Endpoint(Protocol):
    """How the hub learns that a worker process ended, and reads how
    (`forkserver.Forked`, `reattach.Adopted`)."""

    pid: int
    start_time: float | None  # as `osproc.process_start_time`
    sentinel: int  # readable once it ended

    def ended(self) -> bool:
        """Whether the sentinel says it ended (it may wake the hub early)."""

    def exit_code(self) -> int | None:
        """Once it ended: its exit code, if this process can read it."""

    def release(self) -> None:
        """Once it ended: close the sentinel."""

    def describe(self, code: int | None) -> str:
        """How it ended, for a crash's error ("child process died of SIGSEGV ...")."""


class Channel(Protocol):
    """The supervisor's ends of what a worker reads and writes (`forkserver.Pipes`,
    `reattach.SocketPipes`): only their fds are used; `conn` is watched by the hub."""

    conn: Any
    jobs: Any
    control: Any
    reader: _wire.FrameReader


class WorkerRecord:
    """The supervisor's record of one worker process.

    Fields below `send_lock` are guarded by the table's lock. Invariant:
    `attempt` is set exactly while the worker runs an attempt; an idle worker is
    in the pool; `dead` once its sentinel fired (it was reaped).
    """

    def __init__(
        self, agent: str, end: Endpoint, pipes: Channel, hub: Hub, lock: threading.Lock
    ) -> None:
        self.agent = agent
        self.end = end
        # The Connections own the pipes' fds; only the fds are used (see `_wire.write_frame`).
        self.conn = pipes.conn  # what the worker sends (read here, by the hub; non-blocking)
        self.jobs = pipes.jobs  # jobs and stop, read by the worker's main thread
        self.control = pipes.control  # cancels and replies, read by its receiver thread
        self.reader = pipes.reader
        self.jobs_fd: int = self.jobs.fileno()
        self.control_fd: int = self.control.fileno()
        self.closed = False  # its pipes (under `send_lock`)
        self.pid: int = end.pid
        self.sentinel: int = end.sentinel
        self.start_time = end.start_time
        # How it is stopped, with what runs below it (`reaped` and `sigkill_sent` under
        # the table's lock).
        self.ladder = KillLadder(self.pid, hub, lock)
        self.send_lock = threading.Lock()  # one writer; the pipes close under it
        self.attempt: ProcessChild | None = None
        self.session_key: str | None = None
        self.retiring = False  # told to stop, or being killed: never takes another attempt
        # Tokens of the work functions sent to it in full (it keeps them): touched
        # only by the start() that bound an attempt to it, one attempt at a time.
        self.works: set[int] = set()

    @property
    def dead(self) -> bool:
        """Its sentinel fired: it was reaped (the hub thread sets `ladder.reaped`)."""
        return self.ladder.reaped

    def work_part(self, token: int | None, work: bytes, kept: int) -> bytes:
        """The work function's part of a `Run` frame: its token, and its bytes unless the
        worker has them. Beyond `kept` functions the worker is told to forget them all
        (`flush`) and they are sent again as needed."""
        flush = False
        if token is None:
            token = 0
        elif token in self.works:
            work = b""
        else:
            if len(self.works) >= kept:
                self.works.clear()
                flush = True
            self.works.add(token)
        return frames.work_part(flush, token, work)

    def post(self, data: bytes, *, job: bool = False) -> bool:
        """Send a frame to the worker (a job or stop: `job`); False when it is gone."""
        with self.send_lock:
            if self.closed:
                return False
            try:
                _wire.write_frame(self.jobs_fd if job else self.control_fd, data)
            except OSError:
                return False
            return True

    # -- its state's changes: the table makes them, under its lock --------------------
    def bind(self, child: ProcessChild) -> None:
        """It runs `child` from now on, and holds its session."""
        self.attempt, self.session_key = child, child.spec.session_key

    def unbind(self) -> ProcessChild | None:
        """Its attempt ended or never reached it: it runs nothing. Returns what it ran."""
        child, self.attempt = self.attempt, None
        return child

    def retires(self) -> None:
        """It never takes another attempt (told to stop, or being killed)."""
        self.retiring = True

    def was_reaped(self) -> ProcessChild | None:
        """Its sentinel fired: it is dead. Returns the attempt it ran, if any."""
        self.ladder.was_reaped()
        return self.unbind()

    def close(self) -> None:
        """Close its pipes (the hub, once it was reaped)."""
        self.conn.close()
        with self.send_lock:
            self.closed = True
            self.jobs.close()
            self.control.close()


class WorkerTable:
    """The backend's workers and commands, and the attempts bound to its workers.

    Every method may be called from any thread (Zeus's, the spawner's, the hub's);
    each takes the lock itself and never holds it while it writes to a pipe.
    """

    def __init__(self, hub: Hub, *, session_max: int, retire_s: float) -> None:
        self.lock = threading.Lock()
        self._ended = threading.Condition(self.lock)  # a worker or command went away
        self._hub = hub
        self._session_max = session_max
        self._retire_s = retire_s
        self._pool: WarmPool[WorkerRecord] = WarmPool()
        self._workers: set[WorkerRecord] = set()
        self._commands: set[CommandChild] = set()
        self.closed = False  # written under the lock; read without it where a race is harmless

    def workers(self) -> list[WorkerRecord]:
        with self.lock:
            return list(self._workers)

    # -- starting attempts (Zeus's thread, the spawner thread) -----------------------
    def bind_warm(self, child: ProcessChild) -> WorkerRecord | None:
        """Bind `child` to an idle worker of its agent and session, if there is one.

        One that died while idle may come out: its sentinel is not looked at here
        (a system call, hence a hand-over of the GIL to the hub thread, on every
        attempt); posting the job to it fails instead, and `unbind` lets the
        caller take another.
        """
        spec = child.spec
        with self.lock:
            if self.closed:
                return None
            while (worker := self._pool.take(spec.agent, spec.session_key)) is not None:
                if not worker.dead and not worker.retiring:
                    self._bind(worker, child)
                    return worker
        return None

    def unbind(self, worker: WorkerRecord, child: ProcessChild) -> bool:
        """The job never reached `worker` (it died while idle): whether the attempt may
        go to another one (not if it was stopped meanwhile: its worker's death ends it)."""
        with self.lock:
            if child.finished or child.stopped:
                return False
            worker.retires()
            worker.unbind()
            child.bound_to(None)
            return True

    def end_unstarted(self, child: ProcessChild) -> bool:
        """Before a worker is started for `child`: True (and it is finished) if it was
        stopped first, or the backend closed."""
        with self.lock:
            stopped = child.stopped or self.closed
            if stopped:
                child.ends()
        return stopped

    def add_bound(self, worker: WorkerRecord, child: ProcessChild) -> tuple[bool, bool, bool]:
        """A new worker started for `child`: it joins the table, bound to it. Returns
        (closed, killed, cancelled): what came meanwhile, for the caller to carry out."""
        with self.lock:
            self._workers.add(worker)
            self._bind(worker, child)
            killed = child.kill_t is not None
            if killed:
                worker.retires()
            return self.closed, killed, child.cancel_t is not None

    def add_idle(self, worker: WorkerRecord) -> bool:
        """A reattached worker that runs nothing joins the table and the pool, under its
        agent and session (evicting none: each holds a session); False when closed."""
        with self.lock:
            if self.closed:
                return False
            self._workers.add(worker)
            idle = len(self._pool.idle(worker.agent))
            self._pool.put(worker.agent, worker, worker.session_key, idle + 1)
            return True

    def _bind(self, worker: WorkerRecord, child: ProcessChild) -> None:
        """Called with the lock held."""
        worker.bind(child)
        child.bound_to(worker)
        for frame in child.early_mail:  # the worker keeps mail that overtakes its job
            worker.post(frame)
        child.early_mail.clear()

    # -- the `AttemptStops` of each `ProcessChild` (Zeus's thread) ---------------------
    def cancel(self, child: ProcessChild) -> None:
        with self.lock:
            worker = child.worker
            if not child.asks_cancel(time.monotonic()):  # still starting: the spawner
                return  # carries it out
        if worker is not None:
            worker.post(frames.cancel_frame(child.attempt_id, child.stop_cause))

    def kill(self, child: ProcessChild) -> None:
        with self.lock:
            worker = child.worker
            if child.finished or child.kill_t is not None:
                return
            if worker is None:
                child.asks_kill(time.monotonic())  # still starting: the spawner carries it out
                return
            if worker.dead:
                return
            child.asks_kill(time.monotonic())
            worker.retires()
        term_s = child.spec.term_s
        self._in_hub(lambda: worker.ladder.terminate(term_s))

    def mail(self, child: ProcessChild, frame: bytes) -> None:
        with self.lock:
            worker = child.worker
            if worker is None and not child.finished:  # its process is still being started
                child.early_mail.append(frame)
                return
        if worker is not None and not child.finished:
            worker.post(frame)

    def _in_hub(self, step: Callable[[], None]) -> None:
        """Run `step` in the hub thread: now if this is it, else as soon as it wakes."""
        if self._hub.in_hub_thread:
            step()
        else:
            self._hub.call_later(0.0, step)

    # -- ends (the hub thread) ---------------------------------------------------------
    def end_attempt(
        self, worker: WorkerRecord, child: ProcessChild, cancelled: bool = False
    ) -> tuple[bool, float | None, list[WorkerRecord]]:
        """The attempt reported its `Finished`: unbind it, and put its worker back in the
        pool or retire it (`cancelled`: it ended cancelled, asked or not, e.g. by its
        worker as its host's lease ran out). Returns (ended, when it was cancelled, workers
        to retire); not ended when it is no longer the worker's or is being killed (its
        `Finished` then follows the reaping)."""
        with self.lock:
            if child.finished or worker.attempt is not child or child.kill_t is not None:
                return False, None, []
            child.ends()
            worker.unbind()
            cancel_t = child.cancel_t
            if cancel_t is None and not cancelled and not self.closed and not worker.retiring:
                spec = child.spec
                limit = self._session_max if spec.session_max is None else spec.session_max
                evicted = self._pool.put(worker.agent, worker, worker.session_key, limit)
            else:
                evicted = [worker]
        return True, cancel_t, evicted

    def abandon(self, worker: WorkerRecord, child: ProcessChild, error: str) -> bool:
        """What the worker sends can no longer be read: True if this is the first such
        error of a running attempt, which is then being killed (the caller escalates)."""
        with self.lock:
            if not child.unreadable(error):
                return False
            if child.finished or worker.dead or worker.attempt is not child:
                return False
            worker.retires()
            child.asks_kill(time.monotonic())
            return True

    def reaped(
        self, worker: WorkerRecord, ending: Callable[[ProcessChild], Finished]
    ) -> tuple[ProcessChild | None, Finished | None]:
        """The worker was reaped: it leaves the pool, its attempt ends (`ending` makes its
        `Finished`, with the lock held, unless it had one)."""
        finished = None
        with self.lock:
            child = worker.was_reaped()
            self._pool.discard(worker.agent, worker)
            if child is not None and child.ends():
                finished = ending(child)
        return child, finished

    def remove(self, worker: WorkerRecord) -> None:
        """The reaped worker's pipes are closed: it leaves the table."""
        with self.lock:
            self._workers.discard(worker)
            self._ended.notify_all()

    def retire(self, worker: WorkerRecord) -> None:
        """Tell an idle worker to exit; SIGKILL after `retire_s` if it has not."""
        with self.lock:
            if worker.dead:
                return
            worker.retires()
            self._pool.discard(worker.agent, worker)
        worker.post(frames.STOP_FRAME, job=True)
        self._hub.call_later(self._retire_s, worker.ladder.escalate)

    # -- commands ----------------------------------------------------------------------
    def add_command(self, command: CommandChild) -> bool:
        """False when the backend is closed (it then is not added)."""
        with self.lock:
            if not self.closed:
                self._commands.add(command)
            return not self.closed

    def command_ended(self, command: CommandChild) -> None:
        with self.lock:
            self._commands.discard(command)
            self._ended.notify_all()

    # -- closing -----------------------------------------------------------------------
    def close(self) -> bool:
        """Refuse new attempts from now on; False if it was closed already."""
        with self.lock:
            if self.closed:
                return False
            self.closed = True
            return True

    def running(self) -> tuple[list[WorkerRecord], list[CommandChild]]:
        with self.lock:
            return list(self._workers), list(self._commands)

    def wait_ended(self, timeout: float) -> tuple[bool, list[WorkerRecord]]:
        """Wait until every worker and command is gone, or `timeout`: whether they all
        are, and the workers left."""
        with self.lock:
            done = self._ended.wait_for(self._all_ended, timeout)
            return done, list(self._workers)

    def _all_ended(self) -> bool:
        return not self._workers and not self._commands
