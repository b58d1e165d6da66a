"""Chaos: many mixed delegations at once, with cancels racing everything, judged exactly.

Run: `python -m benchmarks chaos` (1,000 delegations on thread and process children;
`--n`, `--seed`, `--isolation thread,process,ray`, `--storm`, `--timeout-s` for every
attempt's deadline in place of the policy's 3 s; `--host-crashes N` kills the host N times
on a SQLite store, chaos_crash.py, and with `--store postgres --hosts K` one of K hosts on
one PostgreSQL store, chaos_hosts.py). The test suite runs a
smaller one (tests/test_chaos.py) on threads and processes; `--isolation ray` runs
the same mix on a local Ray that Zeus starts (the `ray` extra).

Each delegation does one kind of work: completes, completes slowly, fails transiently
then completes, fails for good, crashes (`os._exit` in a process; `SystemExit` in a
thread), segfaults (a process; `SystemExit` in a thread), hangs deaf to cancellation,
runs past its deadline while reporting, goes stale, or spends past its budget. A share
of them is cancelled by the host after a random delay, racing whatever else happens.
The run then checks, from the handles and the event log:

- nothing is lost: every delegation settles;
- nothing is doubled: one `delegation.settled` and one settlement callback each;
- nothing is misjudged: once Zeus logged a cancel request the status is `cancelled`,
  otherwise the kind's own status;
- no attempts overlap: each attempt of a delegation starts after the previous one ended;
- nothing leaks: no fenced thread is left running, and no child process this run
  started is alive once Zeus has stopped.

With `storm=True` one extra agent fails transiently without end under the default
restart intensity, opening its circuit on purpose; `storm_check` compares the other
delegations' statuses with a run without the storm.

Isolation modes are a parameter: `ISOLATIONS` maps a mode to the routing policy keys
that select it (and what else the mode needs: on Ray no more in flight than it has
CPUs, and a longer deadline, since it starts a worker in place of each crashed one).
Another backend is one more entry there, plus its backend in
`Zeus.start(backends=...)` if Zeus does not make it itself.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from actors import Brief, Context, Status, TransientError

__all__ = ["ISOLATIONS", "KINDS", "ChaosReport", "chaos_work", "run_chaos", "storm_check"]

# What selects each isolation mode in an agent's policy.
ISOLATIONS: dict[str, dict[str, Any]] = {
    "thread": {"isolation": "thread"},
    "process": {"isolation": "process"},
    # Starting a Ray worker in place of a crashed one takes a while: a longer deadline.
    "ray": {"isolation": "ray", "timeout_s": 20.0},
}
# The local Ray that Zeus starts for a run with the ray mode (and shuts down after it).
RAY_INIT: dict[str, Any] = {"num_cpus": 8, "log_to_driver": False}

# kind -> the statuses it may settle with when no cancel raced it.
KINDS: dict[str, frozenset[Status]] = {
    "ok": frozenset({Status.completed}),
    "slow": frozenset({Status.completed}),
    "transient": frozenset({Status.completed}),
    "permanent": frozenset({Status.failed}),
    "crash": frozenset({Status.failed}),
    "segfault": frozenset({Status.failed}),
    "hang": frozenset({Status.timed_out}),
    "deadline": frozenset({Status.timed_out}),
    "stale": frozenset({Status.timed_out}),
    "budget": frozenset({Status.budget_exceeded}),
}
_WEIGHTS = {"ok": 4, "slow": 3, "transient": 2, "permanent": 1, "crash": 1, "segfault": 1,
            "hang": 1, "deadline": 1, "stale": 1, "budget": 1}

POLICY: dict[str, Any] = {
    # Loose enough that a loaded two-core host starts a process child well within it.
    "timeout_s": 3.0,
    "heartbeat": {"interval_s": 0.05, "stale_after_s": 1.0},
    "shutdown": {"grace_s": 0.1, "term_s": 0.2},
    "retry": {"max_retries": 1, "backoff": "none", "on": ["transient"]},
    "budget": {"max_cost": 0.35},
    "read_only": True,  # a fenced deaf thread may be retried: overlap is what is checked
}
HANG_S = 3.5  # a deaf hang ends by itself after this long (a fenced thread then exits)


TRAIL_S = 0.02  # how often a running attempt marks the trail (`CHAOS_TRAIL`)


class _Trail:
    """While an attempt's work runs, a thread of the child appends the wall-clock time to
    `<CHAOS_TRAIL>/<attempt id>` every `TRAIL_S`: the judge of a run with several hosts
    sees from it when each attempt really ran, whatever its host logged (a SIGKILLed
    host logs no end). Without `CHAOS_TRAIL` in the environment, nothing is written."""

    def __init__(self, attempt_id: str) -> None:
        self._stop = threading.Event()
        folder = os.environ.get("CHAOS_TRAIL")
        self._path = os.path.join(folder, attempt_id) if folder else None

    def __enter__(self) -> _Trail:
        if self._path is not None:
            self._mark()  # before the work runs: a crash at once still leaves its start
            threading.Thread(target=self._run, daemon=True, name="chaos-trail").start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._path is not None:
            self._mark()

    def _mark(self) -> None:
        assert self._path is not None
        fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{time.time():.6f}\n".encode())
        finally:
            os.close(fd)

    def _run(self) -> None:
        while not self._stop.wait(TRAIL_S):
            self._mark()


def chaos_work(brief: Brief, ctx: Context) -> str:
    """The work function of every chaos agent; runs in the child (a thread, a process, a
    Ray worker)."""
    with _Trail(ctx.attempt_id):
        return _work(brief, ctx)


def _work(brief: Brief, ctx: Context) -> str:
    kind = brief.inputs["kind"]
    # The host's pid: in the brief, or (a brief that must read the same after a host
    # restart, under its key) in the environment the host's children inherit.
    host_pid = brief.inputs.get("host_pid") or int(os.environ.get("CHAOS_HOST_PID", "0"))
    in_process = os.getpid() != host_pid
    ctx.heartbeat(kind)
    if kind == "slow":
        ctx.sleep(brief.inputs["delay_s"])
    elif kind == "transient" and ctx.attempt == 1:
        raise TransientError("flaky dependency")
    elif kind == "permanent":
        raise ValueError("bad input")
    elif kind == "crash":
        if in_process:
            os._exit(3)
        raise SystemExit(3)
    elif kind == "segfault":
        if in_process:
            os.kill(os.getpid(), signal.SIGSEGV)
            time.sleep(10)
        raise SystemExit(139)
    elif kind == "hang":
        time.sleep(HANG_S)  # deaf to cancellation: stale, then killed or fenced
    elif kind == "deadline":
        while True:  # reports all along: only the deadline stops it
            ctx.heartbeat("still going")
            time.sleep(0.02)
    elif kind == "stale":
        ctx.sleep(60)  # alive, no progress: stale
    elif kind == "budget":
        for _ in range(100):
            ctx.charge(calls=1, cost=0.1)
    return f"done:{brief.scope}"


def storm_work(brief: Brief, ctx: Context) -> None:
    """The storm agent: fails transiently, every time."""
    raise TransientError("storm")


@dataclass(frozen=True)
class Planned:
    index: int
    kind: str
    isolation: str
    cancel_after_s: float | None
    delay_s: float


def plan(n: int, seed: int, isolations: Sequence[str], cancel_share: float) -> list[Planned]:
    """The run's delegations, the same for the same seed."""
    rng = random.Random(seed)
    kinds = list(_WEIGHTS)
    weights = [_WEIGHTS[k] for k in kinds]
    return [
        Planned(
            index=i,
            kind=rng.choices(kinds, weights)[0],
            isolation=isolations[i % len(isolations)],
            cancel_after_s=rng.uniform(0.0, 1.0) if rng.random() < cancel_share else None,
            delay_s=rng.uniform(0.01, 0.2),
        )
        for i in range(n)
    ]


