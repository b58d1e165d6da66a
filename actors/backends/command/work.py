"""Command agents run by a worker process: `CommandWork`, the work function that starts a
command agent's program inside a worker and reads its pipes there.

`ProcessBackend(commands_in_workers=True)` turns the attempt of a command agent
into a worker job running `CommandWork` (`as_worker_job`). The program is then
the worker's child, not the supervisor's: the worker holds its pipes, so the
program keeps its reader as long as its worker lives, and a worker is what may
outlive its supervisor (docs/design.md, "Isolation backends"). The program runs as
`actors.backends.command.child` says: the same argv (`command_argv`), inputs (stdin's
first line, or a 0600 file), a session of its own, SIGINT at its default action,
a subreaper; each stdout line a partial result (`ctx.partial`), stderr lines
progress (`ctx.heartbeat`); its `Finished` made by `command_finished`, so the
outcome, error text, `error_type` and exit code are those of a program the
supervisor starts itself. It reaches the worker as `run_work`'s `Ended`.

The stops, in the worker's main thread, which also reaps the program:

- the cooperative cancel (the ctx cancel event, `ctx.pass_cancel_on`): SIGINT to
  the program's group; what it writes while it stops is still reported;
- the kill ladder signals the worker and everything below it (the worker is a
  subreaper; `ProcessTree` walks `/proc` by parent, whatever the session). The
  worker holds SIGTERM while its program lives (passing it on to the program's
  group), then ends as the program ended: dead of the same signal, or with the
  same exit code. So a program that takes `term_s` to stop gets it, one that
  ignores SIGTERM gets the ladder's SIGKILL, and the kill's `killed` and
  `exit_code` are the program's;
- the liveness beat is the worker's own heartbeat thread's.

What differs from a program the supervisor starts (`CommandChild`), by design:

- the attempt's pid (`Spawned`, `handle.pid`, `Finished.pid`) is the worker's, and
  there is one even when the program could not be started; the program runs below;
- a warm worker of the agent may run the attempt (no new process but the program);
- a stderr chunk's heartbeat is sent at most once per `heartbeat_interval_s` (the
  Context's rule); progress still counts every line;
- messages for stdin wait in the worker and are written in order after the inputs
  line, by a thread that may block on a full pipe: none is dropped (the supervisor's
  reader drops one that finds the pipe full); a message that is `None` is not written;
- partial results past `MAX_PARTIALS_SENT` are counted, not sent, as for any worker;
- the worker's backstop (deadline + grace + term + margin) holds for the program too;
- when the program ends, everything left below the worker (what it double-forked or
  sent into a session of its own) is killed with its group, not only what a ladder
  walk had found.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from actors.backends.base import ChildSpec
from actors.backends.command.io import (
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
from actors.backends.command.reports import ContextReports
from actors.backends.inputs import (
    InputsVia,
    feed_stdin,
    inputs_json,
    write_inputs_file,
)
from actors.clock import SystemClock
from actors.context import Context
from actors.models import AttemptOutcome, Brief
from actors.osproc import exit_as, has_children, kill_below, signal_group
from actors.protocol import Finished
from actors.run import Ended
from actors.speaks import Invocation, Pricing, StreamReader

__all__ = ["CommandWork", "as_worker_job"]

_READ = 65536
# After the program exits, how long to wait for its pipes to close before finishing
# anyway (as `actors.backends.command.child`).
_PIPE_GRACE_S = 1.0
_POLL_S = 0.02  # exit polling where there is no pidfd (not Linux)
_CLOCK = SystemClock()  # what a ChildSpec rebuilt for `command_argv` carries; never started


@dataclasses.dataclass(frozen=True, slots=True)
class CommandWork:
    """The work function of a command attempt in a worker (picklable: what the spec says
    of the command; the brief and the rest come with the job)."""

    command: tuple[str, ...] | None
    inputs_via: InputsVia = "argv"
    session_key: str | None = None
    speaks: str = "lines"
    invocation: Invocation | None = None
    pricing: Pricing | None = None
    exit_grace_s: float = 10.0
    term_s: float = 0.5
    previous_error: str | None = None
    previous_partials: tuple[Any, ...] = ()
    # The host's environment at dispatch: the program runs with it (its PATH lookup
    # included), not with the one this worker was forked with long before.
    env: dict[str, str] | None = None
    added_env: Mapping[str, str] | None = None  # the agent's `env:`
    # What else an agent CLI's prompt says (`ChildSpec`'s fields of the same names).
    continues_session: bool = False
    earlier_tools: tuple[str, ...] = ()
    previous_blocker: str | None = None
    note: str | None = None

    @classmethod
    def of(cls, spec: ChildSpec) -> CommandWork:
        """Built in Zeus's thread as the attempt starts (the environment is read there)."""
        if spec.command is None and spec.invocation is None:
            raise ValueError(f"agent {spec.agent!r} has no command")
        return cls(spec.command, spec.inputs_via, spec.session_key, spec.speaks,
                   spec.invocation, spec.pricing, spec.exit_grace_s, spec.term_s,
                   spec.previous_error, spec.previous_partials, dict(os.environ),
                   dict(spec.env) if spec.env else None, spec.continues_session,
                   spec.earlier_tools, spec.previous_blocker, spec.note)

    def __call__(self, brief: Brief, ctx: Context) -> NoReturn:
        """Run the program to its end (the worker's main thread); raises `Ended`."""
        raise Ended(_Run(self, brief, ctx).run())


