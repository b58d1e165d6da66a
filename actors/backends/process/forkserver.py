"""Starting worker processes from a fork server, and reading how they ended.

The supervisor process runs threads (pykka actors, the timer service, the
process backend's hub), and fork() from a threaded process copies whatever
locks other threads hold at that instant: a child can deadlock on its first
malloc, import or log call. spawn is safe but boots a fresh interpreter per
child (about 80 ms here). forkserver forks each child from a small
single-threaded server process, started once, that has already imported the
child's entry module (`actors.backends.process.worker`, preloaded): a child starts in
a few ms with what it needs in memory.

`start_worker` runs in the backend's spawner thread, `ensure_ready` in the
host's thread; `exit_code` and `close_process` in the hub thread.

A worker started here is `Forked` (how the table learns it ended and reads its exit
code) with its `Pipes`; one picked up after its supervisor died is not this
process's child (`actors.backends.process.reattach`).
"""

from __future__ import annotations

import io
import os
import select
import threading
from typing import Any

import multiprocess
from multiprocess import forkserver, popen_forkserver, spawn, util

from actors import wire as _wire
from actors.backends.process import worker as _worker
from actors.osproc import describe_exit, process_start_time

__all__ = [
    "Forked",
    "Pipes",
    "close_process",
    "ensure_ready",
    "exit_code",
    "sentinel_ready",
    "start_worker",
]

_START_METHOD = "forkserver"
_CTX = multiprocess.get_context(_START_METHOD)

# `Process.start()` polls every live child of this module (its `_cleanup`), and
# reading a fork-server child's exit code consumes bytes from its sentinel:
# both go under this lock so two threads never read one sentinel.
_MP_LOCK = threading.Lock()
_preload_set = False


def _prepare_fork_server() -> None:
    """Ask for the preload before the fork server first starts. Called with `_MP_LOCK` held.

    Not at import: importing `actors` leaves multiprocess's global settings alone.
    If something else in the host started the fork server first, the preload is
    not applied and every child imports `actors` itself (~0.4 s each here).
    """
    global _preload_set
    if not _preload_set:
        _CTX.set_forkserver_preload(["actors.backends.process.worker"])
        _preload_set = True


class _Popen(popen_forkserver.Popen):  # type: ignore[misc]
    """The fork server's Popen, minus re-running the host's `__main__` in every child.

    By default each child re-imports the main module (as `__mp_main__`), which
    costs what the host imports (pytest alone: ~275 ms per child here) and runs
    a host script without a `__main__` guard again. Work functions are sent by
    value with dill when they live in `__main__`, so the child does not need it.
    This is `popen_forkserver.Popen._launch` with two keys dropped.
    """

    def _launch(self, process_obj: Any) -> None:
        prep_data = spawn.get_preparation_data(process_obj._name)
        prep_data.pop("init_main_from_path", None)
        prep_data.pop("init_main_from_name", None)
        buf = io.BytesIO()
        popen_forkserver.set_spawning_popen(self)
        try:
            popen_forkserver.reduction.dump(prep_data, buf)
            popen_forkserver.reduction.dump(process_obj, buf)
        finally:
            popen_forkserver.set_spawning_popen(None)
        self.sentinel, w = forkserver.connect_to_new_process(self._fds)
        _parent_w = os.dup(w)
        self.finalizer = util.Finalize(self, util.close_fds, (_parent_w, self.sentinel))
        with open(w, "wb", closefd=True) as f:
            f.write(buf.getbuffer())
        self.pid = forkserver.read_signed(self.sentinel)


class _WorkerProcess(_CTX.Process):  # type: ignore[misc,name-defined]
    @staticmethod
    def _Popen(process_obj: Any) -> _Popen:
        return _Popen(process_obj)


def ensure_ready() -> None:
    """Start the fork server and return once it can fork workers (it has imported `actors`):
    one child that does nothing is forked and reaped."""
    with _MP_LOCK:
        _prepare_fork_server()
        forkserver.ensure_running()
        probe = _WorkerProcess(target=_worker.ready, name="zeus-ready", daemon=False)
        probe.start()
    probe.join()


class Pipes:
    """The supervisor's ends of a new worker's three pipes (Connections; only their fds
    are used): `conn` what the worker sends (non-blocking, read with `reader`), `jobs`
    jobs and stop, `control` cancels, the owner's messages and delegation replies."""

    __slots__ = ("conn", "control", "jobs", "reader")

    def __init__(self, conn: Any, jobs: Any, control: Any) -> None:
        self.conn = conn
        self.jobs = jobs
        self.control = control
        self.reader = _wire.FrameReader(conn.fileno())


class Forked:
    """A worker started from the fork server: its sentinel fires once it was reaped, and
    its exit code is read from it (`exit_code`)."""

    __slots__ = ("pid", "process", "sentinel", "start_time")

    def __init__(self, process: Any) -> None:
        self.process = process
        self.pid: int = process.pid
        self.sentinel: int = process.sentinel
        self.start_time = process_start_time(self.pid)

    def ended(self) -> bool:
        return sentinel_ready(self.sentinel)

    def exit_code(self) -> int | None:
        return exit_code(self.process)

    def release(self) -> None:
        close_process(self.process)

    @staticmethod
    def describe(code: int | None) -> str:
        return describe_exit(code)


def start_worker(agent: str) -> tuple[Any, Pipes]:
    """Fork a worker process for `agent` (`actors.backends.process.worker.main`) from the fork
    server: its `Process` and the supervisor's ends of its pipes."""
    jobs_in, to_jobs = _CTX.Pipe(duplex=False)
    control_in, to_control = _CTX.Pipe(duplex=False)
    from_child, child_out = _CTX.Pipe(duplex=False)
    process = _WorkerProcess(
        target=_worker.main,
        args=(jobs_in, control_in, child_out),
        name=f"zeus-{agent}",
        daemon=False,
    )
    try:
        with _MP_LOCK:
            _prepare_fork_server()
            process.start()
    except BaseException:
        for end in (from_child, to_jobs, to_control):
            end.close()
        raise
    finally:
        for end in (jobs_in, control_in, child_out):
            end.close()
    os.set_blocking(from_child.fileno(), False)  # the hub reads what is there, never waits
    return process, Pipes(from_child, to_jobs, to_control)


def sentinel_ready(fd: int) -> bool:
    """Whether `fd` (a sentinel) is readable now: for a fork-server child, it was reaped."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


def exit_code(process: Any) -> int | None:
    """The exit code of a reaped worker (read from its sentinel, under the lock)."""
    with _MP_LOCK:
        code: int | None = process.exitcode
    return code


def close_process(process: Any) -> None:
    """Release a reaped worker's `Process` (its sentinel fd)."""
    with _MP_LOCK:
        process.close()