@dataclass
class ChaosReport:
    delegations: int
    seconds: float
    statuses: dict[int, Status]  # by planned index (storm delegations are not in it)
    by_status: Counter[str] = field(default_factory=Counter)
    cancels_won: int = 0
    violations: list[str] = field(default_factory=list)
    storm_trips: int = 0


def run_chaos(
    n: int = 1000,
    *,
    seed: int = 1,
    isolations: Sequence[str] = ("thread", "process"),
    cancel_share: float = 0.25,
    storm: bool = False,
    max_restarts: int = 100_000,
    scope: str = "agent",
    settle_within_s: float = 120.0,
    timeout_s: float | None = None,
) -> ChaosReport:
    """Run `n` planned delegations (plus a storm agent's, with `storm`) and judge them.

    `max_restarts` (per agent, within 60 s) is raised by default: a storm is not what a
    plain run tests. `timeout_s`: every attempt's deadline, in place of `POLICY`'s (an
    attempt's clock starts when its child runs the work: docs/design.md, "An attempt's
    clock")."""
    from supervisor import Routing, Zeus

    events: list[dict[str, Any]] = []
    lock = threading.Lock()

    def log(event: dict[str, Any]) -> None:
        with lock:
            events.append(event)

    timed = {} if timeout_s is None else {"timeout_s": timeout_s}
    agents = {f"c_{mode}": {**POLICY, **ISOLATIONS[mode], **timed} for mode in isolations}
    supervisor: dict[str, Any] = {
        "max_concurrent": 64,
        "intensity": {"max_restarts": max_restarts, "within_s": 60, "scope": scope},
    }
    if "ray" in isolations:
        # No more in flight than Ray has CPUs: an attempt waiting for a node is not a
        # hang, but its deadline runs meanwhile.
        supervisor["ray"] = {"init": RAY_INIT}
        supervisor["max_concurrent"] = RAY_INIT["num_cpus"]
    if storm:
        agents["storm"] = {"retry": {"max_retries": 1000, "backoff": "none"}}
    routing = Routing.from_dict({"version": 1, "supervisor": supervisor, "agents": agents})
    planned = plan(n, seed, isolations, cancel_share)
    host_pid = os.getpid()
    callbacks: Counter[str] = Counter()
    started = time.monotonic()
    zeus = Zeus.start(routing, log=log)
    try:
        for mode in isolations:
            zeus.register(f"c_{mode}", chaos_work)
        if storm:
            zeus.register("storm", storm_work)
        handles = []
        storm_handles = []
        timers = []
        for p in planned:
            brief = Brief(agent=f"c_{p.isolation}", scope=f"{p.kind}:{p.index}",
                          inputs={"kind": p.kind, "host_pid": host_pid, "delay_s": p.delay_s})
            handle = zeus.dispatch(brief)
            handle.add_done_callback(_counter(callbacks, handle.id, lock))
            handles.append((p, handle))
            if p.cancel_after_s is not None:
                timer = threading.Timer(p.cancel_after_s, handle.cancel, args=("chaos cancel",))
                timer.daemon = True
                timer.start()
                timers.append(timer)
            if storm and p.index % 10 == 0:
                storm_handles.append(zeus.dispatch(Brief(agent="storm", scope=f"storm:{p.index}")))
        report = ChaosReport(delegations=len(handles) + len(storm_handles), seconds=0.0,
                             statuses={})
        deadline = time.monotonic() + settle_within_s
        for p, handle in handles:
            try:
                summary = handle.result(max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                report.violations.append(f"lost: {handle.id} ({p.kind}) never settled")
                continue
            report.statuses[p.index] = summary.status
            report.by_status[summary.status.value] += 1
        for handle in storm_handles:
            try:
                handle.result(max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                report.violations.append(f"lost: storm delegation {handle.id} never settled")
        for timer in timers:
            timer.cancel()
        report.seconds = time.monotonic() - started
        _wait_for(lambda: zeus.tree()["abandoned_threads"] == 0, HANG_S + 5.0)
        abandoned = zeus.tree()["abandoned_threads"]
        if abandoned:
            report.violations.append(f"leak: {abandoned} fenced threads still running")
    finally:
        zeus.stop(timeout=10)
    with lock:
        log_copy = list(events)
    _judge(report, handles, log_copy, callbacks)
    report.storm_trips = sum(e["event"] == "supervisor.intensity_exceeded" for e in log_copy)
    return report


STORM_MAX_RESTARTS = 200  # the storm agent (1,000 retries each) passes it at once


def storm_check(n: int = 300, *, seed: int = 2, isolations: Sequence[str] = ("thread",),
                scope: str = "agent") -> tuple[ChaosReport, ChaosReport, list[str]]:
    """The same delegations (no cancels) without and with a storm that opens one agent's
    circuit: the other delegations whose status differs (none, if nothing leaks out)."""
    calm = run_chaos(n, seed=seed, isolations=isolations, cancel_share=0.0,
                     max_restarts=STORM_MAX_RESTARTS, scope=scope)
    stormy = run_chaos(n, seed=seed, isolations=isolations, cancel_share=0.0, storm=True,
                       max_restarts=STORM_MAX_RESTARTS, scope=scope)
    kinds = {p.index: f"{p.kind} on {p.isolation}" for p in plan(n, seed, isolations, 0.0)}
    differ = [
        f"delegation {i} ({kinds[i]}): {calm.statuses.get(i)} without the storm, "
        f"{stormy.statuses.get(i)} with it"
        for i in sorted(set(calm.statuses) | set(stormy.statuses))
        if calm.statuses.get(i) is not stormy.statuses.get(i)
    ]
    return calm, stormy, differ


def _counter(callbacks: Counter[str], key: str, lock: threading.Lock) -> Any:
    """A settlement callback that counts its calls (run in Zeus's thread)."""

    def count(_summary: object) -> None:
        with lock:
            callbacks[key] += 1

    return count


def _wait_for(condition: Any, within_s: float) -> bool:
    end = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def _judge(report: ChaosReport, handles: list[tuple[Planned, Any]],
           events: list[dict[str, Any]], callbacks: Counter[str]) -> None:
    settled = Counter(e["delegation_id"] for e in events if e["event"] == "delegation.settled")
    cancel_logged = {e["delegation_id"] for e in events
                     if e["event"] == "delegation.cancel_requested"}
    for p, handle in handles:
        if settled[handle.id] != 1:
            report.violations.append(f"settled {settled[handle.id]} times: {handle.id}")
        if callbacks[handle.id] != 1:
            report.violations.append(f"{callbacks[handle.id]} callbacks: {handle.id}")
        status = report.statuses.get(p.index)
        if status is None:
            continue
        if handle.id in cancel_logged:
            expected: frozenset[Status] = frozenset({Status.cancelled})
            report.cancels_won += 1
        else:
            expected = KINDS[p.kind]
        if status not in expected:
            report.violations.append(
                f"misjudged: {handle.id} ({p.kind} on {p.isolation}) settled {status.value}, "
                f"expected {' or '.join(sorted(s.value for s in expected))}")
    report.violations += _overlaps(events)
    report.violations += _live_children(events)


def _overlaps(events: list[dict[str, Any]]) -> list[str]:
    """Attempts of one delegation that ran at the same time, in the event log's order
    (the logs of a host's restarts one after the other, too)."""
    running: dict[str, str] = {}
    found = []
    for e in events:
        name, delegation = e["event"], str(e.get("delegation_id"))
        if name == "attempt.started":
            if delegation in running:
                found.append(f"overlap: {e['attempt_id']} started while "
                             f"{running[delegation]} ran")
            running[delegation] = e["attempt_id"]
        elif name == "attempt.reattached":  # the same attempt, supervised on after a restart
            if running.get(delegation, e["attempt_id"]) != e["attempt_id"]:
                found.append(f"overlap: {e['attempt_id']} reattached while "
                             f"{running[delegation]} ran")
            running[delegation] = e["attempt_id"]
        elif name in ("attempt.completed", "attempt.failed", "attempt.lost"):
            running.pop(delegation, None)  # (lost: ended by a restart's recovery)
    return found


def _live_children(events: list[dict[str, Any]]) -> list[str]:
    """Child processes this run started that are still alive after Zeus stopped."""
    import psutil

    pids = {e["pid"] for e in events if e["event"] == "attempt.started" and e.get("pid")}
    alive = []
    end = time.monotonic() + 5.0
    for pid in pids:
        while True:
            try:
                gone = psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
            except psutil.NoSuchProcess:
                gone = True
            if gone or time.monotonic() > end:
                break
            time.sleep(0.05)
        if not gone:
            alive.append(f"leak: child process {pid} is alive after zeus.stop()")
    return alive


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks chaos")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--isolation", default="thread,process",
                        help=f"comma-separated, from: {', '.join(ISOLATIONS)}")
    parser.add_argument("--timeout-s", type=float, default=None, metavar="S",
                        help="every attempt's deadline (default: the policy's 3 s)")
    parser.add_argument("--storm", action="store_true",
                        help="also open one agent's circuit on purpose and compare")
    parser.add_argument("--host-crashes", type=int, default=0, metavar="N",
                        help="run on a store and SIGKILL the host N times (chaos_crash.py)")
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite",
                        help="with --host-crashes: the store (postgres: a throwaway server "
                             "of the run's own, chaos_hosts.py)")
    parser.add_argument("--hosts", type=int, default=1, metavar="K",
                        help="with --store postgres: K hosts share the store from the start")
    parser.add_argument("--lease-s", type=float, default=2.5, metavar="S",
                        help="with --store postgres: the hosts' supervisor.store.lease_s")
    parser.add_argument("--db-restarts", type=int, default=0, metavar="N",
                        help="with --store postgres: restart the server N times (fast and "
                             "immediate in turn), each after a host crash")
    args = parser.parse_args(argv)
    isolations = tuple(args.isolation.split(","))
    unknown = [m for m in isolations if m not in ISOLATIONS]
    if unknown:
        parser.error(f"unknown isolation {unknown}; allowed: {', '.join(ISOLATIONS)}")
    if args.store == "postgres":
        return _hosts_main(args.n, args.seed, isolations, args.host_crashes, args.hosts,
                           args.lease_s, args.db_restarts)
    if args.hosts != 1:
        parser.error("--hosts needs --store postgres (a SQLite store has one host)")
    if args.host_crashes:
        from benchmarks.chaos_crash import run_crash_chaos

        crashed = run_crash_chaos(args.n, seed=args.seed, isolations=isolations,
                                  host_crashes=args.host_crashes)
        print(f"chaos with {crashed.crashes} host crashes: {crashed.delegations} delegations "
              f"on {', '.join(isolations)} in {crashed.seconds:.1f}s; "
              f"{dict(crashed.by_status)}; attempts lost with a host: {crashed.lost_attempts} "
              f"({crashed.lost_process_attempts} of them process children); process "
              f"children picked up by the next host: {crashed.reattached_attempts} "
              f"({crashed.adopted_attempts} of them finished meanwhile)")
        for line in crashed.violations[:50]:
            print("  " + line)
        print("OK" if not crashed.violations else f"FAILED: {len(crashed.violations)} "
              "violation(s)")
        return 1 if crashed.violations else 0
    report = run_chaos(args.n, seed=args.seed, isolations=isolations, timeout_s=args.timeout_s)
    print(f"chaos: {report.delegations} delegations on {', '.join(isolations)} in "
          f"{report.seconds:.1f}s; {dict(report.by_status)}; cancels that won: "
          f"{report.cancels_won}")
    failures = list(report.violations)
    if args.storm:
        calm, stormy, differ = storm_check(args.n, seed=args.seed, isolations=isolations)
        print(f"storm: circuit opened {stormy.storm_trips} time(s); other agents' delegations "
              f"that settled differently: {len(differ)}")
        failures += calm.violations + stormy.violations + differ
    for line in failures[:50]:
        print("  " + line)
    print("OK" if not failures else f"FAILED: {len(failures)} violation(s)")
    return 1 if failures else 0


