"""Reattach through Zeus: `Zeus.start` on a store whose process children outlived their host.

The Zeus-level rows of `python -m benchmarks.bench_reattach` (the backend's are in that
module). A host process (this module, `python -m benchmarks._reattach_zeus PLAN.json`)
starts Zeus on a store and dispatches N delegations of `holder`, a process agent that
reports and holds until a release file exists; once the store has every attempt's pid,
the host is SIGKILLed. Then, in the benchmark's process:

- `Zeus.start(routing, store=..., agents=...)` on a store with 100 waiting children,
  from the call to its return with the 100 in `zeus.recovered.reattached`;
- for one child (a round each), from `Zeus.start` being called to that child's first
  `attempt.partial` in the new Zeus's journal (a sink given as `log=`; the child
  reports every 20 ms while it holds, so one is always held), against a cold rerun's:
  the same round with `orphan_grace_s: 0`, where the child dies with its host and the
  new Zeus runs the (read-only) delegation again as a new attempt;
- the normal path: two Zeus on two fresh stores, `orphan_grace_s: 30` and 0, warm
  dispatch of a no-op process delegation and throughput with 8 in flight, alternating
  rounds, each side first in turn.

Every round releases what it held, waits for the summaries, stops its Zeus, and checks
that no process the host had below it is left running.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors import Brief, Context, Status
from actors.backends.process.reattach import children_dir
from actors.osproc import descendants, process_running, process_start_time
from benchmarks._table import Row
from benchmarks.bench_store import BRIEF, _in_flight, samples
from supervisor import Routing, Zeus

ROOT = Path(__file__).resolve().parent.parent
WAIT_S = 120.0  # a bound on waits for the host and its children, never what is measured
REPORT_EVERY_S = 0.02


def holder(brief: Brief, ctx: Context) -> str:
    """Report a partial, then, until the file `inputs["release"]` exists, wait
    `inputs["every_s"]` and report again if `inputs["report"]`; return."""
    import os

    inputs = brief.inputs or {}
    release, every, report = inputs["release"], float(inputs["every_s"]), inputs["report"]
    n = 0
    ctx.partial(n)
    while not os.path.exists(release):
        ctx.sleep(every)
        if report:
            n += 1
            ctx.partial(n)
    return "released"


def noop(brief: Brief, ctx: Context) -> None:
    """The normal path's work: nothing."""


def agents() -> dict[str, Callable[..., Any]]:
    """The agents by reference (this module may run as `__main__`: its functions would
    travel by value then)."""
    module = importlib.import_module("benchmarks._reattach_zeus")
    return {"holder": module.holder, "noop": module.noop}


def routing(grace_s: float) -> Routing:
    return Routing.from_dict({
        "version": 1,
        "supervisor": {"max_concurrent": 128, "orphan_grace_s": grace_s},
        "agents": {"holder": {"isolation": "process", "read_only": True, "timeout_s": 600,
                              "retry": {"max_retries": 1},
                              # 100 workers starting on a small machine: none judged stale
                              "heartbeat": {"stale_after_s": 120}},
                   "noop": {"isolation": "process", "timeout_s": 60, "session_max": 8}},
    })


# -- the host ---------------------------------------------------------------------------


def host(plan_path: str) -> None:
    """Start Zeus on the plan's store, dispatch its N holders, and wait to be SIGKILLed."""
    plan = json.loads(Path(plan_path).read_text(encoding="utf-8"))
    zeus = Zeus.start(routing(plan["grace_s"]), store=plan["store"], agents=agents())
    for i in range(plan["n"]):
        zeus.dispatch(Brief(agent="holder", scope=f"hold {i}", inputs={
            "release": plan["release"], "every_s": plan["every_s"], "report": plan["report"]}))
    threading.Event().wait()


def running_attempts(store: Path) -> dict[str, tuple[int, float | None]]:
    """Attempt id -> (pid, start time) of every open attempt whose pid and first partial
    the store holds (its worker has its job: a worker killed before it reads its job
    does not wait)."""
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as con:
            rows = con.execute("SELECT id, pid, pid_start_time FROM attempts "
                               "WHERE ended IS NULL AND pid IS NOT NULL AND id IN "
                               "(SELECT attempt_id FROM partials)").fetchall()
    except sqlite3.Error:
        return {}  # not created yet
    return {aid: (pid, start) for aid, pid, start in rows}


def until(done: Callable[[], bool], what: str, process: subprocess.Popen[bytes] | None = None,
          errors: Path | None = None) -> None:
    """Wait until `done()`; a bound, never what is measured."""
    give_up = time.monotonic() + WAIT_S
    while not done():
        if process is not None and process.poll() is not None:
            said = errors.read_text(errors="replace")[-2000:] if errors else ""
            raise RuntimeError(f"the host exited before {what}: {said}")
        if time.monotonic() > give_up:
            raise RuntimeError(f"{what}: not within {WAIT_S:.0f} s")
        time.sleep(0.01)


