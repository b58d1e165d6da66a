"""The SUBTASK BRIEF block (docs/formats.md): Brief.parse and Brief.render."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors import Brief
from actors.limits import MAX_DURATION_S

# Strings that look like the format itself, or that plain text cannot carry on one line.
TRICKY = [
    "SUBTASK BRIEF", "Agent: hermes", "Scope:", "- item", "</subtask_summary>", '"quoted"', '"',
    " leading", "trailing ", "none", "null", "42", "[1, 2]", "{}", "@apollo", "**Scope:** x",
    "line\nbreak", "\r\n", "\u2028", "\x85", "tab\tinside", "é ü 漢字 🙂", "```", "Timeout: 5s",
]
texts = st.one_of(
    st.sampled_from(TRICKY),
    st.text(),
    st.lists(st.sampled_from(TRICKY) | st.text(max_size=6), max_size=4).map("".join),
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
briefs = st.builds(
    Brief,
    agent=texts.filter(bool),
    scope=texts.filter(bool),
    inputs=json_values,
    expected_output=st.none() | texts,
    constraints=st.none() | texts,
    partial_ok=st.none() | st.booleans(),
    timeout_s=st.none()
    | st.floats(min_value=0, max_value=MAX_DURATION_S, exclude_min=True),
    session=st.none() | texts,
    mode=st.sampled_from(["subtask", "task"]),
)


@settings(max_examples=200, deadline=None)
@given(briefs)
def test_any_brief_survives_render_and_parse(brief: Brief) -> None:
    assert Brief.parse(brief.render()) == brief


@settings(max_examples=50, deadline=None)
@given(briefs, texts, texts)
def test_a_rendered_brief_is_found_inside_surrounding_prose(
    brief: Brief, before: str, after: str
) -> None:
    text = f"{before.replace('SUBTASK', 'subtask-ish')}\n\n{brief.render()}\n```\n{after}"
    assert Brief.parse(text) == brief


def test_an_ordinary_brief_renders_as_the_protocol_writes_it() -> None:
    brief = Brief(
        agent="apollo",
        scope="Scan all route files for auth patterns",
        inputs="backend/routers/",
        expected_output="a list of files with the auth pattern each uses",
        constraints="read-only; do not touch migrations",
        partial_ok=True,
        timeout_s=60,
    )
    assert brief.render() == (
        "SUBTASK BRIEF\n"
        "Agent: apollo\n"
        "Scope: Scan all route files for auth patterns\n"
        "Inputs: backend/routers/\n"
        "Expected output: a list of files with the auth pattern each uses\n"
        "Constraints: read-only; do not touch migrations\n"
        "Partial OK: true\n"
        "Timeout: 60s"
    )


def test_the_reference_partial_ok_example_parses() -> None:
    text = (
        "SUBTASK BRIEF\n"
        "Agent: apollo\n"
        "Scope: Scan all route files for auth patterns\n"
        "Partial OK: true\n"
        "Timeout: 60s\n"
    )
    assert Brief.parse(text) == Brief(
        agent="apollo", scope="Scan all route files for auth patterns", partial_ok=True,
        timeout_s=60.0,
    )


def test_parse_skips_surrounding_text_and_ignores_label_case_and_decoration() -> None:
    text = (
        "I'll hand this to the explorer.\n\n"
        "```\n"
        "**SUBTASK BRIEF**\n"
        "agent: @hermes\n"
        "SCOPE: Add refresh token rotation\n"
        "inputs: backend/routers/auth.py\n"
        "Output format: the diff and the tests run\n"
        "partial_ok: no\n"
        "timeout: 2m\n"
        "session: hermes-1\n"
        "mode: full task\n"
        "```\n"
        "Scope: not part of the brief\n"
    )
    assert Brief.parse(text) == Brief(
        agent="hermes",
        scope="Add refresh token rotation",
        inputs="backend/routers/auth.py",
        expected_output="the diff and the tests run",
        partial_ok=False,
        timeout_s=120.0,
        session="hermes-1",
        mode="task",
    )


def test_a_value_goes_on_over_the_lines_below_its_label() -> None:
    text = (
        "SUBTASK BRIEF\n"
        "Agent: talos\n"
        "Scope: Fix the typo in the login button\n"
        "Constraints: Do not touch:\n"
        "  - migrations/\n"
        "  - the public API\n"
        "\n"
        "Timeout: 500ms\n"
        "\n"
        "Thanks, that is all.\n"
    )
    brief = Brief.parse(text)
    assert brief.constraints == "Do not touch:\n- migrations/\n- the public API"
    assert brief.timeout_s == 0.5


def test_a_json_list_of_inputs_is_read_as_a_list() -> None:
    text = 'SUBTASK BRIEF\nAgent: apollo\nScope: scan\nInputs: ["a.py", "b.py"]'
    assert Brief.parse(text).inputs == ["a.py", "b.py"]


def test_a_brief_without_agent_and_scope_is_refused_naming_both() -> None:
    with pytest.raises(ValueError, match=r"SUBTASK BRIEF has no Agent and Scope"):
        Brief.parse("SUBTASK BRIEF\nInputs: a.py\n")


def test_a_brief_without_scope_is_refused_naming_scope() -> None:
    with pytest.raises(ValueError, match=r"has no Scope;"):
        Brief.parse("SUBTASK BRIEF\nAgent: apollo\n")


def test_text_without_a_brief_block_is_refused_with_an_example() -> None:
    with pytest.raises(ValueError, match=r"(?s)no SUBTASK BRIEF block found.*Agent: apollo"):
        Brief.parse("Agent: apollo\nScope: scan")


def test_a_timeout_that_is_not_a_duration_is_refused_naming_timeout() -> None:
    with pytest.raises(ValueError, match=r"Timeout: 'soon' is not a duration"):
        Brief.parse("SUBTASK BRIEF\nAgent: apollo\nScope: scan\nTimeout: soon")


def test_a_zero_timeout_is_refused() -> None:
    with pytest.raises(ValueError, match=r"SUBTASK BRIEF is not valid: timeout_s"):
        Brief.parse("SUBTASK BRIEF\nAgent: apollo\nScope: scan\nTimeout: 0s")


def test_partial_ok_that_is_not_a_yes_or_no_is_refused() -> None:
    with pytest.raises(ValueError, match=r"Partial OK: 'maybe' is not true or false"):
        Brief.parse("SUBTASK BRIEF\nAgent: apollo\nScope: scan\nPartial OK: maybe")


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match=r"Mode: 'epic' is not subtask or task"):
        Brief.parse("SUBTASK BRIEF\nAgent: apollo\nScope: scan\nMode: epic")
