"""The <subtask_summary> block (docs/formats.md): Summary.render and Summary.parse."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from actors import AttemptOutcome, AttemptRecord, Status, Summary, Usage
from supervisor.core.state import grouped

# Strings that look like the format itself, or that plain text cannot carry on one line.
TRICKY = [
    "<subtask_summary>", "</subtask_summary>", "Findings:", "Changes: none", "Status: completed",
    "- a bullet", "* star", "Risks / Follow-up:", '"quoted"', '"', " leading", "trailing ", "none",
    "None", "null", "42", "-1.5", "[1, 2]", '{"a": 1}', "NaN", "@apollo", "error: boom",
    "pid=3", "line\nbreak", "\r\n", "\u2028", "\x85", "\x00", "tab\tinside", "é ü 漢字 🙂",
]
texts = st.one_of(
    st.sampled_from(TRICKY),
    st.text(),
    st.lists(st.sampled_from(TRICKY) | st.text(max_size=6), max_size=4).map("".join),
)
names = st.one_of(st.from_regex(r"[a-z][a-z0-9_-]{0,8}(-a[0-9])?", fullmatch=True), texts)
floats = st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | floats | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
attempts = st.builds(
    AttemptRecord,
    id=names,
    agent=names,
    outcome=st.sampled_from(AttemptOutcome),
    duration_s=floats,
    error=st.none() | texts,
    pid=st.none() | st.integers(),
    losing_causes=st.lists(names, max_size=3),
    fenced=st.booleans(),
    killed=st.none() | st.sampled_from(["cooperative", "terminate", "kill"]) | texts,
)
usages = st.builds(
    Usage,
    calls=st.integers(min_value=0),
    input_tokens=st.integers(min_value=0),
    output_tokens=st.integers(min_value=0),
    cost=st.floats(min_value=0, allow_nan=False, allow_infinity=False),
)
summaries = st.builds(
    Summary,
    id=names,
    agent=names,
    scope=texts,
    status=st.sampled_from(Status),
    output=json_values,
    findings=st.lists(texts, max_size=3),
    changes=st.lists(texts, max_size=3),
    validation=st.lists(texts, max_size=3),
    risks=st.lists(texts, max_size=3),
    partial_results=st.lists(json_values, max_size=3),
    attempts=st.lists(attempts, max_size=3),
    usage=usages,
    error=st.none() | texts,
    timeout_kind=st.none() | st.sampled_from(["deadline", "stale"]),
    schema_error=st.none() | texts,
    truncated_chars=st.integers(),
    artifact=st.none() | texts,
    duration_s=floats,
    session_alias=st.none() | texts,
)


@settings(max_examples=200, deadline=None)
@given(summaries)
def test_any_summary_survives_render_and_parse(summary: Summary) -> None:
    assert Summary.parse(summary.render()) == summary


@settings(max_examples=50, deadline=None)
@given(summaries, texts)
def test_the_last_block_in_a_reply_is_the_one_read(summary: Summary, prose: str) -> None:
    # Prose that itself opens and closes a block would be a block: not this test's case.
    assume(not {"<subtask_summary>", "</subtask_summary>"} <= {ln.strip() for ln in
                                                            prose.split("\n")})
    earlier = Summary(id="x-1", agent="x", scope="earlier", status=Status.failed)
    text = f"{earlier.render()}\n{prose}\n{summary.render()}\n{prose}"
    assert Summary.parse(text) == summary


def test_an_ordinary_summary_renders_as_the_protocol_writes_it() -> None:
    summary = Summary(
        id="apollo-3",
        agent="apollo",
        scope="Scan all route files for auth patterns",
        status=Status.partial,
        findings=["auth.py and login.py use JWT"],
        risks=["3 files not scanned before the deadline"],
        partial_results=["auth.py", "login.py"],
        attempts=[
            AttemptRecord(id="apollo-3-a1", agent="apollo", outcome=AttemptOutcome.timeout,
                          duration_s=60.0, pid=4242, killed="terminate",
                          error="deadline of 60s passed"),
        ],
        usage=Usage(calls=3, input_tokens=2700, output_tokens=360, cost=0.006),
        timeout_kind="deadline",
        duration_s=61.5,
        session_alias="apollo-1",
    )
    assert summary.render() == (
        "<subtask_summary>\n"
        "Status: partial\n"
        "Agent: apollo\n"
        "Scope: Scan all route files for auth patterns\n"
        "Id: apollo-3\n"
        "\n"
        "Changes: none\n"
        "\n"
        "Findings:\n"
        "- auth.py and login.py use JWT\n"
        "\n"
        "Validation: none\n"
        "\n"
        "Risks / Follow-up:\n"
        "- 3 files not scanned before the deadline\n"
        "\n"
        "Partial results:\n"
        "- auth.py\n"
        "- login.py\n"
        "\n"
        "Attempts:\n"
        "- apollo-3-a1 apollo timeout 60s pid=4242 killed=terminate "
        "(ignored the cancel; stopped by SIGTERM) error: deadline of 60s passed\n"
        "\n"
        "Usage: 3 calls, 2700 input tokens, 360 output tokens, cost 0.006\n"
        "Timeout kind: deadline\n"
        "Duration: 61.5s\n"
        "Session alias: apollo-1\n"
        "</subtask_summary>"
    )


def test_values_that_are_not_plain_text_are_written_as_json_on_one_line() -> None:
    summary = Summary(
        id="hermes-1", agent="hermes", scope="two\nlines", status=Status.completed,
        output={"files": ["a.py"], "ok": True}, partial_results=["42", 42],
        attempts=[AttemptRecord(id="an id with spaces", agent="hermes",
                                outcome=AttemptOutcome.completed)],
        error='"quoted"',
    )
    text = summary.render()
    assert 'Scope: "two\\nlines"' in text
    assert 'Output: {"files": ["a.py"], "ok": true}' in text
    assert '- "42"\n- 42\n' in text
    assert '- "an id with spaces" hermes completed 0s\n' in text
    assert 'Error: "\\"quoted\\""' in text
    assert Summary.parse(text) == summary


def test_a_worker_written_summary_from_the_protocol_parses() -> None:
    text = (
        "Done. Here is the summary.\n\n"
        "<subtask_summary>\n"
        "Status: completed\n"
        "Agent: hermes\n"
        "Scope: Add refresh token rotation\n"
        "\n"
        "Changes:\n"
        "- backend/routers/auth.py — rotate the refresh token on use\n"
        "\n"
        "Findings:\n"
        "- the old token was never revoked\n"
        "\n"
        "Validation:\n"
        "- pytest tests/auth: 14 passed\n"
        "\n"
        "Risks / Follow-up:\n"
        "- clients that cache the token must re-read it\n"
        "\n"
        "Duration: 42s\n"
        "Session alias: hermes-1\n"
        "</subtask_summary>\n"
    )
    assert Summary.parse(text) == Summary(
        id="",
        agent="hermes",
        scope="Add refresh token rotation",
        status=Status.completed,
        changes=["backend/routers/auth.py — rotate the refresh token on use"],
        findings=["the old token was never revoked"],
        validation=["pytest tests/auth: 14 passed"],
        risks=["clients that cache the token must re-read it"],
        duration_s=42.0,
        session_alias="hermes-1",
    )


def test_the_reference_partial_example_keeps_its_partial_results() -> None:
    text = (
        "<subtask_summary>\n"
        "Status: partial\n"
        "Agent: apollo\n"
        "Scope: Scan all route files for auth patterns\n"
        "Partial results: [auth.py, login.py scanned; 3 files pending]\n"
        "</subtask_summary>"
    )
    summary = Summary.parse(text)
    assert summary.status is Status.partial
    assert summary.partial_results == ["[auth.py, login.py scanned; 3 files pending]"]


@pytest.mark.parametrize(
    ("word", "status"),
    [
        ("completed", Status.completed),
        ("Complete", Status.completed),
        ("TIMED_OUT", Status.timed_out),
        ("timed out", Status.timed_out),
        ("escalated", Status.blocked),
        ("budget exceeded", Status.budget_exceeded),
    ],
)
def test_status_words_of_the_protocols_are_understood(word: str, status: Status) -> None:
    text = f"<subtask_summary>\n**Status:** {word}\nAgent: @apollo\nScope: scan\n</subtask_summary>"
    summary = Summary.parse(text)
    assert (summary.status, summary.agent) == (status, "apollo")


def test_an_unknown_status_is_refused_listing_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match=r"Status: 'pending' is not one of completed, partial"):
        Summary.parse("<subtask_summary>\nStatus: pending\nAgent: a\nScope: s\n</subtask_summary>")


def test_a_summary_without_status_and_scope_is_refused_naming_both() -> None:
    with pytest.raises(ValueError, match=r"has no Status and Scope line"):
        Summary.parse("<subtask_summary>\nAgent: apollo\n</subtask_summary>")


def test_a_bad_duration_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match=r"Duration: 'a while' is not a duration"):
        Summary.parse("<subtask_summary>\nStatus: completed\nAgent: a\nScope: s\n"
                      "Duration: a while\n</subtask_summary>")


def test_a_malformed_attempt_line_is_refused_showing_the_expected_shape() -> None:
    with pytest.raises(ValueError, match=r"is not `<id> <agent> <outcome> <duration>s"):
        Summary.parse("<subtask_summary>\nStatus: failed\nAgent: a\nScope: s\nAttempts:\n"
                      "- a-1-a1 crashed badly\n</subtask_summary>")


REFERENCE_BLOCK = """Done with the auth fix.

