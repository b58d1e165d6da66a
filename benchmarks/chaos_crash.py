"""Chaos with host crashes: the mixed-fault chaos run on a store, with the host itself
SIGKILLed at random moments and started again each time, judged across all restarts.

Run: `python -m benchmarks chaos --host-crashes 3 [--n 200] [--isolation thread,process]`.
The suite runs a short one (tests/test_chaos.py).

A host process (`python -m benchmarks.chaos_crash host ...`) dispatches every planned
delegation under its own key, on one store; the driver kills it after a random delay
(seeded), `host_crashes` times, then lets the last one finish. Each start recovers
what the one before left open. The judge then reads the store and every run's journal:

- exactly once: one stored delegation per key, settled, and at most one
  `delegation.settled` for it across all the journals;
- nothing misjudged: the status its kind settles with, `cancelled` once a cancel was
  logged, or `timed_out` when its deadline passed while no host ran;
- no overlap: each attempt starts after the previous one ended (`attempt.lost`, after
  a restart, is an end); a process attempt reattached by the next host (its child
  waited for it: docs/design.md, "Reattach") is the same attempt, not a second one;
- no spend lost: each summary's calls are those its stored attempts charged;
- nothing left running: no child process any run started is alive at the end.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from benchmarks import chaos

__all__ = ["CrashReport", "run_crash_chaos"]

@dataclass
class CrashReport:
    delegations: int
    crashes: int
    seconds: float
    by_status: Counter[str] = field(default_factory=Counter)
    lost_attempts: int = 0
    lost_process_attempts: int = 0  # of those, process children (the others: threads)
    reattached_attempts: int = 0  # picked up again by the next host (`attempt.reattached`)
    adopted_attempts: int = 0  # of those, finished while no host ran
    violations: list[str] = field(default_factory=list)


def _routing(isolations: Sequence[str], host_crashes: int,
             lease_s: float | None = None) -> dict[str, Any]:
    # A lost attempt is retried as a transient one is: as many times as the host may crash.
    policy = {**chaos.POLICY, "retry": {**chaos.POLICY["retry"], "on": ["transient", "lost"],
                                        "max_retries": host_crashes + 1}}
    supervisor: dict[str, Any] = {"max_concurrent": 64}
    more: dict[str, Any] = {}
    if lease_s is not None:  # several hosts: a taker waits the lease and the ladder's bound,
        supervisor["store"] = {"lease_s": lease_s}  # the longest of the defaults' too
        more["defaults"] = {"shutdown": chaos.POLICY["shutdown"]}
    if "ray" in isolations:  # as in the plain run: a local Ray, no more in flight than CPUs
        supervisor.update(ray={"init": chaos.RAY_INIT},
                          max_concurrent=chaos.RAY_INIT["num_cpus"])
    return {"version": 1, "supervisor": supervisor, **more,
            "agents": {f"c_{mode}": {**policy, **chaos.ISOLATIONS[mode]}
                       for mode in isolations}}


def host(store: str, log: str, n: int, seed: int, isolations: Sequence[str],
         host_crashes: int, slot: int = 0, hosts: int = 1,
         lease_s: float | None = None) -> None:
    """One host run: dispatch the plan under its keys, cancel some, wait for all.

    With `hosts` above 1 (host `slot` of them, on one PostgreSQL store) it dispatches its
    share first (`index % hosts == slot`), then every other key too: a key another host
    claimed already gives a handle on that host's delegation, one not claimed yet is
    this host's. It cancels only in its share, and waits for every key."""
    import threading

    from actors import Brief
    from supervisor import Routing, Zeus

    os.environ["CHAOS_HOST_PID"] = str(os.getpid())  # not in the brief: it must not change
    routing = Routing.from_dict(_routing(isolations, host_crashes, lease_s))
    agents = {f"c_{mode}": chaos.chaos_work for mode in isolations}
    spare = os.environ.get("CHAOS_SPARE")
    if spare:  # started ahead, it opens the store once told which host it is
        import supervisor.store.postgres  # noqa: F401  (what opening it would import)

        deadline = time.monotonic() + 600
        while not os.path.exists(spare) and time.monotonic() < deadline:
            time.sleep(0.01)
        with open(spare, encoding="utf-8") as f:
            told = json.load(f)
        log, slot = told["log"], told["slot"]
    planned = chaos.plan(n, seed, isolations, 0.25)
    planned.sort(key=lambda p: p.index % hosts != slot)  # its share first, in order
    with _retried(lambda: Zeus.start(routing, agents=agents, store=store, log=log)) as zeus:
        go = os.environ.get("CHAOS_GO")  # several hosts: each its share first, all at once
        deadline = time.monotonic() + 120
        while go and not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.01)
        handles = []
        for p in planned:
            brief = Brief(agent=f"c_{p.isolation}", scope=f"{p.kind}:{p.index}",
                          inputs={"kind": p.kind, "delay_s": p.delay_s})
            handle = _retried(functools.partial(zeus.dispatch, brief, key=f"chaos-{p.index}"))
            handles.append(handle)
            if p.cancel_after_s is not None and p.index % hosts == slot:
                timer = threading.Timer(p.cancel_after_s, handle.cancel, args=("chaos cancel",))
                timer.daemon = True
                timer.start()
        for handle in handles:
            handle.result()


