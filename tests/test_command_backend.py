"""Command agents: a program in its own process group, its lines as progress, stdout as result."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from actors import AttemptOutcome, Brief
from actors.backends import ChildSpec, CommandChild, ProcessBackend
from actors.backends.command import command_argv
from actors.clock import SystemClock
from actors.protocol import Finished, Heartbeat, Partial
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


Run = Callable[..., tuple[CommandChild, Outbox]]


@pytest.fixture
def run() -> Iterator[Run]:
    backend = ProcessBackend()
    inboxes: list[Outbox] = []

    def start(command: tuple[str, ...], **overrides: Any) -> tuple[CommandChild, Outbox]:
        inbox = Outbox()
        inboxes.append(inbox)
        handle = backend.start(spec(command, **overrides), inbox)
        assert isinstance(handle, CommandChild)
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
def test_each_stdout_line_is_a_partial_and_stdout_is_the_result(run: Run) -> None:
    handle, inbox = run(("sh", "-c", 'echo one; echo "$1"; printf tail', "sh", "{scope}"))
    finished = inbox.finished()
    assert finished.outcome is AttemptOutcome.completed
    assert finished.value == "one\nfix the login; rm -rf / $(reboot)\ntail"
    lines = [(p.progress, p.item) for p in inbox.of(Partial)]
    assert lines == [(1, "one"), (2, "fix the login; rm -rf / $(reboot)"), (3, "tail")]
    assert finished.pid == handle.pid and finished.exit_code == 0 and finished.progress == 3


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
def test_a_command_that_cannot_start_fails_the_attempt(run: Run) -> None:
    handle, inbox = run(("/nonexistent/zeus-agent", "{scope}"))
    finished = inbox.finished()
    assert finished.outcome is AttemptOutcome.error
    assert finished.error_type == "FileNotFoundError"
    assert "could not start" in (finished.error or "") and handle.pid is None


@pytest.mark.process
def test_a_command_killed_by_a_signal_nobody_sent_is_a_crash(run: Run) -> None:
    _, inbox = run(("sh", "-c", "kill -SEGV $$"))
    finished = inbox.finished()
    assert finished.outcome is AttemptOutcome.crash
    assert "died of SIGSEGV (exit code -11)" in (finished.error or "")


@pytest.mark.process
@pytest.mark.realtime
def test_a_hung_command_is_killed_with_its_whole_group(run: Run) -> None:
    handle, inbox = run(("sh", "-c", "sleep 1000 & echo $!; wait"))
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
    inbox.wait_for(Partial)
    handle.kill()
    finished = inbox.finished()
    assert finished.killed == "kill" and finished.exit_code == -signal.SIGKILL
    assert finished.kill_latency_s is not None and finished.kill_latency_s >= 0.2


@pytest.mark.process
def test_cancel_interrupts_a_command_with_sigint(run: Run) -> None:
    code = "import time; print('ready', flush=True); time.sleep(1000)"
    handle, inbox = run((sys.executable, "-c", code))
    inbox.wait_for(Partial)
    handle.cancel()
    finished = inbox.finished()
    assert finished.outcome is AttemptOutcome.cancelled and finished.killed == "cooperative"
    assert "KeyboardInterrupt" in (finished.error or "")


@pytest.mark.process
@pytest.mark.realtime
def test_a_quiet_command_still_sends_liveness_heartbeats(run: Run) -> None:
    handle, inbox = run(("sh", "-c", "echo one; sleep 1000"), heartbeat_interval_s=0.05)
    inbox.wait_for(Partial)
    assert eventually(lambda: any(b.liveness and b.progress == 1 for b in inbox.of(Heartbeat)))
    beat = next(b for b in inbox.of(Heartbeat) if b.progress == 1)
    assert beat.liveness and beat.attempt_id == "talos-1-a2"
    handle.kill()
    inbox.finished()


@pytest.mark.process
def test_close_kills_running_commands_and_their_groups() -> None:
    backend = ProcessBackend()
    inbox = Outbox()
    handle = backend.start(spec(("sh", "-c", "sleep 1000 & echo $!; wait")), inbox)
    grandchild = int(inbox.wait_for(Partial).item)
    backend.close()
    assert inbox.finished().killed == "terminate"
    assert handle.pid is not None and not alive(handle.pid)
    assert eventually(lambda: not alive(grandchild))
