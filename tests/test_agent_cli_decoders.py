"""Each agent CLI's decoder against transcripts in the CLI's real format
(tests/fixtures/agent_clis/<cli>/<scenario>.jsonl), and the fake CLI that replays them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actors.speaks import SessionTotals, claude, codex, cursor, gemini, opencode
from actors.speaks.claude import ClaudeDecoder
from actors.speaks.codex import CodexDecoder
from actors.speaks.cursor import CursorDecoder
from actors.speaks.decoding import Decoder, EndKind
from actors.speaks.gemini import GeminiDecoder
from actors.speaks.invocation import Invocation, cli_argv
from actors.speaks.opencode import OpenCodeDecoder
from tests._agent_clis import FAKE_CLI, TRANSCRIPTS, FakeClis, fake_clis

__all__ = ["fake_clis"]  # the fixture, used below

DECODERS: dict[str, Callable[[], Decoder]] = {
    "claude": ClaudeDecoder,
    "codex": CodexDecoder,
    "gemini": GeminiDecoder,
    "opencode": OpenCodeDecoder,
    "cursor": CursorDecoder,
}
SESSIONS = {
    "claude": "3f8a2c1e-7b4d-4e9a-9c2f-5d6e8a1b0c47",
    "codex": "019a9776-0a34-7842-8627-112b63d66e90",
    "gemini": "8d3f1b2a-6c4e-4a7f-b9d0-2e5c7a1f4b86",
    "opencode": "ses_4b2f9c1d7ffeQm3Xk8Lr2Vt6Wn",
    "cursor": "c6b62c6f-7ead-4fd6-9922-e952131177ff",
}
COMMON = ("completed", "blocked", "timed_out", "error_result", "error_exit0", "no_result",
          "hang", "stays_alive", "bad_lines", "side_effect")
EXTRA = {
    "claude": ("long_tool", "silent", "spend", "resume", "budget"),
    "codex": ("long_tool", "silent", "spend", "resume"),
    "gemini": ("turn_limit",),
    "opencode": (),
    "cursor": ("usage",),
}
ALL = [(cli, name) for cli in DECODERS for name in (*COMMON, *EXTRA[cli])]
# The scenarios whose run ends well, and the status their summary block gives.
FINISHED = {"completed": "completed", "blocked": "blocked", "timed_out": "timed_out",
            "stays_alive": "completed", "bad_lines": "completed", "long_tool": "completed",
            "spend": "completed", "resume": "completed", "usage": "completed"}


class Recording:
    """A `Stream` that keeps every call made to it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.details: list[tuple[str, str | None]] = []  # each tool call's name and detail

    def session(self, session_id: str) -> None:
        self.calls.append(("session", session_id))

    def tool_started(self, call_id: str, name: str, *, side_effects: bool,
                     detail: str | None = None) -> None:
        self.calls.append(("tool_started", (call_id, name, side_effects)))
        self.details.append((name, detail))

    def tool_ended(self, call_id: str) -> None:
        self.calls.append(("tool_ended", call_id))

    def tool_used(self, name: str, *, side_effects: bool, detail: str | None = None) -> None:
        self.calls.append(("tool_used", (name, side_effects)))
        self.details.append((name, detail))

    def tokens(self, input_tokens: int = 0, output_tokens: int = 0, *,
               cached_input_tokens: int = 0, calls: int = 0) -> None:
        self.calls.append(("tokens", (input_tokens, output_tokens, cached_input_tokens, calls)))

    def cost(self, usd: float, *, input_tokens: int = 0, output_tokens: int = 0,
             cached_input_tokens: int = 0, calls: int = 0) -> None:
        self.calls.append(("cost", (usd, input_tokens, output_tokens, cached_input_tokens,
                                    calls)))

    def total_cost(self, usd: float) -> None:
        self.calls.append(("total_cost", usd))

    def text(self, text: str) -> None:
        self.calls.append(("text", text))

    def failure(self, message: str) -> None:
        self.calls.append(("failure", message))

    def end(self, *, ok: bool, text: str | None = None, error: str | None = None,
            kind: EndKind = None, blocker: str | None = None) -> None:
        self.calls.append(("end", {"ok": ok, "text": text, "error": error, "kind": kind,
                                   "blocker": blocker}))

    def of(self, name: str) -> list[Any]:
        return [value for call, value in self.calls if call == name]

    def spend(self) -> tuple[int, int, int, int]:
        """(input, output, cached input, calls) over every `tokens` and `cost` call."""
        rows = [value for value in self.of("tokens")] + [value[1:] for value in self.of("cost")]
        return (sum(r[0] for r in rows), sum(r[1] for r in rows), sum(r[2] for r in rows),
                sum(r[3] for r in rows))

    def final(self) -> dict[str, Any]:
        (end,) = self.of("end")
        return dict(end)


