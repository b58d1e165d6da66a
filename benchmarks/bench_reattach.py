"""Reattach at the process backend: workers that outlived their host, found and picked up.

    python -m benchmarks.bench_reattach [--n 100] [--rounds 7] [--zeus-rounds 16]

A host process (this module, run with `--host PLAN`) starts N attempts on a
`ProcessBackend` with a store's place; each reports once, waits for a gate file,
reports again and returns. The host is SIGKILLed and the gate opened: each worker
then holds a report and its result. In this process, in the same run:

- `find_waiting` for the N workers (the issue's bound: 0.5 s for 100);
- `ProcessBackend.reattach` of each: from the call to its first held report
  delivered (p50), against a cold start of a new worker to its first report (the
  least a rerun costs); and from the start of `find_waiting` to the last one
  reattached;
- the normal path: warm dispatch with a place against the same without one,
  alternating rounds (the place's job carries the reattach settings).

Then the same through Zeus (`benchmarks._reattach_zeus`): `Zeus.start` on a store with
N waiting children to all of them reattached; one child's first report after
`Zeus.start` against a cold rerun's; warm dispatch and throughput with
`orphan_grace_s` 30 against 0.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors import Brief, Context
from actors.backends import ChildSpec, ProcessBackend
from actors.backends.process.left_behind import leave_mark
from actors.backends.process.reattach import ReattachPlace, find_waiting, place_for_store
from actors.clock import SystemClock
from actors.protocol import Finished, Partial
from benchmarks._reattach_zeus import zeus_rows
from benchmarks._table import Row, report

CLOCK = SystemClock()
GRACE_S = 60.0


def gated(brief: Brief, ctx: Context) -> str:
    """Report, wait for the gate file (the brief's scope), report again, return."""
    import os
    import time

    ctx.partial("before")
    while not os.path.exists(brief.scope):
        time.sleep(0.005)
    ctx.partial("after")
    return "done"


def at_once(brief: Brief, ctx: Context) -> None:
    ctx.partial("first")


def spec(attempt_id: str, work: Any = None, scope: str = "-", **fields: Any) -> ChildSpec:
    return ChildSpec(
        agent="bench", delegation_id=attempt_id.rsplit("-", 1)[0], attempt=1,
        attempt_id=attempt_id, brief=Brief(agent="bench", scope=scope),
        deadline=CLOCK.now() + 600.0, clock=CLOCK, work=work, heartbeat_interval_s=60.0,
        **fields,
    )  # fmt: skip


# -- the host ---------------------------------------------------------------------------


def host(plan_path: str) -> None:
    """Start the plan's attempts, write their pids to the plan's `out` once each reported,
    and wait to be SIGKILLed."""
    plan = json.loads(Path(plan_path).read_text(encoding="utf-8"))
    backend = ProcessBackend(reattach=place_for_store(plan["store"], GRACE_S))
    pids: dict[str, int] = {}
    reported = set()
    done = threading.Condition()

    def sender(attempt_id: str) -> Any:
        def send(message: object) -> None:
            if isinstance(message, Partial):
                with done:
                    reported.add(attempt_id)
                    done.notify_all()

        return send

    ids = [f"bench-{i}-a1" for i in range(plan["n"])]
    children = {aid: backend.start(spec(aid, gated, plan["gate"]), sender(aid)) for aid in ids}
    with done:
        done.wait_for(lambda: len(reported) == len(ids), 120.0)
    for aid, child in children.items():
        assert child.pid is not None
        pids[aid] = child.pid
    Path(plan["out"] + ".tmp").write_text(json.dumps(pids), encoding="utf-8")
    os.replace(plan["out"] + ".tmp", plan["out"])
    while True:
        time.sleep(60)


def orphans(tmp: Path, n: int) -> tuple[Any, dict[str, int]]:
    """A host's N workers, waiting, each holding a report and its result."""
    store, gate, out = tmp / "zeus.db", tmp / "gate", tmp / "pids.json"
    plan = tmp / "plan.json"
    plan.write_text(json.dumps({"store": str(store), "gate": str(gate), "out": str(out),
                                "n": n}))  # fmt: skip
    process = subprocess.Popen([sys.executable, "-m", "benchmarks.bench_reattach", "--host",
                                str(plan)], stdout=subprocess.DEVNULL)  # fmt: skip
    until = time.monotonic() + 120.0
    while not out.exists():
        if time.monotonic() > until or process.poll() is not None:
            raise RuntimeError("the host did not start its attempts")
        time.sleep(0.05)
    pids: dict[str, int] = json.loads(out.read_text(encoding="utf-8"))
    process.send_signal(signal.SIGKILL)
    process.wait()
    gate.touch()
    return place_for_store(store, GRACE_S), pids


# -- the figures ------------------------------------------------------------------------


def bench_find_and_attach(rows: list[Row], n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        place, pids = orphans(Path(tmp), n)
        # Every worker answers once it holds its result (the gate is open: moments).
        finds = []
        until = time.monotonic() + 30.0
        while len(finds) < 5 and time.monotonic() < until:
            t0 = time.perf_counter()
            found = find_waiting(place)
            took = time.perf_counter() - t0
            for waiting in found:
                waiting.close()
            if len(found) == n and all(w.finished for w in found):
                finds.append(took)
        if not finds:
            raise RuntimeError("the workers were not all found waiting with their results")
        backend = ProcessBackend(session_max=n)
        firsts: dict[str, float] = {}
        latencies = []
        t0 = time.perf_counter()
        found = find_waiting(place)
        for waiting in found:
            assert waiting.attempt_id is not None

            def send(message: object, aid: str = waiting.attempt_id) -> None:
                if aid not in firsts:
                    firsts[aid] = time.perf_counter()

            started = time.perf_counter()
            child = backend.reattach(waiting, spec(waiting.attempt_id), send)
            assert child is not None and waiting.attempt_id in firsts
            latencies.append(firsts[waiting.attempt_id] - started)
        all_s = time.perf_counter() - t0
        backend.close()
        assert sorted(w.pid for w in found) == sorted(pids.values())

    cold_backend = ProcessBackend(session_max=0)
    cold = []
    for i in range(30):
        got: list[float] = []
        done = threading.Event()

        def first(message: object, got: list[float] = got, done: threading.Event = done) -> None:
            if isinstance(message, Partial) and not got:
                got.append(time.perf_counter())
            if isinstance(message, Finished):
                done.set()

        t0 = time.perf_counter()
        cold_backend.start(spec(f"cold-{i}-a1", at_once), first)
        done.wait(30)
        cold.append(got[0] - t0)
    cold_backend.close()
    rows.append(Row(f"find_waiting, {n} waiting workers", statistics.median(finds) * 1e3,
                    None, "ms", "", "value<=500" if n >= 100 else "",
                    f"median of {len(finds)}; each knock authenticates and reads a hello",
                    {"n": n, "runs_ms": [t * 1e3 for t in finds]}))  # fmt: skip
    rows.append(Row("reattach p50 (call -> first held report)",
                    statistics.median(latencies) * 1e3, statistics.median(cold) * 1e3, "ms",
                    "a cold start's first report (a rerun's least)", "value<=20",
                    f"p90 {statistics.quantiles(latencies, n=10)[-1] * 1e3:.2f} ms",
                    {"n": len(latencies)}))  # fmt: skip
    rows.append(Row(f"find + reattach all {n}", all_s * 1e3, None, "ms", "",
                    "value<=500" if n >= 100 else "",
                    "the backend's share of 'Zeus.start to all reattached'"))  # fmt: skip


def warm_p50(backend: ProcessBackend, n: int, **fields: Any) -> float:
    """Start to Finished, p50 of `n` after one; `session_max=0` in `fields`: cold starts
    (a new worker each attempt)."""
    def one() -> float:
        done = threading.Event()
        t0 = time.perf_counter()
        backend.start(spec(f"warm-{time.perf_counter_ns()}-a1", at_once, **fields),
                      lambda m: done.set() if isinstance(m, Finished) else None)  # fmt: skip
        done.wait(30)
        return time.perf_counter() - t0

    one()
    return statistics.median(one() for _ in range(n))


def with_and_without_place(rounds: int, n: int, **fields: Any) -> dict[str, list[float]]:
    """`warm_p50` of backends with a store's place and without one, `rounds` each, each side
    first in turn: {"place": [...], "none": [...]}."""
    with tempfile.TemporaryDirectory() as tmp:
        place = place_for_store(Path(tmp) / "zeus.db", 30.0)
        times: dict[str, list[float]] = {"none": [], "place": []}
        sides: list[tuple[str, ReattachPlace | None]] = [("none", None), ("place", place)]
        for _ in range(rounds):
            for name, reattach in sides:
                backend = (ProcessBackend(reattach=reattach) if "session_max" not in fields
                           else ProcessBackend(reattach=reattach,
                                               session_max=fields["session_max"]))
                times[name].append(warm_p50(backend, n, **fields))
                backend.close()
            sides.reverse()  # each side goes first every other round
    return times


def bench_normal_path(rows: list[Row], rounds: int) -> None:
    times = with_and_without_place(rounds, 1000)
    rows.append(Row("warm dispatch p50, with a reattach place",
                    statistics.median(times["place"]) * 1e3,
                    statistics.median(times["none"]) * 1e3, "ms", "the same without a place",
                    "ratio<=1.1", f"median of {rounds} rounds of 1000, each side first in turn",
                    {"place_ms": [t * 1e3 for t in times["place"]],
                     "none_ms": [t * 1e3 for t in times["none"]]}))  # fmt: skip


def bench_cold_mark(rows: list[Row], rounds: int) -> None:
    """What the job mark costs a cold start (a worker with a place leaves `<pid>.job`
    before its job runs: docs/design.md, "Reattach"), against a cold start without a place
    (no mark), each side first in turn; and one mark written alone."""
    times = with_and_without_place(rounds, 20, session_max=0)
    with tempfile.TemporaryDirectory() as tmp:
        marks = []
        for i in range(2000):
            t0 = time.perf_counter()
            leave_mark(tmp, f"bench-{i}-a1")
            marks.append(time.perf_counter() - t0)
    rows.append(Row("cold start p50 (a new worker to Finished), with its job mark",
                    statistics.median(times["place"]) * 1e3,
                    statistics.median(times["none"]) * 1e3, "ms",
                    "a cold start without a place (no mark)", "ratio<=1.1",
                    f"median of {rounds} rounds of 20, each side first in turn; one mark "
                    f"alone p50 {statistics.median(marks) * 1e6:.0f} us",
                    {"place_ms": [t * 1e3 for t in times["place"]],
                     "none_ms": [t * 1e3 for t in times["none"]]}))  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_reattach")
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--zeus-rounds", type=int, default=16)
    parser.add_argument("--host", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.host:
        host(args.host)
        return
    ready = ProcessBackend()
    ready.prestart()
    ready.close()
    rows: list[Row] = []
    bench_find_and_attach(rows, args.n)
    bench_normal_path(rows, args.rounds)
    bench_cold_mark(rows, args.rounds)
    zeus_rows(rows, args.n, args.zeus_rounds)
    report("reattach", rows)


if __name__ == "__main__":
    main()
