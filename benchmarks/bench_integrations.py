"""What the integrations add, each against the same work done without Zeus in this run.

- per framework: one agent run (or graph run) whose tool (node) is Zeus's, against
  the same run whose tool calls the same work function directly; the added cost
  per delegation is the difference (target at most +1 ms);
- MCP: a `delegate` round trip over stdio against a trivial tool (`agents`) on the
  same server;
- tracing on vs off: dispatch overhead of a no-op delegation (target at most 1.2x).

Run: `python -m benchmarks.bench_integrations` (writes benchmarks/results/integrations.json).
Frameworks that are not installed are left out of the table.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from actors import Brief, Context
from benchmarks._table import Row, report
from supervisor import Routing, Zeus
from supervisor.integrations._delegate import Delegator

ROOT = Path(__file__).resolve().parent.parent


def noop(brief: Brief, ctx: Context) -> str:
    return "done"


async def direct(
    agent: str,
    scope: str,
    inputs: dict[str, Any] | None = None,
    partial_ok: bool | None = None,
    timeout_s: float | None = None,
) -> str:
    """The baseline tool: the same signature as Zeus's, the work function called in place."""
    return noop(Brief(agent=agent, scope=scope), None)  # type: ignore[arg-type]


def has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def pair(
    through: Callable[[], Awaitable[Any]], plain: Callable[[], Awaitable[Any]], n: int,
    repeats: int = 5,
) -> tuple[float, float]:
    """Best-of-`repeats` seconds per awaited run of each, over `n` runs, on one loop;
    the two alternate, so that a loaded machine's drift falls on both alike."""

    async def timed() -> tuple[float, float]:
        best = [float("inf"), float("inf")]
        for _ in range(repeats):
            for i, run in enumerate((through, plain)):
                gc.collect()
                t0 = time.perf_counter()
                for _ in range(n):
                    await run()
                best[i] = min(best[i], (time.perf_counter() - t0) / n)
        return best[0], best[1]

    return asyncio.run(timed())


def added(rows: list[Row], name: str, times: tuple[float, float], baseline: str) -> None:
    zeus_s, base_s = times
    rows.append(Row(f"{name}: one delegation through Zeus", zeus_s * 1e3, base_s * 1e3, "ms",
                    baseline))
    rows.append(Row(f"{name}: added cost per delegation", (zeus_s - base_s) * 1e3, None, "ms",
                    target="value<=1.0"))


def bench_pydantic_ai(rows: list[Row], zeus: Zeus, n: int) -> None:
    from pydantic_ai import Agent, Tool
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from supervisor.integrations.pydantic_ai import delegate_tool

    def model(messages: Any, info: Any) -> ModelResponse:
        if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart("ok")])
        return ModelResponse(parts=[ToolCallPart("delegate", {"agent": "noop", "scope": "x"})])

    through = Agent(FunctionModel(model), tools=[delegate_tool(zeus)])
    description = Delegator(zeus).description
    plain = Agent(FunctionModel(model), tools=[
        Tool(direct, name="delegate", description=description, takes_ctx=False)
    ])
    added(rows, "pydantic-ai", pair(lambda: through.run("go"), lambda: plain.run("go"), n),
          "the same agent, the work function as its tool")


def bench_openai_agents(rows: list[Row], zeus: Zeus, n: int) -> None:
    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents.testing import ScriptedModel, assistant_message, function_call

    from supervisor.integrations.openai_agents import delegate_tool

    set_tracing_disabled(True)

    def agent(tool: Any) -> Any:
        steps: list[Any] = []
        for i in range(n * 5 + 2):
            steps += [[function_call("delegate", {"agent": "noop", "scope": "x"},
                                     call_id=f"c{i}")], [assistant_message("ok")]]
        return Agent(name="lead", model=ScriptedModel(steps), tools=[tool])

    through = agent(delegate_tool(zeus))
    plain = agent(function_tool(
        direct, name_override="delegate", description_override=Delegator(zeus).description,
        use_docstring_info=False, strict_mode=False,
    ))
    added(rows, "openai-agents",
          pair(lambda: Runner.run(through, "go"), lambda: Runner.run(plain, "go"), n),
          "the same agent, the work function as its tool")


