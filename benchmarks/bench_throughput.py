"""Throughput through Zeus (dispatch to settled summary), not a backend alone.

The same loop for every contender: at most W in flight, the next one started on
each result; rounds alternate between contenders (the host's load varies) and
the median round is kept. Process children: Zeus with W warm workers against
pebble's `ProcessPool(W)` and `multiprocess.Pool(W)`; thread children with 1, 8
and 64 in flight against `ThreadPoolExecutor`. Plus the supervisor's own CPU per
no-op delegation, read from Zeus's thread (`tree()["actor_cpu_s"]`).

    python -m benchmarks.bench_throughput [--quick] [--targets]

`--targets`: only the rows with a target (sequential and CPU, 8 in flight, 2 workers).
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from actors import Brief, Context
from benchmarks._table import Row, report
from supervisor import Routing, Zeus
from supervisor.core.handle import Handle


def noop(brief: Brief, ctx: Context) -> None:
    """The work: nothing (module level, so process workers take it by reference)."""


def bare_noop() -> None:
    """The baselines' work: nothing."""


def gated(total: int, in_flight: int, start: Callable[[Callable[[], None]], None]) -> float:
    """Seconds to run `total` jobs, at most `in_flight` at once: `start(done)` starts one
    job and arranges for `done()` to be called when it ends (in any thread)."""
    gate = threading.Semaphore(in_flight)
    t0 = time.perf_counter()
    for _ in range(total):
        gate.acquire()
        start(gate.release)
    for _ in range(in_flight):
        gate.acquire()
    return time.perf_counter() - t0


def zeus_starter(zeus: Zeus, briefs: list[Brief]) -> Callable[[Callable[[], None]], None]:
    """One delegation per call, its brief made before the clock starts."""
    queue = iter(briefs)

    def start(done: Callable[[], None]) -> None:
        handle: Handle = zeus.dispatch(next(queue))
        handle.future.add_done_callback(lambda _: done())

    return start


def future_starter(submit: Callable[[], Future[Any]]) -> Callable[[Callable[[], None]], None]:
    def start(done: Callable[[], None]) -> None:
        submit().add_done_callback(lambda _: done())

    return start


def alternate(n: int, rounds: int, contenders: dict[str, Callable[[int], float]]) -> dict[
    str, list[float]
]:
    """Rates (per second) of each contender, in alternating rounds."""
    rates: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, run in contenders.items():
            rates[name].append(n / run(n))
    return rates


def routing(isolation: str, workers: int) -> Routing:
    return Routing.from_dict({
        "version": 1,
        "supervisor": {"max_concurrent": 1024},
        "agents": {"noop": {"isolation": isolation, "timeout_s": 60, "session_max": workers}},
    })


def bench_process(rows: list[Row], workers: int, n: int, rounds: int) -> None:
    import multiprocess
    from pebble import ProcessPool

    mod = sys.modules[__name__] if __name__ != "__main__" else __import__(
        "benchmarks.bench_throughput", fromlist=["noop"])
    with Zeus.start(routing("process", workers), agents={"noop": mod.noop}) as zeus, \
            ProcessPool(max_workers=workers) as pebble, \
            multiprocess.get_context("fork").Pool(workers) as mp_pool:

        def through_zeus(total: int) -> float:
            briefs = [Brief(agent="noop", scope=f"x{i}") for i in range(total)]
            return gated(total, workers, zeus_starter(zeus, briefs))

        def through_pebble(total: int) -> float:
            return gated(total, workers, future_starter(lambda: pebble.schedule(mod.bare_noop)))

        def through_mp(total: int) -> float:
            def start(done: Callable[[], None]) -> None:
                mp_pool.apply_async(mod.bare_noop, callback=lambda _: done())
            return gated(total, workers, start)

        for run in (through_zeus, through_pebble, through_mp):  # warm: every worker exists
            run(workers * 8)
        rates = alternate(n, rounds, {"zeus": through_zeus, "pebble": through_pebble,
                                      "mp": through_mp})
    zeus_rate = statistics.median(rates["zeus"])
    zeus_spread = f"{min(rates['zeus']):.0f}-{max(rates['zeus']):.0f}"
    for name, label in (("pebble", f"pebble ProcessPool({workers})"),
                        ("mp", f"multiprocess.Pool({workers})")):
        rows.append(Row(
            f"process, {workers} warm worker(s), vs {name}", zeus_rate,
            statistics.median(rates[name]), "/s", label + ", the same loop",
            "ratio>=0.8" if name == "pebble" and workers == 2 else "",
            f"median of {rounds} alternating rounds of {n}; at most {workers} in flight; "
            f"spread {zeus_spread} /s against {min(rates[name]):.0f}-{max(rates[name]):.0f}",
            {"rounds_per_s": rates},
        ))