def _retried(call: Any) -> Any:
    """`call()` (`Zeus.start`, `zeus.dispatch`), tried again while the store cannot be
    reached (the database restarts: `StoreError` says so, and nothing was started or
    dispatched), as a host's loop, or whatever starts the host, would."""
    from supervisor import StoreError

    give_up = time.monotonic() + 60
    while True:
        try:
            return call()
        except StoreError:
            if time.monotonic() > give_up:
                raise
            time.sleep(0.05)


def run_crash_chaos(
    n: int = 200, *, seed: int = 1, isolations: Sequence[str] = ("thread", "process"),
    host_crashes: int = 3, folder: Path | None = None,
) -> CrashReport:
    """Run the plan through `host_crashes` killed hosts and a last one, then judge it."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        where = folder or Path(tmp)
        store = where / "chaos.db"
        logs = [where / f"run{i}.jsonl" for i in range(host_crashes + 1)]
        started = time.monotonic()
        for i, log in enumerate(logs):
            cmd = [sys.executable, "-m", "benchmarks.chaos_crash", "host", str(store), str(log),
                   str(n), str(seed), ",".join(isolations), str(host_crashes)]
            proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                sys.path)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if i < host_crashes:
                _await_attempts(log, proc, isolations)
                time.sleep(rng.uniform(0.05, 1.0))  # a random moment of the run
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=60)  # not its pipes: children waiting to be reattached
                assert proc.stderr is not None  # hold their copies open
                proc.stderr.close()
            else:
                _, err = proc.communicate(timeout=600)
                if proc.returncode != 0:
                    raise RuntimeError(f"the last host failed:\n{err[-3000:]}")
        report = CrashReport(delegations=n, crashes=host_crashes,
                             seconds=time.monotonic() - started)
        _judge(report, store, logs, n, seed, isolations)
    return report


def _await_attempts(log: Path, proc: subprocess.Popen[str], isolations: Sequence[str]) -> None:
    """Until this host runs attempts of its own (its start-up is not the moment to test;
    the store's open attempts may still be the last host's): with process children,
    until one of its processes has started or one was reattached."""
    marks = ('"attempt.spawned"', '"attempt.reattached"') if "process" in isolations \
        else ('"attempt.started"',)  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(OSError):
            text = log.read_text(encoding="utf-8")
            if any(mark in text for mark in marks):
                return
        time.sleep(0.02)


def _events(logs: Sequence[Path]) -> list[dict[str, Any]]:
    events = []
    for log in logs:
        if not log.exists():
            continue
        for line in log.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):  # the torn last line of a killed host
                events.append(json.loads(line))
    return events


class _Judged(Protocol):
    by_status: Counter[str]
    lost_attempts: int
    violations: list[str]


def judge_settlements(report: _Judged, rows: Sequence[tuple[Any, ...]],
                      spent: Mapping[str, int], events: Sequence[dict[str, Any]], n: int,
                      seed: int, isolations: Sequence[str]) -> list[dict[str, Any]]:
    """What every chaos run with host crashes checks of its store's delegations (`rows`:
    id, key, status, summary): one per planned key, each settled, and settled once
    across every journal, with the status its kind settles with and the calls its
    stored attempts charged (`spent`). The summaries read, for the run's own counts."""
    settled_events = Counter(e["delegation_id"] for e in events
                             if e["event"] == "delegation.settled")
    cancel_logged = {e["delegation_id"] for e in events
                     if e["event"] == "delegation.cancel_requested"}
    reattached = {e["delegation_id"] for e in events if e["event"] == "attempt.reattached"}
    by_key = Counter(key for _, key, _, _ in rows)
    planned = {f"chaos-{p.index}": p for p in chaos.plan(n, seed, isolations, 0.25)}
    for key in planned:
        if by_key[key] != 1:
            report.violations.append(f"{by_key[key]} stored delegations for key {key}")
    summaries = []
    for delegation_id, key, status, summary_json in rows:
        if status is None:
            report.violations.append(f"lost: {delegation_id} never settled")
            continue
        if settled_events[delegation_id] > 1:
            report.violations.append(f"settled {settled_events[delegation_id]} times: "
                                     f"{delegation_id}")
        summary: dict[str, Any] = json.loads(summary_json)
        summaries.append(summary)
        report.by_status[status] += 1
        outcomes = [a["outcome"] for a in summary["attempts"]]
        report.lost_attempts += outcomes.count("lost")
        p = planned[key]
        expected = {s.value for s in chaos.KINDS[p.kind]}
        if delegation_id in cancel_logged:
            expected.add("cancelled")
        if "lost" in outcomes or delegation_id in reattached:
            expected.add("timed_out")  # its deadline may have passed while no host ran it
        if status not in expected:
            report.violations.append(f"misjudged: {delegation_id} ({p.kind}) settled {status}, "
                                     f"expected {' or '.join(sorted(expected))}")
        calls = spent.get(delegation_id) or 0
        if summary["usage"]["calls"] != calls:
            report.violations.append(
                f"spend: {delegation_id}'s summary has {summary['usage']['calls']} calls, "
                f"its stored attempts {calls}")
    return summaries


