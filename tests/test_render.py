"""`supervisor.cli.render`: one place for events and delegations in words, each cause said once,
rows that fit a screen."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from rich.console import Console

from supervisor import journal as jr
from supervisor.cli.commands import table_lines
from supervisor.cli.live import LiveTree
from supervisor.cli.render import (
    attempt_label,
    causes,
    delegation_label,
    legend,
    plain_event,
)
from supervisor.cli.rows import (
    DETAIL_FULL,
    DETAIL_LEAST,
    fit,
    rows,
)
from supervisor.journal.events import EventLog
from tests.test_journal import T0, dispatched, ev, started, story


def run_of(events: list[dict[str, Any]]) -> jr.Run:
    journal = jr.Journal()
    for event in events:
        journal.apply(event)
    return journal.run


def settled(t: float, d: str, status: str, **fields: Any) -> dict[str, Any]:
    return ev("delegation.settled", t, d, status=status, attempts=1, duration_s=t, **fields)


def failed(t: float, d: str, n: int, outcome: str, error: str) -> dict[str, Any]:
    return ev("attempt.failed", t, d, f"{d}-a{n}", outcome=outcome, error=error, duration_s=t)


def test_a_cancelled_delegation_names_its_reason_once() -> None:
    reason = "the owner cancelled it as its budget ran out"
    run = run_of([
        dispatched(0, "spend-1"),
        started(0, "spend-1", 1),
        ev("delegation.cancel_requested", 1, "spend-1", reason=reason),
        failed(1.2, "spend-1", 1, "cancelled", "cancelled; the child then reported Cancelled: x"),
        settled(1.2, "spend-1", "cancelled", error=reason),
    ])

    label, status = delegation_label(run.delegations["spend-1"], run)

    assert status == "cancelled"
    assert label.count(reason) == 1
    assert label.startswith(
        f"spend-1 spend: cancelled 1.20s, 1 attempt(s), cancel requested ({reason})"
    )


def test_an_attempt_stopped_over_budget_says_so_once_and_drops_its_own_cancelled_ack() -> None:
    run = run_of([
        dispatched(0, "spend-1"),
        started(0, "spend-1", 1),
        ev("attempt.budget_exceeded", 1, "spend-1", "spend-1-a1", limit="calls 13 over 12"),
        ev("attempt.killed", 1.1, "spend-1", "spend-1-a1", how="cooperative", latency_s=0.001),
        failed(
            1.2, "spend-1", 1, "budget_exceeded",
            "over budget; the child then reported Cancelled: spend-1-a1",
        ),
        settled(1.2, "spend-1", "budget_exceeded",
                error="over budget; the child then reported Cancelled: spend-1-a1"),
    ])
    d = run.delegations["spend-1"]

    line = attempt_label(d.attempts[0])
    label, _ = delegation_label(d, run)

    assert line == (
        "spend-1-a1 spend: budget_exceeded after 1.20s; over budget; stopped when asked, in 0.001s"
    )
    assert " - " not in label  # its attempt's row already says why; the row does not repeat it


def test_causes_keeps_what_is_new_and_counts_two_wordings_of_a_deadline_once() -> None:
    assert causes(["deadline hit at 1.50s"], "deadline of 1.5 s passed; exit code 130") == [
        "exit code 130"
    ]
    assert causes([], "a; b; a") == ["a", "b"]
    assert causes(["timeout"], None) == []


def test_a_reattached_attempt_keeps_the_tool_it_is_in_and_its_session_from_the_run_before(
) -> None:
    journal = jr.Journal()
    for e in [ev("zeus.started", 0, pid=1), dispatched(0, "hermes-1"), started(0, "hermes-1", 1),
              ev("attempt.session", 1, "hermes-1", "hermes-1-a1", session_id="s-42"),
              ev("attempt.tool", 2, "hermes-1", "hermes-1-a1", phase="start", tool="Bash",
                 side_effects=True, call_id="t1"),
              ev("zeus.started", 10, pid=2),  # the host crashed; the next one picks it up
              ev("attempt.reattached", 11, "hermes-1", "hermes-1-a1", attempt=1, pid=77,
                 deadline_s=40)]:
        journal.apply(e)
    (a,) = journal.run.delegations["hermes-1"].attempts
    assert (a.session_id, a.pid, a.reattached) == ("s-42", 77, True)
    assert attempt_label(a, now=T0 + 12) == "hermes-1-a1 hermes pid 77: running, in Bash 10.0s"
    journal.apply(ev("attempt.tool", 13, "hermes-1", "hermes-1-a1", phase="end", tool="Bash",
                     call_id="t1", duration_s=11.0))
    assert a.in_tool is None and journal.runs[0].attempts["hermes-1-a1"].in_tool is not None


def test_a_stale_attempts_row_never_starts_a_cause_mid_sentence() -> None:
    a = jr.ReplayedAttempt(
        id="d-a1", delegation_id="d", agent="hermes", outcome="stale", duration_s=12.0,
        stale_after_s=10.0, error="no progress for 10 s (stale; heartbeat.stale_after_s); "
        "the child then reported KeyError: 'x'")
    assert attempt_label(a) == (
        "d-a1 hermes: stale after 12.00s; stale at 10.00s; the child then reported KeyError: 'x'")
    assert causes([], "no progress (stale; a); b [c; d]") == ["no progress (stale; a)", "b [c; d]"]


@pytest.mark.parametrize(
    ("sizes", "height", "expected"),
    [
        ({2: 10, 1: 8, 0: 6, -1: 3}, None, DETAIL_FULL),
        ({2: 10, 1: 8, 0: 6, -1: 3}, 10, DETAIL_FULL),
        ({2: 10, 1: 8, 0: 6, -1: 3}, 9, 1),
        ({2: 10, 1: 8, 0: 6, -1: 3}, 6, 0),
        ({2: 10, 1: 8, 0: 6, -1: 3}, 5, DETAIL_LEAST),
        ({2: 10, 1: 8, 0: 6, -1: 3}, 1, DETAIL_LEAST),  # nothing fits: the least, cut by rich
    ],
)
def test_fit_picks_the_richest_detail_that_fits(
    sizes: dict[int, int], height: int | None, expected: int
) -> None:
    assert fit(sizes.__getitem__, height) == expected


def test_each_detail_level_drops_rows_in_order_and_keeps_every_open_delegation() -> None:
    run = run_of(story())  # apollo-1 completed (2 attempts); athena-2 > hermes-3; themis-4 open

    def ids(detail: int) -> list[str]:
        return [r.text.plain.split(" ")[0 if r.bullet else 1] for r in rows(run, detail)]

    assert ids(DETAIL_FULL) == [
        "apollo-1", "apollo-1-a1", "apollo-1-a2", "athena-2", "athena-2-a1",
        "hermes-3", "hermes-3-a1", "themis-4", "themis-4-a1",
    ]
    assert ids(1) == ["apollo-1", "athena-2", "hermes-3", "hermes-3-a1", "themis-4", "themis-4-a1"]
    assert ids(0) == ["apollo-1", "athena-2", "hermes-3", "themis-4", "themis-4-a1"]


def test_the_least_detail_folds_settled_siblings_into_one_row() -> None:
    events = [dispatched(0, "athena-1"), started(0, "athena-1", 1)]
    for n in range(2, 6):
        events += [dispatched(n, f"apollo-{n}", parent="athena-1"),
                   settled(n + 0.5, f"apollo-{n}", "completed")]
    run = run_of(events)

    body = rows(run, DETAIL_LEAST)

    assert [r.text.plain for r in body][2] == (
        "4 settled: 4 ✔  apollo-2, apollo-3, apollo-4, apollo-5"
    )
    assert len(body) == 3  # athena-1, its running attempt, the folded row


def test_the_legend_names_only_the_marks_on_screen_in_table_order() -> None:
    assert legend(["timed_out", "completed"]).plain == "✔ completed  ⏱ timed out"
    assert legend([]).plain == ""


def test_rows_never_wrap_past_the_width() -> None:
    run = run_of(story())
    out = io.StringIO()
    console = Console(file=out, width=40, force_terminal=True, color_system=None)

    live = LiveTree(console)
    for event in story():
        live(event)
    console.print(live.render())

    lines = out.getvalue().splitlines()
    assert all(len(line) <= 40 for line in lines)
    assert len(lines) == 2 + len(rows(run))  # the head, every row once, the legend
    assert any(line.rstrip().endswith("…") for line in lines)


def test_the_live_view_writes_its_journal_lines_as_zeus_own_event_log_does() -> None:
    theirs = io.StringIO()
    EventLog(theirs, wall=lambda: 1.0).emit("delegation.dispatched", scope="x", timeout_s=2.5)
    ours = io.StringIO()

    LiveTree(None, journal=ours)(json.loads(theirs.getvalue()))

    assert ours.getvalue() == theirs.getvalue()


def test_a_short_screen_folds_settled_detail_and_keeps_the_open_delegation_in_view() -> None:
    out = io.StringIO()
    console = Console(file=out, width=80, height=8, force_terminal=True, color_system=None)
    live = LiveTree(console)
    for event in story():
        live(event)

    console.print(live.render(height=8))

    lines = out.getvalue().splitlines()
    assert len(lines) <= 8
    assert any("themis-4 themis" in line for line in lines)  # the open one
    assert any("themis-4-a1" in line for line in lines)  # and its running attempt
    assert not any("apollo-1-a1" in line for line in lines)  # a settled one's attempts fold


def test_an_attempt_that_ignored_the_cancel_says_so_and_how_long_the_stop_took() -> None:
    run = run_of([
        dispatched(0, "hang-1"),
        started(0, "hang-1", 1),
        ev("attempt.timed_out", 2.0, "hang-1", "hang-1-a1", elapsed_s=2.0),
        ev("attempt.killed", 2.51, "hang-1", "hang-1-a1", how="terminate", latency_s=0.006),
        failed(2.51, "hang-1", 1, "timeout", "deadline of 2 s passed"),
        settled(2.51, "hang-1", "timed_out", timeout_kind="deadline"),
    ])

    line = attempt_label(run.delegations["hang-1"].attempts[0])

    assert line == (
        "hang-1-a1 hang: timeout after 2.51s; deadline hit at 2.00s; "
        "ignored the cancel; stopped by SIGTERM after 0.51s"
    )


EVENTS_IN_WORDS = [
    ("attempt.spawned", {"pid": 4242, "pid_start_time": 1.5}, "its process started (pid 4242)"),
    ("attempt.partial", {"item": "api/routes.py:4: check_auth()", "progress": 3},
     "partial result: api/routes.py:4: check_auth()"),
    ("attempt.killed", {"how": "terminate", "latency_s": 0.003},
     "ignored the cancel; stopped by SIGTERM (in <0.01s)"),
    ("attempt.killed", {"how": "kill", "latency_s": 0.5},
     "ignored the cancel and SIGTERM; killed by SIGKILL (in 0.50s)"),
    ("group.restarted", {"reason": "apollo-2 failed"}, "restarted with its group: apollo-2 failed"),
    ("supervisor.mailbox_lag", {"lag_s": 0.31, "threshold_s": 0.25, "queued": 12},
     "Zeus's mailbox runs 0.31s late (warns past 0.25s); 12 message(s) wait"),
    ("zeus.internal_error", {"message": "timer", "error": "ValueError: x"},
     "internal error (timer): ValueError: x"),
    ("attempt.lost", {"pid": 7, "reason": "its supervisor stopped while it ran"},
     "lost: its supervisor stopped while it ran"),
    ("delegation.replayed", {"status": "completed", "open": False},
     "replayed: its stored summary (completed), not run again"),
    ("zeus.recovered", {"rerun": ["a-1"], "blocked": [], "reattached": [], "adopted": [],
                        "settled": 4}, "recovered the store: 4 settled, 1 rerun"),
    ("delegation.resumed", {"who": "ann", "why": "its changes were checked"},
     "resumed by ann: its changes were checked"),
    ("delegation.resolved", {"status": "completed", "who": "ann", "why": "it had pushed"},
     "resolved by hand as completed by ann: it had pushed"),
    ("some.future_event", {"count": 3}, "some.future_event: count=3"),
]


@pytest.mark.parametrize(("name", "fields", "words"), EVENTS_IN_WORDS, ids=lambda x: str(x)[:30])
def test_every_event_reads_as_words_on_one_line_of_the_one_format(
    name: str, fields: dict[str, Any], words: str
) -> None:
    event = {"ts": 101.25, "event": name, "delegation_id": "apollo-1",
             "attempt_id": "apollo-1-a1", "parent_id": None, "agent": "apollo", **fields}

    line = plain_event(event, t0=100.0)

    assert line == f"   1.25s  apollo-1-a1        {words}"


def test_a_table_wider_than_the_screen_wraps_its_widest_column_at_spaces() -> None:
    rows = [("retry", "flaky-1", "completed", "a transient failure, retried after a backoff"),
            ("cancel race", "spendthrift-2", "cancelled", "the owner cancels as the budget runs "
             "out: cancel wins by rule")]

    head, rule, body = table_lines(("scenario", "delegation", "settled", "what it shows"), rows,
                                   width=60)

    assert head == ["scenario     delegation     settled    what it shows"]
    assert len(rule) <= 60
    assert body == [
        "retry        flaky-1        completed  a transient failure,",
        "                                       retried after a",
        "                                       backoff",
        "cancel race  spendthrift-2  cancelled  the owner cancels as",
        "                                       the budget runs out:",
        "                                       cancel wins by rule",
    ]
    assert table_lines(("a", "b"), [("x", "y z")]) == (["a  b"], "─  ───", ["x  y z"])


def test_a_table_that_cannot_fit_by_wrapping_is_written_one_record_per_row() -> None:
    headers = ("agent", "role", "kind", "timeout", "retries", "backoff", "fallback")
    row = ("prometheus", "infrastructure", "orchestrator", "300s", "2", "exponential", "hermes")

    head, rule, body = table_lines(headers, [row], width=40)

    assert (head, rule) == ([], "")
    assert body == [
        "prometheus: role infrastructure; kind",
        "    orchestrator; timeout 300s; retries",
        "    2; backoff exponential; fallback",
        "    hermes",
    ]