def transcript(cli: str, name: str) -> list[str]:
    return (TRANSCRIPTS / cli / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()


def events(cli: str, name: str) -> list[dict[str, Any]]:
    found = []
    for line in transcript(cli, name):
        if line.startswith("#"):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            found.append(event)
    return found


def decode(cli: str, name: str, decoder: Decoder | None = None) -> tuple[Recording, int]:
    """Feed a transcript through its CLI's decoder, as the reader does: the recording and
    the count of bad lines (not JSON, a type the decoder does not know, over 1 MB)."""
    decoder = decoder or DECODERS[cli]()
    stream, bad = Recording(), 0
    for line in transcript(cli, name):
        if line.startswith("#! big-line"):
            bad += 1  # a line over 1 MB never reaches the decoder
            continue
        if line.startswith("#") or not line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if not isinstance(event, dict) or not decoder.event(event, stream):
            bad += 1
    return stream, bad


def exit_code(cli: str, name: str) -> int:
    """The exit code the transcript ends with (`#! exit N`; 0 at its end)."""
    for line in transcript(cli, name):
        if line.startswith("#! exit "):
            return int(line.split()[2])
    return 0


# --- every transcript ---------------------------------------------------------------


@pytest.mark.parametrize(("cli", "name"), ALL)
def test_the_transcript_names_its_cli_version_and_source(cli: str, name: str) -> None:
    first = transcript(cli, name)[0]
    assert first.startswith("# ") and "(" in first and first.endswith(")")


@pytest.mark.parametrize(("cli", "name"), ALL)
def test_every_event_is_known_except_the_planted_ones(cli: str, name: str) -> None:
    _, bad = decode(cli, name)
    assert bad == (3 if name == "bad_lines" else 0)


@pytest.mark.parametrize(("cli", "name"), ALL)
def test_the_session_is_reported_once(cli: str, name: str) -> None:
    stream, _ = decode(cli, name)
    assert stream.of("session") == [SESSIONS[cli]]


@pytest.mark.parametrize(("cli", "name"), ALL)
def test_every_tool_started_ends_unless_the_run_stopped_inside_it(cli: str, name: str) -> None:
    stream, _ = decode(cli, name)
    started = [call_id for call_id, _, _ in stream.of("tool_started")]
    assert len(started) == len(set(started))
    if name in FINISHED or name in ("error_result", "error_exit0", "side_effect", "no_result"):
        assert set(stream.of("tool_ended")) == set(started)
    assert set(stream.of("tool_ended")) <= set(started)


@pytest.mark.parametrize(("cli", "name"), [(c, n) for c, n in ALL if n in FINISHED])
def test_a_finished_run_ends_ok_with_its_summary_block(cli: str, name: str) -> None:
    stream, _ = decode(cli, name)
    end = stream.final()
    assert end["ok"] is True and end["error"] is None and end["kind"] is None
    text = end["text"] or stream.of("text")[-1]
    assert "<subtask_summary>" in text and "</subtask_summary>" in text
    assert f"Status: {FINISHED[name]}" in text
    # The streamed text's latest value is the reply's last message, block included.
    assert "<subtask_summary>" in stream.of("text")[-1]


@pytest.mark.parametrize("cli", DECODERS)
def test_a_blocked_run_says_its_blocker(cli: str) -> None:
    stream, _ = decode(cli, "blocked")
    text = stream.final()["text"] or stream.of("text")[-1]
    risks = text.split("Risks / Follow-up:")[1]
    assert "blocked: the fixture database credentials" in risks


@pytest.mark.parametrize(("cli", "name"),
                         [(c, n) for c in DECODERS for n in ("error_result", "error_exit0")])
def test_an_error_terminal_event_ends_not_ok(cli: str, name: str) -> None:
    stream, _ = decode(cli, name)
    end = stream.final()
    assert end["ok"] is False and end["error"]
    assert (exit_code(cli, name) != 0) == (name == "error_result")


@pytest.mark.parametrize(("cli", "error"), [
    ("claude", "API Error: 529"),
    ("codex", "stream disconnected before completion"),
    ("gemini", "exhausted your capacity"),
    ("opencode", "exceed the rate limit"),
    ("cursor", "ECONNRESET"),
])
def test_the_error_is_the_clis_own_message(cli: str, error: str) -> None:
    stream, _ = decode(cli, "error_result")
    assert error in stream.final()["error"]


@pytest.mark.parametrize(("cli", "name"),
                         [(c, n) for c, n in ALL if n in ("no_result", "hang", "silent",
                                                          "side_effect")])
def test_a_stream_without_its_terminal_event_has_no_end(cli: str, name: str) -> None:
    stream, _ = decode(cli, name)
    assert stream.of("end") == []


@pytest.mark.parametrize("cli", DECODERS)
def test_a_side_effect_tool_ran_before_the_crash(cli: str) -> None:
    stream, _ = decode(cli, "side_effect")
    assert exit_code(cli, "side_effect") != 0
    effects = [name for _, name, effects in stream.of("tool_started") if effects]
    effects += [name for name, effects in stream.of("tool_used") if effects]
    assert effects
    edits = {"claude": "Edit", "codex": "file_change", "gemini": "replace",
             "opencode": "edit", "cursor": "editToolCall"}
    assert edits[cli] in effects


# --- tools and side effects ---------------------------------------------------------


def test_claude_tools_start_on_tool_use_and_end_on_tool_result() -> None:
    stream, _ = decode("claude", "completed")
    assert stream.of("tool_started") == [
        ("toolu_01A9bC3dE5fG7hJ9kL1mN3pQ", "Read", False),
        ("toolu_01B2cD4eF6gH8jK0lM2nP4qR", "Bash", True),
        ("toolu_01C3dE5fG7hJ9kL1mN3pQ5rS", "Edit", True),
        ("toolu_01D4eF6gH8jK0lM2nP4qR6sT", "Bash", True),
    ]
    order = [call for call, _ in stream.calls if call.startswith("tool_")]
    assert order == ["tool_started", "tool_ended"] * 4


def test_codex_tool_items_start_and_end_by_item_id() -> None:
    stream, _ = decode("codex", "completed")
    assert stream.of("tool_started") == [
        ("item_1", "command_execution", True), ("item_2", "command_execution", True),
        ("item_4", "file_change", True), ("item_5", "command_execution", True),
    ]
    assert stream.of("tool_ended") == ["item_1", "item_2", "item_4", "item_5"]


def test_gemini_tools_start_on_tool_use_and_end_on_tool_result() -> None:
    stream, _ = decode("gemini", "completed")
    assert [(name, effects) for _, name, effects in stream.of("tool_started")] == [
        ("read_file", False), ("run_shell_command", True), ("replace", True),
        ("run_shell_command", True),
    ]


def test_opencode_tools_are_reported_once_done() -> None:
    stream, _ = decode("opencode", "completed")
    assert stream.of("tool_started") == []
    assert stream.of("tool_used") == [("read", False), ("bash", True), ("edit", True),
                                      ("bash", True)]


def test_cursor_tool_calls_start_and_end_by_call_id() -> None:
    stream, _ = decode("cursor", "completed")
    assert [(name, effects) for _, name, effects in stream.of("tool_started")] == [
        ("readToolCall", False), ("shellToolCall", True), ("editToolCall", True),
        ("shellToolCall", True),
    ]


@pytest.mark.parametrize(("module", "writes", "reads"), [
    (claude, {"Edit", "Write", "MultiEdit", "NotebookEdit", "Bash"},
     {"Read", "Grep", "Glob", "LS", "WebFetch", "WebSearch", "TodoWrite"}),
    (codex, {"command_execution", "file_change", "mcp_tool_call"}, {"web_search"}),
    (gemini, {"write_file", "replace", "run_shell_command"},
     {"read_file", "glob", "grep_search", "list_directory", "web_fetch", "google_web_search"}),
    (opencode, {"edit", "write", "bash", "patch"}, {"read", "grep", "glob", "list", "webfetch"}),
    (cursor, {"shellToolCall", "editToolCall", "writeToolCall", "deleteToolCall"},
     {"readToolCall", "grepToolCall", "globToolCall", "lsToolCall"}),
])
def test_the_side_effect_lists(module: Any, writes: set[str], reads: set[str]) -> None:
    assert writes <= module.SIDE_EFFECT_TOOLS
    assert reads <= module.READ_ONLY_TOOLS
    assert not module.SIDE_EFFECT_TOOLS & module.READ_ONLY_TOOLS


@pytest.mark.parametrize(("cli", "event", "name"), [
    ("claude", {"type": "assistant", "message": {"id": "msg_x", "content": [
        {"type": "tool_use", "id": "toolu_x", "name": "mcp__github__create_issue"}]}},
     "mcp__github__create_issue"),
    ("gemini", {"type": "tool_use", "tool_id": "t1", "tool_name": "github__create_issue"},
     "github__create_issue"),
    ("cursor", {"type": "tool_call", "subtype": "started", "call_id": "c1",
                "tool_call": {"mcpToolCall": {"args": {"name": "create_issue"}}}},
     "mcpToolCall"),
])
def test_an_unknown_tool_counts_as_having_side_effects(cli: str, event: dict[str, Any],
                                                       name: str) -> None:
    stream = Recording()
    assert DECODERS[cli]().event(event, stream)
    assert stream.of("tool_started")[0][1:] == (name, True)


def test_codex_reads_the_early_item_type_field() -> None:
    decoder, stream = CodexDecoder(), Recording()
    assert decoder.event({"type": "item.started", "item": {
        "id": "item_1", "item_type": "command_execution", "command": "ls"}}, stream)
    assert decoder.event({"type": "item.completed", "item": {
        "id": "item_1", "item_type": "command_execution", "command": "ls", "exit_code": 0}},
        stream)
    assert decoder.event({"type": "item.completed", "item": {
        "id": "item_2", "item_type": "assistant_message", "text": "Done."}}, stream)
    assert decoder.event({"type": "turn.completed", "usage": {
        "input_tokens": 10, "cached_input_tokens": 0, "output_tokens": 2}}, stream)
    assert stream.of("tool_started") == [("item_1", "command_execution", True)]
    assert stream.of("tool_ended") == ["item_1"]
    assert stream.final()["text"] == "Done."


def test_a_codex_item_completed_without_a_start_is_a_tool_used() -> None:
    stream = Recording()
    assert CodexDecoder().event({"type": "item.completed", "item": {
        "id": "item_7", "type": "file_change", "changes": [], "status": "completed"}}, stream)
    assert stream.of("tool_used") == [("file_change", True)]


# --- spend --------------------------------------------------------------------------


def test_claude_counts_a_repeated_message_id_once() -> None:
    stream, _ = decode("claude", "spend")
    assistant = [e for e in events("claude", "spend") if e["type"] == "assistant"]
    ids = {e["message"]["id"] for e in assistant}
    assert len(assistant) > 2 * len(ids)  # every id repeats over several lines
    (result,) = [e for e in events("claude", "spend") if e["type"] == "result"]
    usage = result["usage"]
    expected_input = (usage["input_tokens"] + usage["cache_creation_input_tokens"]
                      + usage["cache_read_input_tokens"])
    # The sum over distinct ids (each its largest report) is the result's total; the
    # result's usage is not added on top.
    assert stream.spend() == (expected_input, usage["output_tokens"],
                              usage["cache_read_input_tokens"], len(ids))
    assert stream.spend() == (150868, 1971, 144705, 9)
    assert stream.of("total_cost") == [0.4113862]


def test_claude_charges_only_what_a_later_line_of_a_message_adds() -> None:
    decoder, stream = ClaudeDecoder(), Recording()
    def line(output: int) -> dict[str, Any]:
        return {"type": "assistant", "message": {"id": "msg_1", "content": [], "usage": {
            "input_tokens": 3, "cache_creation_input_tokens": 100,
            "cache_read_input_tokens": 900, "output_tokens": output}}}
    for output in (1, 1, 40, 40):
        decoder.event(line(output), stream)
    assert stream.of("tokens") == [(1003, 1, 900, 1), (0, 39, 0, 0)]


def test_claude_counts_output_tokens_from_the_partial_messages_as_they_grow() -> None:
    """With --include-partial-messages: the `assistant` line says output_tokens 1 (the
    reply's start); the reply's `message_delta` says what it really spent."""
    decoder, stream = ClaudeDecoder(), Recording()
    start = {"id": "msg_1", "usage": {"input_tokens": 3, "cache_creation_input_tokens": 100,
                                      "cache_read_input_tokens": 900, "output_tokens": 1}}
    lines: list[dict[str, Any]] = [
        {"type": "stream_event", "parent_tool_use_id": None,
         "event": {"type": "message_start", "message": {**start, "content": []}}},
        {"type": "assistant", "parent_tool_use_id": None,
         "message": {**start, "content": [{"type": "text", "text": "Done."}]}},
        {"type": "stream_event", "parent_tool_use_id": None,
         "event": {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                   "usage": {"output_tokens": 60}}},
        {"type": "stream_event", "parent_tool_use_id": None,
         "event": {"type": "message_delta", "delta": {}, "usage": {"output_tokens": 90}}},
        {"type": "stream_event", "parent_tool_use_id": None,
         "event": {"type": "message_stop"}},
    ]
    for line in lines:
        assert decoder.event(line, stream)
    assert stream.of("tokens") == [(1003, 1, 900, 1), (0, 59, 0, 0), (0, 30, 0, 0)]
    assert stream.spend() == (1003, 90, 900, 1)


@pytest.mark.parametrize(("name", "totals"), [
    ("completed", (86706, 1097, 80235, 5, 0.1287415)),
    ("error_result", (50459, 623, 45041, 3, 0.0731902)),
    ("resume", (40676, 529, 39066, 2, 0.0412277)),
])
def test_claude_spend_and_total_cost(name: str, totals: tuple[int, int, int, int, float]) -> None:
    stream, _ = decode("claude", name)
    assert stream.spend() == totals[:4]
    assert stream.of("total_cost") == [totals[4]]
    assert stream.calls.index(("total_cost", totals[4])) < next(
        i for i, (call, _) in enumerate(stream.calls) if call == "end")


def test_codex_usage_is_the_threads_running_total() -> None:
    stream, _ = decode("codex", "spend")
    assert stream.spend() == (612447, 9873, 571904, 1)
    decoder, stream = CodexDecoder(), Recording()
    for total in ((1000, 100, 800), (1500, 180, 1200), (1500, 180, 1200)):
        decoder.event({"type": "turn.completed", "usage": {
            "input_tokens": total[0], "output_tokens": total[1],
            "cached_input_tokens": total[2]}}, stream)
    assert stream.of("tokens") == [(1000, 100, 800, 1), (500, 80, 400, 1)]


def test_a_resumed_codex_thread_charges_only_past_the_previous_runs_total() -> None:
    first = CodexDecoder()
    before, _ = decode("codex", "completed", first)
    assert first.last_total == (48213, 41984, 1877)
    # Without what the thread had spent, its first total is all charged ...
    alone, _ = decode("codex", "resume")
    assert alone.spend() == (48213 + 31877, 1877 + 612, 41984 + 30720, 1)
    # ... with it, only this run's part.
    follow_up, _ = decode("codex", "resume", CodexDecoder(prior=SessionTotals(*first.last_total)))
    assert follow_up.spend() == (31877, 612, 30720, 1)
    assert follow_up.of("session") == before.of("session")


def test_gemini_tokens_arrive_with_the_result() -> None:
    stream, _ = decode("gemini", "completed")
    (result,) = [e for e in events("gemini", "completed") if e["type"] == "result"]
    stats = result["stats"]
    # total_tokens counts the thinking tokens output_tokens leaves out.
    assert stream.spend() == (stats["input_tokens"],
                              stats["total_tokens"] - stats["input_tokens"], stats["cached"], 1)
    tokens_at = next(i for i, (call, _) in enumerate(stream.calls) if call == "tokens")
    assert all(call != "tokens" for call, _ in stream.calls[:tokens_at])
    assert stream.calls[tokens_at + 1][0] == "end"


def test_opencode_charges_each_steps_own_cost() -> None:
    stream, _ = decode("opencode", "completed")
    steps = [e["part"] for e in events("opencode", "completed") if e["type"] == "step_finish"]
    costs = stream.of("cost")
    assert len(costs) == len(steps) == 4
    for (usd, input_tokens, output_tokens, cached, calls), step in zip(costs, steps,
                                                                        strict=True):
        tokens = step["tokens"]
        assert usd == step["cost"] and calls == 1
        assert input_tokens == tokens["input"] + tokens["cache"]["read"] + tokens["cache"]["write"]
        assert output_tokens == tokens["output"] + tokens["reasoning"]
        assert cached == tokens["cache"]["read"]
    assert stream.of("tokens") == []


def test_an_older_cursor_reports_no_spend() -> None:
    stream, _ = decode("cursor", "completed")
    assert stream.spend() == (0, 0, 0, 0) and stream.of("total_cost") == []


def test_cursor_tokens_arrive_with_the_result_cached_input_counted() -> None:
    stream, _ = decode("cursor", "usage")
    (result,) = [e for e in events("cursor", "usage") if e["type"] == "result"]
    usage = result["usage"]
    # Its inputTokens leave both caches out; Zeus's input counts them in.
    assert stream.spend() == (usage["inputTokens"] + usage["cacheReadTokens"]
                              + usage["cacheWriteTokens"], usage["outputTokens"],
                              usage["cacheReadTokens"], 1)
    assert stream.spend() == (56787, 1187, 48256, 1)
    assert [call for call, _ in stream.calls[-2:]] == ["tokens", "end"]


@pytest.mark.parametrize("event", [
    {"type": "retry", "subtype": "starting", "attempt": 1},
    {"type": "connection", "subtype": "reconnecting", "attempt": 2},
    {"type": "interaction_query", "subtype": "request", "query_type": "permission"},
    {"type": "system", "subtype": "background_shell_timeout", "aborted_count": 1},
])
def test_cursor_s_newer_lines_are_known_and_mean_only_progress(event: dict[str, Any]) -> None:
    stream = Recording()
    assert CursorDecoder().event({**event, "session_id": "s"}, stream)
    assert stream.calls == [("session", "s")]


# --- the end ------------------------------------------------------------------------


@pytest.mark.parametrize(("subtype", "kind"), [
    ("error_max_turns", "turn_limit"), ("error_max_budget_usd", "budget"),
    ("error_during_execution", None),
])
def test_claude_error_subtypes(subtype: str, kind: EndKind) -> None:
    stream = Recording()
    ClaudeDecoder().event({"type": "result", "subtype": subtype, "is_error": True,
                           "session_id": "s", "errors": ["Reached maximum number of turns (10)"],
                           "total_cost_usd": 0.5}, stream)
    end = stream.final()
    assert end["ok"] is False and end["kind"] == kind
    assert end["error"] == "Reached maximum number of turns (10)"


DENIED = "real-2.1.328-permission-denied-partial"  # Bash(rm -rf build), not allowed


def test_claudes_permission_denials_become_the_blocker_of_a_reply_with_no_block() -> None:
    stream, _ = decode("claude", DENIED)
    (result,) = [e for e in events("claude", DENIED) if e["type"] == "result"]
    assert [d["tool_name"] for d in result["permission_denials"]] == ["Bash"]
    end = stream.final()
    assert end["ok"] is True and end["error"] is None
    assert end["blocker"] == "needs permission for Bash(rm -rf build)"
    assert end["text"] == "I could not remove build/: running the command was not allowed."


@pytest.mark.parametrize("status", ["completed", "blocked"])
def test_a_summary_block_says_otherwise_than_claudes_permission_denials(status: str) -> None:
    (result,) = [e for e in events("claude", DENIED) if e["type"] == "result"]
    text = (f"Removed it another way.\n\n<subtask_summary>\nStatus: {status}\n"
            "Agent: hermes\nScope: Clean\n</subtask_summary>")
    stream = Recording()
    ClaudeDecoder().event({**result, "result": text}, stream)
    assert stream.final()["blocker"] is None and stream.final()["text"] == text
    stream = Recording()
    ClaudeDecoder().event({**result, "permission_denials": []}, stream)
    assert stream.final()["blocker"] is None


def test_claude_budget_transcript() -> None:
    stream, _ = decode("claude", "budget")
    assert stream.final()["kind"] == "budget" and exit_code("claude", "budget") == 1


def test_a_claude_api_failure_with_subtype_success_is_not_ok() -> None:
    stream, _ = decode("claude", "error_result")
    (result,) = [e for e in events("claude", "error_result") if e["type"] == "result"]
    assert result["subtype"] == "success" and result["is_error"] is True
    assert stream.final()["ok"] is False


def test_codex_error_lines_are_failures_and_turn_failed_is_the_end() -> None:
    stream, _ = decode("codex", "error_result")
    assert len(stream.of("failure")) == 6
    assert stream.calls[-1][0] == "end"


def test_gemini_turn_limits() -> None:
    stream, _ = decode("gemini", "turn_limit")
    end = stream.final()
    assert end["ok"] is False and end["kind"] == "turn_limit"
    assert exit_code("gemini", "turn_limit") == 53
    assert GeminiDecoder().exit_meaning(53) == "turn limit reached"
    # The core's own limit: an error line, then a result that still says success.
    stream = Recording()
    decoder = GeminiDecoder()
    for event in ({"type": "init", "session_id": "s", "model": "m"},
                  {"type": "error", "severity": "error",
                   "message": "Maximum session turns exceeded"},
                  {"type": "result", "status": "success", "stats": {}}):
        decoder.event(event, stream)
    assert stream.final()["kind"] == "turn_limit" and stream.final()["ok"] is False


def test_gemini_exit_codes() -> None:
    meanings = {code: GeminiDecoder().exit_meaning(code) for code in (1, 41, 42, 44, 52, 53,
                                                                       54, 55, 130)}
    assert meanings[1] is None
    assert all(meanings[code] for code in (41, 42, 44, 52, 53, 54, 55, 130))
    assert ClaudeDecoder().exit_meaning(53) is None


def test_a_gemini_warning_is_nothing_and_an_error_is_a_failure() -> None:
    stream = Recording()
    decoder = GeminiDecoder()
    assert decoder.event({"type": "error", "severity": "warning",
                          "message": "Loop detected, stopping execution"}, stream)
    assert stream.calls == []
    assert decoder.event({"type": "error", "severity": "error", "message": "bad chunk"},
                         stream)
    assert stream.of("failure") == ["bad chunk"]


def test_gemini_joins_the_reply_deltas_of_one_message() -> None:
    stream, _ = decode("gemini", "completed")
    texts = stream.of("text")
    assert texts[1] == "I'll read the failing test and the code it covers first."
    assert texts[-1].startswith("The empty input now returns an empty list.")


def test_an_old_opencode_ends_on_the_stop_step() -> None:
    stream = Recording()
    decoder = OpenCodeDecoder()
    lines = [e for e in events("opencode", "completed") if e["type"] != "done"]
    for event in lines:
        decoder.event(event, stream)
    assert stream.final()["ok"] is True
    assert "<subtask_summary>" in (stream.final()["text"] or "")


def test_cursor_joins_consecutive_assistant_lines() -> None:
    stream, _ = decode("cursor", "completed")
    texts = stream.of("text")
    assert texts[-1].startswith("The empty input now returns an empty list.")
    assert texts[-1].endswith("</subtask_summary>")


# --- odd events ---------------------------------------------------------------------


@pytest.mark.parametrize("cli", DECODERS)
def test_an_unknown_type_is_false(cli: str) -> None:
    decoder, stream = DECODERS[cli](), Recording()
    for event in ({"type": "no_such_event"}, {"type": 3}, {}, {"kind": "assistant"}):
        assert decoder.event(event, stream) is False


ODD = (None, 7, -1, 1.5, True, "x", "", [], [1, "a"], {}, {"a": 1})


@pytest.mark.parametrize("cli", DECODERS)
def test_odd_fields_never_raise(cli: str) -> None:
    seen: list[dict[str, Any]] = []
    for name in (*COMMON, *EXTRA[cli]):
        seen += events(cli, name)
    for event in seen:
        for key, value in event.items():
            if key == "type":
                continue
            inner = value if isinstance(value, dict) else {}
            for odd in ODD:
                DECODERS[cli]().event({**event, key: odd}, Recording())
                for sub in inner:
                    DECODERS[cli]().event({**event, key: {**inner, sub: odd}}, Recording())


# --- the fake CLI -------------------------------------------------------------------


def run_fake(*argv: str, env: dict[str, str] | None = None,
             cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(FAKE_CLI), *argv], capture_output=True,
                          stdin=subprocess.DEVNULL, text=True, timeout=30, env=env, cwd=cwd,
                          check=False)


