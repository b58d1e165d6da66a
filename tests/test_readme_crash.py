"""The README's "Surviving a crash" example, run as a real host that is SIGKILLed mid-run
and started again on the same store."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from tests._zygote import forked

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
WAIT_S = 30.0  # a safety bound on waits, never the thing asserted

pytestmark = [pytest.mark.process, pytest.mark.realtime]


def crash_example() -> str:
    section = README.read_text(encoding="utf-8").split("## Surviving a crash", 1)[1]
    match = re.search(r"^```python\n(.*?)^```", section, re.M | re.S)
    assert match, "the README's crash section has no ```python block"
    return match.group(1)


def run(tmp: Path) -> Any:
    """`python host.py` in `tmp`, forked from a process that has imported Zeus
    (tests/_zygote.py)."""
    return forked("host.py", [], cwd=tmp, env={**os.environ, "PYTHONPATH": str(ROOT)},
                  script=True)


def charged(store: Path) -> int:
    """The calls the store holds (what the first host had charged and committed)."""
    if not store.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as con:
            row = con.execute("SELECT coalesce(sum(calls), 0) FROM attempts").fetchone()
    except sqlite3.Error:
        return 0  # being created
    return int(row[0])


def test_the_readme_host_killed_mid_run_resumes_and_then_serves_its_summary(
    tmp_path: Path,
) -> None:
    (tmp_path / "host.py").write_text(crash_example())
    first = run(tmp_path)
    deadline = time.monotonic() + WAIT_S
    while charged(tmp_path / "zeus.db") < 3:  # killed while it reads, a few pages in
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, "the first host never charged"
        time.sleep(0.01)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=WAIT_S)

    out, err = run(tmp_path).communicate(timeout=WAIT_S)
    assert "rerun: ('survey-1',)" in out, err
    status_line = out.strip().splitlines()[-1]
    assert status_line.startswith("completed ['lost', 'completed']")
    assert int(status_line.rsplit(" ", 1)[1]) >= 23  # the rerun's 20 and the first's 3 or more

    again, err = run(tmp_path).communicate(timeout=WAIT_S)
    assert "rerun: ()" in again, err
    assert again.strip().splitlines()[-1] == status_line  # served from the store, not run
