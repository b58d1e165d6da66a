"""A command agent's inputs by argv (the default), the first line of stdin, or an owner-only file.

`argv` puts them where every local user can read them (`/proc/<pid>/cmdline`);
`stdin` and `file` do not. The real-command tests run with the program under the
supervisor process and under a worker (`commands_in_workers`): the same either way.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import AttemptOutcome, Brief
from actors.backends import ChildSpec, ProcessBackend
from actors.backends.command.child import command_argv
from actors.backends.inputs import INPUTS_FILE_ENV, inputs_json, write_inputs_file
from actors.clock import SystemClock
from actors.protocol import Finished
from supervisor import Routing, RoutingError
from tests._support import Outbox

INPUTS = {"files": ["a.py", "b c.py"], "token": "s3cret", "note": "line\nbreak é"}
PY = sys.executable

# Prints its inputs' first line, then whether stdin is still open (it reads no further).
READ_FIRST_LINE = (
    "import sys, select; line = sys.stdin.readline(); "
    "sys.stdout.write(line); "
    "r, _, _ = select.select([sys.stdin], [], [], 0); print('open' if not r else 'eof')"
)


def spec(command: tuple[str, ...], **overrides: Any) -> ChildSpec:
    clock = SystemClock()
    fields: dict[str, Any] = {
        "agent": "talos", "delegation_id": "talos-1", "attempt": 1, "attempt_id": "talos-1-a1",
        "brief": Brief(agent="talos", scope="s", inputs=INPUTS), "deadline": clock.now() + 60,
        "clock": clock, "command": command, "heartbeat_interval_s": 5.0, "term_s": 0.5,
    }
    fields.update(overrides)
    return ChildSpec(**fields)


Run = Callable[..., Finished]


@pytest.fixture(params=[False, True], ids=["supervisor", "worker"])
def run(request: pytest.FixtureRequest) -> Iterator[Run]:
    backend = ProcessBackend(commands_in_workers=request.param)

    def start(command: tuple[str, ...], **overrides: Any) -> Finished:
        inbox = Outbox()
        backend.start(spec(command, **overrides), inbox)
        return inbox.finished()

    yield start
    backend.close()


# -- the command line (no process) -------------------------------------------------------------


def test_argv_is_the_default_and_puts_the_inputs_json_in_the_arguments() -> None:
    assert spec(("prog",)).inputs_via == "argv"
    assert command_argv(spec(("prog", "{inputs}"))) == ["prog", inputs_json(INPUTS)]


def test_with_a_file_the_placeholder_is_the_files_path() -> None:
    assert command_argv(spec(("prog", "--in={inputs}"), inputs_via="file"), "/tmp/x.json") == [
        "prog", "--in=/tmp/x.json"]


def test_with_stdin_an_inputs_placeholder_is_refused_at_run_time_and_at_load_time() -> None:
    with pytest.raises(ValueError, match=r"inputs_via is stdin.*remove \{inputs\}"):
        command_argv(spec(("prog", "{inputs}"), inputs_via="stdin"))
    with pytest.raises(RoutingError, match=r"agents.t.command\[1\]: found \{inputs\} with"):
        Routing.from_dict({"agents": {"t": {"command": ["prog", "{inputs}"],
                                            "inputs_via": "stdin"}}})


def test_inputs_via_is_read_from_routing_and_may_be_a_default() -> None:
    routing = Routing.from_dict({"defaults": {"inputs_via": "file"},
                                 "agents": {"t": {"command": ["prog"]},
                                            "u": {"command": ["prog"], "inputs_via": "stdin"}}})
    assert (routing.agent("t").inputs_via, routing.agent("u").inputs_via) == ("file", "stdin")
    with pytest.raises(RoutingError, match="inputs_via: found 'pipe'"):
        Routing.from_dict({"agents": {"t": {"command": ["prog"], "inputs_via": "pipe"}}})


def test_an_inputs_file_is_owner_only_and_holds_one_json_line() -> None:
    path = Path(write_inputs_file(INPUTS))
    try:
        assert os.stat(path).st_mode & 0o777 == 0o600
        assert json.loads(path.read_text()) == INPUTS
    finally:
        path.unlink()


# -- real commands -----------------------------------------------------------------------------


@pytest.mark.process
def test_stdin_gives_the_inputs_as_the_first_line_and_keeps_stdin_open(run: Run) -> None:
    finished = run((PY, "-c", READ_FIRST_LINE), inputs_via="stdin")
    assert finished.outcome is AttemptOutcome.completed, finished
    first, state = str(finished.value).splitlines()
    assert json.loads(first) == INPUTS
    assert state == "open"


@pytest.mark.process
def test_stdin_inputs_larger_than_the_pipe_arrive_whole(run: Run) -> None:
    big = {"blob": "x" * 1_000_000}
    script = "import sys, json; print(len(json.loads(sys.stdin.readline())['blob']))"
    finished = run((PY, "-c", script), inputs_via="stdin",
                   brief=Brief(agent="talos", scope="s", inputs=big))
    assert finished.outcome is AttemptOutcome.completed, finished
    assert str(finished.value).strip() == "1000000"


@pytest.mark.process
def test_a_program_that_never_reads_stdin_still_finishes(run: Run) -> None:
    big = {"blob": "x" * 1_000_000}
    finished = run((PY, "-c", "print('done')"), inputs_via="stdin",
                   brief=Brief(agent="talos", scope="s", inputs=big))
    assert finished.outcome is AttemptOutcome.completed, finished
    assert str(finished.value).strip() == "done"


@pytest.mark.process
def test_file_gives_the_path_in_argv_and_env_and_the_file_is_removed_after(run: Run) -> None:
    script = ("import sys, os, json; p = sys.argv[1]; "
              f"assert os.environ['{INPUTS_FILE_ENV}'] == p; "
              "print(p); print(oct(os.stat(p).st_mode & 0o777)); print(open(p).read().strip())")
    finished = run((PY, "-c", script, "{inputs}"), inputs_via="file")
    assert finished.outcome is AttemptOutcome.completed, finished
    path, mode, content = str(finished.value).splitlines()
    assert mode == "0o600"
    assert json.loads(content) == INPUTS
    assert not Path(path).exists()
    assert "s3cret" not in path


@pytest.mark.process
def test_argv_inputs_are_visible_in_the_command_line_and_stdin_inputs_are_not(run: Run) -> None:
    script = "import os; print(open(f'/proc/{os.getpid()}/cmdline', 'rb').read().decode())"
    by_argv = run((PY, "-c", script, "{inputs}"))
    by_stdin = run((PY, "-c", script), inputs_via="stdin")
    assert "s3cret" in str(by_argv.value)
    assert "s3cret" not in str(by_stdin.value)