def played(cli: str, name: str) -> list[str]:
    return [line for line in transcript(cli, name) if line and not line.startswith("#")]


def test_the_fake_claude_prints_the_transcript() -> None:
    done = run_fake("claude", "-p", "x (scenario: completed)", "--output-format", "stream-json",
                    "--verbose")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == played("claude", "completed")


def test_the_fake_claude_needs_verbose_with_stream_json() -> None:
    done = run_fake("claude", "-p", "x (scenario: completed)", "--output-format", "stream-json")
    assert done.returncode == 1 and done.stdout == ""
    assert ("Error: When using --print, --output-format=stream-json requires --verbose"
            in done.stderr)


@pytest.mark.parametrize(("cli", "argv"), [
    ("claude", ["-p", "x"]),
    ("codex", ["exec", "--skip-git-repo-check", "x"]),
    ("gemini", ["-p", "x"]),
    ("opencode", ["run", "x"]),
    ("cursor", ["-p", "x"]),
])
def test_the_fake_wants_its_stream_flag(cli: str, argv: list[str]) -> None:
    done = run_fake(cli, *argv)
    assert done.returncode == 2 and done.stderr and done.stdout == ""


@pytest.mark.parametrize("cli", DECODERS)
def test_the_fake_accepts_the_argv_zeus_builds(cli: str, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    invocation = Invocation(speaks=cli, program=(sys.executable, str(FAKE_CLI), cli),
                            args=("--model", "some-model", "--some-new-flag"),
                            budget_usd=1.25 if cli == "claude" else None)
    argv = cli_argv(invocation, "Fix it.\n\nscenario: blocked")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False,
                          env={"PATH": "/usr/bin:/bin", "ZEUS_FAKE_CLI_LOG": str(log)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == played(cli, "blocked")
    (call,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert call["cli"] == cli and call["prompt"] == "Fix it.\n\nscenario: blocked"
    assert call["resume"] is None and call["budget"] == (1.25 if cli == "claude" else None)


@pytest.mark.parametrize("cli", ["claude", "codex"])
def test_the_fake_resume_needs_the_session(cli: str, tmp_path: Path) -> None:
    program = (sys.executable, str(FAKE_CLI), cli)
    without = cli_argv(Invocation(speaks=cli, program=program), "go on (scenario: resume)")
    done = subprocess.run(without, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 1 and done.stdout == ""
    assert "No conversation found" in done.stderr or "no rollout found" in done.stderr
    resumed = cli_argv(Invocation(speaks=cli, program=program, resume=SESSIONS[cli]),
                       "go on (scenario: resume)")
    done = subprocess.run(resumed, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == played(cli, "resume")


def test_the_fake_clis_on_path(fake_clis: FakeClis) -> None:
    assert sorted(path.name for path in fake_clis.dir.iterdir()) == [
        "claude", "codex", "cursor-agent", "gemini", "opencode"]
    done = subprocess.run(["cursor-agent", "-p", "--output-format", "stream-json",
                           "--resume", "chat-1", "fix it (scenario: error_result)"],
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 1
    assert done.stdout.splitlines() == played("cursor", "error_result")
    (call,) = fake_clis.calls()
    assert call["cli"] == "cursor" and call["resume"] == "chat-1"
    assert call["argv"][-1] == "fix it (scenario: error_result)"


def test_the_fake_directives(tmp_path: Path) -> None:
    path = tmp_path / "made.jsonl"
    path.write_text('# made here\n#! repeat 3\n{"type":"init","session_id":"s"}\n'
                    '#! stderr something went wrong\n#! big-line 10\n#! exit 3\n'
                    '{"type":"never"}\n', encoding="utf-8")
    done = run_fake("gemini", "-p", "x", "--output-format", "stream-json",
                    env={"PATH": "/usr/bin:/bin", "ZEUS_FAKE_CLI_TRANSCRIPT": str(path)})
    assert done.returncode == 3
    assert done.stdout.splitlines() == ['{"type":"init","session_id":"s"}'] * 3 + ["x" * 10]
    assert done.stderr == "something went wrong\n"


def test_the_fake_picks_the_scenario_from_its_environment() -> None:
    done = run_fake("opencode", "run", "--format", "json", "fix it",
                    env={"PATH": "/usr/bin:/bin", "ZEUS_FAKE_CLI_SCENARIO": "no_result"})
    assert done.returncode == 0
    assert done.stdout.splitlines() == played("opencode", "no_result")


@pytest.mark.parametrize("prompt", [
    "Fix it.\n\nscenario: blocked",
    'say "hi"  twice, then -v --model x -- done ',
    "Role: leaf at depth 1 of 2;\nDeadline: 60 s from now.\nScope: run pytest -q, then -x",
    "007 1e5 0x1F .5 -",
    "",
])
def test_opencode_gets_the_prompt_in_words_it_does_not_quote_or_misread(prompt: str) -> None:
    argv = cli_argv(Invocation(speaks="opencode", args=("-m", "local/m")), prompt)
    assert argv[:6] == ["opencode", "run", "--format", "json", "-m", "local/m"]
    cut = argv.index("--", 6)
    before, after = argv[6:cut], argv[cut + 1:]
    # OpenCode's run.ts quotes each message argument that holds a space, then joins them
    # with one; its yargs reads a word that starts with `-` before `--` as an option, and
    # one that reads as a number after it as a number, which run.ts fails on
    # (checked against the real OpenCode in tests/real_clis/test_zeus.py).
    assert not any(" " in word for word in before + after)
    assert not any(word.startswith("-") for word in before)
    assert not any(re.fullmatch(r"-?[\d.]+(e\d+)?|0x[0-9A-F]+", word) for word in after)
    assert " ".join(before + after) == prompt


def test_opencode_gets_a_number_after_an_option_like_word_joined_to_the_word_before() -> None:
    # `--` can go after the last number only when no `-word` comes before it
    argv = cli_argv(Invocation(speaks="opencode"), "run pytest -x 3 times at 2 workers")
    assert argv[argv.index("--"):] == ["--", "-x 3", "times", "at 2", "workers"]
