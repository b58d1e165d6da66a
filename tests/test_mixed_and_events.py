"""Many delegations at once settle exactly once each; the journal tells it; results are shaped."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import structlog
from pydantic import BaseModel

from actors import Brief, Context, Status, TransientError
from actors.clock import FakeClock
from supervisor import SupervisorError, Zeus
from supervisor.core.settlement import truncate
from supervisor.testing import sync
from tests._support import eventually
from tests.conftest import Recorder, ZeusFactory

KINDS = ("ok", "permanent", "transient_then_ok", "timeout", "cancelled", "flaky")


def mixed(brief: Brief, ctx: Context) -> str:
    kind = brief.scope.split(":")[0]
    ctx.partial(brief.scope)
    if kind == "permanent":
        raise RuntimeError("permanent failure")
    if kind == "flaky" or (kind == "transient_then_ok" and ctx.attempt == 1):
        raise TransientError("try again")
    if kind in ("timeout", "cancelled"):
        ctx.sleep(600)
    return brief.scope


def test_a_hundred_mixed_delegations_settle_exactly_once_with_the_right_status(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    # The default intensity (20 restarts in 60 s, per agent): the flaky agent's storm
    # (17 delegations, 3 retries each) opens its circuit and touches nothing else.
    retry = {"max_retries": 1, "backoff": "none", "on": ["transient"]}
    zeus = make_zeus(
        {"m": {"timeout_s": 30, "heartbeat": {"stale_after_s": 1000}, "retry": retry},
         "f": {"timeout_s": 30, "retry": {**retry, "max_retries": 3}}},
        supervisor={"max_concurrent": 100},
        works={"m": mixed, "f": mixed},
    )
    briefs = [(KINDS[i % 6], i) for i in range(100)]
    handles = [zeus.dispatch(Brief(agent="f" if kind == "flaky" else "m", scope=f"{kind}:{i}"))
               for kind, i in briefs]
    for handle, (kind, _) in zip(handles, briefs, strict=True):
        if kind == "cancelled":
            handle.cancel("owner cancel")
    # Everything that can finish by itself has; then the deadline passes for the rest.
    hanging = {h.id for h, (kind, _) in zip(handles, briefs, strict=True) if kind == "timeout"}
    recorder.wait_for("delegation.settled", count=100 - len(hanging))
    assert eventually(lambda: hanging <= {e["delegation_id"]
                                          for e in recorder.named("attempt.started")})
    clock.advance(30)
    summaries = [h.result(10) for h in handles]
    expected = {
        "ok": Status.completed,
        "permanent": Status.failed,
        "transient_then_ok": Status.completed,
        "timeout": Status.timed_out,
        "cancelled": Status.cancelled,
        "flaky": Status.failed,
    }
    for summary in summaries:
        assert summary.status is expected[summary.scope.split(":")[0]], summary
    settled = recorder.named("delegation.settled")
    assert sorted(e["delegation_id"] for e in settled) == sorted(h.id for h in handles)
    assert len(settled) == 100
    (storm,) = recorder.named("supervisor.intensity_exceeded")
    assert (storm["agent"], storm["scope"]) == ("f", "agent")


def test_every_event_carries_the_pinned_fields(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    zeus = make_zeus(works={"m": mixed})
    zeus.dispatch(Brief(agent="m", scope="ok:1")).result(10)
    zeus.stop()
    for event in recorder.events:
        for key in ("ts", "event", "delegation_id", "attempt_id", "parent_id", "agent"):
            assert key in event, (key, event)
    dispatched = recorder.named("delegation.dispatched")[0]
    assert dispatched["policy"]["timeout_s"] == 120.0  # the effective policy
    assert dispatched["policy"]["retry"]["max_retries"] == 0
    assert [e["event"] for e in recorder.events] == [
        "zeus.started",
        "delegation.dispatched",
        "attempt.started",
        "attempt.partial",  # mixed() reports one partial result
        "attempt.completed",
        "delegation.settled",
        "zeus.stopped",
    ]
    settled = recorder.named("delegation.settled")[0]
    assert {k: settled[k] for k in ("status", "attempts", "agent", "delegation_id")} == {
        "status": "completed",
        "attempts": 1,
        "agent": "m",
        "delegation_id": "m-1",
    }


def test_the_journal_is_json_lines_flushed_per_event(tmp_path: Path) -> None:
    journal = tmp_path / "events.jsonl"
    with Zeus.start(agents={"m": mixed}, log=journal) as zeus:
        handle = zeus.dispatch(Brief(agent="m", scope="ok:1"))
        handle.result(10)
        sync(zeus)
        lines = journal.read_text().splitlines()  # readable before stop: flushed per event
        assert [json.loads(line)["event"] for line in lines][-1] == "delegation.settled"
    events = [json.loads(line) for line in journal.read_text().splitlines()]
    assert events[-1]["event"] == "zeus.stopped"
    assert events[2]["event"] == "attempt.started" and events[2]["attempt"] == 1


def test_a_host_structlog_logger_receives_the_events_without_configure() -> None:
    with (
        structlog.testing.capture_logs() as logs,
        Zeus.start(agents={"m": mixed}, log=structlog.get_logger()) as zeus,
    ):
        zeus.dispatch(Brief(agent="m", scope="ok:1")).result(10)
    names = [e["event"] for e in logs]
    assert names[0] == "zeus.started" and "delegation.settled" in names


def test_a_log_path_that_cannot_be_written_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SupervisorError, match="cannot write the event log"):
        Zeus.start(log=tmp_path / "missing-dir" / "events.jsonl")


# -- result policy ------------------------------------------------------------------------


@pytest.mark.parametrize("cap", [25, 40, 99])
def test_truncation_keeps_the_marker_inside_the_cap_and_counts_what_it_omitted(
    cap: int,
) -> None:
    text = "x" * 100
    cut, omitted = truncate(text, cap)
    assert len(cut) <= cap
    assert f"[{omitted} chars truncated]" in cut
    assert len(cut) - len(cut[cut.index("…"):]) + omitted == len(text)


def test_a_cap_too_small_for_the_marker_still_holds() -> None:
    cut, omitted = truncate("x" * 100, 10)
    assert len(cut) == 10 and omitted == 100


class Finding(BaseModel):
    path: str
    line: int


def test_result_policy_truncates_writes_an_artifact_and_checks_the_schema(
    make_zeus: ZeusFactory, tmp_path: Path
) -> None:
    def long_output(brief: Brief, ctx: Context) -> Any:
        return "y" * 500 if brief.scope == "text" else {"path": "a.py", "line": "NaN"}

    zeus = make_zeus(
        {
            "t": {"result": {"max_chars": 100}},
            "a": {"result": {"max_chars": 100, "overflow": "artifact",
                             "artifact_dir": str(tmp_path)}},
            "s": {"result": {"schema": "tests.test_mixed_and_events:Finding"}},
        },
        works={"t": long_output, "a": long_output, "s": long_output},
    )
    truncated = zeus.dispatch(Brief(agent="t", scope="text")).result(10)
    assert len(truncated.output) <= 100 and truncated.truncated_chars > 400
    overflowed = zeus.dispatch(Brief(agent="a", scope="text")).result(10)
    assert overflowed.artifact is not None
    assert Path(overflowed.artifact).read_text() == "y" * 500
    checked = zeus.dispatch(Brief(agent="s", scope="json")).result(10)
    assert checked.status is Status.completed  # a mismatch never fails the run
    assert checked.schema_error is not None and "line" in checked.schema_error


def test_a_child_that_floods_partials_keeps_a_bounded_number(make_zeus: ZeusFactory) -> None:
    from supervisor.core.state import MAX_PARTIALS

    def flood(brief: Brief, ctx: Context) -> str:
        for i in range(MAX_PARTIALS + 50):
            ctx.partial(i)
        return "flooded"

    summary = make_zeus(works={"f": flood}).dispatch(Brief(agent="f", scope="s")).result(30)
    assert len(summary.partial_results) == MAX_PARTIALS
    assert any("50 partial results dropped" in r for r in summary.risks)


def test_zeus_survives_a_child_whose_result_breaks_the_summary(
    make_zeus: ZeusFactory,
) -> None:
    lock = threading.Lock()

    def odd(brief: Brief, ctx: Context) -> Any:
        return lock  # not JSON-able; still settles, the output kept as is

    zeus = make_zeus(works={"o": odd, "m": mixed})
    assert zeus.dispatch(Brief(agent="o", scope="s")).result(10).status is Status.completed
    assert zeus.dispatch(Brief(agent="m", scope="ok:2")).result(10).status is Status.completed


def test_the_dispatched_event_carries_the_briefs_overrides(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    zeus = make_zeus({"m": {"timeout_s": 60, "partial_ok": True}}, works={"m": mixed})
    zeus.dispatch(Brief(agent="m", scope="ok:1", timeout_s=5, partial_ok=False)).result(10)
    (dispatched,) = recorder.named("delegation.dispatched")
    assert dispatched["timeout_s"] == 5
    assert (dispatched["policy"]["timeout_s"], dispatched["policy"]["partial_ok"]) == (5, False)


def test_a_log_sink_that_fails_never_stops_a_settlement(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken_sink(event: dict[str, Any]) -> None:
        raise OSError("No space left on device")

    with Zeus.start(agents={"m": mixed}, log=broken_sink) as zeus:
        summary = zeus.dispatch(Brief(agent="m", scope="ok:1")).result(10)
    assert summary.status is Status.completed
    assert "No space left on device" in caplog.text


def test_an_artifact_that_cannot_be_written_still_settles_truncated(
    make_zeus: ZeusFactory, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file-not-a-dir"
    blocker.write_text("x")

    def long_output(brief: Brief, ctx: Context) -> str:
        return "z" * 500

    zeus = make_zeus(
        {"a": {"result": {"max_chars": 100, "overflow": "artifact",
                          "artifact_dir": str(blocker / "sub")}}},
        works={"a": long_output},
    )
    summary = zeus.dispatch(Brief(agent="a", scope="s")).result(10)
    assert summary.status is Status.completed
    assert summary.artifact is None and len(summary.output) <= 100
    assert any("could not be written" in r for r in summary.risks)
