"""Figures under hostile load: memory released at settlement, deadlines while hundreds of
process children start at once (with and without CPU burners beside them).

Run: `python -m benchmarks.bench_hostile` (writes benchmarks/results/hostile.json).
"""

from __future__ import annotations

import gc
import importlib
import multiprocessing
import statistics
import time
import tracemalloc
from typing import Any

from actors import Brief, Context
from benchmarks._table import Row, report
from supervisor import Routing, Zeus
from supervisor.testing import sync


def done(brief: Brief, ctx: Context) -> str:
    return "ok"


def hang(brief: Brief, ctx: Context) -> None:
    time.sleep(600)


def _burn(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def this_module() -> Any:
    """This module under its importable name, so that its functions go by reference."""
    return importlib.import_module("benchmarks.bench_hostile")


# -- memory released at settlement ------------------------------------------------------


def bench_memory_released(rows: list[Row], n: int = 20_000, input_bytes: int = 10_000) -> None:
    """Traced memory left after `n` delegations with 10 KB inputs have settled and their
    handles are gone, while every deadline (an hour) is still far away."""
    r = Routing.from_dict({"version": 1, "supervisor": {"max_concurrent": 1000},
                           "agents": {"a": {"timeout_s": 3600}}})
    with Zeus.start(r, agents={"a": done}) as zeus:
        for _ in range(200):  # warm up: pooled threads, caches
            zeus.dispatch(Brief(agent="a", scope="w")).result(10)
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        batch = 500
        for start in range(0, n, batch):
            handles = [
                zeus.dispatch(Brief(agent="a", scope=f"s{i}", inputs={"blob": "x" * input_bytes}))
                for i in range(start, start + batch)
            ]
            for h in handles:
                h.result(30)
            del handles
        sync(zeus)
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
    inputs = n * input_bytes
    rows.append(Row(f"memory retained after {n:,} settled delegations", retained / 2**20,
                    inputs / 2**20, "MB", f"their inputs ({input_bytes // 1000} KB each)",
                    "ratio<=0.02", note="tracemalloc, handles dropped, deadlines 1 h away"))
    rows.append(Row("  retained per settled delegation", retained / n, None, "B"))


# -- deadlines while many process children start ----------------------------------------


def _overshoot(n: int, burners: int, mod: Any) -> list[float]:
    """Seconds past each attempt's 1 s deadline when Zeus decided it timed out."""
    events: list[dict[str, Any]] = []
    r = Routing.from_dict({"version": 1, "supervisor": {"max_concurrent": n},
                           "agents": {"h": {"isolation": "process", "timeout_s": 1.0,
                                            "retry": {"max_retries": 0},
                                            "shutdown": {"grace_s": 0.2, "term_s": 0.2}}}})
    ctx = multiprocessing.get_context("spawn")
    burning = [ctx.Process(target=mod._burn, args=(120.0,), daemon=True) for _ in range(burners)]
    for p in burning:
        p.start()
    try:
        with Zeus.start(r, agents={"h": mod.hang}, log=events.append) as zeus:
            handles = [zeus.dispatch(Brief(agent="h", scope=str(i))) for i in range(n)]
            for h in handles:
                h.result(120)
    finally:
        for p in burning:
            p.kill()
            p.join()
    first: dict[str, float] = {}
    for e in events:
        if e["event"] == "attempt.timed_out":
            first.setdefault(str(e["attempt_id"]), float(e["elapsed_s"]) - 1.0)
    return list(first.values())


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) >= 2 else values[0]


def bench_deadlines_under_load(rows: list[Row], n: int = 300) -> None:
    mod = this_module()
    for burners, target in ((0, 0.100), (2, 0.250)):
        late = _overshoot(n, burners, mod)
        assert len(late) == n, f"{len(late)} of {n} attempts timed out"
        beside = f", {burners} CPU burners beside" if burners else ""
        rows.append(Row(f"{n} process children at once{beside}: deadline overshoot p99",
                        _p99(late) * 1e3, target * 1e3, "ms", "the target", "ratio<=1.0",
                        note=f"p50 {statistics.median(late) * 1e3:.1f} ms, "
                             f"max {max(late) * 1e3:.1f} ms",
                        extra={"p50_ms": statistics.median(late) * 1e3,
                               "max_ms": max(late) * 1e3}))


def main() -> None:
    rows: list[Row] = []
    bench_memory_released(rows)
    bench_deadlines_under_load(rows)
    report("hostile", rows)


if __name__ == "__main__":
    main()
