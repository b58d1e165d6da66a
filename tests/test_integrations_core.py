"""What the integrations stand on, without any framework: several `log=` sinks, the
dispatch hook, usage read from a framework's counters and priced, and the bridge
that awaits a delegation and cancels it with the awaiting task."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from actors import Brief, Context, Status, Usage
from actors.usage import usage_from
from supervisor import Routing, Zeus
from supervisor.integrations import _bridge
from supervisor.integrations._extras import missing_extra
from supervisor.routing import PricingPolicy
from supervisor.rules.budget import priced
from tests._integration_agents import echo
from tests._support import wait_cancelled
from tests.conftest import Recorder, ZeusFactory

# -- log= with several targets ----------------------------------------------------------


def test_log_takes_a_path_and_sinks_together_and_each_gets_every_event(tmp_path: Path) -> None:
    journal, first, second = tmp_path / "events.jsonl", Recorder(), Recorder()
    with Zeus.start(agents={"echo": echo}, log=[journal, first, second]) as zeus:
        zeus.dispatch(Brief(agent="echo", scope="hi")).result(10)
    lines = [json.loads(line)["event"] for line in journal.read_text().splitlines()]
    assert lines == first.names() == second.names()
    assert lines[0] == "zeus.started" and lines[-1] == "zeus.stopped"


def test_a_broken_sink_does_not_keep_events_from_the_others() -> None:
    recorder = Recorder()

    def broken(event: dict[str, Any]) -> None:
        raise OSError("disk full")

    with Zeus.start(agents={"echo": echo}, log=[broken, recorder]) as zeus:
        summary = zeus.dispatch(Brief(agent="echo", scope="hi")).result(10)
    assert summary.status is Status.completed
    assert "delegation.settled" in recorder.names()


def test_a_sink_hears_each_dispatch_in_the_host_thread_before_zeus_does() -> None:
    seen: list[tuple[str, str, bool]] = []
    host = threading.current_thread().name

    class Sink:
        def __call__(self, event: dict[str, Any]) -> None:
            if event["event"] == "delegation.dispatched":
                seen.append(("event", event["delegation_id"], False))

        def on_dispatch(self, delegation_id: str) -> None:
            seen.append(("hook", delegation_id, threading.current_thread().name == host))

    with Zeus.start(agents={"echo": echo}, log=Sink()) as zeus:
        zeus.dispatch(Brief(agent="echo", scope="hi")).result(10)
    assert seen == [("hook", "echo-1", True), ("event", "echo-1", False)]


def test_the_settled_event_carries_the_delegations_usage(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    def spends(brief: Brief, ctx: Context) -> int:
        ctx.charge(calls=2, input_tokens=10, output_tokens=3, cost=0.5)
        return 1

    zeus = make_zeus({"s": {}}, works={"s": spends})
    zeus.dispatch(Brief(agent="s", scope="x")).result(10)
    (settled,) = recorder.wait_for("delegation.settled")
    assert settled["usage"] == {"calls": 2, "input_tokens": 10, "output_tokens": 3, "cost": 0.5}


# -- usage from a framework's counters -----------------------------------------------------


@dataclass
class RunUsageLike:  # pydantic-ai RunUsage / the Agents SDK's Usage
    requests: int = 3
    input_tokens: int = 100
    output_tokens: int = 20


@dataclass
class RequestUsageLike:  # pydantic-ai RequestUsage: one request, no `requests` field
    input_tokens: int = 7
    output_tokens: int = 2


@dataclass
class CompletionUsageLike:  # openai CompletionUsage
    prompt_tokens: int = 11
    completion_tokens: int = 5
    total_tokens: int = 16


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (RunUsageLike(), Usage(calls=3, input_tokens=100, output_tokens=20)),
        (RequestUsageLike(), Usage(calls=1, input_tokens=7, output_tokens=2)),
        (CompletionUsageLike(), Usage(calls=1, input_tokens=11, output_tokens=5)),
        ({"prompt_tokens": 4, "completion_tokens": 1, "cost": 0.25},
         Usage(calls=1, input_tokens=4, output_tokens=1, cost=0.25)),
        ({"input_tokens": 4, "requests": 0}, Usage(calls=0, input_tokens=4)),
    ],
)
def test_usage_is_read_from_a_frameworks_own_counters(usage: object, expected: Usage) -> None:
    assert usage_from(usage) == expected


def test_a_usage_without_tokens_is_refused_with_what_to_give_instead() -> None:
    with pytest.raises(TypeError, match=r"input_tokens/output_tokens.*ctx.charge"):
        usage_from(object())


@pytest.mark.parametrize(
    ("usage", "cost"),
    [
        (Usage(calls=1, input_tokens=2_000_000, output_tokens=1_000_000), 2 * 3.0 + 15.0),
        (Usage(calls=1, input_tokens=10, cost=0.7), 0.7),  # its own cost wins
        (Usage(calls=1), 0.0),  # nothing to price
    ],
)
def test_tokens_without_a_cost_are_priced_by_the_policy(usage: Usage, cost: float) -> None:
    pricing = PricingPolicy(input_per_mtok=3.0, output_per_mtok=15.0)
    assert priced(usage, pricing).cost == pytest.approx(cost)
    assert priced(usage, None) == usage


def test_charge_usage_counts_against_the_budget_at_the_policys_price(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    def spends(brief: Brief, ctx: Context) -> None:
        ctx.charge_usage(RunUsageLike(requests=1, input_tokens=1_000_000, output_tokens=0))
        ctx.sleep(30)  # stopped by the budget long before

    zeus = make_zeus(
        {"s": {"pricing": {"input_per_mtok": 3.0}, "budget": {"max_cost": 2.0},
               "shutdown": {"grace_s": 0}}},
        works={"s": spends},
    )
    summary = zeus.dispatch(Brief(agent="s", scope="x")).result(10)
    assert summary.status is Status.budget_exceeded
    assert (summary.usage.input_tokens, summary.usage.cost) == (1_000_000, 3.0)


def test_pricing_is_checked_when_the_routing_loads() -> None:
    with pytest.raises(Exception, match="input_per_mtok"):
        Routing.from_dict({"version": 1, "agents": {"a": {"pricing": {"input_per_mtok": -1}}}})


# -- the bridge ------------------------------------------------------------------------------


def test_cancelling_the_awaiting_task_cancels_the_delegation(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    zeus = make_zeus({"w": {}}, works={"w": wait_cancelled})

    async def host() -> None:
        handle = zeus.dispatch(Brief(agent="w", scope="x"))
        task = asyncio.ensure_future(_bridge.await_summary(handle))
        await asyncio.to_thread(recorder.wait_for, "attempt.heartbeat")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        summary = await asyncio.to_thread(handle.result, 10)
        assert summary.status is Status.cancelled

    asyncio.run(host())
    (requested,) = recorder.named("delegation.cancel_requested")
    assert requested["reason"] == _bridge.AWAITER_CANCELLED


def test_cancelling_the_task_awaiting_a_group_cancels_every_member(
    make_zeus: ZeusFactory, recorder: Recorder
) -> None:
    zeus = make_zeus({"w": {}}, works={"w": wait_cancelled})

    async def host() -> None:
        group = zeus.dispatch_group([Brief(agent="w", scope=str(n)) for n in range(3)])
        task = asyncio.ensure_future(_bridge.await_group(group))
        await asyncio.to_thread(recorder.wait_for, "attempt.heartbeat", 3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        summaries = await asyncio.to_thread(group.results, 10)
        assert [s.status for s in summaries] == [Status.cancelled] * 3

    asyncio.run(host())


def test_a_wait_that_runs_out_cancels_nothing(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus({"w": {}}, works={"w": wait_cancelled})
    handle = zeus.dispatch(Brief(agent="w", scope="x"))
    assert asyncio.run(_bridge.wait_summary(handle, 0.01)) is None
    assert not handle.done()
    handle.cancel("test over")
    assert handle.result(10).status is Status.cancelled


def test_an_awaited_summary_is_the_delegations_summary(make_zeus: ZeusFactory) -> None:
    zeus = make_zeus({"e": {}}, works={"e": echo})
    handle = zeus.dispatch(Brief(agent="e", scope="hello"))
    summary = asyncio.run(_bridge.await_summary(handle))
    assert summary is handle.result(0)


def test_missing_framework_errors_name_the_extra() -> None:
    error = missing_extra("supervisor.integrations.otel", "otel", ImportError("x", name="foo"))
    assert "pip install 'zeus-supervisor[otel]'" in str(error)


def test_importing_zeus_imports_no_framework() -> None:
    code = (
        "import sys, supervisor, supervisor.cli, supervisor.integrations;"
        "frameworks = {'mcp', 'pydantic_ai', 'agents', 'langgraph', 'langchain_core', "
        "'opentelemetry'};"
        "print(sorted(frameworks & {m.split('.')[0] for m in sys.modules}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_each_integration_without_its_framework_names_the_extra_to_install() -> None:
    code = """
import sys
for name in ("mcp", "pydantic_ai", "agents", "langchain_core", "langgraph", "opentelemetry"):
    sys.modules[name] = None  # as if not installed
for module in ("mcp", "pydantic_ai", "openai_agents", "langgraph", "otel"):
    try:
        __import__(f"supervisor.integrations.{module}")
    except ImportError as exc:
        print(str(exc).rsplit("pip install ", 1)[1])
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [
        f"'zeus-supervisor[{extra}]'"
        for extra in ("mcp", "pydantic-ai", "openai-agents", "langgraph", "otel")
    ]


def test_zeus_mcp_without_the_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from supervisor.cli.main import main

    for name in [n for n in sys.modules if n == "mcp" or n.startswith("mcp.")] or ["mcp"]:
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed
    monkeypatch.delitem(sys.modules, "supervisor.integrations.mcp", raising=False)
    assert main(["mcp"]) == 2
    said = capsys.readouterr().err
    assert said.startswith("zeus mcp: needs the mcp extra (mcp")  # what import missed
    assert said.endswith(" is missing): pip install 'zeus-supervisor[mcp]'\n")
    assert said.count("zeus mcp") == 1