def as_worker_job(spec: ChildSpec) -> ChildSpec:
    """The attempt `spec` of a command agent as a worker job that runs its command."""
    return dataclasses.replace(spec, work=CommandWork.of(spec), command=None, invocation=None)


class _Run:
    """One run of a program. The worker's main thread runs it, but for `_on_cancel`
    (the thread that sets the cancel event) and the stdin thread (`feed_stdin`)."""

    def __init__(self, work: CommandWork, brief: Brief, ctx: Context) -> None:
        self._work = work
        self._brief = brief
        self._ctx = ctx
        # Guards `_closed`, `_cancel_t` and `_exited_t` (the cancelling thread reads them).
        self._lock = threading.Lock()
        self._closed = False  # the wake pipe is closed
        self._cancel_t: float | None = None
        self._wake_r, self._wake_w = os.pipe()
        for fd in (self._wake_r, self._wake_w):
            os.set_blocking(fd, False)
        self._terminated = False  # the worker got SIGTERM (the kill ladder)
        self._term_passed = False
        self._interrupted = False
        self._popen: subprocess.Popen[bytes] | None = None
        self._inputs_file: str | None = None
        self._reader = StreamReader(
            work.speaks, ContextReports(ctx, self.ended), pricing=work.pricing,
            prior=work.invocation.prior if work.invocation else None)
        self._ended_t: float | None = None  # the stream's terminal event came
        self._graced = False  # stopped once its exit grace ran out
        self._graced_kill_at: float | None = None
        self._selector = selectors.DefaultSelector()
        self._open_pipes: set[int] = set()
        self._pidfd: int | None = None
        self._returncode: int | None = None
        self._exited_t: float | None = None
        self._done = threading.Event()  # the stdin thread stops waiting for mail

    def run(self) -> Finished:
        forget = self._ctx.pass_cancel_on(self._on_cancel)
        restore = self._hold_sigterm()
        try:
            finished = self._start()
            if finished is None:
                self._watch()
            if self._terminated:  # the kill ladder: this worker ends as its program did
                for item in self._reader.stopped_partials():  # stopped before it ended
                    self._ctx.partial(item)
                self._cleanup()
                exit_as(self._returncode if self._popen is not None else -signal.SIGTERM)
            return finished or self._finished()
        finally:
            forget()
            self._cleanup()
            restore()

    # -- starting ------------------------------------------------------------------------
    def _start(self) -> Finished | None:
        """Start the program; the attempt's `Finished` if it was not started."""
        ctx = self._ctx
        if self._cancel_t is not None or self._terminated:
            return Finished(ctx.attempt_id, AttemptOutcome.cancelled, error=UNSTARTED)
        via = self._work.inputs_via
        try:
            if via == "file":
                self._inputs_file = write_inputs_file(self._brief.inputs)
            env = program_env(self._work.env, ctx.fence, self._inputs_file,
                              self._work.added_env)
            argv = command_argv(self._spec(), self._inputs_file)
            popen = start_program(argv, env, mail=self._work.invocation is None)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            return Finished(
                ctx.attempt_id,
                start_outcome(self._spec(), exc),
                error=start_error(self._spec(), exc),
                error_type=type(exc).__name__,
            )
        self._popen = popen
        assert popen.stdout is not None and popen.stderr is not None
        # The inputs line (inputs_via: stdin), then the owner's messages, written in order
        # by a thread of their own, which owns the pipe from here on and closes it (an
        # agent CLI's standard input is /dev/null: it reads no mail).
        first = (inputs_json(self._brief.inputs) + "\n").encode() if via == "stdin" else None
        if popen.stdin is not None:
            threading.Thread(
                target=feed_stdin, args=(popen.stdin, first, ctx.receive, self._done),
                name=f"zeus-stdin-{ctx.attempt_id}", daemon=True,
            ).start()  # fmt: skip
        for pipe, handler in ((popen.stdout, self._on_stdout), (popen.stderr, self._on_stderr)):
            fd = pipe.fileno()
            os.set_blocking(fd, False)
            self._open_pipes.add(fd)
            self._selector.register(fd, selectors.EVENT_READ, handler)
        self._selector.register(self._wake_r, selectors.EVENT_READ, self._on_wake)
        if hasattr(os, "pidfd_open"):
            with contextlib.suppress(OSError):  # an old kernel: poll instead
                self._pidfd = os.pidfd_open(popen.pid)
        if self._pidfd is not None:
            self._selector.register(self._pidfd, selectors.EVENT_READ, self._on_exit)
        return None

    def _spec(self) -> ChildSpec:
        """The attempt's spec as far as `command_argv` reads it."""
        ctx, work = self._ctx, self._work
        return ChildSpec(
            agent=ctx.agent, delegation_id=ctx.delegation_id, attempt=ctx.attempt,
            attempt_id=ctx.attempt_id, brief=self._brief, deadline=ctx.deadline, clock=_CLOCK,
            command=work.command, inputs_via=work.inputs_via, session_key=work.session_key,
            depth=ctx.depth, framing=ctx.framing, speaks=work.speaks,
            invocation=work.invocation, previous_error=work.previous_error,
            previous_partials=work.previous_partials, continues_session=work.continues_session,
            earlier_tools=work.earlier_tools, previous_blocker=work.previous_blocker,
            note=work.note,
        )  # fmt: skip

    # -- the stops -----------------------------------------------------------------------
    def _on_cancel(self) -> None:
        """The thread that sets the cancel event: note it and wake the main thread (not once
        the program has exited: a cancel then changes nothing, as for `CommandChild`)."""
        with self._lock:
            if self._closed or self._cancel_t is not None or self._exited_t is not None:
                return
            self._cancel_t = time.monotonic()
            self._wake()

    def _hold_sigterm(self) -> Callable[[], None]:
        """While the program runs, a SIGTERM to the worker is passed on to it (the main
        thread, between two steps of its own); returns what puts the old handler back."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None  # not in a worker's main thread: signals are not ours

        def on_sigterm(signum: int, frame: Any) -> None:
            self._terminated = True
            if not self._closed:  # closed only by this thread, which the handler interrupts
                self._wake()

        old = signal.signal(signal.SIGTERM, on_sigterm)

        def restore() -> None:
            signal.signal(signal.SIGTERM, old)

        return restore

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full: it is awake already
            os.write(self._wake_w, b"!")

    def _on_wake(self) -> None:
        with contextlib.suppress(OSError):
            os.read(self._wake_r, 512)

    def _pass_stops_on(self) -> None:
        """Send what was asked since the last look to the program's group, unless it was
        reaped (this thread reaps: its pid cannot be reused in between)."""
        assert self._popen is not None
        if self._returncode is not None:
            return
        if self._terminated and not self._term_passed:
            self._term_passed = True  # the ladder has signalled it too, if it had started
            signal_group(self._popen.pid, signal.SIGTERM)
        if self._cancel_t is not None and not self._interrupted:
            self._interrupted = True
            signal_group(self._popen.pid, signal.SIGINT)

    # -- reading -------------------------------------------------------------------------
    def _watch(self) -> None:
        """Read the program's pipes until it has exited and they closed (or the grace ran
        out, or the worker is being killed)."""
        while True:
            self._pass_stops_on()
            if self._pidfd is None and self._returncode is None:
                self._on_exit()
            exited = self._exited_t
            if exited is not None and (not self._open_pipes or self._terminated
                                       or self._graced):
                return
            timeout: float | None = None
            if exited is not None:
                timeout = exited + _PIPE_GRACE_S - time.monotonic()
                if timeout <= 0:
                    return
            elif self._ended_t is not None:
                timeout = self._exit_grace_step()
            elif self._pidfd is None:
                timeout = _POLL_S
            for key, _ in self._selector.select(timeout):
                key.data()

    def _read(self, fd: int) -> bytes | None:
        """One chunk from `fd`; b"" at its end (then it is closed); None if nothing is ready."""
        chunk = read_chunk(fd, _READ)
        if chunk == b"":
            self._open_pipes.discard(fd)
            self._selector.unregister(fd)
        return chunk

    def _on_stdout(self) -> None:
        assert self._popen is not None and self._popen.stdout is not None
        chunk = self._read(self._popen.stdout.fileno())
        if chunk is not None:
            self._reader.stdout(chunk)

    def _on_stderr(self) -> None:
        assert self._popen is not None and self._popen.stderr is not None
        chunk = self._read(self._popen.stderr.fileno())
        if chunk is not None:
            for _ in range(self._reader.stderr(chunk)):
                self._ctx.heartbeat()

    def ended(self) -> None:
        """The stream's terminal event came: its exit grace starts."""
        if self._ended_t is None:
            self._ended_t = time.monotonic()

    def _exit_grace_step(self) -> float | None:
        """A program alive past its exit grace is stopped by the ladder (SIGTERM to its
        group, `term_s`, SIGKILL), its result kept: the next step's signal if it is due,
        and how long until the one after (None: nothing left but to wait for its exit)."""
        assert self._popen is not None and self._ended_t is not None
        now = time.monotonic()
        work = self._work
        if not self._graced:
            due = self._ended_t + work.exit_grace_s
            if now < due:
                return due - now if self._pidfd is not None else min(_POLL_S, due - now)
            self._graced = True
            signal_group(self._popen.pid, signal.SIGTERM)
            self._graced_kill_at = now + work.term_s
        if self._graced_kill_at is not None:
            if now < self._graced_kill_at:
                left = self._graced_kill_at - now
                return left if self._pidfd is not None else min(_POLL_S, left)
            self._graced_kill_at = None
            signal_group(self._popen.pid, signal.SIGKILL)
        return None if self._pidfd is not None else _POLL_S

    def _on_exit(self) -> None:
        assert self._popen is not None
        returncode = self._popen.poll()
        if returncode is None:
            return  # not yet (a spurious wake-up)
        self._returncode = returncode
        with self._lock:
            self._exited_t = time.monotonic()
        if self._pidfd is not None:
            self._selector.unregister(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        # What the program started dies with it: its group, and whatever else is below
        # this worker (a subreaper: what the program left was adopted here).
        signal_group(self._popen.pid, signal.SIGKILL, or_process=False)
        if has_children():
            kill_below()

    # -- the end -------------------------------------------------------------------------
    def _finished(self) -> Finished:
        assert self._popen is not None and self._exited_t is not None
        ctx = self._ctx
        if self._cancel_t is not None and not self._graced:
            for item in self._reader.stopped_partials():  # stopped before it ended
                ctx.partial(item)
        finished = command_finished(
            ctx.attempt_id,
            command_program(self._spec()),
            pid=os.getpid(),
            returncode=self._returncode,
            exited_t=self._exited_t,
            kill_t=None,  # a kill ends this worker instead (`exit_as`)
            cancel_t=self._cancel_t,
            sigkill_sent=False,
            progress=ctx.progress,
            reader=self._reader,
            graced=self._graced,
        )
        if ctx.partials_dropped:
            finished = dataclasses.replace(finished, partials_dropped=ctx.partials_dropped)
        return finished

    def _cleanup(self) -> None:
        """Close what the run opened (again: a no-op) and reap what it left."""
        self._done.set()
        with self._lock:
            if self._closed:
                return
            self._closed = True
        os.close(self._wake_r)
        os.close(self._wake_w)
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        self._selector.close()
        popen = self._popen
        if popen is not None:
            if self._returncode is None:  # the run failed while it ran: it goes with it
                signal_group(popen.pid, signal.SIGKILL)
                kill_below()
                popen.wait()
            for pipe in (popen.stdout, popen.stderr):
                if pipe is not None:
                    pipe.close()
        if self._inputs_file is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._inputs_file)
            self._inputs_file = None
        has_children()  # reaps what it left that has died; one still dying, at the next end

