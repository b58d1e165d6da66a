"""What reading hostile or large input costs: agent-written text, and big routing files.

Run: `python -m benchmarks.bench_input` (writes benchmarks/results/input.json).

- parsing: `Brief.parse` and `Summary.parse` of 1 MB of each adversarial shape, in
  seconds per MB, against `str.splitlines` of the same text (the least any line
  reader pays). Target: at most 0.5 s per MB, whatever the shape.
- routing: `Routing.load` of 1,000 and 8,000 agents, against `yaml.load` of the same
  file with PyYAML's pure-Python SafeLoader (what parsing alone costs); and the time
  per agent at 8,000 over the time per agent at 1,000 (1.0 is linear).
"""

from __future__ import annotations

import contextlib
import gc
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from actors import Brief, Summary
from benchmarks._table import Row, report
from supervisor import Routing

MB = 1 << 20

SHAPES: dict[str, Callable[[], str]] = {
    "blank lines": lambda: "SUBTASK BRIEF\nAgent: a\n" + "\n" * MB + "Scope: x\n",
    "blank lines then a label": lambda: ("\n" * 50 + "Scope: x\n") * (MB // 59),
    "'a' + spaces + 'x' label": lambda: "SUBTASK BRIEF\n" + "a" + " " * MB + "x",
    "close tags before open tags": lambda: (
        "</subtask_summary>\n" * (MB // 38) + "<subtask_summary>\n" * (MB // 38)
    ),
    "continuation lines": lambda: "SUBTASK BRIEF\nAgent: a\nScope: x\n" + "more\n" * (MB // 5),
    "list items": lambda: "<subtask_summary>\nStatus: completed\nAgent: a\nScope: s\n"
    "Findings:\n" + "- f\n" * (MB // 4),
    "a long duration": lambda: "SUBTASK BRIEF\nAgent: a\nScope: s\nTimeout: " + "1" * MB + "q",
}


def best_of(fn: Callable[[], Any], repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        started = time.perf_counter()
        with contextlib.suppress(ValueError):
            fn()
        best = min(best, time.perf_counter() - started)
    return best


def bench_parsing(rows: list[Row]) -> None:
    for name, make in SHAPES.items():
        text = make()
        megabytes = len(text.encode()) / MB
        baseline = best_of(text.splitlines) / megabytes
        for parse in (Brief.parse, Summary.parse):
            per_mb = best_of(lambda parse=parse, text=text: parse(text)) / megabytes
            rows.append(Row(
                f"{parse.__qualname__}: {name}", per_mb, baseline, "s/MB",
                "str.splitlines of the same text", target="value<=0.5",
            ))


def routing_text(agents: int) -> str:
    lines = ["defaults: {timeout_s: 60, retry: {max_retries: 1}}", "agents:"]
    lines += [
        f"  agent{i}: {{timeout_s: {i % 100 + 1}, fallback: agent{(i + 1) % agents}, "
        "role: a worker}"
        for i in range(agents)
    ]
    return "\n".join(lines) + "\n"


def bench_routing(rows: list[Row], tmp: Path) -> None:
    per_agent: dict[int, float] = {}
    for agents in (1_000, 8_000):
        path = tmp / f"routing-{agents}.yml"
        text = routing_text(agents)
        path.write_text(text, encoding="utf-8")
        zeus = best_of(lambda path=path: Routing.load(path), repeats=2)
        parse = best_of(lambda text=text: yaml.load(text, Loader=yaml.SafeLoader), repeats=2)
        per_agent[agents] = zeus / agents
        rows.append(Row(
            f"Routing.load, {agents:,} agents", zeus, parse, "s",
            "yaml.load (pure-Python SafeLoader) of the same file", target="ratio<=2.0",
        ))
    rows.append(Row(
        "Routing.load time per agent, 8,000 over 1,000", per_agent[8_000] / per_agent[1_000],
        None, "x", target="value<=1.5", note="1.0 is linear; quadratic would be 8",
    ))


def main() -> None:
    rows: list[Row] = []
    bench_parsing(rows)
    with tempfile.TemporaryDirectory() as tmp:
        bench_routing(rows, Path(tmp))
    report("input", rows)


if __name__ == "__main__":
    main()
