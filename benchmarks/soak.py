"""Soak: 20,000 thread plus 5,000 process delegations (10 KB inputs), memory sampled as
they settle; after warm-up the resident memory should stay flat.

Run once: `python -m benchmarks.soak` (writes benchmarks/results/soak.json). The figure
is the least-squares slope of RSS over delegations after the first quarter of each
phase, in bytes per delegation; fds and live child processes are reported too.
"""

from __future__ import annotations

import gc
import importlib
import os

import psutil

from actors import Brief, Context
from benchmarks._table import Row, report
from supervisor import Routing, Zeus

INPUT = "x" * 10_000


def done(brief: Brief, ctx: Context) -> int:
    ctx.partial(len(brief.inputs["blob"]))
    return 1


def slope(points: list[tuple[int, int]]) -> float:
    """Least-squares slope of y over x."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    num = sum((x - mx) * (y - my) for x, y in points)
    den = sum((x - mx) ** 2 for x, _ in points) or 1.0
    return num / den


def _phase(zeus: Zeus, agent: str, total: int, in_flight: int, every: int) -> list[tuple[int, int]]:
    """`total` delegations, `in_flight` at a time; RSS sampled every `every` settled."""
    me = psutil.Process()
    samples = []
    for start in range(0, total, in_flight):
        handles = [zeus.dispatch(Brief(agent=agent, scope=f"s{i}", inputs={"blob": INPUT}))
                   for i in range(start, start + in_flight)]
        for h in handles:
            assert h.result(60).status == "completed"
        del handles
        if (start + in_flight) % every == 0:
            gc.collect()
            samples.append((start + in_flight, me.memory_info().rss))
    return samples


def main(threads: int = 20_000, processes: int = 5_000) -> None:
    mod = importlib.import_module("benchmarks.soak")
    r = Routing.from_dict({"version": 1, "supervisor": {"max_concurrent": 1000}, "agents": {
        "t": {"timeout_s": 3600},
        "p": {"isolation": "process", "timeout_s": 3600, "session_max": 8},
    }})
    me = psutil.Process()
    rows: list[Row] = []
    with Zeus.start(r, agents={"t": mod.done, "p": mod.done}) as zeus:
        _phase(zeus, "p", 200, 8, 200)  # warm up: the fork server and 8 warm workers exist
        fds_before = me.num_fds()
        thread_samples = _phase(zeus, "t", threads, 100, 500)
        process_samples = _phase(zeus, "p", processes, 8, 200)
        fds_after = me.num_fds()
        children = len(me.children(recursive=True))
        settled = zeus.tree()["settled"]
    for name, samples in (("thread", thread_samples), ("process", process_samples)):
        steady = samples[len(samples) // 4:]
        per = slope(steady)
        rows.append(Row(f"soak, {samples[-1][0]:,} {name} delegations: RSS slope",
                        per, None, "B", target="value<=200",
                        note="after warm-up (first quarter left out), bytes per delegation",
                        extra={"rss_mb": [round(rss / 2**20, 1) for _, rss in samples]}))
        rows.append(Row(f"  RSS {name} phase, first -> last sample",
                        samples[-1][1] / 2**20, samples[0][1] / 2**20, "MB", "first sample"))
    rows.append(Row("soak: fds after, against after warm-up", fds_after, fds_before, "fd",
                    "after warm-up", "ratio<=1.0"))
    rows.append(Row("soak: settled delegations", settled, None, ""))
    rows.append(Row("soak: child processes left", children, None, "", target="value<=10",
                    note="8 warm workers, the fork server, its resource tracker"))
    report("soak", rows)
    if os.environ.get("SOAK_VERBOSE"):
        print(thread_samples, process_samples)


if __name__ == "__main__":
    main()