def _judge(report: CrashReport, store: Path, logs: Sequence[Path], n: int, seed: int,
           isolations: Sequence[str]) -> None:
    events = _events(logs)
    report.reattached_attempts = sum(e["event"] == "attempt.reattached" for e in events)
    report.adopted_attempts = sum(len(e.get("adopted", ())) for e in events
                                  if e["event"] == "zeus.recovered")
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as con:
        rows = con.execute("SELECT id, key, status, summary FROM delegations").fetchall()
        spent = dict(con.execute("SELECT delegation_id, sum(calls) FROM attempts"
                                 " GROUP BY delegation_id").fetchall())
        pids = con.execute("SELECT pid, pid_start_time FROM attempts WHERE pid IS NOT NULL"
                           ).fetchall()
    for summary in judge_settlements(report, rows, spent, events, n, seed, isolations):
        report.lost_process_attempts += sum(
            a["outcome"] == "lost" and a["agent"] == "c_process" for a in summary["attempts"])
    report.violations += chaos._overlaps(events)
    report.violations += _alive(pids)


def _alive(pids: Sequence[tuple[int, float | None]]) -> list[str]:
    from actors.osproc import process_running

    end = time.monotonic() + 5.0  # a child killed at the end may still be dying
    alive = []
    for pid, start in pids:
        while process_running(pid, start) and time.monotonic() < end:
            time.sleep(0.05)
        if process_running(pid, start):
            alive.append(f"leak: child process {pid} is alive after the last host stopped")
    return alive


def main(argv: Sequence[str]) -> None:
    """`host STORE LOG N SEED ISOLATIONS CRASHES [SLOT HOSTS LEASE_S]`: one host run (the
    driver starts it)."""
    _, store, log, n, seed, isolations, crashes, *shared = argv
    more: dict[str, Any] = {}
    if shared:
        slot, hosts, lease_s = shared
        more = {"slot": int(slot), "hosts": int(hosts), "lease_s": float(lease_s)}
    host(store, log, int(n), int(seed), tuple(isolations.split(",")), int(crashes), **more)


if __name__ == "__main__":
    main(sys.argv[1:])
