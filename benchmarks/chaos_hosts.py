"""Chaos with host crashes on one PostgreSQL store shared by several hosts, judged across
every host and every restart.

Run: `python -m benchmarks chaos --host-crashes 3 --store postgres --hosts 3 [--n 200]
[--lease-s 2.5] [--db-restarts N]`. The suite runs a short one (tests/test_chaos.py).

With `--db-restarts N`, the run's own server is also restarted N times (`pg_ctl
restart`, `-m fast` and `-m immediate` in turn, up again at once), each after a host
crash, at a random moment: a restart within the lease fails no delegation (docs/design.md,
"The database itself fails"), so the judge is the same.

The run starts a throwaway PostgreSQL of its own (tests/_postgres.py) and a fresh
database on it, then `hosts` host processes (`python -m benchmarks.chaos_crash host ...`)
on it at once. Host `k` dispatches its share of the plan first (`index % hosts == k`),
then every other key: keys are the store's, so a key dispatched on two hosts is one
delegation. Each crash SIGKILLs a random one (seeded) of the live hosts that run
attempts (by the store); the killed host is either started again at once (a new
incarnation on this machine, which takes over what its predecessor left open at once:
docs/design.md, "Many hosts on one PostgreSQL store"; a host process started ahead,
since its imports take longer here than a lease) or left dead, so that the others take
its delegations over once its lease (`supervisor.store.lease_s`) and its ladder's bound
have passed, which the run waits for before the next crash; the choice alternates, from
a seeded first one, and the last live host is always started again.
Every incarnation writes a journal of its own, and every attempt's work marks a trail
while it runs (`CHAOS_TRAIL`, benchmarks/chaos.py). The judge then reads the store and
every journal:

- exactly once: one stored delegation per key, settled, and at most one
  `delegation.settled` for it across all the journals;
- nothing misjudged: as in benchmarks/chaos_crash.py;
- no overlap, three ways: the stored attempts of a delegation, in order, each start
  after the one before ended; so do their `attempt.started` and their ends
  (`attempt.completed`, `attempt.failed`, `attempt.lost`, whichever host logged them);
  and no attempt's trail has a mark before the last mark of the one before it;
- no spend lost: each summary's calls are those its stored attempts charged;
- no host taken over by a live one before its lease's end plus its ladder's bound, by
  the database's clock;
- nothing left running: no delegation open, no child process alive at the end.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.chaos_crash import _alive, _events, judge_settlements

__all__ = ["HostsReport", "run_hosts_chaos"]

LEASE_S = 2.5


@dataclass
class HostsReport:
    delegations: int
    hosts: int
    crashes: int
    seconds: float
    restarted: int = 0  # killed hosts started again at once
    left_dead: int = 0  # killed hosts whose delegations the others took over
    by_status: Counter[str] = field(default_factory=Counter)
    by_host: Counter[int] = field(default_factory=Counter)  # delegations first run by slot
    lost_attempts: int = 0
    taken_over: int = 0  # `delegation.taken_over`, across all journals: by a live host
    recovered_on_restart: int = 0  # open delegations a host started again recovered at once
    reattached_attempts: int = 0
    trailed_attempts: int = 0  # attempts whose work marked the trail
    takeover_s: list[float] = field(default_factory=list)  # a kill left dead -> taken over
    db_restarts: list[str] = field(default_factory=list)  # each restart's mode, in order
    violations: list[str] = field(default_factory=list)


@dataclass
class _Run:
    slot: int
    log: Path
    proc: subprocess.Popen[str]


def run_hosts_chaos(
    n: int = 200, *, seed: int = 1, isolations: Sequence[str] = ("thread", "process"),
    host_crashes: int = 3, hosts: int = 3, lease_s: float = LEASE_S,
    folder: Path | None = None, url: str | None = None, db_restarts: int = 0,
) -> HostsReport:
    """Run the plan on `hosts` hosts sharing one PostgreSQL through `host_crashes` kills of
    a random live host (and `db_restarts` restarts of the server, each after a kill), then
    judge it. `url`: an empty database to use, in place of a throwaway server of the run's
    own (which alone can be restarted); `RuntimeError` when there is neither."""
    if hosts < 1 or host_crashes < 0 or not 0 <= db_restarts <= host_crashes:
        raise ValueError(f"hosts must be at least 1, host_crashes at least 0 and "
                         f"db_restarts between 0 and host_crashes, not {hosts}, "
                         f"{host_crashes} and {db_restarts}")
    if db_restarts and url is not None:
        raise ValueError("db_restarts restarts the run's own server: give no url")
    rng = random.Random(seed)
    with contextlib.ExitStack() as stack:
        server = None
        if url is None:
            url, server = stack.enter_context(_throwaway_database())
        restart_db = None if server is None else _restarter(server, rng, db_restarts)
        report = _run(url, rng, n, seed, isolations, host_crashes, hosts, lease_s, folder,
                      restart_db)
    return report


def _restarter(server: Any, rng: random.Random, times: int) -> Callable[[], str | None]:
    """Restarts `server` (`pg_ctl stop -m fast`, then `-m immediate`, in turn; started again
    at once) at a random moment, `times` times at most; each call the mode, or None once
    they are used."""
    modes = itertools.islice(itertools.cycle(("fast", "immediate")), times)

    def restart() -> str | None:
        mode = next(modes, None)
        if mode is not None:
            time.sleep(rng.uniform(0.05, 0.5))  # a random moment of the run
            server.stop(mode)
            server.start()
        return mode

    return restart


@contextlib.contextmanager
def _throwaway_database() -> Iterator[tuple[str, Any]]:
    """A fresh database on a PostgreSQL server started for the run (tests/_postgres.py),
    and the server."""
    from tests._postgres import SKIP, PostgresServer, find_bin_dir

    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise RuntimeError(SKIP)
    server = PostgresServer(bin_dir)
    try:
        yield server.database(), server
    finally:
        server.close()


def _run(url: str, rng: random.Random, n: int, seed: int, isolations: Sequence[str],
         host_crashes: int, hosts: int, lease_s: float, folder: Path | None,
         restart_db: Callable[[], str | None] | None = None) -> HostsReport:
    with tempfile.TemporaryDirectory() as tmp:
        where = folder or Path(tmp)
        trail = where / "trail"
        trail.mkdir()
        report = HostsReport(delegations=n, hosts=hosts, crashes=0, seconds=0.0)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path),
               "CHAOS_TRAIL": str(trail),
               "CHAOS_GO": str(where / "go")}
        incarnations = Counter[int]()
        runs: list[_Run] = []

        def log_of(slot: int) -> Path:
            incarnations[slot] += 1
            return where / f"host{slot}-run{incarnations[slot] - 1}.jsonl"

        def launch(slot: int, log: Path, **more: str) -> subprocess.Popen[str]:
            cmd = [sys.executable, "-m", "benchmarks.chaos_crash", "host", url, str(log),
                   str(n), str(seed), ",".join(isolations), str(host_crashes), str(slot),
                   str(hosts), str(lease_s)]
            return subprocess.Popen(cmd, env={**env, **more}, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)

        def start(slot: int) -> _Run:
            log = log_of(slot)
            run = _Run(slot, log, launch(slot, log))
            runs.append(run)
            return run

        spares = 0

        def new_spare() -> tuple[Path, subprocess.Popen[str]]:
            """A host process started ahead (its imports take seconds here), so that a
            killed host starts again within its lease, as a restart on a quiet machine
            would: it opens the store once told which host it is."""
            nonlocal spares
            spares += 1
            told = where / f"spare{spares}.json"
            return told, launch(0, where / "unused.jsonl", CHAOS_SPARE=str(told))

        def start_spare(slot: int) -> _Run:
            told, proc = spare
            run = _Run(slot, log_of(slot), proc)
            partial = told.with_suffix(".part")
            partial.write_text(json.dumps({"slot": slot, "log": str(run.log)}))
            partial.rename(told)
            runs.append(run)
            return run

        started = time.monotonic()
        live = {slot: start(slot) for slot in range(hosts)}
        spare = new_spare()
        _all_started(list(live.values()))
        Path(env["CHAOS_GO"]).touch()  # each dispatches its share, all at once
        restart = rng.random() < 0.5
        kills: list[tuple[float, int]] = []  # hosts left dead: when killed (wall), pid
        while report.crashes < host_crashes:
            victim = _victim(url, list(live.values()), rng)
            if victim is None:
                break  # every host finished first: fewer crashes (`crashes` says)
            time.sleep(rng.uniform(0.05, 1.0))  # a random moment of the run
            if victim.proc.poll() is not None:
                continue  # it finished meanwhile: not a crash
            killed_at = time.time()
            victim.proc.send_signal(signal.SIGKILL)
            victim.proc.wait(timeout=60)  # not its pipes: children waiting to be
            assert victim.proc.stderr is not None  # reattached hold their copies open
            victim.proc.stderr.close()
            report.crashes += 1
            others = [r for r in live.values() if r is not victim and r.proc.poll() is None]
            if restart or not others:
                live[victim.slot] = start_spare(victim.slot)
                spare = new_spare()
                report.restarted += 1
            else:
                del live[victim.slot]
                kills.append((killed_at, victim.proc.pid))
                report.left_dead += 1
                # Before the next crash: the others take it over once its lease ends (a
                # host started here meanwhile would take it over at once instead).
                report.violations += _await_taken(url, victim.proc.pid, lease_s + 60.0)
            restart = not restart
            if restart_db is not None and (mode := restart_db()) is not None:
                report.db_restarts.append(mode)
        spare[1].kill()  # it never opened the store
        spare[1].communicate()
        for run in live.values():
            _, err = run.proc.communicate(timeout=600)
            if run.proc.returncode != 0:
                raise RuntimeError(f"host {run.slot} failed:\n{err[-3000:]}")
        report.seconds = time.monotonic() - started
        _judge(report, url, [r.log for r in runs], trail, n, seed, isolations, kills)
    return report


def _victim(url: str, runs: Sequence[_Run], rng: random.Random) -> _Run | None:
    """A random one of the hosts that run attempts of their own right now (by the store:
    an open delegation it owns with an attempt not ended), once there is one; None once
    every host has exited."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        while True:
            running = {r.proc.pid: r for r in runs if r.proc.poll() is None}
            if not running:
                return None
            pids = {pid for (pid,) in con.execute(
                "SELECT DISTINCT h.pid FROM hosts h JOIN delegations d ON d.owner = h.id"
                " JOIN attempts a ON a.delegation_id = d.id WHERE d.status IS NULL AND"
                " a.ended IS NULL AND h.taken_by IS NULL AND h.released IS NULL")}
            ready = sorted(pid for pid in pids if pid in running)
            if ready:
                return running[rng.choice(ready)]
            time.sleep(0.02)


