"""How a command agent's end reads as its `Finished` (`command_finished`), case by case."""

from __future__ import annotations

from typing import Any

import pytest

from actors.backends.base import ChildSpec
from actors.backends.command.io import STDERR_TAIL, command_finished, command_program, start_error
from actors.clock import SystemClock
from actors.models import AttemptOutcome, Brief
from actors.speaks import Invocation, StreamReader
from actors.speaks.stderr import what_failed
from tests._support import NullSink


def finished(**given: Any) -> Any:
    args: dict[str, Any] = {
        "pid": 7, "returncode": 0, "exited_t": 10.0, "kill_t": None, "cancel_t": None,
        "sigkill_sent": False, "progress": 3,
    }  # fmt: skip
    out, err = given.pop("out", [b"he", b"llo\n"]), given.pop("err", b"")
    reader = StreamReader("lines", NullSink())
    for chunk in [*out, b""]:
        reader.stdout(chunk)
    reader.stderr(err)
    args.update(given)
    return command_finished("a-1-a1", "tool", reader=reader, **args)


@pytest.mark.parametrize(
    ("given", "outcome", "killed", "latency"),
    [
        ({}, AttemptOutcome.completed, None, None),
        ({"kill_t": 9.0, "returncode": -15}, AttemptOutcome.cancelled, "terminate", 1.0),
        ({"kill_t": 9.5, "returncode": -9, "sigkill_sent": True}, AttemptOutcome.cancelled,
         "kill", 0.5),
        # killed wins over an exit 0 that raced it: the supervisor had decided
        ({"kill_t": 9.0, "returncode": 0}, AttemptOutcome.cancelled, "terminate", 1.0),
        ({"cancel_t": 8.0, "returncode": 130}, AttemptOutcome.cancelled, "cooperative", 2.0),
        ({"cancel_t": 8.0, "returncode": 0}, AttemptOutcome.completed, None, None),
        ({"returncode": -11}, AttemptOutcome.crash, None, None),
        ({"returncode": 2}, AttemptOutcome.error, None, None),
    ],
)
def test_the_outcome_follows_kill_then_exit_code_then_cancel(
    given: dict[str, Any], outcome: AttemptOutcome, killed: str | None, latency: float | None
) -> None:
    result = finished(**given)
    assert result.outcome is outcome
    assert result.killed == killed
    assert result.kill_latency_s == latency
    assert (result.pid, result.progress, result.exit_code) == (7, 3, given.get("returncode", 0))


def test_a_completed_command_returns_its_whole_standard_output() -> None:
    assert finished().value == "hello\n"


def test_a_failed_command_names_the_program_and_ends_with_its_standard_error_tail() -> None:
    err = b"x" * STDERR_TAIL + b"\nthe last words\n"
    result = finished(returncode=2, err=bytearray(err))
    assert result.error_type == "CommandFailed"
    assert result.error.startswith("command 'tool' exited with exit code 2: ")
    assert result.error.endswith("the last words")
    assert len(result.error) < STDERR_TAIL + 60


def test_a_failed_command_with_nothing_on_standard_error_says_so() -> None:
    result = finished(returncode=-11)
    assert result.error == (
        "command 'tool' died of SIGSEGV (exit code -11) (nothing on standard error)"
    )


# -- an agent CLI's end: named as the CLI, its stderr's failure, Gemini's exit codes ------


def cli_finished(speaks: str, program: str, returncode: int, err: bytes = b"",
                 out: tuple[bytes, ...] = ()) -> Any:
    reader = StreamReader(speaks, NullSink())
    for chunk in [*out, b""]:
        reader.stdout(chunk)
    reader.stderr(err)
    return command_finished("a-1-a1", program, reader=reader, pid=7, returncode=returncode,
                            exited_t=10.0, kill_t=None, cancel_t=None, sigkill_sent=False,
                            progress=1)


GEMINI_UNTRUSTED = (b"\x1b[31mGemini CLI is not running in a trusted directory. To proceed, "
                    b"either use `--skip-trust`, set the `GEMINI_CLI_TRUST_WORKSPACE=true` "
                    b"environment variable, or trust this directory in interactive mode.\x1b[0m\n")


def test_gemini_in_a_folder_it_does_not_trust_is_unavailable_and_says_the_fix() -> None:
    result = cli_finished("gemini", "gemini", 55, GEMINI_UNTRUSTED)
    assert result.outcome is AttemptOutcome.unavailable  # not a crash retried: its fallback
    assert result.error.startswith(
        "gemini exited 55: the folder is not trusted; pass `--skip-trust` in args:, or set "
        "GEMINI_CLI_TRUST_WORKSPACE=true (stderr: Gemini CLI is not running in a trusted")
    assert "\x1b" not in result.error


@pytest.mark.parametrize(("code", "meaning", "outcome"), [
    (41, "authentication failed", "unavailable"), (42, "bad input", "error"),
    (44, "sandbox error", "unavailable"), (52, "configuration error", "unavailable"),
    (53, "turn limit reached", "error"), (54, "tool execution failed", "error"),
])
def test_gemini_s_other_fatal_exits_say_what_they_mean(code: int, meaning: str,
                                                        outcome: str) -> None:
    # where it cannot serve here (its key, sandbox, settings) its fallback runs; the
    # others are the task's own
    result = cli_finished("gemini", "gemini", code, b"Invalid auth method selected.\n")
    assert result.outcome is AttemptOutcome(outcome)
    assert result.error.startswith(f"gemini exited {code}: {meaning}")
    assert result.error.endswith("(stderr: Invalid auth method selected.)")


