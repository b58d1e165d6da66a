"""Runtime benchmarks for thread children, each against a baseline measured in this run.

Run: `python -m benchmarks.bench_runtime` (writes benchmarks/results/runtime.json).
"""

from __future__ import annotations

import gc
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psutil
import pykka

from actors import Brief, Context
from benchmarks._table import Row, report
from supervisor import Routing, Zeus
from supervisor.testing import held, sync


def noop(brief: Brief, ctx: Context) -> None:
    return None


def routing(**supervisor: Any) -> Routing:
    return Routing.from_dict({"version": 1, "supervisor": supervisor, "agents": {}})


class Echo(pykka.ThreadingActor):
    def on_receive(self, message: Any) -> Any:
        return message


class Counter(pykka.ThreadingActor):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def on_receive(self, message: Any) -> Any:
        if message == "count?":
            return self.count
        if isinstance(message, tuple):  # ("hold", release, held)
            message[2].set()
            message[1].wait()
            return None
        self.count += 1
        return None


def per_op(fn: Any, n: int, repeats: int = 5) -> float:
    """Best-of-`repeats` seconds per call of `fn`, over `n` calls each."""
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def bench_dispatch(rows: list[Row]) -> None:
    n = 1000

    def bare_actor() -> None:
        ref = Echo.start()
        ref.ask("ping")
        ref.stop()

    pool = ThreadPoolExecutor(max_workers=8)

    def thread_pool() -> None:
        pool.submit(noop, None, None).result(timeout=5)

    with Zeus.start(routing(), agents={"noop": noop}) as zeus:
        brief = Brief(agent="noop", scope="nothing")

        def delegation() -> None:
            zeus.dispatch(brief).result(5)

        per_op(delegation, 200, 1)  # warm up
        zeus_s = per_op(delegation, n)
        actor_s = per_op(bare_actor, n)
        pool_s = per_op(thread_pool, n)

        in_flight = 8
        t0 = time.perf_counter()
        total = 0
        while total < 2000:
            handles = [zeus.dispatch(brief) for _ in range(in_flight)]
            for h in handles:
                h.result(5)
            total += in_flight
        rate_8 = total / (time.perf_counter() - t0)
    pool.shutdown()
    rows.append(Row("dispatch overhead per no-op delegation", zeus_s * 1e6, actor_s * 1e6, "us",
                    "pykka actor start+ask+stop", "ratio<=1.5"))
    rows.append(Row("  the same vs ThreadPoolExecutor submit+result", zeus_s * 1e6,
                    pool_s * 1e6, "us", "ThreadPoolExecutor.submit().result(timeout)"))
    rows.append(Row("delegations per second, sequential", 1 / zeus_s, None, "/s"))
    rows.append(Row("delegations per second, 8 in flight", rate_8, None, "/s"))