@dataclass
class Crashed:
    """A store whose host ran holders and was SIGKILLed once each had its job."""

    store: Path
    release: Path
    attempts: dict[str, tuple[int, float | None]]  # the holders' (pid, start time)
    below: list[tuple[int, float | None]]  # every process below the host as it died

    def finish(self, zeus: Zeus) -> None:
        """Release the holders, wait for every summary, stop Zeus; nothing may be left."""
        self.release.touch()
        ids = {aid.rsplit("-", 1)[0] for aid in self.attempts}
        statuses = {zeus.handle(d).result(WAIT_S).status for d in ids}
        zeus.stop()
        assert statuses == {Status.completed}, statuses
        until(lambda: not any(process_running(pid, start) for pid, start in self.below),
              "every process below the host was gone")


@contextmanager
def crashed(n: int, grace_s: float, *, report: bool) -> Iterator[Crashed]:
    """A host with `n` holders (reporting every 20 ms with `report`), SIGKILLed once the
    store has each one's pid and first partial; then, with a grace, until every worker
    listens, else until every one has stopped with its host. On the way out nothing of
    the host's is left running, also when the round failed."""
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        store, release, plan, errors = (tmp / name for name in (
            "zeus.db", "release", "plan.json", "host.err"))
        plan.write_text(json.dumps({
            "store": str(store), "release": str(release), "n": n, "grace_s": grace_s,
            "every_s": REPORT_EVERY_S if report else 0.5, "report": report}))  # fmt: skip
        with errors.open("wb") as err:
            process = subprocess.Popen(
                [sys.executable, "-m", "benchmarks._reattach_zeus", str(plan)], cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                stderr=err)
        below: list[tuple[int, float | None]] = []
        try:
            until(lambda: len(running_attempts(store)) == n, f"{n} attempts ran", process,
                  errors)
            attempts = running_attempts(store)
            below = [(pid, process_start_time(pid)) for pid in descendants(process.pid)]
            process.kill()
            process.wait()
            if grace_s > 0:
                sockets = children_dir(store)
                until(lambda: all((sockets / f"{pid}.sock").exists()
                                  for pid, _ in attempts.values()), f"{n} workers waited")
            else:
                until(lambda: not any(process_running(*p) for p in attempts.values()),
                      "the workers stopped with their host")
            yield Crashed(store, release, attempts, below)
        finally:
            process.kill()
            process.wait()
            release.touch()
            for pid, start in below:  # after a failed round: by pid and start time
                if process_running(pid, start):
                    os.kill(pid, signal.SIGKILL)


# -- the figures ------------------------------------------------------------------------


def bench_start_all_reattached(rows: list[Row], n: int, rounds: int) -> None:
    """`Zeus.start` on a store with `n` waiting children, to its return with all of them
    reattached."""
    took = []
    for _ in range(rounds):
        with crashed(n, 30.0, report=False) as left:
            t0 = time.perf_counter()
            zeus = Zeus.start(routing(30.0), store=left.store, agents=agents())
            took.append(time.perf_counter() - t0)
            reattached = set(zeus.recovered.reattached)
            left.finish(zeus)
            assert reattached == set(left.attempts), zeus.recovered
    rows.append(Row(f"Zeus.start to all {n} waiting children reattached",
                    statistics.median(took) * 1e3, None, "ms", "",
                    "value<=500" if n >= 100 else "",
                    f"median of {rounds} hosts SIGKILLed with {n} process children each",
                    {"n": n, "runs_ms": [t * 1e3 for t in took]}))  # fmt: skip


def first_report(grace_s: float) -> tuple[float, float]:
    """One child: (Zeus.start called -> its first partial in the new Zeus, Zeus.start's
    own time). With a grace the attempt that reports is the one reattached; without, the
    delegation's second attempt (the first is lost), in a new worker."""
    with crashed(1, grace_s, report=True) as left:
        firsts: dict[str, float] = {}

        def sink(event: dict[str, Any]) -> None:
            if event["event"] == "attempt.partial" and event["attempt_id"] not in firsts:
                firsts[event["attempt_id"]] = time.perf_counter()

        t0 = time.perf_counter()
        zeus = Zeus.start(routing(grace_s), store=left.store, agents=agents(), log=sink)
        started = time.perf_counter() - t0
        until(lambda: bool(firsts), "the child reported")
        recovered = zeus.recovered
        left.finish(zeus)
    [(attempt, at)] = firsts.items()
    expected = recovered.reattached if grace_s > 0 else tuple(f"{d}-a2" for d in
                                                                  recovered.rerun)
    assert (attempt,) == expected, (attempt, recovered)
    return at - t0, started