## subtask_summary
**files_changed:** [src/auth.py, tests/test_auth.py]
**summary:** Added the missing token check
**tests:** ✅
**status:** {status}
"""


@pytest.mark.parametrize(("word", "status"), [("complete", Status.completed),
                                              ("escalated", Status.blocked),
                                              ("partial", Status.partial)])
def test_the_reference_tables_markdown_block_is_read(word: str, status: Status) -> None:
    summary = Summary.parse(REFERENCE_BLOCK.format(status=word))
    assert summary.status is status
    assert summary.changes == ["src/auth.py", "tests/test_auth.py"]
    assert summary.output == "Added the missing token check"
    assert summary.validation == ["✅"]


def test_a_markdown_block_without_status_is_refused_saying_so() -> None:
    with pytest.raises(ValueError, match=r"no \*\*status:\*\* line"):
        Summary.parse("## subtask_summary\n**summary:** did it\n")


def test_an_attempts_evidence_survives_render_and_parse() -> None:
    record = AttemptRecord(id="a-1-a1", agent="a", outcome="stale", progress=20,
                           tool_calls=14, last_tool="pytest",
                           last_note='ran "pytest -x" error: 3 failed', error="no progress")
    summary = Summary(id="a-1", agent="a", scope="s", status=Status.timed_out,
                      attempts=[record])
    text = summary.render()
    assert "tool_calls=14 last_tool=pytest" in text
    assert Summary.parse(text) == summary
def test_every_attempt_is_written_in_the_one_text_shape_whatever_its_names_hold() -> None:
    attempts = [
        AttemptRecord(id="hang-1-a1", agent="hang", outcome=AttemptOutcome.timeout,
                      duration_s=2.5, pid=8365, killed="terminate",
                      losing_causes=["child:cancelled", "budget_exceeded"],
                      error="deadline of 2 s passed"),
        AttemptRecord(id="x-1-a2", agent="an agent", outcome=AttemptOutcome.error,
                      losing_causes=["a, b", ""], fenced=True, killed="error: no",
                      error="ValueError: boom\nTraceback (most recent call last):"),
    ]
    summary = Summary(id="x-1", agent="x", scope="s", status=Status.failed, attempts=attempts)

    text = summary.render()

    assert "- hang-1-a1 hang timeout 2.5s pid=8365 losing=child:cancelled,budget_exceeded " \
           "killed=terminate (ignored the cancel; stopped by SIGTERM; the budget ran out too, " \
           "which lost to the deadline) error: deadline of 2 s passed\n" in text
    assert '- x-1-a2 "an agent" error 0s losing=["a, b", ""] fenced killed="error: no" ' \
           "(its thread did not stop: fenced, its late messages dropped) " \
           'error: "ValueError: boom\\nTraceback (most recent call last):"\n' in text
    assert not [line for line in text.splitlines() if line.startswith("- {")]
    assert Summary.parse(text) == summary


def test_an_attempt_written_as_json_by_an_older_zeus_still_parses() -> None:
    text = ("<subtask_summary>\nStatus: failed\nAgent: a\nScope: s\nAttempts:\n"
            '- {"id": "a-1-a1", "agent": "a", "outcome": "error", "losing_causes": ["x:y"]}\n'
            "</subtask_summary>")

    (attempt,) = Summary.parse(text).attempts

    assert (attempt.id, attempt.losing_causes) == ("a-1-a1", ["x:y"])


def test_a_failed_summary_says_type_and_message_with_the_traceback_indented_beneath() -> None:
    error = (
        "ValueError: bad input\n"
        "Traceback (most recent call last):\n"
        '  File "work.py", line 3, in work\n'
        "    raise ValueError('bad input')\n"
        "ValueError: bad input"
    )
    summary = Summary(id="a-1", agent="a", scope="s", status=Status.failed, error=error)

    text = summary.render()

    assert (
        "Error: ValueError: bad input\n"
        "    Traceback (most recent call last):\n"
        '      File "work.py", line 3, in work\n'
        "        raise ValueError('bad input')\n"
        "    ValueError: bad input\n"
    ) in text
    assert "\\n" not in text
    assert Summary.parse(text) == summary


@pytest.mark.parametrize(
    "error", [" edge space\nx", "a\r\nb", "a\n</subtask_summary>", "ends with a break\n"]
)
def test_an_error_that_indenting_would_change_is_written_as_json(error: str) -> None:
    summary = Summary(id="a-1", agent="a", scope="s", status=Status.failed, error=error)

    text = summary.render()

    assert f"Error: {json.dumps(error, ensure_ascii=False)}" in text
    assert Summary.parse(text) == summary


def test_partials_repeated_in_a_row_are_written_once_with_a_count() -> None:
    partials = ["hotfix: checking 61 file(s)", "hotfix: checking 61 file(s)", {"a": 1}, {"a": 1},
                {"a": 1}, "clean", "ends (2 times)"]
    summary = Summary(id="a-1", agent="a", scope="s", status=Status.partial,
                      partial_results=partials)

    text = summary.render()

    assert (
        "Partial results:\n"
        "- hotfix: checking 61 file(s) (2 times)\n"
        '- {"a": 1} (3 times)\n'
        "- clean\n"
        '- "ends (2 times)"\n'
    ) in text
    assert Summary.parse(text) == summary


def test_a_retry_s_repeated_partials_are_grouped_in_order_of_first_appearance() -> None:
    assert grouped(["start", "scan", "start", "scan", "f1", {"b": 1, "a": 2}, {"a": 2, "b": 1}]) \
        == ["start", "start", "scan", "scan", "f1", {"b": 1, "a": 2}, {"a": 2, "b": 1}]


def test_a_cost_summed_from_charges_reads_as_money_not_as_float_noise() -> None:
    spent = Usage(calls=1, cost=0.002) + Usage(calls=1, cost=0.0304) + Usage(calls=1, cost=0.0011)
    summary = Summary(id="a-1", agent="a", scope="s", status=Status.completed, usage=spent)

    text = summary.render()

    assert spent.cost == 0.0335  # the float sum is 0.033499999999999995
    assert "Usage: 3 calls, 0 input tokens, 0 output tokens, cost 0.0335\n" in text
    assert Summary.parse(text) == summary


def test_a_partial_summary_says_why_it_stopped_short_not_error() -> None:
    summary = Summary(id="a-1", agent="a", scope="s", status=Status.partial,
                      error="deadline of 5 s passed", partial_results=["half"])
    text = summary.render()
    assert "Stopped short: deadline of 5 s passed\n" in text and "Error:" not in text
    assert Summary.parse(text) == summary
    failed = summary.model_copy(update={"status": Status.failed})
    assert "Error: deadline of 5 s passed\n" in failed.render()


def test_one_call_and_one_token_are_written_in_the_singular_and_read_back() -> None:
    summary = Summary(id="a-1", agent="a", scope="s", status=Status.completed,
                      usage=Usage(calls=1, input_tokens=1, output_tokens=2, cost=0.5))
    text = summary.render()
    assert "Usage: 1 call, 1 input token, 2 output tokens, cost 0.5\n" in text
    assert Summary.parse(text) == summary


def test_a_duration_too_short_for_plain_repr_is_written_in_decimals_not_an_exponent() -> None:
    attempt = AttemptRecord(id="a-1-a1", agent="a", outcome=AttemptOutcome.transient,
                            duration_s=8e-05, error="boom")
    summary = Summary(id="a-1", agent="a", scope="s", status=Status.failed, attempts=[attempt],
                      duration_s=0.0001)

    text = summary.render()

    assert "- a-1-a1 a transient 0.00008s error: boom\n" in text  # not "8e-05s error"
    assert "Duration: 0.0001s\n" in text
    assert Summary.parse(text) == summary


def test_an_attempt_line_says_in_words_how_the_attempt_was_stopped() -> None:
    ignored = AttemptRecord(id="hang-1-a1", agent="hang", outcome=AttemptOutcome.timeout,
                            duration_s=2.5, killed="terminate", losing_causes=["child:cancelled"])
    raced = AttemptRecord(id="spend-1-a1", agent="spend", outcome=AttemptOutcome.cancelled,
                          duration_s=1.2, killed="cooperative", losing_causes=["budget_exceeded"])
    summary = Summary(id="x-1", agent="x", scope="s", status=Status.failed,
                      attempts=[ignored, raced])

    lines = [line for line in summary.render().splitlines() if line.startswith("- ")]

    assert lines == [
        "- hang-1-a1 hang timeout 2.5s losing=child:cancelled killed=terminate "
        "(ignored the cancel; stopped by SIGTERM)",
        "- spend-1-a1 spend cancelled 1.2s losing=budget_exceeded killed=cooperative "
        "(stopped when asked; the budget ran out too, which lost to the cancel)",
    ]
    assert Summary.parse(summary.render()) == summary
