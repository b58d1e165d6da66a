"""Process children, each figure against a baseline measured in the same run.

Run: `python -m benchmarks.bench_process` (or `python benchmarks/bench_process.py`);
prints a table and writes benchmarks/results/process.json.

Baselines: a bare `multiprocess.Process` with the same start method (forkserver,
the same fork server), and pebble's `ProcessPool` (its defaults). The work
functions are module-level functions of this module, sent by reference as a
host's registered agents are; a lambda's cost (sent by value) is measured too.
This module imports little at the top: bare baseline children re-import it.
"""

from __future__ import annotations

import contextlib
import gc
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import multiprocess

from actors import Brief, Context
from actors.backends import ChildSpec, ProcessBackend
from actors.clock import SystemClock
from actors.protocol import Finished, Partial
from benchmarks._table import Row, report

CTX = multiprocess.get_context("forkserver")
CLOCK = SystemClock()


# -- work functions (module level: they travel by reference) ----------------------------


def noop(brief: Brief, ctx: Context) -> None:
    return None


def hang(brief: Brief, ctx: Context) -> None:
    ctx.partial("hung")
    time.sleep(1000)


def crash(brief: Brief, ctx: Context) -> None:
    stamp_and_exit(brief.scope)


def sleeper(brief: Brief, ctx: Context) -> None:
    ctx.partial(os.getpid())
    ctx.sleep(120)


def bare_noop() -> None:
    return None


def bare_sleep() -> None:
    time.sleep(120)


def stamp(path: str) -> None:
    Path(path).write_text(repr(time.monotonic()))


def stamp_and_exit(path: str) -> None:
    stamp(path)
    os._exit(1)


def stamp_and_hang(path: str) -> None:
    stamp(path)
    time.sleep(1000)


# -- helpers ----------------------------------------------------------------------------


class Waiter:
    """A `send` that records when Finished arrived (in the hub thread) and wakes the caller."""

    def __init__(self, on_partial: Callable[[Partial], None] | None = None) -> None:
        self.event = threading.Event()
        self.partial = threading.Event()
        self.finished: Finished | None = None
        self.at = 0.0
        self._on_partial = on_partial

    def __call__(self, message: object) -> None:
        if isinstance(message, Finished):
            self.at = time.monotonic()
            self.finished = message
            self.event.set()
        elif isinstance(message, Partial):
            self.partial.set()
            if self._on_partial is not None:
                self._on_partial(message)

    def wait(self, timeout: float = 30.0) -> Finished:
        if not self.event.wait(timeout):
            raise RuntimeError("no Finished within 30 s")
        assert self.finished is not None
        return self.finished


_n = 0


def spec(
    work: Callable[..., Any],
    agent: str = "bench",
    scope: str = "x",
    brief: Brief | None = None,
    **kw: Any,
) -> ChildSpec:
    global _n
    _n += 1
    return ChildSpec(
        agent=agent,
        delegation_id=f"{agent}-{_n}",
        attempt=1,
        attempt_id=f"{agent}-{_n}-a1",
        brief=brief or Brief(agent=agent, scope=scope),
        deadline=CLOCK.now() + 600,
        clock=CLOCK,
        work=work,
        **kw,
    )


def wait_gone(pid: int, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.0005)


def ms(seconds: float) -> float:
    return seconds * 1000.0


def p50(values: list[float]) -> float:
    return statistics.median(values)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def this_module() -> Any:
    """This module under its importable name, so that its functions go by reference."""
    import importlib

    return importlib.import_module("benchmarks.bench_process")


# -- figures ----------------------------------------------------------------------------


