"""A CLI session's totals, counted once: Codex's running totals with their cached part,
Claude Code's `total_cost_usd` in both the forms its versions print, the totals kept in
the store across a restart (the schema's first migration), and the "at least" of an
attempt stopped before its CLI reported (docs/agent-clis.md, "Usage and cost")."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from actors import AttemptRecord, Brief, Status, Usage
from actors.models import AttemptOutcome, Summary
from actors.speaks import SessionTotals, StreamReader
from actors.speaks.codex import CodexDecoder
from supervisor import Routing, Zeus
from supervisor.store.schema import SCHEMA_VERSION
from tests._agent_clis import FakeClis, fake_clis
from tests._postgres import is_postgres, open_store
from tests._support import NullSink

__all__ = ["fake_clis"]  # the fixture, imported for its use here

SESSION = "2dac883f-6583-4c8a-9b6e-f8da680ef658"


# -- Codex: a running total, its cached part counted as cached ------------------------------
def test_a_resumed_codex_turn_charges_the_cached_tokens_it_added_as_cached() -> None:
    recorded: list[tuple[Any, ...]] = []

    class Stream:
        def tokens(self, input_tokens: int = 0, output_tokens: int = 0, *,
                   cached_input_tokens: int = 0, calls: int = 0) -> None:
            recorded.append((input_tokens, output_tokens, cached_input_tokens, calls))

        def end(self, **kwargs: Any) -> None:
            pass

    # The thread's first run: 1,000 input (600 cached), 100 output. Its second run's total
    # adds 1,000 input, of which 200 cached, and 50 output.
    decoder = CodexDecoder(prior=SessionTotals(1000, 600, 100))
    decoder.event({"type": "turn.completed", "usage": {
        "input_tokens": 2000, "cached_input_tokens": 800, "output_tokens": 150}},
        Stream())  # type: ignore[arg-type]
    assert recorded == [(1000, 50, 200, 1)]


# -- Claude Code: the run's own cost, whichever form its result takes ----------------------
def _claude(result: dict[str, Any], *, input_tokens: int = 1300,
            output_tokens: int = 50) -> list[bytes]:
    """One run as Claude Code streams it (the shapes 2.1.197 and 2.1.328 print): its
    reply's usage as it streams, then `result` with what is given."""
    start = {"type": "stream_event", "session_id": SESSION, "parent_tool_use_id": None,
             "event": {"type": "message_start", "message": {
                 "id": "msg_2", "usage": {"input_tokens": input_tokens, "output_tokens": 1,
                                          "cache_read_input_tokens": 0,
                                          "cache_creation_input_tokens": 0}}}}
    delta = {"type": "stream_event", "session_id": SESSION, "parent_tool_use_id": None,
             "event": {"type": "message_delta", "usage": {"output_tokens": output_tokens}}}
    end = {"type": "result", "subtype": "success", "is_error": False, "result": "Done.",
           "session_id": SESSION, "usage": {"input_tokens": input_tokens,
                                            "output_tokens": output_tokens}, **result}
    lines = [{"type": "system", "subtype": "init", "session_id": SESSION}, start, delta, end]
    return [json.dumps(line).encode() + b"\n" for line in lines]


def _model(tokens_in: int, tokens_out: int, cost: float) -> dict[str, Any]:
    return {"claude-sonnet-4-5-20250929": {
        "inputTokens": tokens_in, "outputTokens": tokens_out, "cacheReadInputTokens": 0,
        "cacheCreationInputTokens": 0, "costUSD": cost}}


def _cost(lines: list[bytes], prior: SessionTotals | None) -> float:
    sink = NullSink()
    reader = StreamReader("claude", sink, prior=prior)
    for line in lines:
        reader.stdout(line)
    reader.stdout(b"")
    return round(sum(said[1].cost for said in sink.said if said[0] == "charge"), 10)