def _hosts_main(n: int, seed: int, isolations: Sequence[str], host_crashes: int, hosts: int,
                lease_s: float, db_restarts: int = 0) -> int:
    """`--store postgres`: several hosts on one PostgreSQL (chaos_hosts.py)."""
    from benchmarks.chaos_hosts import run_hosts_chaos

    r = run_hosts_chaos(n, seed=seed, isolations=isolations, host_crashes=host_crashes,
                        hosts=hosts, lease_s=lease_s, db_restarts=db_restarts)
    takeover = (f"; from a kill to the first delegation taken over: "
                f"{', '.join(f'{s:.2f}s' for s in r.takeover_s)}" if r.takeover_s else "")
    print(f"chaos on PostgreSQL with {r.hosts} hosts and {r.crashes} host crashes "
          f"({r.restarted} started again, {r.left_dead} left dead; lease {lease_s:g}s): "
          f"{r.delegations} delegations on {', '.join(isolations)} in {r.seconds:.1f}s; "
          f"{dict(r.by_status)}; dispatched by host: {dict(sorted(r.by_host.items()))}; "
          f"attempts lost with a host: {r.lost_attempts}; delegations recovered by a host "
          f"started again: {r.recovered_on_restart}, taken over by a live host after the "
          f"lease: {r.taken_over}; attempts reattached: {r.reattached_attempts}{takeover}"
          + (f"; the server restarted: {', '.join(r.db_restarts)}" if r.db_restarts else ""))
    for line in r.violations[:50]:
        print("  " + line)
    print("OK" if not r.violations else f"FAILED: {len(r.violations)} violation(s)")
    return 1 if r.violations else 0