def bench_langgraph(rows: list[Row], zeus: Zeus, n: int) -> None:
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    from supervisor.integrations.langgraph import fan_out

    class State(TypedDict, total=False):
        out: list[Any]

    async def plain_node(state: State) -> State:
        return {"out": [await direct("noop", "x")]}

    def graph(node: Any) -> Any:
        builder = StateGraph(State)
        builder.add_node("work", node)
        builder.add_edge(START, "work")
        builder.add_edge("work", END)
        return builder.compile()

    through = graph(fan_out(zeus, lambda s: [Brief(agent="noop", scope="x")], key="out"))
    plain = graph(plain_node)
    added(rows, "langgraph", pair(lambda: through.ainvoke({}), lambda: plain.ainvoke({}), n),
          "the same graph, the work function as its node")


def bench_mcp(rows: list[Row], n: int) -> None:
    from mcp import Client, StdioServerParameters

    with tempfile.TemporaryDirectory() as tmp:
        routing = Path(tmp) / "routing.yml"
        routing.write_text(
            "version: 1\nagents:\n  noop: {entrypoint: 'benchmarks.bench_integrations:noop'}\n"
        )
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "supervisor.cli", "mcp", "--routing",
                                          str(routing)], cwd=ROOT,
        )

        async def measure() -> tuple[float, float]:
            async with Client(params) as client:
                async def timed(name: str, args: dict[str, Any]) -> float:
                    t0 = time.perf_counter()
                    for _ in range(n):
                        await client.call_tool(name, args)
                    return (time.perf_counter() - t0) / n

                delegate, trivial = float("inf"), float("inf")
                for _ in range(3):  # alternate, as `pair` does
                    trivial = min(trivial, await timed("agents", {}))
                    delegate = min(
                        delegate, await timed("delegate", {"agent": "noop", "scope": "x"})
                    )
                return delegate, trivial

        delegate, trivial = asyncio.run(measure())
    rows.append(Row("mcp: delegate round trip over stdio", delegate * 1e3, trivial * 1e3, "ms",
                    "a trivial tool (agents) on the same server"))
    rows.append(Row("mcp: added cost of a delegation", (delegate - trivial) * 1e3, None, "ms"))


def bench_tracing(rows: list[Row], n: int) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    from supervisor.integrations.otel import tracing

    empty = Routing.from_dict({"version": 1, "agents": {}})
    brief = Brief(agent="noop", scope="x")

    def batch(zeus: Zeus) -> float:
        gc.collect()
        t0 = time.perf_counter()
        for _ in range(n):
            zeus.dispatch(brief).result(5)
        return (time.perf_counter() - t0) / n

    with Zeus.start(empty, agents={"noop": noop}) as plain, Zeus.start(
        empty, agents={"noop": noop}, log=tracing(TracerProvider())
    ) as traced:
        off = on = float("inf")
        for _ in range(7):  # alternate, so that a loaded machine's drift falls on both alike
            off = min(off, batch(plain))
            on = min(on, batch(traced))
    rows.append(Row("tracing on: dispatch overhead per delegation", on * 1e6, off * 1e6, "us",
                    "tracing off (log=None)", target="ratio<=1.2"))


def main() -> None:
    rows: list[Row] = []
    n = 300
    empty = Routing.from_dict({"version": 1, "agents": {}})
    with Zeus.start(empty, agents={"noop": noop}) as zeus:
        if has("pydantic_ai"):
            bench_pydantic_ai(rows, zeus, n)
        if has("agents"):
            bench_openai_agents(rows, zeus, n)
        if has("langgraph"):
            bench_langgraph(rows, zeus, n)
    if has("mcp"):
        bench_mcp(rows, 100)
    if has("opentelemetry.sdk"):
        bench_tracing(rows, 1000)
    report("integrations", rows)


if __name__ == "__main__":
    main()