# What the session's first run was charged: 1,100 in, 50 out, $0.00405 (measured).
FIRST = SessionTotals(1100, 0, 50, 0.00405)
# The second run's own, as both versions measured it: 1,300 in, 50 out, $0.00465.
SESSION_TOTAL = {"total_cost_usd": 0.0087, "modelUsage": _model(2400, 100, 0.0087)}
RUN_OWN = {"total_cost_usd": 0.00465, "modelUsage": _model(1300, 50, 0.00465)}


@pytest.mark.parametrize("prior", [FIRST, None], ids=["known", "unknown"])
def test_a_session_total_with_the_runs_own_part_beside_it_is_charged_that_part(
        prior: SessionTotals | None) -> None:
    # 2.1.328: total_cost_usd and modelUsage are the session's; the run's own is in
    # model_usage_since_last_result
    lines = _claude({**SESSION_TOTAL,
                     "model_usage_since_last_result": _model(1300, 50, 0.00465)})
    assert _cost(lines, prior) == 0.00465


def test_a_runs_own_total_on_a_resumed_session_is_charged_whole() -> None:
    # 2.1.197: total_cost_usd is the run's own, though above what the session was charged
    assert _cost(_claude(RUN_OWN), FIRST) == 0.00465


def test_a_session_total_without_the_runs_part_is_charged_what_it_adds() -> None:
    # a version that prints the session's totals and no part of its own: modelUsage counts
    # the session's earlier tokens, so what it adds over the session's charges is this run's
    assert _cost(_claude(SESSION_TOTAL), FIRST) == 0.00465


def test_a_total_below_what_the_session_was_charged_is_the_runs_own() -> None:
    cheap = {"total_cost_usd": 0.001, "modelUsage": _model(300, 10, 0.001)}
    assert _cost(_claude(cheap, input_tokens=300, output_tokens=10), FIRST) == 0.001


# -- through Zeus, with the fake CLIs: memory, then a store across a restart ---------------
def _routing() -> Routing:
    return Routing.from_dict({"version": 1, "supervisor": {"orphan_grace_s": 5}, "agents": {
        "talos": {"speaks": "codex", "timeout_s": 30, "shutdown": {"grace_s": 0.5, "term_s": 0.5},
                  "retry": {"max_retries": 0},
                  # cached input is free here, so the cost says how much of it was cached
                  "pricing": {"input_per_mtok": 1.0, "output_per_mtok": 0.0,
                              "cached_input_per_mtok": 0.0}}}})


def _run(zeus: Zeus, scenario: str, **brief: Any) -> Summary:
    summary: Summary = zeus.dispatch(Brief(
        agent="talos", scope=f"Fix the failing test (scenario: {scenario})",
        **brief)).result(timeout=60)
    return summary


# The fake Codex's transcripts (tests/fixtures/agent_clis/codex): `completed` totals 48,213
# input (41,984 cached) and 1,877 output; `resume` continues that thread to 80,090 input
# (72,704 cached) and 2,489 output: it added 31,877 input, 30,720 of them cached, and 612.
ADDED = Usage(calls=1, input_tokens=31877, output_tokens=612, cost=(31877 - 30720) / 1e6)


@pytest.mark.process
@pytest.mark.realtime
def test_a_follow_up_in_a_codex_thread_is_charged_what_its_turn_added(
        tmp_path: Path, fake_clis: FakeClis) -> None:
    with Zeus.start(_routing(), log=str(tmp_path / "events.jsonl")) as zeus:
        first = _run(zeus, "completed", session="fix-auth")
        follow_up = _run(zeus, "resume", session="fix-auth")
    assert first.status is follow_up.status is Status.completed, follow_up.error
    assert fake_clis.calls()[1]["resume"] == first.attempts[0].session_id
    assert follow_up.usage == ADDED


