"""Ray children (`isolation: ray`), each figure against bare Ray measured in the same run.

Run: `python -m benchmarks.bench_ray [--quick]` (needs the extra:
`pip install 'zeus-supervisor[ray]'`); prints a table and writes
benchmarks/results/ray.json. A local Ray is started with every CPU of the machine.

Baselines: bare `ray.get(f.remote())` of the same function (one at a time, and 8
in flight), a bare `ray.cancel(force=True)` of the same hung task measured to
Ray confirming its end (`ray.get` raising `TaskCancelledError`), and N bare
tasks of 1 s against N Ray children of 1 s. `--quick` shrinks the last figure
(40 children of 0.25 s) for a loaded machine.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors import Brief, Context
from actors.backends.ray.place import gone
from benchmarks._table import Row, report

ROUNDS = 200


# -- work functions (module level: Ray workers import them by name) -----------------------


def noop(brief: Brief, ctx: Context) -> None:
    return None


def hang(brief: Brief, ctx: Context) -> None:
    ctx.partial("hung")
    while True:
        time.sleep(0.05)


def crash(brief: Brief, ctx: Context) -> None:
    Path(brief.scope).write_text(repr(time.time()))
    os._exit(1)


def sleep_for(brief: Brief, ctx: Context) -> None:
    time.sleep(float(brief.scope))


def bare_noop() -> None:
    return None


def bare_hang(started: Any) -> None:
    started.put(os.getpid())
    while True:
        time.sleep(0.05)


def bare_sleep(seconds: float) -> None:
    time.sleep(seconds)


# -- figures ----------------------------------------------------------------------------------


def per_op(run: Any, rounds: int) -> float:
    """Median seconds per call of `run()` over `rounds` calls (after 20 warm-up calls)."""
    for _ in range(20):
        run()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_noop(rows: list[Row], zeus: Any, ray: Any) -> None:
    bare = ray.remote(max_retries=0)(bare_noop)
    brief = Brief(agent="noop", scope="nothing")
    zeus_s = per_op(lambda: zeus.dispatch(brief).result(timeout=60), ROUNDS)
    bare_s = per_op(lambda: ray.get(bare.remote()), ROUNDS)
    rows.append(Row("no-op delegation on Ray, sequential (p50)", zeus_s * 1e3, bare_s * 1e3,
                    "ms", "bare ray.get(f.remote())", "ratio<=1.5"))
    zeus8 = per_op(lambda: [h.result(timeout=60) for h in [zeus.dispatch(brief)
                                                          for _ in range(8)]], ROUNDS // 4)
    bare8 = per_op(lambda: ray.get([bare.remote() for _ in range(8)]), ROUNDS // 4)
    rows.append(Row("no-op delegations on Ray, 8 in flight (per 8, p50)", zeus8 * 1e3,
                    bare8 * 1e3, "ms", "bare ray.get of 8 f.remote()", "ratio<=1.5"))


def bench_kill(rows: list[Row], zeus: Any, ray: Any, rounds: int = 7) -> None:
    """Deadline to settled (grace_s 0) vs a bare forced cancel to Ray confirming the end."""
    zeus_times = []
    for i in range(rounds):
        handle = zeus.dispatch(Brief(agent="hang", scope=str(i)))
        summary = handle.result(timeout=60)
        settled = time.monotonic()
        assert summary.status.value == "timed_out", summary
        zeus_times.append(settled - TIMED_OUT[handle.id])
    from ray.util.queue import Queue

    started = Queue()
    bare = ray.remote(max_retries=0)(bare_hang)
    bare_times, exit_times = [], []
    for _ in range(rounds):
        ref = bare.remote(started)
        pid = started.get(timeout=60)
        t0 = time.monotonic()
        ray.cancel(ref, force=True)
        with contextlib.suppress(ray.exceptions.TaskCancelledError):
            ray.get(ref, timeout=60)
        bare_times.append(time.monotonic() - t0)
        while not gone(pid):
            time.sleep(0.001)
        exit_times.append(time.monotonic() - t0)
    zeus_p50 = statistics.median(zeus_times) * 1e3
    rows.append(Row("hung Ray child: deadline to settled (grace_s 0, p50)", zeus_p50,
                    statistics.median(bare_times) * 1e3, "ms",
                    "bare ray.cancel(force=True) to TaskCancelledError", "ratio<=1.2",
                    note="Zeus also waits for the worker's pid to exit (no overlapping retry)"))
    rows.append(Row("the same vs bare cancel to the worker's exit", zeus_p50,
                    statistics.median(exit_times) * 1e3, "ms",
                    "bare ray.cancel(force=True) to the worker pid gone"))


TIMED_OUT: dict[str, float] = {}


def on_event(event: dict[str, Any]) -> None:
    """The journal sink: when each delegation's attempt reached its deadline."""
    if event["event"] == "attempt.timed_out":
        TIMED_OUT[event["delegation_id"]] = time.monotonic()


