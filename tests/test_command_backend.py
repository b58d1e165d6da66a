"""Command agents: a program in its own process group, its lines as progress, stdout as result.

A `lines` program's lines are progress only (heartbeats), and partial results only for an
attempt stopped before it ended (its last lines); a test that needs data from a running
program (a pid) runs it as `speaks="jsonl"` and reads its `{"partial": ...}` line.

Every real-command test runs twice: with the program started and read by the
supervisor process (`supervisor`), and by a worker process
(`ProcessBackend(commands_in_workers=True)`, `worker`). The behaviour is the same
but where a test says otherwise: there the attempt's pid is the worker's.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from actors import AttemptOutcome, Brief
from actors.backends import ChildHandle, ChildSpec, ProcessBackend
from actors.backends.command.child import command_argv
from actors.clock import SystemClock
from actors.mail import Mail
from actors.protocol import Finished, Heartbeat, Partial
from actors.speaks.reader import STOPPED_LINES
from tests._support import Outbox, alive, eventually


def spec(command: tuple[str, ...], **overrides: Any) -> ChildSpec:
    clock = SystemClock()
    fields: dict[str, Any] = {
        "agent": "talos",
        "delegation_id": "talos-1",
        "attempt": 2,
        "attempt_id": "talos-1-a2",
        "brief": Brief(agent="talos", scope="fix the login; rm -rf / $(reboot)"),
        "deadline": clock.now() + 60.0,
        "clock": clock,
        "command": command,
        "heartbeat_interval_s": 5.0,
        "term_s": 0.5,
    }
    fields.update(overrides)
    return ChildSpec(**fields)


Run = Callable[..., tuple[ChildHandle, Outbox]]


def wait_for_lines(inbox: Outbox, lines: int = 1) -> None:
    """Wait until a heartbeat says the program's output has reached `lines` lines (the first
    line's heartbeat is sent at once; later counts ride the next heartbeat, a liveness
    beat included, so a test waiting past the first line sets a short interval)."""
    def reached() -> bool:
        beats = inbox.of(Heartbeat)
        if lines == 1:  # a progress heartbeat, not the liveness beat
            return any(not b.liveness and b.progress >= 1 for b in beats)
        return any(b.progress >= lines for b in beats)

    assert eventually(reached), f"no heartbeat at {lines} lines: {inbox.messages}"


@pytest.fixture(params=[False, True], ids=["supervisor", "worker"])
def in_workers(request: pytest.FixtureRequest) -> bool:
    """Whether the program runs under a worker process (else under the supervisor's)."""
    return bool(request.param)


@pytest.fixture
def run(in_workers: bool) -> Iterator[Run]:
    backend = ProcessBackend(commands_in_workers=in_workers)
    inboxes: list[Outbox] = []

    def start(command: tuple[str, ...], **overrides: Any) -> tuple[ChildHandle, Outbox]:
        inbox = Outbox()
        inboxes.append(inbox)
        handle = backend.start(spec(command, **overrides), inbox)
        return handle, inbox

    yield start
    backend.close()
    for inbox in inboxes:
        assert len(inbox.of(Finished)) == 1, inbox.messages


# -- the command line (no process) -------------------------------------------------------


def test_placeholders_are_substituted_inside_single_arguments_never_through_a_shell() -> None:
    argv = command_argv(
        spec(
            ("hotfix", "{scope}", "--agent={agent}", "--try", "{attempt}", "{inputs}"),
            brief=Brief(agent="talos", scope="a b; rm -rf /", inputs={"files": ["x.py"]}),
        )
    )
    assert argv == ["hotfix", "a b; rm -rf /", "--agent=talos", "--try", "2", '{"files": ["x.py"]}']


def test_an_unknown_placeholder_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"unknown placeholder \{scop\}.*known: \{agent\}"):
        command_argv(spec(("hotfix", "{scop}")))


def test_literal_braces_that_are_not_placeholders_are_kept() -> None:
    assert command_argv(spec(("jq", '{"a": 1}', "{}"))) == ["jq", '{"a": 1}', "{}"]


# -- real commands -----------------------------------------------------------------------


@pytest.mark.process
def test_a_completed_lines_command_sends_no_partial_and_stdout_is_the_result(run: Run) -> None:
    handle, inbox = run(("sh", "-c", 'echo one; echo "$1"; printf tail', "sh", "{scope}"))
    finished = inbox.finished()
    assert finished.outcome is AttemptOutcome.completed
    assert finished.value == "one\nfix the login; rm -rf / $(reboot)\ntail"
    assert inbox.of(Partial) == []  # its lines are progress, not partial results
    beats = [b for b in inbox.of(Heartbeat) if not b.liveness]
    assert beats and all(1 <= b.progress <= 3 for b in beats)  # the first line's, at once
    assert finished.pid == handle.pid and finished.exit_code == 0 and finished.progress == 3


