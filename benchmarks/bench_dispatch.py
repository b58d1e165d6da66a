"""What `dispatch()` costs the caller's thread while Zeus is busy.

Run: `python -m benchmarks.bench_dispatch` (writes benchmarks/results/dispatch.json).

A background thread keeps 8 no-op thread delegations in flight, so Zeus's thread is
busy all along; the measured thread dispatches one more no-op delegation at a time
and times `zeus.dispatch()` alone (the call returns before the delegation runs). The
baseline is `ThreadPoolExecutor.submit()` timed the same way, beside the same load.
"""

from __future__ import annotations

import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from actors import Brief, Context
from benchmarks._table import Row, report
from supervisor import Zeus

BRIEF = Brief(agent="noop", scope="nothing")
N = 5000


def noop(brief: Brief, ctx: Context) -> None:
    return None


def _busy(zeus: Zeus, stop: threading.Event) -> None:
    """8 delegations in flight until `stop` (the next started on each result)."""
    gate = threading.Semaphore(8)
    while not stop.is_set():
        gate.acquire()
        zeus.dispatch(BRIEF).add_done_callback(lambda _s: gate.release())


def dispatch_cost() -> tuple[float, float]:
    """Median seconds of `zeus.dispatch()` and of `executor.submit()`, each with Zeus busy."""
    with Zeus.start(agents={"noop": noop}) as zeus, ThreadPoolExecutor(8) as pool:
        stop = threading.Event()
        load = threading.Thread(target=_busy, args=(zeus, stop), daemon=True)
        load.start()
        zeus_times, pool_times = [], []
        try:
            for _ in range(N):
                t0 = time.perf_counter()
                handle = zeus.dispatch(BRIEF)
                zeus_times.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                future = pool.submit(noop, BRIEF, None)  # type: ignore[arg-type]
                pool_times.append(time.perf_counter() - t0)
                handle.result(10)
                future.result(10)
        finally:
            stop.set()
            load.join(10)
    return statistics.median(zeus_times), statistics.median(pool_times)


def main() -> None:
    zeus_s, pool_s = dispatch_cost()
    report("dispatch", [Row("dispatch() on the caller's thread, Zeus busy (median)",
                            zeus_s * 1e6, pool_s * 1e6, "us",
                            "ThreadPoolExecutor.submit() beside the same load", "value<=10",
                            note="8 no-op delegations kept in flight by another thread")])


if __name__ == "__main__":
    main()
