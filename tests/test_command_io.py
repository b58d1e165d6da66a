"""How a command agent's end reads as its `Finished` (`command_finished`), case by case."""

from __future__ import annotations

from typing import Any

import pytest

from actors.backends.command.io import STDERR_TAIL, command_finished
from actors.models import AttemptOutcome
from actors.speaks import StreamReader
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