def test_an_exit_a_cli_does_not_document_is_still_a_crash() -> None:
    for speaks, code in (("gemini", 1), ("gemini", 130), ("claude", 55)):
        result = cli_finished(speaks, speaks, code)
        assert result.outcome is AttemptOutcome.crash, (speaks, code)
        assert result.error.startswith(f"{speaks} exited {code}")


CLAUDE_CRASH = (b"Warning: no stdin data received in 3s, proceeding without it. If piping "
                b"from a slow command, redirect stdin explicitly: < /dev/null to skip, or "
                b"wait longer.\n"
                b"Loading config from /home/dev/.claude\n"
                b"Error: 401 Unauthorized: invalid x-api-key\n"
                b"    at request (file:///cli.js:1:1)\n"
                b"Shutting down\n")


def test_a_cli_s_error_names_the_cli_and_the_wrapper_that_ran_it() -> None:
    result = cli_finished("claude", "claude (run by bash)", 1, CLAUDE_CRASH)
    assert result.error == ("claude (run by bash) exited 1 before its stream's result: "
                            "Error: 401 Unauthorized: invalid x-api-key: check the API key in "
                            "the agent's env: (or the CLI's own login)")
    assert result.outcome is AttemptOutcome.unavailable  # a refused key: its fallback runs


def test_the_stderr_quoted_leaves_out_the_banners() -> None:
    banners = (b"Warning: 256-color support not detected. Using a terminal with at least "
               b"256-color support is recommended for a better visual experience.\n"
               b"YOLO mode is enabled. All tool calls will be automatically approved.\n"
               b"Ripgrep is not available. Falling back to GrepTool.\n")
    result = cli_finished("gemini", "gemini", 1, banners + b"the model went away\n")
    assert result.error == "gemini exited 1 before its stream's result: the model went away"
    codex = cli_finished("codex", "codex (run by npx)", 1,
                         b"Reading additional input from stdin...\n")
    assert codex.error == "codex (run by npx) exited 1 before its stream's result"


def test_the_stderr_quoted_is_a_few_lines_that_say_what_failed() -> None:
    err = b"".join(b"step %d done\n" % n for n in range(200))
    err += b"ERROR: 429 Too Many Requests\n" + b"step 201 done\n" * 3
    err += b"".join(b"Error: stream disconnected (%d)\n" % n for n in range(8))
    result = cli_finished("codex", "codex", 1, err)
    said = result.error.split(": ", 1)[1]
    assert said.splitlines() == [f"Error: stream disconnected ({n})" for n in range(3, 8)]
    assert len(result.error) < STDERR_TAIL + 80


def cli_spec(speaks: str, program: tuple[str, ...] = ()) -> ChildSpec:
    return ChildSpec(agent="talos", delegation_id="talos-1", attempt=1, attempt_id="talos-1-a1",
                     brief=Brief(agent="talos", scope="fix it"), deadline=60.0,
                     clock=SystemClock(), invocation=Invocation(speaks, program=program))


@pytest.mark.parametrize(("speaks", "program", "named"), [
    ("claude", (), "claude"),
    ("claude", ("/opt/bin/claude",), "claude"),
    ("claude", ("bash", "-c", 'exec claude "$@"', "claude"), "claude (run by bash)"),
    ("codex", ("npx", "-y", "@openai/codex"), "codex (run by npx)"),
    ("cursor", (), "cursor-agent"),
])
def test_an_agent_cli_is_named_as_itself_with_its_wrapper(
        speaks: str, program: tuple[str, ...], named: str) -> None:
    assert command_program(cli_spec(speaks, program)) == named


def test_a_wrapper_not_found_is_named_with_the_cli_it_runs() -> None:
    spec = cli_spec("codex", ("npx", "-y", "@openai/codex"))
    error = start_error(spec, FileNotFoundError(2, "No such file or directory", "npx"))
    assert error.startswith("command agent 'talos' could not start: the program 'npx' that "
                            "runs codex for agent 'talos' was not found: install it")
    error = start_error(spec, PermissionError(13, "Permission denied"))
    assert error == ("command agent 'talos' could not start codex (run by npx): "
                     "PermissionError: [Errno 13] Permission denied")


@pytest.mark.parametrize(("line", "says"), [
    ("HTTP 529 from the API", True), ("request failed with status code 503", True),
    ("429 Too Many Requests", True), ("API Error: 500 {\"type\":\"api_error\"}", True),
    ("Overloaded", True), ("connect ECONNREFUSED 127.0.0.1:443", True),
    ("permission denied", True), ("command not found: rg", True),
    ("processed 503 files", False), ("step 401 of 900 done", False),
])
def test_what_a_stderr_line_says_of_a_failure(line: str, says: bool) -> None:
    assert (what_failed(f"noise 1\n{line}\nnoise 2\n", STDERR_TAIL) == line) is says
