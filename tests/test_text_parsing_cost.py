"""Brief.parse and Summary.parse cost one pass over the text, whatever agents write.

Agent-written text can hold shapes that made the parsers quadratic (a blank line
scanned ahead to the next label, a label regex that backtracked over spaces,
each open tag compared with every close tag). The property test hides a valid
block behind such noise and asks for the block back within a per-example
deadline; noise inside a block must cost Python work in proportion to its size
(lines run, counted at two sizes); what a count cannot see, a regex that
backtracks, the 1 MB tests see: they are the benchmark's figure with a loose
bound (benchmarks/bench_parsing.py measures it against `str.splitlines`).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from types import FrameType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors import Brief, Status, Summary

BRIEF = Brief(agent="apollo", scope="Scan the routes", inputs={"dir": "src"}, timeout_s=30)
SUMMARY = Summary(id="d-1", agent="apollo", scope="Scan the routes", status=Status.completed,
                  findings=["one", "two"], duration_s=1.5)


def spaced_label(width: int) -> str:
    return "a" + " " * width + "x"


# Each shape is (name, a function of a size n giving noise of about n lines or n characters).
SHAPES = {
    "blank lines": lambda n: "\n" * n,
    "blank lines then a label": lambda n: ("\n" * 20 + "Scope: x\n") * (n // 20 + 1),
    "crlf lines": lambda n: "\r\n" * n,
    "spaced label": lambda n: spaced_label(n),
    "spaced label with a colon": lambda n: spaced_label(n) + ": y",
    "bold spaced label": lambda n: "**" + spaced_label(n) + "**:",
    "close tags before open tags": lambda n: "</subtask_summary>\n" * n + "<subtask_summary>\n" * n,
    "unclosed open tags": lambda n: "<subtask_summary>\nStatus: x\n" * n,
    "continuation lines": lambda n: "more text\n" * n,
    "bullets": lambda n: "- item\n" * n,
    "digits": lambda n: "Timeout: " + "1" * n + "q",
    "colons": lambda n: ":" * n,
    "stars": lambda n: "*" * n,
    "punctuation": lambda n: "_-" * n + "subtask",
}
ONE_MB = 1 << 20


@settings(max_examples=60, deadline=timedelta(seconds=1))
@given(shape=st.sampled_from(sorted(SHAPES)), size=st.integers(min_value=1, max_value=40_000))
def test_a_block_behind_adversarial_noise_is_read_back_in_one_pass(shape: str, size: int) -> None:
    noise = SHAPES[shape](size)
    assert Summary.parse(noise + "\n" + SUMMARY.render()) == SUMMARY
    assert Brief.parse(noise + "\n" + BRIEF.render()) == BRIEF


HEADS = {
    "brief": (Brief.parse, "SUBTASK BRIEF\nAgent: a\n"),
    "summary": (Summary.parse, "<subtask_summary>\nStatus: completed\nAgent: a\n"),
}


def parse_inside(kind: str, noise: str) -> None:
    """Parse a block with `noise` inside it; refusing the text is fine, only the cost counts."""
    parse, head = HEADS[kind]
    with contextlib.suppress(ValueError):
        parse(head + noise + "\nScope: s\n")


def python_lines_run(fn: Callable[[], None]) -> int:
    """How many lines of Python `fn()` executes (its loops' passes, counted, not timed)."""
    count = 0

    def tracer(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal count
        count += event == "line"
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(previous)
    return count


@pytest.mark.parametrize("kind", sorted(HEADS))
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_noise_inside_a_block_costs_python_work_in_proportion_to_its_size(
    shape: str, kind: str
) -> None:
    """Four times the noise, at most about four times the lines run: a parser that scans
    ahead, or compares each tag with every other, runs sixteen times as many."""
    parse_inside(kind, SHAPES[shape](10))  # the first call's one-off work is not counted
    small = python_lines_run(lambda: parse_inside(kind, SHAPES[shape](1_000)))
    large = python_lines_run(lambda: parse_inside(kind, SHAPES[shape](4_000)))
    assert large <= 6 * small, (shape, kind, small, large)


DEEP = "[" * 100_000  # deeper than json can read: a RecursionError before


def test_a_value_nested_too_deeply_for_json_is_kept_as_text() -> None:
    assert Brief.parse(f"SUBTASK BRIEF\nAgent: a\nScope: s\nInputs: {DEEP}").inputs == DEEP
    head = "<subtask_summary>\nStatus: completed\nAgent: a\nScope: s\n"
    summary = Summary.parse(f"{head}Output: {DEEP}\nFindings: {DEEP}\nPartial results:\n- {DEEP}")
    assert summary.output == DEEP and summary.findings == [DEEP]
    assert summary.partial_results == [DEEP]


def test_an_attempt_nested_too_deeply_for_json_is_refused_with_a_value_error() -> None:
    head = "<subtask_summary>\nStatus: completed\nAgent: a\nScope: s\nAttempts:\n"
    with pytest.raises(ValueError, match="nested too deeply"):
        Summary.parse(head + '- {"id": ' + DEEP)


def test_text_that_looks_like_deep_json_survives_render_and_parse() -> None:
    summary = SUMMARY.model_copy(update={"output": DEEP, "partial_results": [DEEP]})
    assert Summary.parse(summary.render()) == summary
    brief = BRIEF.model_copy(update={"inputs": DEEP})
    assert Brief.parse(brief.render()) == brief


@pytest.mark.realtime
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_megabyte_of_any_shape_parses_in_well_under_a_few_seconds(shape: str) -> None:
    noise = SHAPES[shape](ONE_MB // max(1, len(SHAPES[shape](1))))
    for text in (noise, "SUBTASK BRIEF\nAgent: a\n" + noise, "<subtask_summary>\n" + noise):
        for parse in (Brief.parse, Summary.parse):
            started = time.perf_counter()
            with contextlib.suppress(ValueError):
                parse(text)
            # Loose: the target is 0.5 s (benchmarks); the quadratic parsers took minutes.
            assert time.perf_counter() - started < 3.0, (shape, parse)
