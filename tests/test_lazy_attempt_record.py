"""An ended attempt's record is decided in Zeus's thread and made where it is read
(supervisor/core/settlement.py, `AttemptEnd`): with the summary, by its reader."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from actors import AttemptOutcome, AttemptRecord, Status, Usage
from supervisor import Brief, Routing, Zeus
from supervisor.core.settlement import AttemptEnd, Settlement, as_record

ROUTING = Routing.from_dict({"version": 1, "agents": {"fails": {}}})


def fails(brief: Brief, ctx: Any) -> str:
    raise RuntimeError("boom")


def record_fields(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "d-1-a1", "agent": "fails", "outcome": AttemptOutcome.error, "duration_s": 0.25,
        "error": "RuntimeError: boom", "pid": None, "losing_causes": [], "fenced": False,
        "killed": None, "progress": 0, "tool_calls": 0, "last_tool": None, "last_note": None,
        "bad_lines": 0, "session_id": None,
    }
    return {**base, **changes}


def test_the_records_are_made_with_the_summary_in_the_thread_that_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made_in: list[str] = []
    record = AttemptEnd.record

    def noted(self: AttemptEnd) -> AttemptRecord:
        made_in.append(threading.current_thread().name)
        return record(self)

    monkeypatch.setattr(AttemptEnd, "record", noted)
    with Zeus.start(ROUTING, agents={"fails": fails}) as zeus:
        handle = zeus.dispatch(Brief(agent="fails", scope="x"))
        handle.future.exception(timeout=10)  # settled, not read: no record is made yet
        assert made_in == []
        summary = handle.result(10)
    assert made_in == [threading.current_thread().name]
    assert summary.status is Status.failed
    assert [(type(a), a.id, a.outcome, a.error) for a in summary.attempts] == [
        (AttemptRecord, f"{handle.id}-a1", AttemptOutcome.error, "RuntimeError: boom")]


def test_a_record_reads_as_decided_and_is_made_once() -> None:
    end = AttemptEnd(record_fields(tool_calls=3))
    assert (end.outcome, end.error, end.tool_calls) == (AttemptOutcome.error,
                                                        "RuntimeError: boom", 3)
    with pytest.raises(AttributeError):
        end.not_a_field  # noqa: B018 - the read is the test
    made = as_record(end)
    assert made is as_record(end) and made == AttemptRecord(**record_fields(tool_calls=3))
    kept = AttemptRecord(**record_fields())
    assert as_record(kept) is kept  # one a store kept is one already


def test_a_record_that_fails_validation_says_so_and_the_summary_is_still_made() -> None:
    end = AttemptEnd(record_fields(last_note=object()))
    settlement = Settlement({
        "id": "d-1", "agent": "fails", "scope": "s", "status": Status.failed, "output": None,
        "findings": (), "changes": (), "validation": (), "risks": (), "partial_results": (),
        "attempts": [end], "usage": Usage(),
        "error": "boom", "timeout_kind": None, "schema_error": None, "truncated_chars": 0,
        "artifact": None, "duration_s": 0.5, "session_alias": None,
    })
    summary = settlement.summary()
    (attempt,) = summary.attempts
    assert summary.status is Status.failed and summary.error == "boom"
    assert (attempt.id, attempt.outcome) == ("d-1-a1", AttemptOutcome.error)
    assert (attempt.error or "").startswith("its record could not be built: ValidationError")