def bench_cold(rows: list[Row], mod: Any, n: int = 30) -> None:
    backend = ProcessBackend(session_max=0)

    def cold(work: Callable[..., Any]) -> tuple[list[float], list[float]]:
        to_finished, to_reaped = [], []
        for _ in range(n):
            waiter = Waiter()
            t0 = time.perf_counter()
            backend.start(spec(work), waiter)
            finished = waiter.wait()
            t1 = time.perf_counter()
            assert finished.pid is not None
            wait_gone(finished.pid)
            to_finished.append(t1 - t0)
            to_reaped.append(time.perf_counter() - t0)
        return to_finished, to_reaped

    ours, ours_reaped = cold(mod.noop)
    lam, _ = cold(lambda brief, ctx: None)
    backend.close()
    bare = []
    for _ in range(n):
        t0 = time.perf_counter()
        process = CTX.Process(target=mod.bare_noop)
        process.start()
        process.join()
        bare.append(time.perf_counter() - t0)
        process.close()
    rows.append(
        Row(
            "cold dispatch p50 (start -> Finished)",
            ms(p50(ours)),
            ms(p50(bare)),
            "ms",
            "bare multiprocess Process start+join (forkserver)",
            "ratio<=1.2",
            f"each child imports this module (the work's, the baseline's main); ours until "
            f"reaped too: {ms(p50(ours_reaped)):.2f} ms; a lambda, nothing to import: "
            f"{ms(p50(lam)):.2f} ms",
            {
                "n": n,
                "ours_to_reaped_p50_ms": ms(p50(ours_reaped)),
                "lambda_p50_ms": ms(p50(lam)),
            },
        )
    )