def bench_concurrent(rows: list[Row]) -> None:
    n = 1000

    def sleeper(brief: Brief, ctx: Context) -> None:
        time.sleep(1.0)

    def zeus_run() -> float:
        with Zeus.start(routing(max_concurrent=n), agents={"s": sleeper}) as zeus:
            t0 = time.perf_counter()
            handles = [zeus.dispatch(Brief(agent="s", scope=str(i))) for i in range(n)]
            statuses = {h.result(30).status for h in handles}
            wall = time.perf_counter() - t0
        assert statuses == {"completed"}, statuses
        return wall

    def raw_run() -> float:
        t0 = time.perf_counter()
        threads = [threading.Thread(target=time.sleep, args=(1.0,)) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return time.perf_counter() - t0

    gc.collect()
    zeus_wall = min(zeus_run() for _ in range(2))
    raw_wall = min(raw_run() for _ in range(2))
    rows.append(Row("1,000 thread children sleeping 1 s: wall time", zeus_wall, raw_wall, "s",
                    "1,000 raw threads sleeping 1 s", "value<=1.5", note="best of 2 runs each"))


def bench_heartbeats(rows: list[Row]) -> None:
    """Zeus's mailbox is held while 100 children queue their heartbeats, then drained.

    The figure is Zeus's own processing rate, not the senders' (100 threads that
    race for the GIL to send are the noisy part, and not the supervisor's cost).
    The baseline is a raw pykka actor draining the same number of tells.
    """
    children, beats = 100, 1000
    go = threading.Event()
    sent = threading.Semaphore(0)

    def beater(brief: Brief, ctx: Context) -> None:
        go.wait(30)
        for _ in range(beats):
            ctx.heartbeat()
        sent.release()

    policy = {"heartbeat": {"interval_s": 1e-9, "stale_after_s": 60}}
    r = Routing.from_dict({"version": 1, "supervisor": {"max_concurrent": children},
                           "agents": {"b": policy}})
    total = children * beats
    with Zeus.start(r, agents={"b": beater}) as zeus:
        handles = [zeus.dispatch(Brief(agent="b", scope=str(i))) for i in range(children)]
        sync(zeus)
        cpu0 = zeus.tree()["actor_cpu_s"]
        with held(zeus):
            go.set()
            for _ in range(children):
                sent.acquire()
            t0 = time.perf_counter()
        sync(zeus)
        elapsed = time.perf_counter() - t0
        cpu = zeus.tree()["actor_cpu_s"] - cpu0
        for h in handles:
            h.result(60)
    zeus_rate = total / elapsed

    counter = Counter.start()
    hold, is_held = threading.Event(), threading.Event()
    counter.tell(("hold", hold, is_held))
    is_held.wait()
    for _ in range(total):
        counter.tell("beat")
    t0 = time.perf_counter()
    hold.set()
    counter.ask("count?")
    raw_rate = total / (time.perf_counter() - t0)
    counter.stop()
    rows.append(Row("heartbeats processed per second (100 children)", zeus_rate, raw_rate, "/s",
                    "a raw pykka actor counting tells", "value>=50000"))
    rows.append(Row("supervisor CPU time per heartbeat", cpu / total * 1e6, None, "us",
                    note="the actor thread's own CPU"))


def bench_stale(rows: list[Row]) -> None:
    stale_after, interval = 0.2, 0.05
    latencies = []
    progressed_at: list[float] = []

    def hangs(brief: Brief, ctx: Context) -> None:
        ctx.partial("one")
        progressed_at.append(time.monotonic())
        ctx.sleep(30)

    r = Routing.from_dict({"version": 1, "agents": {"h": {
        "timeout_s": 30, "heartbeat": {"interval_s": interval, "stale_after_s": stale_after},
        "shutdown": {"grace_s": 0}}}})
    events: list[dict[str, Any]] = []
    with Zeus.start(r, agents={"h": hangs}, log=events.append) as zeus:
        for i in range(10):
            progressed_at.clear()
            zeus.dispatch(Brief(agent="h", scope=str(i))).result(10)
            (stale,) = [e for e in events if e["event"] == "attempt.stale"][-1:]
            # ts is wall time; compare against the wall time of the last progress
            latencies.append(stale["elapsed_s"])
    latency = statistics.median(latencies)
    rows.append(Row("stale detection: start to attempt.stale (median)", latency,
                    stale_after + interval, "s", "stale_after_s + one interval",
                    "ratio<=1.0", note=f"stale_after_s={stale_after}, interval_s={interval}"))


def bench_memory(rows: list[Row]) -> None:
    n = 500
    proc = psutil.Process()
    release = threading.Event()
    running = threading.Semaphore(0)

    def waiter(brief: Brief, ctx: Context) -> None:
        running.release()
        release.wait(60)

    gc.collect()
    with Zeus.start(routing(max_concurrent=n), agents={"w": waiter}) as zeus:
        sync(zeus)
        before = proc.memory_info().rss
        handles = [zeus.dispatch(Brief(agent="w", scope=str(i))) for i in range(n)]
        for _ in range(n):  # every child running in its own thread (started off Zeus's)
            running.acquire(timeout=60)
        during = proc.memory_info().rss
        release.set()
        for h in handles:
            h.result(30)
    release2 = threading.Event()
    gc.collect()
    before_raw = proc.memory_info().rss
    threads = [threading.Thread(target=release2.wait, args=(60,)) for _ in range(n)]
    for t in threads:
        t.start()
    during_raw = proc.memory_info().rss
    release2.set()
    for t in threads:
        t.join()
    rows.append(Row("RSS per live thread child", (during - before) / n / 1024,
                    max(1.0, (during_raw - before_raw) / n / 1024), "KiB", "a raw waiting thread"))


def hung(brief: Brief, ctx: Context) -> None:
    time.sleep(1000)


def deaf_to_sigterm(brief: Brief, ctx: Context) -> None:
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(1000)


def dies(brief: Brief, ctx: Context) -> None:
    import os

    print(time.time(), file=open(brief.scope, "w"), flush=True)  # noqa: SIM115
    os._exit(1)


def bench_process_through_zeus(rows: list[Row]) -> None:
    """Kill and crash latency end to end: timer, mailbox, kill ladder, reaping, settlement."""
    import statistics
    import tempfile

    r = Routing.from_dict({"version": 1, "agents": {
        "hung": {"isolation": "process", "timeout_s": 0.2, "shutdown": {"grace_s": 0}},
        "dies": {"isolation": "process"},
        "deaf": {"isolation": "process", "timeout_s": 1.0,  # time to import and ignore
                 "shutdown": {"grace_s": 0, "term_s": 0.1}},
    }})
    events: list[dict[str, Any]] = []
    kill: list[float] = []
    crash: list[float] = []
    deaf: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, Zeus.start(
        r, agents={"hung": hung, "dies": dies, "deaf": deaf_to_sigterm}, log=events.append
    ) as zeus:
        for i in range(15):
            handle = zeus.dispatch(Brief(agent="hung", scope=str(i)))
            handle.result(10)
            mine = [e for e in events if e["delegation_id"] == handle.id]
            due = next(e["ts"] for e in mine if e["event"] == "attempt.timed_out")
            settled = next(e["ts"] for e in mine if e["event"] == "delegation.settled")
            kill.append(settled - due)
        for i in range(15):
            stamp = f"{tmp}/{i}"
            handle = zeus.dispatch(Brief(agent="dies", scope=stamp))
            handle.result(10)
            settled = next(e["ts"] for e in events if e["event"] == "delegation.settled"
                           and e["delegation_id"] == handle.id)
            crash.append(settled - float(open(stamp).read()))  # noqa: SIM115
        for i in range(5):
            handle = zeus.dispatch(Brief(agent="deaf", scope=str(i)))
            summary = handle.result(10)
            assert summary.attempts[0].killed == "kill", summary.attempts[0]
            mine = [e for e in events if e["delegation_id"] == handle.id]
            due = next(e["ts"] for e in mine if e["event"] == "attempt.timed_out")
            settled = next(e["ts"] for e in mine if e["event"] == "delegation.settled")
            deaf.append(settled - due)
    rows.append(Row("Zeus: child ignoring SIGTERM, deadline to settled (p50)",
                    statistics.median(deaf) * 1e3, 100.0, "ms", "term_s (0.1 s)",
                    "ratio<=1.5", note="the ladder: SIGTERM, term_s, SIGKILL"))
    rows.append(Row("Zeus: hung process child, deadline to settled (p50)",
                    statistics.median(kill) * 1e3, None, "ms", target="value<=20",
                    note="grace_s 0: SIGTERM at once"))
    rows.append(Row("Zeus: process child death to settled (p50)",
                    statistics.median(crash) * 1e3, None, "ms", target="value<=10"))


def main() -> None:
    rows: list[Row] = []
    for bench in (bench_dispatch, bench_concurrent, bench_heartbeats, bench_stale, bench_memory,
                  bench_process_through_zeus):
        bench(rows)
    report("runtime", rows)


if __name__ == "__main__":
    main()