def bench_crash(rows: list[Row], zeus: Any, rounds: int = 7) -> None:
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(rounds):
            stamp = Path(tmp) / f"crash-{i}"
            summary = zeus.dispatch(Brief(agent="crash", scope=str(stamp))).result(timeout=60)
            settled = time.time()
            assert summary.attempts[0].outcome.value == "crash", summary
            times.append(settled - float(stamp.read_text()))
    rows.append(Row("Ray worker os._exit to settled (p50)", statistics.median(times) * 1e3,
                    None, "ms"))


def bench_many(rows: list[Row], zeus: Any, ray: Any, count: int, seconds: float) -> None:
    brief = Brief(agent="sleeper", scope=str(seconds))
    bare = ray.remote(max_retries=0)(bare_sleep)
    warm = int(ray.cluster_resources().get("CPU", 1))  # workers in place of the killed ones
    for h in [zeus.dispatch(Brief(agent="sleeper", scope="0.1")) for _ in range(warm)]:
        h.result(timeout=600)
    ray.get([bare.remote(0.1) for _ in range(warm)])
    t0 = time.monotonic()
    handles = [zeus.dispatch(brief) for _ in range(count)]
    statuses = {h.result(timeout=3600).status.value for h in handles}
    zeus_s = time.monotonic() - t0
    assert statuses == {"completed"}, statuses
    t0 = time.monotonic()
    ray.get([bare.remote(seconds) for _ in range(count)])
    bare_s = time.monotonic() - t0
    rows.append(Row(f"{count} Ray children of {seconds:g} s: wall time", zeus_s, bare_s, "s",
                    f"{count} bare Ray tasks of {seconds:g} s", "ratio<=1.2"))


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    quick = "--quick" in args
    try:
        import ray
    except ImportError:
        print("bench_ray: Ray is not installed (pip install 'zeus-supervisor[ray]'); skipped")
        return
    from supervisor import Routing, Zeus

    if not ray.is_initialized():
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    here = f"{__name__}" if __name__ != "__main__" else "benchmarks.bench_ray"
    ray_agent = {"isolation": "ray", "retry": {"max_retries": 0}, "timeout_s": 600}
    routing = Routing.from_dict({"version": 1, "agents": {
        "noop": {**ray_agent, "entrypoint": f"{here}:noop"},
        "hang": {**ray_agent, "entrypoint": f"{here}:hang", "timeout_s": 1.0,
                 "shutdown": {"grace_s": 0}},
        "crash": {**ray_agent, "entrypoint": f"{here}:crash"},
        "sleeper": {**ray_agent, "entrypoint": f"{here}:sleep_for"},
    }})
    rows: list[Row] = []
    zeus = Zeus.start(routing, log=on_event)
    try:
        bench_noop(rows, zeus, ray)
        bench_kill(rows, zeus, ray)
        bench_crash(rows, zeus)
        count, seconds = (40, 0.25) if quick else (500, 1.0)
        bench_many(rows, zeus, ray, count, seconds)
    finally:
        zeus.stop()
        ray.shutdown()
    report("ray", rows)


if __name__ == "__main__":
    main()
