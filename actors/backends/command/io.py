"""A command agent's text in and out: its argv from the brief (or, for an agent CLI, from
what it speaks), and its `Finished` from how the program ended and what its output said
(`actors.speaks.StreamReader` reads it). No I/O here: the supervisor's
reader (`actors.backends.command.child`) and a worker's (`actors.backends.command.work`) run the
program, and both say what it did with these, in the same words.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from actors.backends.base import ChildSpec
from actors.backends.inputs import INPUTS_FILE_ENV
from actors.context import Fence
from actors.models import AttemptOutcome
from actors.osproc import describe_exit, prepare_program
from actors.protocol import Finished
from actors.speaks import CLI_PROGRAMS, StreamReader, cli_argv, prompt_text
from actors.speaks.reader import STDERR_TAIL

__all__ = [
    "BRIEF_TEXT_PLACEHOLDERS",
    "FENCE_ENV",
    "PLACEHOLDER",
    "PLACEHOLDERS",
    "STDERR_TAIL",
    "UNSTARTED",
    "agent_prompt",
    "command_argv",
    "command_finished",
    "command_program",
    "program_env",
    "read_chunk",
    "start_error",
    "start_outcome",
    "start_program",
]

PLACEHOLDER = re.compile(r"\{(\w+)\}")
# What `{name}` a command may hold, in the order `command_argv` fills them.
PLACEHOLDERS = (
    "agent", "scope", "inputs", "expected_output", "constraints", "partial_ok", "mode",
    "session", "attempt", "attempt_id", "delegation_id", "depth", "framing", "python",
    "prompt",
)
# The ones whose text comes from a brief, so from whoever wrote it (an agent, a user).
BRIEF_TEXT_PLACEHOLDERS = frozenset({"scope", "inputs", "expected_output", "constraints",
                                     "session", "prompt"})


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str, ensure_ascii=False)


_PYTHON_NAMES = ("python", "python3")


def command_argv(spec: ChildSpec, inputs_path: str | None = None) -> list[str]:
    """The program and arguments that run `spec`, each placeholder replaced within its own
    argument: `spec.command`, or for an agent CLI the argv its `invocation` speaks with
    (placeholders filled in its program and the user's `args:`, never in the prompt).

    `{inputs}` is the inputs as JSON (`inputs_via: argv`), or `inputs_path` (`file`);
    with `stdin` it is refused. `{prompt}` is the brief as an agent reads it
    (`actors.speaks.prompt_text`). Raises `ValueError` naming an unknown placeholder and
    the known ones.
    """
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
    shown = spec.command if spec.invocation is None else (
        *spec.invocation.program, *spec.invocation.args)

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "inputs" and spec.inputs_via == "stdin":
            raise ValueError(
                f"{{inputs}} in the command of agent {spec.agent!r}, whose inputs_via is stdin: "
                "the inputs arrive as the first line of standard input; remove {inputs}"
            )
        if name == "prompt":
            if "prompt" not in values:
                values["prompt"] = agent_prompt(spec)
            return values["prompt"]
        if name not in values:
            raise ValueError(
                f"unknown placeholder {{{name}}} in command {list(shown or ())!r} "
                f"of agent {spec.agent!r}; known: "
                f"{', '.join('{' + k + '}' for k in (*values, 'prompt') if k != 'prompt')}, "
                "{prompt}"
            )
        return values[name]

    def filled(args: tuple[str, ...]) -> list[str]:
        return [PLACEHOLDER.sub(substitute, arg) for arg in args]

    if spec.invocation is not None:
        invocation = spec.invocation
        argv = cli_argv(dataclasses.replace(
            invocation, program=tuple(filled(invocation.program)),
            args=tuple(filled(invocation.args))), agent_prompt(spec))
    else:
        assert spec.command is not None
        argv = filled(spec.command)
    if argv and argv[0] in _PYTHON_NAMES:
        argv[0] = sys.executable  # "python" means the interpreter Zeus runs on, venv and all
    return argv


def agent_prompt(spec: ChildSpec) -> str:
    """The prompt of `spec`'s attempt: its brief as an agent reads it."""
    return prompt_text(spec.brief, agent=spec.agent, framing=spec.framing,
                       previous_error=spec.previous_error,
                       previous_partials=spec.previous_partials,
                       continued=spec.continues_session, earlier_tools=spec.earlier_tools,
                       blocker=spec.previous_blocker, note=spec.note,
                       in_session=spec.invocation is not None
                       and spec.invocation.resume is not None)


def command_program(spec: ChildSpec) -> str:
    """What an attempt of `spec` runs, as its messages name it: an agent CLI by its own
    name, with the wrapper that runs it where `command:` gives one ("codex (run by npx)",
    "claude (run by bash)"); a plain command by its program, as its argv names it."""
    program = _program(spec)
    if spec.invocation is None:
        return program
    cli = CLI_PROGRAMS[spec.invocation.speaks]
    wrapper = os.path.basename(program)
    return cli if wrapper == cli else f"{cli} (run by {wrapper})"


def _program(spec: ChildSpec) -> str:
    """The program an attempt of `spec` starts, as its argv names it."""
    if spec.invocation is not None:
        return (spec.invocation.program or (CLI_PROGRAMS[spec.invocation.speaks],))[0]
    return (spec.command or ("?",))[0]


# The error of an attempt stopped before its program started.
UNSTARTED = "stopped before its program started"


def start_outcome(spec: ChildSpec, exc: BaseException) -> AttemptOutcome:
    """How an attempt whose program could not be started ended: an agent CLI that is not
    installed (or not runnable) cannot serve, `unavailable` (its fallback runs); anything
    else is an `error`."""
    if spec.invocation is not None and isinstance(exc, (FileNotFoundError, PermissionError)):
        return AttemptOutcome.unavailable
    return AttemptOutcome.error


def start_error(spec: ChildSpec, exc: BaseException) -> str:
    """The error of an attempt whose program could not be started (its `error_type` is the
    exception's type name); a program not found names it and the `command:` key."""
    agent = spec.agent
    name = command_program(spec)
    if isinstance(exc, FileNotFoundError) and exc.filename is not None:
        program = _program(spec)
        if spec.invocation is not None and not spec.invocation.program:
            how = (f"agent {agent!r} speaks {spec.invocation.speaks}, but its program "
                   f"{program!r} is not on PATH")
        elif spec.invocation is not None:  # its path, or a wrapper that runs it
            how = (f"the program {program!r} that runs {CLI_PROGRAMS[spec.invocation.speaks]} "
                   f"for agent {agent!r} was not found")
        else:
            how = f"the program {program!r} of agent {agent!r} was not found"
        return (f"command agent {agent!r} could not start: {how}: install it, or set "
                f"agents.{agent}.command to the program to run (a path, or a wrapper such "
                "as npx)")
    started = f" {name}" if spec.invocation is not None else ""
    return f"command agent {agent!r} could not start{started}: {type(exc).__name__}: {exc}"


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
    reader: StreamReader,
    graced: bool = False,
) -> Finished:
    """The `Finished` of a program that ended with `returncode` at `exited_t`, in this order:
    killed by Zeus (`kill_t`: by the ladder's SIGTERM, or its SIGKILL if `sigkill_sent`),
    completed all the same if its stream's result had come; how its stream says it ended
    (an agent CLI, a script: `StreamReader.verdict`, also after its exit grace ran out,
    `graced`); exit 0 (completed, its whole output the value); stopped after a cancel
    (`cancel_t`); else a crash (death by a signal) or an error, with what its standard
    error says failed. `program` names it as `command_program` does.
    """
    common: dict[str, Any] = {"pid": pid, "progress": progress, "exit_code": returncode,
                              "bad_lines": reader.bad_lines,
                              "usage_unknown": reader.usage_unknown}
    if kill_t is not None and not graced:
        value = reader.final_value() if reader.ended else None
        return Finished(
            attempt_id,
            AttemptOutcome.completed if value is not None else AttemptOutcome.cancelled,
            value=value,
            killed="kill" if sigkill_sent else "terminate",
            kill_latency_s=exited_t - kill_t,
            **common,
        )
    if reader.speaks in ("lines", "jsonl"):
        named = f"command {program!r}"
        what = describe_exit(returncode, named)
    else:  # an agent CLI, by its own name (`command_program`)
        named = program
        what = (f"{program} exited {returncode}" if returncode is not None and returncode > 0
                else describe_exit(returncode, program))
    verdict = reader.verdict(returncode, named, describe=what)
    if verdict is not None and (cancel_t is None or verdict.outcome is AttemptOutcome.completed):
        return Finished(attempt_id, verdict.outcome, value=verdict.value, error=verdict.error,
                        error_type=verdict.error_type, **common)
    if returncode == 0 and verdict is None:
        return Finished(attempt_id, AttemptOutcome.completed, value=reader.final_value(),
                        **common)
    tail = reader.stderr_tail
    error = f"{what}: {tail}" if tail else f"{what} (nothing on standard error)"
    if cancel_t is not None:
        return Finished(
            attempt_id,
            AttemptOutcome.cancelled,
            error=error,
            killed="cooperative",
            kill_latency_s=exited_t - cancel_t,
            **common,
        )
    crashed = returncode is not None and returncode < 0
    return Finished(
        attempt_id,
        AttemptOutcome.crash if crashed else AttemptOutcome.error,
        error=error,
        error_type="CommandFailed",
        **common,
    )


