"""The process backend's records: `WorkerRecord` (one worker process) and `ProcessChild`
(Zeus's handle on one attempt in a worker).

Their fields are guarded by the backend's lock unless said otherwise; the
backend (`actors.backends.process`) and its hub thread (`actors.backends.worker_events`)
change them.
"""

from __future__ import annotations

import threading
import traceback
from typing import TYPE_CHECKING, Any

from actors import wire as _wire
from actors.backends.base import ChildSpec, Send
from actors.backends.forkserver import Pipes
from actors.backends.hub import Hub
from actors.backends.jobs import WORK_HEADER
from actors.backends.ladder import KillLadder
from actors.mail import Mail
from actors.osproc import process_start_time

if TYPE_CHECKING:
    from actors.backends.process import ProcessBackend

__all__ = ["ProcessChild", "WorkName", "WorkerRecord", "deliver"]



class WorkerRecord:
    """The supervisor's record of one worker process.

    Fields below `send_lock` are guarded by the backend's lock. Invariant:
    `attempt` is set exactly while the worker runs an attempt; an idle worker is
    in the pool; `dead` once its sentinel fired (it was reaped).
    """

    def __init__(
        self, agent: str, process: Any, pipes: Pipes, hub: Hub, lock: threading.Lock
    ) -> None:
        self.agent = agent
        self.process = process
        # The Connections own the pipes' fds; only the fds are used (see `_wire.write_frame`).
        self.conn = pipes.conn  # what the worker sends (read here, by the hub; non-blocking)
        self.jobs = pipes.jobs  # jobs and stop, read by the worker's main thread
        self.control = pipes.control  # cancels and replies, read by its receiver thread
        self.reader = _wire.FrameReader(self.conn.fileno())
        self.jobs_fd: int = self.jobs.fileno()
        self.control_fd: int = self.control.fileno()
        self.closed = False  # its pipes (under `send_lock`)
        self.pid: int = process.pid
        self.sentinel: int = process.sentinel
        self.start_time = process_start_time(self.pid)
        # How it is stopped, with what runs below it (`reaped` and `sigkill_sent` under
        # the backend's lock).
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

    def work_header(self, token: int | None, work: bytes, kept: int) -> bytes:
        """The work function's part of a job: its token, and its bytes unless the worker has them.

        Beyond `kept` functions the worker is told to forget them all (`flush`)
        and they are sent again as needed.
        """
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
        return WORK_HEADER.pack(flush, token, len(work)) + work

    def post(self, data: bytes, *, job: bool = False) -> bool:
        """Send to the worker (a job or stop: `job`); False when it is gone."""
        with self.send_lock:
            if self.closed:
                return False
            try:
                _wire.write_frame(self.jobs_fd if job else self.control_fd, data)
            except OSError:
                return False
            return True

    def close(self) -> None:
        """Close its pipes (the hub, once it was reaped)."""
        self.conn.close()
        with self.send_lock:
            self.closed = True
            self.jobs.close()
            self.control.close()


class ProcessChild:
    """Zeus's handle on one attempt in a worker process. `cancel`/`kill` return at once."""

    def __init__(self, backend: ProcessBackend, spec: ChildSpec, send: Send) -> None:
        self.spec = spec
        self.attempt_id = spec.attempt_id
        self.send = send
        self._backend = backend
        self.worker: WorkerRecord | None = None
        # Guarded by the backend's lock (`finished` is written by the hub thread only,
        # or before the attempt reaches a worker):
        self.finished = False
        self.cancel_t: float | None = None
        self.kill_t: float | None = None
        self.progress = 0
        self.read_error: str | None = None
        self.hard_stop: float | None = None  # the worker kills itself then (`_backstop`)
        self.early_mail: list[bytes] = []  # sent before its worker existed (under the lock)

    @property
    def pid(self) -> int | None:
        return self.worker.pid if self.worker is not None else None

    @property
    def pid_start_time(self) -> float | None:
        """The worker's start time (as psutil's `create_time()`): a pid plus this names it."""
        return self.worker.start_time if self.worker is not None else None

    @property
    def killable(self) -> bool:
        # Before its worker exists too (the spawner then never starts it); not once it
        # was refused without a process.
        return self.worker is not None or not self.finished

    def cancel(self) -> None:
        """Set the child Context's cancel event (a message down the pipe)."""
        self._backend._cancel(self)

    def deliver(self, mail: Mail) -> None:
        """Send the owner's message down the control pipe (`ctx.receive()` reads it)."""
        data = mail.encode("process").pickled
        assert data is not None
        frame = b"M" + self.attempt_id.encode() + b"\0" + data
        with self._backend._lock:
            worker = self.worker
            if worker is None and not self.finished:  # its process is still being started
                self.early_mail.append(frame)
                return
        if worker is not None and not self.finished:
            worker.post(frame)

    def kill(self) -> None:
        """SIGTERM to the worker's group now, SIGKILL after `term_s`; `Finished` after reaping."""
        self._backend._kill(self)


class WorkName:
    """Names a work function in an error, computed only if there is one."""

    def __init__(self, work: object) -> None:
        self.work = work

    def __str__(self) -> str:
        name = getattr(self.work, "__qualname__", None) or repr(self.work)
        return f"the work function {name} (a {_wire.type_name(self.work)})"


def deliver(child: ProcessChild, message: object) -> None:
    """Pass `message` to the attempt's owner; a failing receiver is printed, never raised."""
    try:
        child.send(message)
    except Exception:  # noqa: BLE001 - a failing receiver must not stop the hub
        traceback.print_exc()