def bench_warm(rows: list[Row], mod: Any, n: int = 2000) -> None:
    backend = ProcessBackend(session_max=1)
    backend.start(spec(mod.noop), waiter := Waiter())
    waiter.wait()

    def run(work: Callable[..., Any], count: int) -> list[float]:
        times = []
        for _ in range(count):
            waiter = Waiter()
            t0 = time.perf_counter()
            backend.start(spec(work), waiter)
            waiter.wait()
            times.append(time.perf_counter() - t0)
        return times

    gc.collect()
    by_ref = run(mod.noop, n)
    by_value = run(lambda brief, ctx: None, n // 4)
    backend.close()

    from pebble import ProcessPool

    with ProcessPool(max_workers=1) as pool:
        pool.schedule(mod.bare_noop).result()
        pebble = []
        for _ in range(n // 4):
            t0 = time.perf_counter()
            pool.schedule(mod.bare_noop).result()
            pebble.append(time.perf_counter() - t0)
    rows.append(
        Row(
            "warm dispatch p50 (start -> Finished)",
            ms(p50(by_ref)),
            ms(p50(pebble)),
            "ms",
            "pebble ProcessPool(1) schedule().result()",
            "value<=1.0",
            f"p90 {ms(pct(by_ref, 0.9)):.2f} ms, p99 {ms(pct(by_ref, 0.99)):.2f} ms",
            {"n": n, "p90_ms": ms(pct(by_ref, 0.9)), "p99_ms": ms(pct(by_ref, 0.99))},
        )
    )
    rows.append(
        Row(
            "warm dispatch p50, a lambda (sent by value)",
            ms(p50(by_value)),
            ms(p50(pebble)),
            "ms",
            "pebble ProcessPool(1) (a module function)",
            note="dill pickles it once; the warm worker then gets a token",
            extra={"n": n // 4},
        )
    )


def bench_throughput(
    rows: list[Row], mod: Any, n: int = 4000, workers: int = 4, rounds: int = 5
) -> None:
    """Ours and pebble's in alternating rounds (the host's load varies); the median round each."""
    from pebble import ProcessPool

    backend = ProcessBackend(session_max=workers)
    slots = threading.Semaphore(workers)
    done = threading.Event()
    count = [0]
    lock = threading.Lock()

    def send(message: object) -> None:
        if isinstance(message, Finished):
            with lock:
                count[0] += 1
                if count[0] == target[0]:
                    done.set()
            slots.release()

    def burst(total: int) -> float:
        count[0] = 0
        target[0] = total
        done.clear()
        # The briefs are the caller's input, made before the clock starts (as a pebble
        # task's arguments would be); each attempt's ChildSpec is made in the loop.
        briefs = [Brief(agent="bench", scope=f"x{i}") for i in range(total)]
        t0 = time.perf_counter()
        for brief in briefs:
            slots.acquire()
            backend.start(spec(mod.noop, brief=brief), send)
        done.wait(120)
        return time.perf_counter() - t0

    def pebble_all(pool: Any, total: int) -> float:
        t0 = time.perf_counter()
        futures = [pool.schedule(mod.bare_noop) for _ in range(total)]
        for future in futures:
            future.result()
        return time.perf_counter() - t0

    target = [0]
    ours, pebble = [], []
    with ProcessPool(max_workers=workers) as pool:
        burst(workers * 4)  # warm: the workers exist
        pebble_all(pool, workers * 4)
        for _ in range(rounds):
            ours.append(n / burst(n))
            pebble.append(n / pebble_all(pool, n))
        backend.close()
        # The same loop as ours: at most `workers` tasks in flight, the next on each result.
        gate = threading.Semaphore(workers)
        t0 = time.perf_counter()
        for _ in range(n):
            gate.acquire()
            pool.schedule(mod.bare_noop).add_done_callback(lambda _: gate.release())
        for _ in range(workers):
            gate.acquire()
        pebble_gated = n / (time.perf_counter() - t0)
    rows.append(
        Row(
            f"no-op throughput, {workers} warm workers",
            statistics.median(ours),
            statistics.median(pebble),
            "/s",
            f"pebble ProcessPool({workers}), all {n} scheduled at once",
            "ratio>=1.0",
            f"median of {rounds} alternating rounds each (best {max(ours):.0f} vs "
            f"{max(pebble):.0f}/s); ours: at most {workers} attempts in flight, each start() "
            f"-> Finished, briefs made beforehand; pebble in that same loop: "
            f"{pebble_gated:.0f}/s",
            {
                "n": n,
                "cpus": os.cpu_count(),
                "ours_rounds_per_s": ours,
                "pebble_rounds_per_s": pebble,
                "pebble_same_loop_per_s": pebble_gated,
            },
        )
    )


def bench_kill(rows: list[Row], mod: Any, tmp: Path, n: int = 15, timeout_s: float = 0.2) -> None:
    backend = ProcessBackend(session_max=0)
    ours, internal = [], []
    for _ in range(n):
        waiter = Waiter()
        handle = backend.start(spec(mod.hang, term_s=0.5), waiter)
        waiter.partial.wait(30)
        t0 = time.monotonic()
        handle.kill()
        finished = waiter.wait()
        assert finished.killed == "terminate", finished
        ours.append(waiter.at - t0)
        internal.append(finished.kill_latency_s or 0.0)
    backend.close()

    from pebble import ProcessPool

    pebble = []
    with ProcessPool(max_workers=1) as pool:
        pool.schedule(mod.bare_noop).result()
        for i in range(n // 2):
            path = tmp / f"hang{i}"
            at = [0.0]
            future = pool.schedule(mod.stamp_and_hang, args=(str(path),), timeout=timeout_s)
            future.add_done_callback(lambda f, at=at: at.__setitem__(0, time.monotonic()))
            with contextlib.suppress(TimeoutError):
                future.result()
            while at[0] == 0.0:
                time.sleep(0.001)
            pebble.append(at[0] - (float(path.read_text()) + timeout_s))
    rows.append(
        Row(
            "kill latency p50, hung child (kill -> Finished)",
            ms(p50(ours)),
            ms(p50(pebble)),
            "ms",
            f"pebble: its timeout ({timeout_s}s) expiring -> TimeoutError",
            "value<=20",
            "term_s=0.5 as configured; SIGTERM ends a sleeping child at once",
            {"n": n, "ours_internal_p50_ms": ms(p50(internal)), "pebble_n": len(pebble)},
        )
    )
    rows.append(
        Row(
            "kill latency p50, as a ratio (at most 0.5: 2x faster)",
            ms(p50(ours)),
            ms(p50(pebble)),
            "ms",
            "pebble ProcessPool timeout",
            "ratio<=0.5",
        )
    )


def bench_crash(rows: list[Row], mod: Any, tmp: Path, n: int = 20) -> None:
    backend = ProcessBackend(session_max=0)
    ours = []
    for i in range(n):
        path = tmp / f"crash{i}"
        waiter = Waiter()
        backend.start(spec(mod.crash, scope=str(path)), waiter)
        finished = waiter.wait()
        assert finished.outcome == "crash", finished
        ours.append(waiter.at - float(path.read_text()))
    backend.close()

    from pebble import ProcessPool
    from pebble.common import ProcessExpired

    pebble = []
    with ProcessPool(max_workers=1) as pool:
        pool.schedule(mod.bare_noop).result()
        for i in range(n // 2):
            path = tmp / f"pcrash{i}"
            at = [0.0]
            future = pool.schedule(mod.stamp_and_exit, args=(str(path),))
            future.add_done_callback(lambda f, at=at: at.__setitem__(0, time.monotonic()))
            with contextlib.suppress(ProcessExpired):
                future.result()
            while at[0] == 0.0:
                time.sleep(0.001)
            pebble.append(at[0] - float(path.read_text()))
    rows.append(
        Row(
            "crash detection p50 (death -> Finished)",
            ms(p50(ours)),
            ms(p50(pebble)),
            "ms",
            "pebble: os._exit in a task -> ProcessExpired",
            "value<=10",
            "from the child's last timestamp before os._exit(1)",
            {"n": n},
        )
    )


def bench_many(rows: list[Row], mod: Any, n: int = 200) -> None:
    import psutil

    backend = ProcessBackend(session_max=0)
    waiters = [Waiter() for _ in range(n)]
    t0 = time.perf_counter()
    for waiter in waiters:
        backend.start(spec(mod.noop), waiter)
    for waiter in waiters:
        waiter.wait(120)
    ours = time.perf_counter() - t0
    backend.close()
    t0 = time.perf_counter()
    processes = [CTX.Process(target=mod.bare_noop) for _ in range(n)]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
        process.close()
    bare = time.perf_counter() - t0
    rows.append(
        Row(
            f"{n} process children at once: wall time",
            ours,
            bare,
            "s",
            f"{n} bare multiprocess Process start, then join all",
            note="ours: start all -> every Finished",
            extra={"n": n},
        )
    )

    # Memory: every child alive at once.
    backend = ProcessBackend(session_max=0)
    running = threading.Semaphore(0)
    handles = []
    waiters = [Waiter(on_partial=lambda _: running.release()) for _ in range(n)]
    t0 = time.perf_counter()
    for waiter in waiters:
        handles.append(backend.start(spec(mod.sleeper), waiter))
    for _ in range(n):
        running.acquire(timeout=120)
    all_running = time.perf_counter() - t0
    rss, uss = memory([h.pid for h in handles if h.pid is not None], psutil)
    for handle in handles:
        handle.cancel()
    for waiter in waiters:
        waiter.wait(120)
    backend.close()
    bare_processes = [CTX.Process(target=mod.bare_sleep) for _ in range(10)]
    for process in bare_processes:
        process.start()
    time.sleep(0.5)  # let them settle into their sleep before measuring
    bare_rss, bare_uss = memory([p.pid for p in bare_processes], psutil)
    for process in bare_processes:
        process.kill()
        process.join()
        process.close()
    rows.append(
        Row(
            "RSS per child (all running)",
            rss / 2**20,
            bare_rss / 2**20,
            "MB",
            "a bare multiprocess child (forkserver), sleeping",
            note=f"{n} running in {all_running:.2f}s; unique (USS) {uss / 2**20:.2f} MB "
            f"vs {bare_uss / 2**20:.2f} MB: most of the RSS is shared with the fork server",
            extra={"uss_mb": uss / 2**20, "bare_uss_mb": bare_uss / 2**20, "n": n},
        )
    )


def memory(pids: list[int], psutil: Any) -> tuple[float, float]:
    rss, uss = [], []
    for pid in pids:
        info = psutil.Process(pid).memory_full_info()
        rss.append(info.rss)
        uss.append(info.uss)
    return statistics.mean(rss), statistics.mean(uss)


def main() -> None:
    mod = this_module()
    warm = ProcessBackend()  # the first child waits for the fork server's imports
    warm.prestart()
    warm.start(spec(mod.noop), waiter := Waiter())
    waiter.wait(60)
    warm.close()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        bench_cold(rows, mod)
        bench_warm(rows, mod)
        bench_throughput(rows, mod)
        bench_kill(rows, mod, Path(tmp))
        bench_crash(rows, mod, Path(tmp))
        bench_many(rows, mod)
    report("process", rows)


if __name__ == "__main__":
    main()