# What a command's program finds its delegation's fence in (`ctx.fence`): `<id>:<epoch>`.
FENCE_ENV = "ZEUS_FENCE"


_ENV_REFERENCE = re.compile(r"\$\{(\w+)\}")


def program_env(base: Mapping[str, str] | None, fence: Fence,
                inputs_file: str | None = None,
                added: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a command's program runs with: `base` (None: this process's), the
    agent's `env:` (`added`, each `${VAR}` in a value read from `base`, empty when unset),
    its fence in `ZEUS_FENCE`, and with `inputs_via: file` the inputs file in
    `ZEUS_INPUTS_FILE`."""
    host = os.environ if base is None else base
    env = dict(host)
    for name, value in (added or {}).items():
        env[name] = _ENV_REFERENCE.sub(lambda m: host.get(m.group(1), ""), value)
    env[FENCE_ENV] = str(fence)
    if inputs_file is not None:
        env[INPUTS_FILE_ENV] = inputs_file
    return env


def start_program(argv: list[str], env: dict[str, str] | None, *,
                  mail: bool) -> subprocess.Popen[bytes]:
    """Start a command's program: in a session of its own, SIGINT at its default and a
    subreaper (`actors.osproc.prepare_program`), its standard output and error piped.
    Its standard input is a pipe when it takes `mail` (the inputs line, then the owner's
    messages: a command that speaks lines or jsonl), else /dev/null: an agent CLI reads
    an open pipe to its end before it starts (Codex, OpenCode) or waits on it (Claude
    3 s, Gemini 0.5 s). Raises what `Popen` raises."""
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if mail else subprocess.DEVNULL,
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
