"""`StreamReader`, fed by hand: what a stream's lines become (progress, tools, spend, the
session), what it says about how the run ended, Zeus's own `jsonl` protocol, and the
bad lines that are counted and never fatal."""

from __future__ import annotations

import json
from typing import Any

import pytest

from actors import AttemptOutcome, Usage
from actors.speaks import MAX_LINE, Pricing, StreamReader
from tests._support import NullSink


def lines(*events: Any) -> bytes:
    return b"".join((e if isinstance(e, bytes) else json.dumps(e).encode()) + b"\n"
                    for e in events)


def assistant(mid: str, *, out: int, tool: str | None = None, tid: str = "t1",
              text: str | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if tool:
        content.append({"type": "tool_use", "id": tid, "name": tool, "input": {}})
    if text:
        content.append({"type": "text", "text": text})
    return {"type": "assistant", "session_id": "s-1", "parent_tool_use_id": None,
            "message": {"id": mid, "content": content,
                        "usage": {"input_tokens": 100, "output_tokens": out}}}


def tool_result(tid: str = "t1") -> dict[str, Any]:
    return {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": tid}]}}


def result(text: str = "done", **fields: Any) -> dict[str, Any]:
    return {"type": "result", "subtype": "success", "is_error": False, "result": text,
            "session_id": "s-1", **fields}


def test_a_tool_call_that_ends_within_its_chunk_is_one_instantaneous_call() -> None:
    sink = NullSink()
    reader = StreamReader("claude", sink)
    reader.stdout(lines(assistant("m1", out=5, tool="Edit"), tool_result()))
    assert ("tool", "Edit", False, None, "t1") in sink.said
    assert not any(s[0] == "tool" and s[3] is not None for s in sink.said)


def test_a_tool_call_across_chunks_puts_the_attempt_inside_a_tool_until_it_ends() -> None:
    sink = NullSink()
    reader = StreamReader("claude", sink)
    reader.stdout(lines(assistant("m1", out=5, tool="Bash")))
    assert sink.said[-2:] == [("tool", "Bash", False, True, "t1"),
                              ("charge", Usage(calls=1, input_tokens=100, output_tokens=5))]
    reader.stdout(lines(tool_result()))
    assert sink.said[-1] == ("tool", "Bash", False, False, "t1")


def test_each_of_two_tool_calls_in_flight_together_starts_and_ends_by_its_own_id() -> None:
    sink = NullSink()
    reader = StreamReader("claude", sink)
    reader.stdout(lines(assistant("m1", out=5, tool="Bash", tid="t1"),
                        assistant("m2", out=5, tool="Grep", tid="t2")))
    reader.stdout(lines(tool_result("t1")))
    reader.stdout(lines(tool_result("t2")))
    assert [s for s in sink.said if s[0] == "tool"] == [
        ("tool", "Bash", False, True, "t1"), ("tool", "Grep", True, True, "t2"),
        ("tool", "Bash", False, False, "t1"), ("tool", "Grep", True, False, "t2")]


def test_spend_is_one_charge_a_chunk_and_a_repeated_message_counts_once() -> None:
    sink = NullSink()
    reader = StreamReader("claude", sink, pricing=Pricing(3.0, 15.0))
    reader.stdout(lines(assistant("m1", out=5), assistant("m1", out=5),
                        assistant("m1", out=8), assistant("m2", out=2)))
    charges = [s[1] for s in sink.said if s[0] == "charge"]
    assert charges == [Usage(calls=2, input_tokens=200, output_tokens=10,
                             cost=(200 * 3.0 + 10 * 15.0) / 1e6)]


def test_the_clis_own_total_cost_replaces_the_estimate_upward_only() -> None:
    sink = NullSink()
    reader = StreamReader("claude", sink, pricing=Pricing(3.0, 15.0))
    reader.stdout(lines(assistant("m1", out=1000)))  # estimated 0.0153
    reader.stdout(lines(result(total_cost_usd=0.05)))
    reader.stdout(b"")
    costs = [s[1].cost for s in sink.said if s[0] == "charge"]
    assert sum(costs) == pytest.approx(0.05)
    low = NullSink()
    again = StreamReader("claude", low, pricing=Pricing(3.0, 15.0))
    again.stdout(lines(assistant("m1", out=1000), result(total_cost_usd=0.001)))
    assert sum(s[1].cost for s in low.said if s[0] == "charge") == pytest.approx(0.0153)


def test_bad_lines_are_counted_and_are_progress() -> None:
    sink = NullSink()
    reader = StreamReader("claude", sink)
    reader.stdout(b"Warning: not JSON\n" + lines({"type": "telepathy"}, [1, 2]) + b"\n")
    reader.stdout(b"x" * (MAX_LINE + 10))  # a line over a megabyte, not ended yet
    reader.stdout(b"xxx\n" + lines(result()))
    reader.stdout(b"")
    assert reader.bad_lines == 4
    assert reader.verdict(0, "claude", describe="exited 0").outcome is AttemptOutcome.completed


@pytest.mark.parametrize(("events", "code", "outcome"), [
    ([result()], 0, AttemptOutcome.completed),
    ([result(), ], 1, AttemptOutcome.error),  # a success that exits non-zero
    ([{**result(), "is_error": True}], 0, AttemptOutcome.error),  # exit 0 after an error
    ([{**result(), "subtype": "error_max_budget_usd", "is_error": True}], 1,
     AttemptOutcome.budget_exceeded),
    ([assistant("m1", out=1)], 0, AttemptOutcome.crash),  # no terminal event
    ([assistant("m1", out=1)], 1, AttemptOutcome.crash),  # cut short
    ([result()], -15, AttemptOutcome.completed),  # stopped by its exit grace after it
])
def test_the_end_is_judged_from_the_stream_and_the_exit_together(
        events: list[Any], code: int, outcome: AttemptOutcome) -> None:
    reader = StreamReader("claude", NullSink())
    reader.stdout(lines(*events))
    reader.stdout(b"")
    verdict = reader.verdict(code, "claude", describe=f"exited {code}")
    assert verdict is not None and verdict.outcome is outcome


def test_jsonl_is_zeus_own_protocol_and_other_lines_are_progress() -> None:
    sink = NullSink()
    reader = StreamReader("jsonl", sink)
    reader.stdout(lines({"partial": "a.py"}, {"charge": {"calls": 1, "cost": 0.5}},
                        {"tool": {"name": "pytest", "phase": "start", "side_effects": False}},
                        {"heartbeat": "thinking"}, {"session": "abc"}) + b"plain words\n")
    reader.stdout(lines({"tool": {"name": "pytest", "phase": "end"}}, {"result": {"n": 3}}))
    reader.stdout(b"")
    assert ("partial", "a.py") in sink.said and ("session", "abc") in sink.said
    assert ("note", "thinking") in sink.said
    assert ("charge", Usage(calls=1, cost=0.5)) in sink.said
    assert ("tool", "pytest", True, True, "pytest") in sink.said  # no id: its name is one
    assert ("tool", "pytest", True, False, "pytest") in sink.said
    assert reader.bad_lines == 0
    verdict = reader.verdict(0, "script", describe="exited 0")
    assert verdict is not None and verdict.value == {"n": 3}


def test_lines_keep_the_whole_output_and_their_last_fifty_for_a_stop() -> None:
    reader = StreamReader("lines", NullSink())
    reader.stdout(b"".join(f"line {n}\n".encode() for n in range(1, 61)))
    reader.stdout(b"")
    assert reader.stopped_partials() == [f"line {n}" for n in range(11, 61)]
    assert reader.final_value().startswith("line 1\n")
    assert reader.verdict(0, "tool", describe="exited 0") is None  # by its exit alone


def test_tokens_a_cli_priced_at_zero_are_priced_by_pricing() -> None:
    def step(cost: float) -> dict[str, Any]:
        return {"type": "step_finish", "sessionID": "ses_1", "part": {
            "reason": "tool-calls", "cost": cost,
            "tokens": {"input": 1000, "output": 100, "reasoning": 0,
                       "cache": {"read": 0, "write": 0}}}}
    sink = NullSink()
    reader = StreamReader("opencode", sink, pricing=Pricing(3.0, 15.0))
    reader.stdout(lines(step(0)))  # a local model OpenCode prices at 0
    reader.stdout(lines(step(0.25)))  # its own price, where it has one, is kept
    costs = [s[1].cost for s in sink.said if s[0] == "charge"]
    assert costs == [pytest.approx((1000 * 3.0 + 100 * 15.0) / 1e6), 0.25]
    unpriced = NullSink()
    StreamReader("opencode", unpriced).stdout(lines(step(0)))
    assert [s[1].cost for s in unpriced.said if s[0] == "charge"] == [0.0]