def _await_taken(url: str, pid: int, within_s: float) -> list[str]:
    """Until the host of process `pid` is taken over, or owns nothing open any more."""
    import psycopg

    deadline = time.monotonic() + within_s
    with psycopg.connect(url, autocommit=True) as con:
        while time.monotonic() < deadline:
            row = con.execute(
                "SELECT h.id, h.taken_by, (SELECT count(*) FROM delegations d WHERE"
                " d.owner = h.id AND d.status IS NULL) FROM hosts h WHERE h.pid = %s"
                " ORDER BY h.n DESC LIMIT 1", (pid,)).fetchone()
            if row is None or row[1] is not None or row[2] == 0:
                return []
            time.sleep(0.05)
    assert row is not None
    return [f"lost: host {row[0]} (pid {pid}), left dead, was not taken over within "
            f"{within_s:g}s; it still owns {row[2]} open delegations"]


def _all_started(runs: Sequence[_Run]) -> None:
    """Until every host of `runs` has started (its journal says `zeus.started`) or exited."""
    deadline = time.monotonic() + 120
    for run in runs:
        while time.monotonic() < deadline and run.proc.poll() is None:
            with contextlib.suppress(OSError):
                if '"zeus.started"' in run.log.read_text(encoding="utf-8"):
                    break
            time.sleep(0.02)


