"""The README's asyncio example runs as written: cancellation follows the task, shield opts out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def asyncio_block() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("## In an asyncio host", 1)[1]
    match = re.search(r"^```python\n(.*?)^```", section, re.M | re.S)
    assert match, "README.md's asyncio section has no ```python block"
    return match.group(1)


def test_the_asyncio_example_is_at_most_15_lines_of_code() -> None:
    assert len([line for line in asyncio_block().splitlines() if line.strip()]) <= 15


@pytest.mark.realtime
def test_the_asyncio_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(asyncio_block(), str(README), "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out.split() == ["cancelled", "completed", "slept", "0.2", "s"]