def bench_first_report(rows: list[Row], rounds: int) -> None:
    """One child a round, reattached against run again cold, alternating."""
    found: dict[str, list[tuple[float, float]]] = {"reattach": [], "cold": []}
    sides = [("reattach", 30.0), ("cold", 0.0)]
    for _ in range(rounds):
        for name, grace in sides:
            found[name].append(first_report(grace))
        sides.reverse()  # each side goes first every other round
    reattach, cold = ([f[0] * 1e3 for f in found[s]] for s in ("reattach", "cold"))
    starts = {s: statistics.median(f[1] for f in found[s]) * 1e3 for s in found}
    rows.append(Row("reattach one child: Zeus.start -> first report (p50)",
                    statistics.median(reattach), statistics.median(cold), "ms",
                    "a cold rerun's first report (orphan_grace_s 0: a new attempt, new worker)",
                    "value<=20", f"{rounds} rounds a side, alternating; Zeus.start itself "
                    f"{starts['reattach']:.1f} ms against {starts['cold']:.1f} ms",
                    {"reattach_ms": reattach, "cold_ms": cold,
                     "zeus_start_ms": starts}))  # fmt: skip


def bench_grace_cost(rows: list[Row], rounds: int, samples_n: int, flight_n: int) -> None:
    """Two Zeus on two fresh stores, `orphan_grace_s` 30 and 0, alternating rounds, each
    side first in turn; for half the rounds the one with a grace is started first, for
    the other half the other (the Zeus started first ran the slower here, either way)."""
    warm: dict[str, list[float]] = {"grace": [], "none": []}
    flight: dict[str, list[float]] = {"grace": [], "none": []}
    for half, order in enumerate((("grace", "none"), ("none", "grace"))):
        with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
            sides = [(name, stack.enter_context(Zeus.start(
                routing(30.0 if name == "grace" else 0.0), store=Path(tmp) / f"{name}.db",
                agents=agents()))) for name in order]  # fmt: skip
            for _, zeus in sides:  # warm: the fork server up, 8 workers idle
                _in_flight(zeus, 8, 200)
                samples(lambda i, z=zeus: z.dispatch(BRIEF).result(WAIT_S), 100)  # type: ignore[misc]
            for _ in range((rounds + 1 - half) // 2):
                for name, zeus in sides:
                    warm[name].append(statistics.median(samples(
                        lambda i, z=zeus: z.dispatch(BRIEF).result(WAIT_S), samples_n)))  # type: ignore[misc]
                    flight[name].append(_in_flight(zeus, 8, flight_n))
                sides.reverse()
    rows.append(Row("warm process dispatch p50, store + orphan_grace_s 30",
                    statistics.median(warm["grace"]) * 1e3,
                    statistics.median(warm["none"]) * 1e3, "ms",
                    "the same, store + orphan_grace_s 0", "ratio<=1.1",
                    f"median of {rounds} rounds of {samples_n} no-op delegations "
                    "(dispatch to result()), each side first in turn, and started first "
                    "for half of them",
                    {"grace_ms": [t * 1e3 for t in warm["grace"]],
                     "none_ms": [t * 1e3 for t in warm["none"]],
                     "round_ratios": paired(warm)}))  # fmt: skip
    rows.append(Row("process throughput, 8 in flight, orphan_grace_s 30",
                    statistics.median(flight["grace"]), statistics.median(flight["none"]), "/s",
                    "the same, store + orphan_grace_s 0", "ratio>=0.9",
                    f"median of {rounds} rounds of {flight_n}, each side first in turn, and "
                    "started first for half of them",
                    {"grace_per_s": flight["grace"], "none_per_s": flight["none"],
                     "round_ratios": paired(flight)}))  # fmt: skip


def paired(sides: dict[str, list[float]]) -> list[float]:
    """Each round's grace / none, sorted: how far one round can stray from the median."""
    return sorted(round(g / n, 3) for g, n in zip(sides["grace"], sides["none"], strict=True))


def zeus_rows(rows: list[Row], n: int, rounds: int) -> None:
    """The Zeus-level rows, appended to `rows`: `n` children a host (3 hosts), one child
    a round (10 rounds a side), `rounds` rounds a side of the normal path (one round
    strays up to a fifth either way on a busy two-core machine, so 16 by default: the
    median then moves a few percent between runs, not ten)."""
    bench_start_all_reattached(rows, n, 3)
    bench_first_report(rows, 10)
    bench_grace_cost(rows, rounds, 300, 1000)


if __name__ == "__main__":
    host(sys.argv[1])
