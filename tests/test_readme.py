"""The README's example runs as written: the first ```python block, executed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from actors import Status, Summary

README = Path(__file__).resolve().parent.parent / "README.md"


def first_python_block() -> str:
    match = re.search(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), re.M | re.S)
    assert match, "README.md has no ```python block"
    return match.group(1)


def test_readme_example_is_at_most_15_lines() -> None:
    assert len(first_python_block().splitlines()) <= 15


def test_readme_example_runs_and_prints_a_completed_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    exec(compile(first_python_block(), str(README), "exec"), {"__name__": "readme"})
    summary = Summary.parse(capsys.readouterr().out)
    assert summary.status is Status.completed
    assert summary.findings == ["4 words"]
    assert summary.partial_results == ["Count", "these", "four", "words"]


def test_readme_gives_the_two_commands_ci_and_a_newcomer_run() -> None:
    text = README.read_text(encoding="utf-8")
    assert "pip install -e . && zeus demo" in text
    assert "pip install -e '.[test]' && python -m pytest -q" in text