@pytest.mark.process
@pytest.mark.realtime
def test_a_follow_up_after_a_restart_is_charged_only_what_its_turn_added(
        store_url: str, fake_clis: FakeClis) -> None:
    with Zeus.start(_routing(), store=store_url) as zeus:
        first = _run(zeus, "completed", session="fix-auth")
    with Zeus.start(_routing(), store=store_url) as zeus:
        follow_up = _run(zeus, "resume", session="fix-auth")
    assert follow_up.status is Status.completed, follow_up.error
    assert fake_clis.calls()[1]["resume"] == first.attempts[0].session_id
    assert follow_up.usage == ADDED
    store = open_store(store_url)
    try:
        assert store.session_totals(first.attempts[0].session_id) == SessionTotals(
            80090, 72704, 2489, round((48213 - 41984 + 31877 - 30720) / 1e6, 10))
    finally:
        store.close()


@pytest.mark.process
@pytest.mark.realtime
def test_a_turn_another_host_ran_in_the_session_is_not_charged_again(
        pg_url: str, fake_clis: FakeClis) -> None:
    # Two hosts on one PostgreSQL: A runs the first turn, B the follow-up, then A a third
    # turn, whose thread totals are the follow-up's (the fake replays the same totals): A
    # knew only its own turn's totals, and charged B's turn again.
    with Zeus.start(_routing(), store=pg_url) as a:
        first = _run(a, "completed", session="fix-auth")
        with Zeus.start(_routing(), store=pg_url) as b:
            follow_up = _run(b, "resume", session="fix-auth")
        third = _run(a, "resume", session="fix-auth")
    assert first.status is follow_up.status is third.status is Status.completed, third.error
    assert [c["resume"] for c in fake_clis.calls()] == [None, *[first.attempts[0].session_id] * 2]
    assert follow_up.usage == ADDED
    assert (third.usage.input_tokens, third.usage.output_tokens) == (0, 0)


# -- the store keeps them, and an older store is migrated ----------------------------------
def _attempt(store: Any, n: int) -> str:
    d_id, a_id = f"apollo-{n}", f"apollo-{n}-a1"
    brief = Brief(agent="apollo", scope="s")
    store.record_delegation(d_id, key=f"k{n}", parent_id=None, ordinal=None, agent="apollo",
                            brief=brief, policy={"read_only": True}, deadline=None,
                            created=1.0)
    store.attempt_started(a_id, delegation_id=d_id, number=1, agent="apollo", started=1.0,
                          deadline=None)
    return a_id


def _charged_progress(store: Any, delegation_id: str) -> int:
    stored = store.delegation_as_open(delegation_id)
    assert stored is not None
    (attempt,) = stored.attempts
    return int(attempt.charged_progress)


def test_a_sessions_totals_are_written_with_its_charges_and_read_after_a_restart(
        store_url: str) -> None:
    store = open_store(store_url)
    a_id = _attempt(store, 1)
    store.charge("apollo-1", a_id, Usage(calls=1, input_tokens=100, cost=0.5),
                 session=("t-1", SessionTotals(100, 40, 0, 0.5)))
    store.charge("apollo-1", a_id, Usage(output_tokens=7),
                 session=("t-1", SessionTotals(0, 0, 7, 0.0)))
    assert store.session_totals("t-1") is None  # buffered with the charges, not yet written
    store.commit()
    store.close()
    store = open_store(store_url)
    try:
        assert store.session_totals("t-1") == SessionTotals(100, 40, 7, 0.5)
        a2 = _attempt(store, 2)  # (a follow-up: on PostgreSQL, a new host's own)
        store.charge("apollo-2", a2, Usage(input_tokens=10),
                     session=("t-1", SessionTotals(10, 10, 0, 0.0)))
        store.commit()
        assert store.session_totals("t-1") == SessionTotals(110, 50, 7, 0.5)
        assert store.session_totals("t-2") is None
    finally:
        store.close()


