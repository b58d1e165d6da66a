"""A command agent's text in and out: its argv from the brief, its output cut into lines
(`Output`), and its `Finished` from how the program ended. No I/O here: the supervisor's
reader (`actors.backends.command`) and a worker's (`actors.backends.command_work`) run the
program, and both say what it did with these, in the same words.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

from actors.backends.base import ChildSpec
from actors.models import AttemptOutcome
from actors.osproc import describe_exit, prepare_program
from actors.protocol import Finished

__all__ = [
    "BRIEF_TEXT_PLACEHOLDERS",
    "PLACEHOLDER",
    "PLACEHOLDERS",
    "STDERR_TAIL",
    "UNSTARTED",
    "Output",
    "command_argv",
    "command_finished",
    "read_chunk",
    "start_error",
    "start_program",
]

PLACEHOLDER = re.compile(r"\{(\w+)\}")
# What `{name}` a command may hold, in the order `command_argv` fills them.
PLACEHOLDERS = (
    "agent", "scope", "inputs", "expected_output", "constraints", "partial_ok", "mode",
    "session", "attempt", "attempt_id", "delegation_id", "depth", "framing", "python",
)
# The ones whose text comes from a brief, so from whoever wrote it (an agent, a user).
BRIEF_TEXT_PLACEHOLDERS = frozenset({"scope", "inputs", "expected_output", "constraints",
                                     "session"})


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str, ensure_ascii=False)


_PYTHON_NAMES = ("python", "python3")


def command_argv(spec: ChildSpec, inputs_path: str | None = None) -> list[str]:
    """`spec.command` with its placeholders replaced, each within its own argument.

    `{inputs}` is the inputs as JSON (`inputs_via: argv`), or `inputs_path` (`file`);
    with `stdin` it is refused. Raises `ValueError` naming an unknown placeholder and
    the known ones.
    """
    assert spec.command is not None
    brief = spec.brief
    values = {
        "agent": spec.agent,
        "scope": brief.scope,
        "inputs": _text(brief.inputs),
        "expected_output": _text(brief.expected_output),
        "constraints": _text(brief.constraints),
        "partial_ok": _text(brief.partial_ok),
        "mode": brief.mode,
        "session": _text(spec.session_key),
        "attempt": str(spec.attempt),
        "attempt_id": spec.attempt_id,
        "delegation_id": spec.delegation_id,
        "depth": str(spec.depth),
        "framing": spec.framing,
        "python": sys.executable,
    }

    if spec.inputs_via == "file":
        values["inputs"] = inputs_path or ""

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "inputs" and spec.inputs_via == "stdin":
            raise ValueError(
                f"{{inputs}} in the command of agent {spec.agent!r}, whose inputs_via is stdin: "
                "the inputs arrive as the first line of standard input; remove {inputs}"
            )
        if name not in values:
            raise ValueError(
                f"unknown placeholder {{{name}}} in command {list(spec.command or ())!r} "
                f"of agent {spec.agent!r}; known: {', '.join('{' + k + '}' for k in values)}"
            )
        return values[name]

    argv = [PLACEHOLDER.sub(substitute, arg) for arg in spec.command]
    if argv and argv[0] in _PYTHON_NAMES:
        argv[0] = sys.executable  # "python" means the interpreter Zeus runs on, venv and all
    return argv


STDERR_TAIL = 4000  # characters of standard error kept for the error message
# The error of an attempt stopped before its program started.
UNSTARTED = "stopped before its program started"


def start_error(agent: str, exc: BaseException) -> str:
    """The error of an attempt whose program could not be started (its `error_type` is the
    exception's type name)."""
    return f"command agent {agent!r} could not start: {type(exc).__name__}: {exc}"


class Output:
    """What a program wrote so far: its whole standard output (`out`), the line it has not
    ended yet, and the tail of its standard error (`err`). Used by one thread at a time."""

    __slots__ = ("_line", "err", "out")

    def __init__(self) -> None:
        self.out: list[bytes] = []
        self._line = b""
        self.err = bytearray()

    def stdout(self, chunk: bytes) -> list[str]:
        """Take a chunk of standard output (b"" at its end): the lines it ends, each without
        its newline (and the last one at the end, if it had none)."""
        self.out.append(chunk)
        lines = (self._line + chunk).split(b"\n")
        self._line = lines.pop()
        if not chunk and self._line:  # the last line had no newline
            lines.append(self._line)
            self._line = b""
        return [line.rstrip(b"\r").decode("utf-8", errors="replace") for line in lines]

    def stderr(self, chunk: bytes) -> int:
        """Take a chunk of standard error: how many lines it ends (each counts as progress)."""
        self.err += chunk
        del self.err[: max(0, len(self.err) - 4 * STDERR_TAIL)]
        return chunk.count(b"\n")


def command_finished(
    attempt_id: str,
    program: str,
    *,
    pid: int | None,
    returncode: int | None,
    exited_t: float,
    kill_t: float | None,
    cancel_t: float | None,
    sigkill_sent: bool,
    progress: int,
    out: list[bytes],
    err: bytes | bytearray,
) -> Finished:
    """The `Finished` of a program that ended with `returncode` at `exited_t`, in this order:
    killed (`kill_t`: by the ladder's SIGTERM, or its SIGKILL if `sigkill_sent`); exit 0
    (completed, its standard output `out` the value); stopped after a cancel (`cancel_t`);
    else a crash (death by a signal) or an error, with the tail of its standard error `err`.
    """
    if kill_t is not None:
        return Finished(
            attempt_id,
            AttemptOutcome.cancelled,
            pid=pid,
            killed="kill" if sigkill_sent else "terminate",
            kill_latency_s=exited_t - kill_t,
            progress=progress,
            exit_code=returncode,
        )
    if returncode == 0:
        value = b"".join(out).decode("utf-8", errors="replace")
        return Finished(
            attempt_id,
            AttemptOutcome.completed,
            value=value,
            pid=pid,
            progress=progress,
            exit_code=0,
        )
    tail = err.decode("utf-8", errors="replace")[-STDERR_TAIL:].strip()
    what = describe_exit(returncode, f"command {program!r}")
    error = f"{what}: {tail}" if tail else f"{what} (nothing on standard error)"
    if cancel_t is not None:
        return Finished(
            attempt_id,
            AttemptOutcome.cancelled,
            error=error,
            pid=pid,
            killed="cooperative",
            kill_latency_s=exited_t - cancel_t,
            progress=progress,
            exit_code=returncode,
        )
    crashed = returncode is not None and returncode < 0
    return Finished(
        attempt_id,
        AttemptOutcome.crash if crashed else AttemptOutcome.error,
        error=error,
        error_type="CommandFailed",
        pid=pid,
        progress=progress,
        exit_code=returncode,
    )


def start_program(argv: list[str], env: dict[str, str] | None) -> subprocess.Popen[bytes]:
    """Start a command's program: in a session of its own, SIGINT at its default and a
    subreaper (`actors.osproc.prepare_program`), with its three pipes (standard input:
    the inputs line, then the owner's messages). Raises what `Popen` raises."""
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=prepare_program,
        env=env,
    )


def read_chunk(fd: int, size: int) -> bytes | None:
    """One chunk from a program's non-blocking pipe: b"" at its end (or once it broke),
    None when nothing is ready; the caller closes it at its end."""
    try:
        return os.read(fd, size)
    except BlockingIOError:
        return None
    except OSError:
        return b""