def bench_threads(rows: list[Row], in_flight: int, n: int, rounds: int) -> None:
    cpus: list[float] = []  # Zeus's thread's CPU per delegation, each measured round
    with Zeus.start(routing("thread", 1), agents={"noop": noop}) as zeus, \
            ThreadPoolExecutor(max_workers=in_flight) as pool:

        def through_zeus(total: int) -> float:
            briefs = [Brief(agent="noop", scope=f"x{i}") for i in range(total)]
            before = zeus.tree()["actor_cpu_s"]
            took = gated(total, in_flight, zeus_starter(zeus, briefs))
            cpus.append((zeus.tree()["actor_cpu_s"] - before) / total)
            return took

        def through_pool(total: int) -> float:
            return gated(total, in_flight, future_starter(lambda: pool.submit(bare_noop)))

        through_zeus(200)
        through_pool(200)
        cpus.clear()  # not the warm-up's
        rates = alternate(n, rounds, {"zeus": through_zeus, "pool": through_pool})
    per = 1e6 / statistics.median(rates["zeus"])
    rows.append(Row(
        f"thread children, {in_flight} in flight: Zeus's thread's CPU per delegation",
        statistics.median(cpus) * 1e6, None, "us", note=(
            f"median of {rounds}, spread {min(cpus) * 1e6:.1f}-{max(cpus) * 1e6:.1f} us, of "
            f"{per:.1f} us of wall time per delegation: Zeus's thread is the serial part")))
    rows.append(Row(
        f"thread children, {in_flight} in flight", statistics.median(rates["zeus"]),
        statistics.median(rates["pool"]), "/s", f"ThreadPoolExecutor({in_flight}), the same loop",
        "ratio>=0.33" if in_flight == 8 else "",
        f"median of {rounds} alternating rounds of {n}; spread "
        f"{min(rates['zeus']):.0f}-{max(rates['zeus']):.0f} /s against "
        f"{min(rates['pool']):.0f}-{max(rates['pool']):.0f}", {"rounds_per_s": rates},
    ))


def bench_sequential(rows: list[Row], n: int, rounds: int) -> None:
    """Dispatch to settled, one at a time, against submit().result()."""
    with Zeus.start(routing("thread", 1), agents={"noop": noop}) as zeus, \
            ThreadPoolExecutor(max_workers=1) as pool:

        def through_zeus(total: int) -> float:
            briefs = [Brief(agent="noop", scope=f"x{i}") for i in range(total)]
            t0 = time.perf_counter()
            for brief in briefs:
                zeus.dispatch(brief).result()
            return time.perf_counter() - t0

        def through_pool(total: int) -> float:
            t0 = time.perf_counter()
            for _ in range(total):
                pool.submit(bare_noop).result()
            return time.perf_counter() - t0

        through_zeus(200)
        rates = alternate(n, rounds, {"zeus": through_zeus, "pool": through_pool})
        cpus = []
        for _ in range(rounds):
            before = zeus.tree()["actor_cpu_s"]
            through_zeus(n)
            cpus.append((zeus.tree()["actor_cpu_s"] - before) / n)
        cpu_per = statistics.median(cpus)
    zeus_s = 1 / statistics.median(rates["zeus"])
    pool_s = 1 / statistics.median(rates["pool"])
    rows.append(Row(
        "sequential no-op, dispatch to settled", zeus_s * 1e6, pool_s * 1e6, "us",
        "ThreadPoolExecutor.submit().result()", "ratio<=2.5",
        f"median of {rounds} alternating rounds of {n}",
    ))
    rows.append(Row(
        "supervisor CPU per no-op delegation", cpu_per * 1e6, None, "us", "",
        "value<=60", "Zeus's own thread's CPU time (tree()['actor_cpu_s']) over "
        f"{n} sequential thread delegations; median of {rounds}, spread "
        f"{min(cpus) * 1e6:.1f}-{max(cpus) * 1e6:.1f} us",
    ))