@pytest.mark.process
@pytest.mark.parametrize("stop", ["kill", "cancel"])
def test_a_stopped_lines_command_reports_its_last_lines_as_partials(
    run: Run, stop: str
) -> None:
    script = "for i in $(seq 1 60); do echo line $i; done; sleep 1000"
    handle, inbox = run(("sh", "-c", script), heartbeat_interval_s=0.05)
    wait_for_lines(inbox, 60)
    assert inbox.of(Partial) == []  # none while it runs
    handle.kill() if stop == "kill" else handle.cancel()
    finished = inbox.finished()
    assert finished.outcome is AttemptOutcome.cancelled
    assert STOPPED_LINES == 50
    assert [p.item for p in inbox.of(Partial)] == [f"line {i}" for i in range(11, 61)]
    at = inbox.messages.index(inbox.of(Partial)[0])
    assert all(isinstance(m, Partial | Heartbeat) for m in inbox.messages[at:-1])
    assert inbox.messages[-1] is finished  # sent just before its Finished


@pytest.mark.process
def test_a_non_zero_exit_fails_with_the_tail_of_stderr(run: Run) -> None:
    script = (
        "for i in $(seq 1 2000); do echo noise $i >&2; done; echo 'the real reason' >&2; exit 4"
    )
    _, inbox = run(("sh", "-c", script))
    finished = inbox.finished()
    assert finished.outcome is AttemptOutcome.error
    assert finished.exit_code == 4
    error = finished.error or ""
    assert error.startswith("command 'sh' exited with exit code 4: ")
    assert error.endswith("the real reason") and "noise 1\n" not in error
    assert len(error) < 4200
    assert inbox.of(Heartbeat)  # stderr lines count as progress too


@pytest.mark.process
def test_a_command_that_cannot_start_fails_the_attempt(run: Run, in_workers: bool) -> None:
    handle, inbox = run(("/nonexistent/zeus-agent", "{scope}"))
    finished = inbox.finished()
    assert finished.outcome is AttemptOutcome.error
    assert finished.error_type == "FileNotFoundError"
    assert finished.error == (
        "command agent 'talos' could not start: the program '/nonexistent/zeus-agent' of "
        "agent 'talos' was not found: install it, or set agents.talos.command to the "
        "program to run (a path, or a wrapper such as npx)"
    )
    # Under a worker the attempt has the worker's pid, which started even if its program
    # could not; under the supervisor no process ever existed.
    assert (handle.pid is not None) is in_workers


@pytest.mark.process
def test_a_command_killed_by_a_signal_nobody_sent_is_a_crash(run: Run) -> None:
    _, inbox = run(("sh", "-c", "kill -SEGV $$"))
    finished = inbox.finished()
    assert finished.outcome is AttemptOutcome.crash
    assert "died of SIGSEGV (exit code -11)" in (finished.error or "")


@pytest.mark.process
@pytest.mark.realtime
def test_a_hung_command_is_killed_with_its_whole_group(run: Run) -> None:
    handle, inbox = run(("sh", "-c", 'sleep 1000 & echo "{\\"partial\\": $!}"; wait'),
                        speaks="jsonl")
    grandchild = int(inbox.wait_for(Partial).item)
    pid = handle.pid
    assert pid is not None and alive(pid) and alive(grandchild)
    handle.kill()
    finished = inbox.finished()
    assert finished.outcome is AttemptOutcome.cancelled
    assert finished.killed == "terminate" and finished.exit_code == -signal.SIGTERM
    assert finished.kill_latency_s is not None and finished.kill_latency_s < 0.5
    assert not alive(pid)  # reaped before Finished
    assert eventually(lambda: not alive(grandchild))


@pytest.mark.process
@pytest.mark.realtime
def test_a_command_that_ignores_sigterm_is_sigkilled(run: Run) -> None:
    handle, inbox = run(
        ("sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"), term_s=0.2
    )
    wait_for_lines(inbox)
    handle.kill()
    finished = inbox.finished()
    assert finished.killed == "kill" and finished.exit_code == -signal.SIGKILL
    assert finished.kill_latency_s is not None and finished.kill_latency_s >= 0.2


@pytest.mark.process
def test_cancel_interrupts_a_command_with_sigint(run: Run) -> None:
    code = "import time; print('ready', flush=True); time.sleep(1000)"
    handle, inbox = run((sys.executable, "-c", code))
    wait_for_lines(inbox)
    handle.cancel()
    finished = inbox.finished()
    assert finished.outcome is AttemptOutcome.cancelled and finished.killed == "cooperative"
    assert "KeyboardInterrupt" in (finished.error or "")


