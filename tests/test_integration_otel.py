"""`tracing()`: spans from the event stream, read back with the SDK's InMemorySpanExporter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip(
    "opentelemetry.sdk", reason="the otel extra is not installed (pip install -e '.[otel]')"
)

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from actors import Brief, Context, TransientError
from actors.clock import FakeClock
from supervisor import Zeus
from supervisor.integrations.otel import tracing
from supervisor.testing import sync
from tests._integration_agents import echo
from tests._support import wait_cancelled
from tests.conftest import Recorder, ZeusFactory


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def spans(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {span.name: span for span in exporter.get_finished_spans()}


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def test_a_delegation_span_is_a_child_of_the_span_current_at_dispatch(
    make_zeus: ZeusFactory, recorder: Recorder, provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    def spends(brief: Brief, ctx: Context) -> str:
        ctx.charge(calls=1, input_tokens=30, output_tokens=4, cost=0.01)
        return "ok"

    zeus = make_zeus({"echo": {}}, works={"echo": spends}, log=[recorder, tracing(provider)])
    with provider.get_tracer("host").start_as_current_span("host request"):
        zeus.dispatch(Brief(agent="echo", scope="x")).result(10)
    sync(zeus)
    found = spans(exporter)
    host, delegation, attempt = found["host request"], found["delegation echo"], found[
        "attempt echo"]
    assert parent_of(delegation) == host.context.span_id
    assert parent_of(attempt) == delegation.context.span_id
    assert delegation.context.trace_id == host.context.trace_id
    assert dict(delegation.attributes or {}) == {
        "zeus.agent": "echo", "zeus.delegation_id": "echo-1", "zeus.depth": 1,
        "zeus.timeout_s": 120.0, "zeus.status": "completed", "zeus.attempts": 1,
        "zeus.usage.calls": 1, "zeus.usage.input_tokens": 30, "zeus.usage.output_tokens": 4,
        "zeus.usage.cost": 0.01, "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 4,
    }
    assert dict(attempt.attributes or {}) == {
        "zeus.agent": "echo", "zeus.delegation_id": "echo-1", "zeus.attempt": 1,
        "zeus.outcome": "completed",
    }
    # Timed by the journal: the attempt lies within its delegation.
    assert delegation.start_time <= attempt.start_time <= attempt.end_time <= delegation.end_time


def test_a_nested_delegation_is_a_child_of_its_parent_delegations_span(
    make_zeus: ZeusFactory, provider: TracerProvider, exporter: InMemorySpanExporter,
    recorder: Recorder,
) -> None:
    def lead(brief: Brief, ctx: Context) -> str:
        return str(ctx.delegate(Brief(agent="echo", scope="inner")).output)

    zeus = make_zeus({"lead": {"kind": "orchestrator"}, "echo": {}},
                     works={"lead": lead, "echo": echo}, log=[recorder, tracing(provider)])
    zeus.dispatch(Brief(agent="lead", scope="outer")).result(10)
    sync(zeus)
    found = spans(exporter)
    assert parent_of(found["delegation lead"]) is None  # no span was current at dispatch
    assert parent_of(found["delegation echo"]) == found["delegation lead"].context.span_id


def test_a_retry_and_a_fallback_are_span_events_and_each_attempt_a_span(
    make_zeus: ZeusFactory, provider: TracerProvider, exporter: InMemorySpanExporter,
    recorder: Recorder,
) -> None:
    def flaky(brief: Brief, ctx: Context) -> str:
        raise TransientError("try again")

    zeus = make_zeus(
        {"a": {"retry": {"max_retries": 1, "initial_s": 0}, "fallback": "b"}, "b": {}},
        works={"a": flaky, "b": echo}, log=[recorder, tracing(provider)],
    )
    zeus.dispatch(Brief(agent="a", scope="x")).result(10)
    sync(zeus)
    finished = exporter.get_finished_spans()
    attempts = [s for s in finished if s.name.startswith("attempt")]
    assert [(s.name, s.attributes["zeus.attempt"], s.attributes["zeus.outcome"])  # type: ignore[index]
            for s in attempts] == [
        ("attempt a", 1, "transient"), ("attempt a", 2, "transient"), ("attempt b", 3, "completed")
    ]
    assert attempts[0].status.status_code is StatusCode.ERROR
    (delegation,) = [s for s in finished if s.name == "delegation a"]
    assert [e.name for e in delegation.events] == ["retry", "fallback"]
    assert dict(delegation.events[1].attributes or {}) == {"from": "a", "to": "b"}


def test_a_stale_attempt_carries_stale_and_kill_events_and_an_error_status(
    make_zeus: ZeusFactory, clock: FakeClock, provider: TracerProvider,
    exporter: InMemorySpanExporter, recorder: Recorder,
) -> None:
    zeus = make_zeus({"w": {"heartbeat": {"stale_after_s": 5}}}, works={"w": wait_cancelled},
                     log=[recorder, tracing(provider)])
    handle = zeus.dispatch(Brief(agent="w", scope="x"))
    recorder.wait_for("attempt.heartbeat")
    clock.advance(6)
    handle.result(10)
    sync(zeus)
    found = spans(exporter)
    assert [e.name for e in found["attempt w"].events] == ["stale", "kill"]
    assert found["attempt w"].attributes["zeus.outcome"] == "stale"  # type: ignore[index]
    assert found["delegation w"].attributes["zeus.status"] == "timed_out"  # type: ignore[index]
    assert found["delegation w"].status.status_code is StatusCode.ERROR


def test_tracing_stacks_with_a_journal_path(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    journal = tmp_path / "events.jsonl"
    with Zeus.start(agents={"echo": echo}, log=[journal, tracing(provider)]) as zeus:
        zeus.dispatch(Brief(agent="echo", scope="x")).result(10)
    events = [json.loads(line)["event"] for line in journal.read_text().splitlines()]
    assert "delegation.settled" in events
    assert sorted(spans(exporter)) == ["attempt echo", "delegation echo"]