def _read_trail(trail: Path) -> dict[str, tuple[float, float]]:
    """Each attempt's first and last mark (wall clock)."""
    spans = {}
    for path in trail.iterdir():
        marks = []
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError):  # a mark torn by a kill
                marks.append(float(line))
        if marks:
            spans[path.name] = (min(marks), max(marks))
    return spans


def _judge(report: HostsReport, url: str, logs: Sequence[Path], trail: Path, n: int,
           seed: int, isolations: Sequence[str], kills: Sequence[tuple[float, int]]) -> None:
    import psycopg

    events = _events(logs)
    report.reattached_attempts = sum(e["event"] == "attempt.reattached" for e in events)
    report.taken_over = sum(e["event"] == "delegation.taken_over" for e in events)
    report.recovered_on_restart = sum(
        len(e["rerun"]) + len(e["reattached"]) + len(e["adopted"]) + len(e["blocked"])
        for e in events if e["event"] == "zeus.recovered")
    with psycopg.connect(url) as con:
        rows = con.execute("SELECT id, key, status, summary FROM delegations").fetchall()
        attempts = con.execute(
            "SELECT id, delegation_id, number, started, ended, calls, pid, pid_start_time"
            " FROM attempts ORDER BY delegation_id, number").fetchall()
        hosts = con.execute(
            "SELECT id, pid, extract(epoch FROM lease_until)::float8, bound_s,"
            " extract(epoch FROM taken_at)::float8, taken_by FROM hosts").fetchall()
    report.takeover_s += _takeover_times(events, hosts, kills)
    report.violations += _early_takeovers(events, hosts)
    spent: Counter[str] = Counter()
    by_delegation: dict[str, list[tuple[str, int, float, float | None]]] = defaultdict(list)
    for attempt_id, delegation_id, number, started, ended, calls, _, _ in attempts:
        spent[delegation_id] += calls
        by_delegation[delegation_id].append((attempt_id, number, started, ended))
    judge_settlements(report, rows, spent, events, n, seed, isolations)
    report.by_host.update(_dispatched_by(logs))
    report.violations += _stored_overlaps(by_delegation)
    report.violations += _logged_overlaps(events, by_delegation)
    spans = _read_trail(trail)
    report.trailed_attempts = len(spans)
    report.violations += _trail_overlaps(by_delegation, spans)
    report.violations += _alive([(pid, start) for *_, pid, start in attempts
                                 if pid is not None])


