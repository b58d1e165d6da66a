"""Command agents: an attempt that runs a program (`spec.command`) instead of a Python function.

The command is a tuple of arguments; `{scope}`, `{agent}`, `{inputs}` ... in
them are replaced by the brief's fields, each substitution staying inside its
own argument (no shell ever parses them). A command that starts with
`python` (or `python3`, or `{python}`) runs on the interpreter Zeus runs on,
so a command agent sees the same virtual environment. An agent CLI (`spec.invocation`)
runs with the argv it speaks (`actors.speaks.cli_argv`). The program runs in a process
group of its own (`start_new_session=True`). Its standard output is read as `spec.speaks`
says (`actors.speaks.StreamReader`): every line counts as progress; an event stream's
tool calls, spend and session are sent as the child's messages as they come. Each chunk
on standard error that ends lines counts as progress too (a `Heartbeat`). How it ended
is judged from its stream and its exit together (`command.io.command_finished`); a
program still alive `exit_grace_s` after its stream's terminal event is stopped by the
ladder, its result kept. A plain
command's standard input stays open: each message the owner sends (`handle.send`) is
one JSON line on it. An agent CLI's is /dev/null: it reads no mail.

`cancel()` sends SIGINT to the group (what Ctrl-C would: the program's chance
to stop cleanly); `kill()` runs the same kill ladder as a process child
(`actors.backends.ladder`): SIGTERM to the group, `term_s`, SIGKILL.

The command is watched by the backend's `Hub`, the same reader thread as the
Python workers: its stdout and stderr pipes and a pidfd for its exit are
ordinary fds to wait on, so a command costs no thread, its exit is seen at once
(not by polling), and the kill ladder and the liveness beat are hub timers like
the workers'.

The hub is a thread of the host's process: a host that is frozen cannot stop such a
program, nor can the program tell it is orphaned. So on a shared store, where a host
holds a lease, commands run under workers instead (`ProcessBackend(
commands_in_workers=True)`, which `ProcessBackend.extend_lease` turns on), and a worker
stops its program by itself once the lease has run out (`actors.backends.process.worker_lease`).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Callable

from actors.backends.base import ChildHandle, ChildSpec, Send
from actors.backends.command.io import (
    BRIEF_TEXT_PLACEHOLDERS,
    PLACEHOLDER,
    PLACEHOLDERS,
    UNSTARTED,
    command_argv,
    command_finished,
    command_program,
    program_env,
    read_chunk,
    start_error,
    start_outcome,
    start_program,
)
from actors.backends.command.reports import MessageReports
from actors.backends.hub import Hub
from actors.backends.inputs import send_first_line, write_inputs_file
from actors.backends.ladder import KillLadder
from actors.context import Fence
from actors.mail import Mail
from actors.models import AttemptOutcome
from actors.osproc import process_start_time
from actors.protocol import Finished, Heartbeat, Spawned, Started
from actors.speaks import StreamReader

# The argv's names are also reached from here (`actors.backends.command.io` holds them).
__all__ = [
    "BRIEF_TEXT_PLACEHOLDERS",
    "PLACEHOLDER",
    "PLACEHOLDERS",
    "CommandChild",
    "command_argv",
]

_READ = 65536
# After the program exits, how long to wait for its pipes to close (a descendant
# that left the group may hold them open) before finishing anyway.
_PIPE_GRACE_S = 1.0
_POLL_S = 0.02  # exit polling where there is no pidfd (not Linux)


class CommandChild(ChildHandle):
    """A running command attempt. `cancel`/`kill` from Zeus's thread; the rest runs in the hub."""

    starts_later = True  # once its program was started (`Started`), not as it is queued

    def __init__(
        self, spec: ChildSpec, send: Send, hub: Hub, on_end: Callable[[CommandChild], None]
    ) -> None:
        if spec.command is None and spec.invocation is None:
            raise ValueError(f"agent {spec.agent!r} has no command")
        self.spec = spec
        self.attempt_id = spec.attempt_id
        self.pid_start_time: float | None = None
        self._send = send
        self._hub = hub
        self._on_end = on_end
        self._lock = threading.Lock()
        self._early_mail: list[bytes] = []  # sent before the program started (under the lock)
        self._stdin_ready = False  # its inputs line is written: messages may follow
        self._popen: subprocess.Popen[bytes] | None = None
        self._pidfd: int | None = None
        self._ladder: KillLadder | None = None  # set once started, before `_popen`
        self._reports = MessageReports(
            spec.attempt_id, spec.heartbeat_interval_s, self._emit,
            on_ended=self._start_exit_grace)
        self._reader = StreamReader(
            spec.speaks, self._reports, pricing=spec.pricing,
            prior=spec.invocation.prior if spec.invocation else None)
        self._open_pipes: set[int] = set()
        self._graced = False  # stopped by the ladder once its exit grace ran out
        # Guarded by _lock:
        self._finished = False
        self._returncode: int | None = None
        self._exited_t: float | None = None
        self._cancel_t: float | None = None
        self._kill_t: float | None = None
        self._inputs_file: str | None = None  # inputs_via: file, until the attempt ends

    # -- Zeus's thread ---------------------------------------------------------------
    def start(self) -> None:
        """Start the program (the backend's spawner thread); a failure to start is this
        attempt's `Finished` (outcome error). Stopped before it started: never started."""
        with self._lock:
            stopped = self._kill_t is not None or self._cancel_t is not None
        if stopped:
            self._end_unstarted(AttemptOutcome.cancelled, UNSTARTED)
            return
        via = self.spec.inputs_via
        try:
            if via == "file":
                self._inputs_file = write_inputs_file(self.spec.brief.inputs)
            env = program_env(None, Fence(self.spec.delegation_id, self.spec.epoch),
                              self._inputs_file, self.spec.env)
            argv = command_argv(self.spec, self._inputs_file)
            popen = start_program(argv, env, mail=self.spec.invocation is None)
            started_at = time.monotonic()
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            self._remove_inputs_file()
            self._end_unstarted(start_outcome(self.spec, exc), start_error(self.spec, exc),
                                type(exc).__name__)
            return
        self.pid_start_time = process_start_time(popen.pid)
        self._ladder = KillLadder(popen.pid, self._hub, self._lock)
        self._popen = popen
        assert popen.stdout is not None and popen.stderr is not None
        if popen.stdin is not None:  # an agent CLI's is /dev/null
            os.set_blocking(popen.stdin.fileno(), False)  # a full pipe never holds up Zeus
        if via == "stdin" and popen.stdin is not None:  # the inputs line, before any mail
            send_first_line(popen.stdin, self.spec.brief.inputs,
                            name=f"zeus-inputs-{self.attempt_id}")
        with self._lock:  # messages sent while it was being started
            for line in self._early_mail:
                self._write_line(line)
            self._early_mail.clear()
            self._stdin_ready = True
        out, err = popen.stdout.fileno(), popen.stderr.fileno()
        for fd in (out, err):
            os.set_blocking(fd, False)
        self._open_pipes = {out, err}
        self._hub.watch(out, self._on_stdout)
        self._hub.watch(err, self._on_stderr)
        if hasattr(os, "pidfd_open"):
            try:
                self._pidfd = os.pidfd_open(popen.pid)
            except OSError:  # an old kernel: poll instead
                self._pidfd = None
        if self._pidfd is not None:
            self._hub.watch(self._pidfd, self._on_pidfd)
        else:
            self._hub.call_later(_POLL_S, self._poll_exit)
        self._hub.call_later(self.spec.heartbeat_interval_s, self._beat)
        self._emit(Spawned(self.attempt_id, popen.pid, self.pid_start_time))
        self._emit(Started(self.attempt_id, started_at))  # its deadline counts from here
        with self._lock:
            killed, cancelled = self._kill_t is not None, self._cancel_t is not None
        if killed:  # asked while the program was starting
            self._hub.call_later(0.0, self._terminate)
        elif cancelled:
            self._hub.call_later(0.0, self._interrupt)

    def _remove_inputs_file(self) -> None:
        if self._inputs_file is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._inputs_file)
            self._inputs_file = None

    def fail(self, error: str, error_type: str | None = None) -> None:
        """End an attempt that never started: its `Finished` (outcome error)."""
        self._end_unstarted(AttemptOutcome.error, error, error_type)

    def _end_unstarted(
        self, outcome: AttemptOutcome, error: str, error_type: str | None = None
    ) -> None:
        with self._lock:
            self._finished = True
        self._emit(Finished(self.attempt_id, outcome, error=error, error_type=error_type))
        self._on_end(self)

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen is not None else None

    @property
    def killable(self) -> bool:
        return True  # before its program started too: it then never starts

    def cancel(self) -> None:
        """SIGINT to the program's group: the cooperative stop for a program."""
        with self._lock:
            if self._finished or self._exited_t is not None or self._cancel_t is not None:
                return
            self._cancel_t = time.monotonic()
        if self._popen is not None:
            self._hub.call_later(0.0, self._interrupt)

    def put_mail(self, mail: Mail) -> None:
        """Write the owner's message as one JSON line on the program's standard input.

        Dropped if the program has closed its input or does not read it fast enough
        to leave room in the pipe (64 KiB on Linux).
        """
        line = mail.encode("command").line
        assert line is not None
        with self._lock:
            if self._finished:
                return
            if not self._stdin_ready:  # still starting, or its inputs line not yet written
                self._early_mail.append(line)
                return
            self._write_line(line)

    def _write_line(self, line: bytes) -> None:
        """Called with the lock held."""
        assert self._popen is not None
        if self._popen.stdin is not None:
            with contextlib.suppress(OSError):  # BrokenPipe, or a full pipe (BlockingIO)
                os.write(self._popen.stdin.fileno(), line)

    def kill(self) -> None:
        """SIGTERM to the group now, SIGKILL after `term_s`; `Finished` follows the reaping."""
        with self._lock:
            if self._finished or self._exited_t is not None or self._kill_t is not None:
                return
            self._kill_t = time.monotonic()
            pid = self.pid
        if pid is None:
            return  # still starting: `start()` carries the kill out
        # In the hub thread, which also reaps: the program cannot be reaped (and its
        # pid reused) between the check and the signal, and /proc is walked there.
        self._hub.call_later(0.0, self._terminate)

    # -- the hub thread --------------------------------------------------------------
    def _interrupt(self) -> None:
        """SIGINT to the program's group (the ladder's cooperative step)."""
        if self._ladder is not None:
            self._ladder.interrupt()

    def _terminate(self) -> None:
        if self._ladder is not None:
            self._ladder.terminate(self.spec.term_s)

    def _beat(self) -> None:
        with self._lock:
            if self._finished or self._exited_t is not None:
                return
        self._emit(Heartbeat(self.attempt_id, self._reports.count, liveness=True))
        self._hub.call_later(self.spec.heartbeat_interval_s, self._beat)

    def _read(self, fd: int) -> bytes | None:
        """One chunk from `fd`; b"" at its end (then it is closed); None if nothing is ready."""
        chunk = read_chunk(fd, _READ)
        if chunk == b"":
            self._close_pipe(fd)
        return chunk

    def _on_stdout(self) -> None:
        assert self._popen is not None and self._popen.stdout is not None
        chunk = self._read(self._popen.stdout.fileno())
        if chunk is None:
            return
        self._reader.stdout(chunk)
        if not chunk:
            self._maybe_finish()

    def _start_exit_grace(self) -> None:
        """Its stream's terminal event came: it has `exit_grace_s` to exit."""
        self._hub.call_later(self.spec.exit_grace_s, self._exit_grace_over)

    def _exit_grace_over(self) -> None:
        """Its terminal event came `exit_grace_s` ago and it still runs: the ladder stops
        it, and its result is kept."""
        with self._lock:
            if self._finished or self._exited_t is not None or self._kill_t is not None:
                return
            self._graced = True
        self._terminate()

    def _on_stderr(self) -> None:
        assert self._popen is not None and self._popen.stderr is not None
        chunk = self._read(self._popen.stderr.fileno())
        if chunk is None:
            return
        if lines := self._reader.stderr(chunk):
            self._reports.count += lines
            self._emit(Heartbeat(self.attempt_id, self._reports.count))
        if not chunk:
            self._maybe_finish()

    def _on_pidfd(self) -> None:
        self._on_exit()

    def _poll_exit(self) -> None:
        if not self._on_exit():
            self._hub.call_later(_POLL_S, self._poll_exit)

    def _on_exit(self) -> bool:
        assert self._popen is not None
        returncode = self._popen.poll()
        if returncode is None:
            return False  # not yet (a spurious wake-up)
        if self._pidfd is not None:
            self._hub.unwatch(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        assert self._ladder is not None
        with self._lock:
            self._returncode = returncode
            self._exited_t = time.monotonic()
            self._ladder.was_reaped()
            killed = self._kill_t is not None or self._graced
        # What the program started dies with it, and what the ladder found below it.
        self._ladder.sweep()
        if killed:
            self._finish()
        else:
            self._maybe_finish()
            self._hub.call_later(_PIPE_GRACE_S, self._finish)
        return True

    def _close_pipe(self, fd: int) -> None:
        if fd in self._open_pipes:
            self._open_pipes.discard(fd)
            self._hub.unwatch(fd)

    def _maybe_finish(self) -> None:
        with self._lock:
            ready = self._exited_t is not None and not self._open_pipes
        if ready:
            self._finish()

    def _finish(self) -> None:
        with self._lock:
            if self._finished:
                return
            self._finished = True
            returncode = self._returncode
            exited_t = self._exited_t or time.monotonic()
            kill_t, cancel_t = self._kill_t, self._cancel_t
        popen = self._popen
        assert popen is not None and popen.stdout is not None and popen.stderr is not None
        for fd in list(self._open_pipes):
            self._close_pipe(fd)
        popen.stdout.close()
        popen.stderr.close()
        if popen.stdin is not None:
            with self._lock, contextlib.suppress(OSError):
                popen.stdin.close()
        self._remove_inputs_file()
        sigkill_sent = self._ladder is not None and self._ladder.sigkill_sent
        if (kill_t is not None or cancel_t is not None) and not self._graced:
            for item in self._reader.stopped_partials():  # stopped before it ended
                self._reports.partial(item)
        self._emit(
            command_finished(
                self.attempt_id,
                command_program(self.spec),
                pid=self.pid,
                returncode=returncode,
                exited_t=exited_t,
                kill_t=kill_t,
                cancel_t=cancel_t,
                sigkill_sent=sigkill_sent,
                progress=self._reports.count,
                reader=self._reader,
                graced=self._graced,
            )
        )
        self._on_end(self)

    def _emit(self, message: object) -> None:
        with contextlib.suppress(Exception):  # the receiver's failure must not stop the hub
            self._send(message)