@pytest.mark.process
@pytest.mark.realtime
def test_a_quiet_command_still_sends_liveness_heartbeats(run: Run) -> None:
    handle, inbox = run(("sh", "-c", "echo one; sleep 1000"), heartbeat_interval_s=0.05)
    wait_for_lines(inbox)
    # After its one line, the liveness beat goes on, carrying the line's progress.
    assert eventually(lambda: any(b.liveness and b.progress == 1 for b in inbox.of(Heartbeat)))
    beat = next(b for b in inbox.of(Heartbeat) if b.liveness and b.progress == 1)
    assert beat.attempt_id == "talos-1-a2"
    handle.kill()
    inbox.finished()


@pytest.mark.process
def test_close_kills_running_commands_and_their_groups(in_workers: bool) -> None:
    backend = ProcessBackend(commands_in_workers=in_workers)
    inbox = Outbox()
    script = 'sleep 1000 & echo "{\\"partial\\": $!}"; wait'
    handle = backend.start(spec(("sh", "-c", script), speaks="jsonl"), inbox)
    grandchild = int(inbox.wait_for(Partial).item)
    backend.close()
    assert inbox.finished().killed == "terminate"
    assert handle.pid is not None and not alive(handle.pid)
    assert eventually(lambda: not alive(grandchild))


# Prints each line of its standard input until the message "stop".
ECHO_STDIN = (
    "import sys\n"
    "for line in sys.stdin:\n"
    "    if line.strip() == '\"stop\"':\n"
    "        break\n"
    "    print(line.strip(), flush=True)\n"
)


@pytest.mark.process
def test_the_owners_messages_are_json_lines_on_stdin_after_the_inputs_line(run: Run) -> None:
    handle, inbox = run(
        (sys.executable, "-c", ECHO_STDIN),
        inputs_via="stdin",
        brief=Brief(agent="talos", scope="s", inputs={"files": ["a.py"]}),
    )
    wait_for_lines(inbox)  # the inputs line came first
    for message in ({"steer": "left"}, [1, "two"], "stop"):
        handle.put_mail(Mail(message).encode("command"))  # as Zeus encodes it for a command
    finished = inbox.finished()
    assert finished.outcome is AttemptOutcome.completed, finished
    assert [json.loads(line) for line in finished.value.splitlines()] == [
        {"files": ["a.py"]}, {"steer": "left"}, [1, "two"]]


@pytest.mark.process
def test_what_a_cancelled_command_writes_while_it_stops_is_still_reported(run: Run) -> None:
    code = (
        "import time\n"
        "try:\n"
        "    print('ready', flush=True); time.sleep(1000)\n"
        "except KeyboardInterrupt:\n"
        "    print('saved my work', flush=True); raise SystemExit(3)\n"
    )
    handle, inbox = run(("python", "-c", code))  # the interpreter Zeus runs on
    wait_for_lines(inbox)
    assert inbox.of(Partial) == []
    handle.cancel()
    finished = inbox.finished()
    assert (finished.outcome, finished.killed, finished.exit_code) == (
        AttemptOutcome.cancelled, "cooperative", 3)
    assert finished.error == "command 'python' exited with exit code 3 (nothing on standard error)"
    # Its lines, the one written while it stopped included, are its stopped partials.
    assert [p.item for p in inbox.of(Partial)] == ["ready", "saved my work"]
    # Progress: its 2 lines, then each of the 2 partials that report them (every report
    # is a step, so a Partial's progress is past the heartbeats' before it).
    assert finished.progress == 4
    assert [p.progress for p in inbox.of(Partial)] == [3, 4]


# Starts a descendant that leaves the program's session (`setsid`), prints its pid as a
# jsonl partial, hangs.
ESCAPE = (
    "import os, subprocess, sys, time\n"
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1000)'],\n"
    "                     start_new_session=True)\n"
    "print('{\"partial\": %d}' % p.pid, flush=True)\n"
    "time.sleep(1000)\n"
)


@pytest.mark.process
@pytest.mark.realtime
def test_the_kill_ladder_reaches_a_descendant_that_left_the_programs_session(run: Run) -> None:
    handle, inbox = run((sys.executable, "-c", ESCAPE), speaks="jsonl")
    escaped = int(inbox.wait_for(Partial).item)
    assert alive(escaped)
    handle.kill()
    assert inbox.finished().killed == "terminate"
    assert eventually(lambda: not alive(escaped))


@pytest.mark.process
@pytest.mark.realtime
def test_a_killed_command_that_exits_cleanly_on_sigterm_reports_its_own_exit_code(
    run: Run,
) -> None:
    script = "trap 'exit 0' TERM; echo ready; while :; do sleep 0.05; done"
    handle, inbox = run(("sh", "-c", script))
    wait_for_lines(inbox)
    handle.kill()
    finished = inbox.finished()
    assert (finished.outcome, finished.killed, finished.exit_code) == (
        AttemptOutcome.cancelled, "terminate", 0)