def _takeover_times(events: list[dict[str, Any]], hosts: Sequence[tuple[Any, ...]],
                    kills: Sequence[tuple[float, int]]) -> list[float]:
    """For each host left dead: from its kill to its first delegation taken over."""
    times = []
    for killed_at, pid in kills:
        ids = {host_id for host_id, host_pid, *_ in hosts if host_pid == pid}
        taken = [e["ts"] for e in events
                 if e["event"] == "delegation.taken_over" and e.get("from_host") in ids]
        if taken:
            times.append(min(taken) - killed_at)
    return times


def _early_takeovers(events: list[dict[str, Any]], hosts: Sequence[tuple[Any, ...]]
                     ) -> list[str]:
    """Hosts taken over by a live host before their lease's end plus their ladder's bound,
    by the database's clock (a host started again here takes its dead predecessor over
    at once, and says no `host.taken_over`)."""
    taken = {(e["host"], e["by"]) for e in events if e["event"] == "host.taken_over"}
    return [f"early: host {host_id} taken over by {by} {lease_until + bound_s - at:.3f}s "
            f"before its lease's end plus its bound"
            for host_id, _, lease_until, bound_s, at, by in hosts
            if (host_id, by) in taken and at is not None and at < lease_until + bound_s]


def _dispatched_by(logs: Sequence[Path]) -> Counter[int]:
    """How many delegations each host (all its incarnations) dispatched itself."""
    counts: Counter[int] = Counter()
    for log in logs:
        slot = int(log.name.removeprefix("host").split("-")[0])
        counts[slot] += sum(e["event"] == "delegation.dispatched" for e in _events([log]))
    return counts


def _stored_overlaps(by_delegation: dict[str, list[tuple[str, int, float, float | None]]]
                     ) -> list[str]:
    """Stored attempts of one delegation that started before the one before had ended."""
    found = []
    for attempts in by_delegation.values():
        for (before, _, _, ended), (after, _, started, _) in itertools.pairwise(attempts):
            if ended is None:
                found.append(f"overlap: {after} stored while {before} never ended")
            elif started < ended:
                found.append(f"overlap: {after} stored as started {ended - started:.3f}s "
                             f"before {before} ended")
    return found


_ENDS = ("attempt.completed", "attempt.failed", "attempt.lost")


def _logged_overlaps(events: list[dict[str, Any]],
                     by_delegation: dict[str, list[tuple[str, int, float, float | None]]]
                     ) -> list[str]:
    """Attempts whose `attempt.started`, in any journal, comes before the end of the
    delegation's stored attempt before it, in any journal (wall-clock `ts`). An attempt
    whose start no journal holds (its host was killed before the line was written) is
    not judged here: the stored attempts and the trail still are."""
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    for e in events:
        if e["event"] == "attempt.started":
            starts.setdefault(e["attempt_id"], e["ts"])
        elif e["event"] in _ENDS:
            ends.setdefault(e["attempt_id"], e["ts"])
    found = []
    for attempts in by_delegation.values():
        for (before, *_), (after, *_) in itertools.pairwise(attempts):
            started, end = starts.get(after), ends.get(before)
            if started is None:
                continue
            if end is None:
                found.append(f"overlap: {after} logged started while {before} logged no end")
            elif started < end:
                found.append(f"overlap: {after} logged started {end - started:.3f}s before "
                             f"{before} logged its end")
    return found


def _trail_overlaps(by_delegation: dict[str, list[tuple[str, int, float, float | None]]],
                    spans: dict[str, tuple[float, float]]) -> list[str]:
    """Attempts of one delegation whose work ran at once: a mark of a later attempt before
    the last mark of an earlier one."""
    found = []
    for attempts in by_delegation.values():
        ran = [(a, spans[a]) for a, *_ in attempts if a in spans]
        for i, (before, (_, last)) in enumerate(ran):
            for after, (first, _) in ran[i + 1:]:
                if first < last:
                    found.append(f"overlap: {after}'s work ran {last - first:.3f}s while "
                                 f"{before}'s still did")
    return found