def _make_old(store_url: str, version: int) -> None:
    """The store as schema `version` had it: 1 without `agent_sessions`, and 1 and 2
    without `attempts.charged_progress` and `delegations.answer` (nor, on PostgreSQL,
    `zeus_fenced`)."""
    undo = ["ALTER TABLE attempts DROP COLUMN charged_progress",
            "ALTER TABLE delegations DROP COLUMN answer"]
    if version == 1:
        undo.append("DROP TABLE agent_sessions")
    if is_postgres(store_url):
        import psycopg

        with psycopg.connect(store_url, autocommit=True) as con:
            for statement in (*undo, "DROP FUNCTION zeus_fenced(TEXT, BIGINT)"):
                con.execute(statement)
            con.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'",
                        (str(version),))
        return
    con = sqlite3.connect(store_url, isolation_level=None)
    try:
        for statement in undo:
            con.execute(statement)
        con.execute(f"PRAGMA user_version = {version}")
    finally:
        con.close()


def _version(store_url: str) -> int:
    if is_postgres(store_url):
        import psycopg

        with psycopg.connect(store_url) as con:
            row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            assert row is not None
            return int(row[0])
    con = sqlite3.connect(store_url)
    try:
        return int(con.execute("PRAGMA user_version").fetchone()[0])
    finally:
        con.close()


@pytest.mark.parametrize("version", [1, 2])
def test_a_store_of_an_older_schema_is_migrated_in_place_its_data_kept(
        store_url: str, version: int) -> None:
    store = open_store(store_url)
    a_id = _attempt(store, 1)
    store.charge("apollo-1", a_id, Usage(calls=2, cost=0.25))
    store.attempt_ended(a_id, outcome="completed", ended=2.0, error=None,
                        record=AttemptRecord(id=a_id, agent="apollo",
                                             outcome=AttemptOutcome.completed))
    store.commit()
    store.close()
    _make_old(store_url, version)
    assert _version(store_url) == version
    store = open_store(store_url)
    try:
        assert _version(store_url) == SCHEMA_VERSION == 3
        assert store.delegation("apollo-1") is not None
        assert store.total_spent() == Usage(calls=2, cost=0.25)
        assert _charged_progress(store, "apollo-1") == 0  # (the column's default)
        assert store.session_totals("t-1") is None
        a2 = _attempt(store, 2)
        store.charge("apollo-2", a2, Usage(input_tokens=5),
                     session=("t-1", SessionTotals(5, 0, 0, 0.0)), progress=4)
        store.commit()
        assert store.session_totals("t-1") == SessionTotals(5, 0, 0, 0.0)
        assert _charged_progress(store, "apollo-2") == 4  # the new column is written
    finally:
        store.close()


# -- what is not known is said -------------------------------------------------------------
@pytest.mark.process
@pytest.mark.realtime
def test_a_codex_turn_stopped_before_it_reported_says_its_usage_is_at_least(
        tmp_path: Path, fake_clis: FakeClis) -> None:
    routing = Routing.from_dict({"version": 1, "agents": {"talos": {
        "speaks": "codex", "timeout_s": 2, "shutdown": {"grace_s": 0.5, "term_s": 0.5},
        "retry": {"max_retries": 0}}}})
    with Zeus.start(routing, log=str(tmp_path / "events.jsonl")) as zeus:
        summary = _run(zeus, "hang")
    (attempt,) = summary.attempts
    assert attempt.outcome is AttemptOutcome.timeout
    assert attempt.usage_unknown is not None and "only at its end" in attempt.usage_unknown
    assert "Usage: at least 0 calls, 0 input tokens, 0 output tokens, cost 0" in (
        summary.render())
    assert Summary.parse(summary.render()) == summary


def test_a_completed_codex_run_knows_its_usage() -> None:
    sink = NullSink()
    reader = StreamReader("codex", sink)
    reader.stdout(b'{"type":"thread.started","thread_id":"t"}\n')
    assert reader.usage_unknown is not None  # stopped here, its turn would not be counted
    reader.stdout(b'{"type":"turn.completed","usage":{"input_tokens":5,"output_tokens":1}}\n')
    assert reader.usage_unknown is None
    assert StreamReader("claude", NullSink()).usage_unknown is None  # its usage streams