def beating(brief: Brief, ctx: Context) -> None:
    """The work of the many-children row: 1 s in ten sleeps, a heartbeat after each."""
    for _ in range(10):
        ctx.sleep(0.1)
        ctx.heartbeat()


def bare_beating(send: Callable[[int], None]) -> None:
    """The raw threads' work: the same sleeps, a counter sent after each."""
    for i in range(10):
        time.sleep(0.1)
        send(i)


def bench_many_threads(rows: list[Row], count: int, rounds: int) -> None:
    """`count` thread children at once, 1 s each with 10 heartbeats, against `count` raw
    threads that sleep the same way and put a counter on a queue after each sleep."""
    import queue

    def raw(total: int) -> float:
        beats: queue.SimpleQueue[int] = queue.SimpleQueue()
        threads = [threading.Thread(target=bare_beating, args=(beats.put,), daemon=True)
                   for _ in range(total)]
        t0 = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return time.perf_counter() - t0

    routing_ = Routing.from_dict({
        "version": 1,
        "supervisor": {"max_concurrent": count},
        "agents": {"beating": {"isolation": "thread", "timeout_s": 120,
                               "heartbeat": {"interval_s": 0.05, "stale_after_s": 60}}},
    })
    with Zeus.start(routing_, agents={"beating": beating}) as zeus:

        def through_zeus(total: int) -> float:
            briefs = [Brief(agent="beating", scope=f"x{i}") for i in range(total)]
            t0 = time.perf_counter()
            handles = [zeus.dispatch(brief) for brief in briefs]
            for handle in handles:
                assert handle.result(120).ok
            return time.perf_counter() - t0

        walls: dict[str, list[float]] = {"zeus": [], "raw": []}
        for _ in range(rounds):
            walls["zeus"].append(through_zeus(count))
            walls["raw"].append(raw(count))
    rows.append(Row(
        f"{count:,} concurrent thread children, 1 s each, 10 heartbeats: wall time",
        statistics.median(walls["zeus"]), statistics.median(walls["raw"]), "s",
        f"{count:,} raw threads, the same sleeps, a queue put after each", "ratio<=1.2",
        f"median of {rounds} alternating rounds", {"walls_s": walls},
    ))


def main(argv: list[str] | None = None) -> None:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    n, rounds = (500, 3) if quick else (2000, 5)
    rows: list[Row] = []
    if "--targets" in (argv if argv is not None else sys.argv[1:]):  # the burst's rows only
        bench_sequential(rows, n, rounds)
        bench_threads(rows, 8, n, rounds)
        bench_process(rows, 2, n, rounds)
        report("throughput_targets", rows)
        return
    bench_sequential(rows, n, rounds)
    for in_flight in (1, 8, 64):
        bench_threads(rows, in_flight, n, rounds)
    for workers in (1, 2, 4):
        bench_process(rows, workers, n, rounds)
    bench_many_threads(rows, 2_000 if quick else 10_000, 1 if quick else 3)
    report("throughput", rows)


if __name__ == "__main__":
    main()
