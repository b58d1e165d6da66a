"""Output to a closed pipe ends a command at once with 141 (the README's exit status).

Each test runs `zeus` as a real process with its standard output on a pipe, reads
what it needs, closes the pipe and waits: the command must end within a few seconds
with 141, and the slow children it started (each writes its pid) must be gone. Ctrl-C
while the run waits on the same children still ends it with 130.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from supervisor.cli.commands import EXIT_CLOSED, EXIT_INTERRUPTED
from tests._support import alive, eventually

pytestmark = [pytest.mark.process, pytest.mark.realtime]

ROUTING = """\
agents:
  slow:
    command: [sh, -c, 'echo $$ > "$1"; exec sleep 60', sh, '{scope}']
    timeout_s: 120
"""
ENDS_WITHIN_S = 10.0  # loose: the command ends at once, children stopped by the kill ladder


# `zeus` with Ctrl-C raising KeyboardInterrupt even where this test's own parent ignores it.
ZEUS = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from supervisor.cli.main import main; sys.exit(main())")


def zeus(tmp_path: Path, *args: str) -> subprocess.Popen[bytes]:
    (tmp_path / "routing.yml").write_text(ROUTING, encoding="utf-8")
    return subprocess.Popen([sys.executable, "-c", ZEUS, *args], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def pids(*files: Path) -> list[int]:
    assert eventually(lambda: all(f.exists() and f.read_text().strip() for f in files)), \
        "the children never started"
    return [int(f.read_text()) for f in files]


def ended(p: subprocess.Popen[bytes]) -> tuple[int, str]:
    assert p.stderr is not None
    with p.stderr:
        try:
            p.wait(ENDS_WITHIN_S)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            pytest.fail(f"zeus did not end within {ENDS_WITHIN_S}s after its output was closed")
        return p.returncode, p.stderr.read().decode()


def plan(tmp_path: Path) -> list[Path]:
    files = [tmp_path / "pid1", tmp_path / "pid2"]
    (tmp_path / "plan.yml").write_text("".join(f"- agent: slow\n  scope: {f}\n" for f in files),
                                       encoding="utf-8")
    return files


def test_run_whose_reader_left_after_one_line_ends_with_141_and_stops_its_children(
    tmp_path: Path,
) -> None:
    files = plan(tmp_path)
    p = zeus(tmp_path, "run", "plan.yml")
    assert p.stdout is not None
    children = pids(*files)
    assert p.stdout.readline()  # `zeus run plan.yml | head -1`: one line, then the reader left
    p.stdout.close()
    code, err = ended(p)
    assert code == EXIT_CLOSED, err
    assert "Traceback" not in err, err
    assert eventually(lambda: not any(alive(pid) for pid in children), ENDS_WITHIN_S)


def test_dispatch_whose_reader_left_before_any_output_ends_with_141_at_once(
    tmp_path: Path,
) -> None:
    file = tmp_path / "pid"
    p = zeus(tmp_path, "dispatch", "slow", str(file))
    assert p.stdout is not None
    (child,) = pids(file)
    p.stdout.close()  # `zeus dispatch slow ... | true`: nothing was written yet
    code, err = ended(p)
    assert code == EXIT_CLOSED, err
    assert eventually(lambda: not alive(child), ENDS_WITHIN_S)


def test_demo_whose_reader_left_after_three_lines_ends_with_141(tmp_path: Path) -> None:
    p = zeus(tmp_path, "demo", "--log", str(tmp_path / "demo.jsonl"))
    assert p.stdout is not None
    lines = [p.stdout.readline() for _ in range(3)]
    assert lines[0].startswith(b"zeus demo:"), lines
    p.stdout.close()
    code, err = ended(p)
    assert code == EXIT_CLOSED, err
    assert "Traceback" not in err, err


def test_run_interrupted_while_it_waits_ends_with_130_and_stops_its_children(
    tmp_path: Path,
) -> None:
    files = plan(tmp_path)
    p = zeus(tmp_path, "run", "plan.yml")
    assert p.stdout is not None
    with p.stdout:
        children = pids(*files)
        p.send_signal(signal.SIGINT)
        code, err = ended(p)
        out = p.stdout.read().decode()
    assert code == EXIT_INTERRUPTED, err
    assert "zeus run: interrupted; 0 delegation(s) had settled" in out
    assert eventually(lambda: not any(alive(pid) for pid in children), ENDS_WITHIN_S)
