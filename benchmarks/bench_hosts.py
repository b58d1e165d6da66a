"""Several hosts on one PostgreSQL store (docs/design.md, "Several hosts").

    python -m benchmarks hosts [--rounds 5] [--n 240]

Starts a throwaway PostgreSQL of its own (as the tests do: tests/_postgres.py). In one run:

- **takeover**: a host process runs held process children and is SIGKILLed; from the kill
  to the first of its delegations running again on another host (each run writes its
  wall-clock start), against `lease_s + 2` (DBOS Conductor waits 60 s, River and Oban an
  hour). With `lease_s` 3 and a fast ladder (grace 0.5 s, term 0.5 s), each round;
- **takeover at the default lease**: the same at `lease_s` 10 (the default) and the
  default ladder, against `lease_s + 5`;
- **healing after an outage**: a host on a shared store whose database is stopped for
  3x `lease_s` (3 s) and started again: from the database's return to its first
  delegation settled, with no host restarted (the host is fenced, joins the store again
  and runs its own old work), against `lease_s + 10` (what the guide promises);
- **throughput**: N delegations of a 50 ms thread agent, 8 in flight per host, on three
  hosts at once (N each) against one host (N), each host its own process;
- **renewal traffic**: statements a host sends for its lease per `lease_s / 3`, idle and
  with 200 open delegations.
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
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors import Brief, Context
from benchmarks._table import Row, report

ROOT = Path(__file__).resolve().parent.parent
LEASE_S = 3.0
FAST = {"grace_s": 0.5, "term_s": 0.5}


def held(brief: Brief, ctx: Context) -> str:
    """Write this run's wall-clock start, then hold until the gate file exists."""
    inputs = brief.inputs or {}
    folder = Path(inputs["dir"])
    with (folder / f"{inputs['name']}.starts").open("a") as f:
        f.write(f"{time.time()}\n")
    while not (folder / "gate").exists():
        ctx.sleep(0.02)
    return "done"


def nap(brief: Brief, ctx: Context) -> str:
    """50 ms of waiting (an agent's call out), then done."""
    ctx.sleep(0.05)
    return "done"


def _host(url: str, plan: dict[str, Any], folder: Path) -> subprocess.Popen[str]:
    plan_path = folder / f"plan-{time.monotonic_ns()}.json"
    plan_path.write_text(json.dumps(plan))
    return subprocess.Popen(
        [sys.executable, "-m", "tests._durable_host", url, str(plan_path)], cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True)


def _first_line(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("{"):
        raise RuntimeError("a host did not start")


def _wait(check: Any, bound_s: float = 60.0) -> None:
    deadline = time.monotonic() + bound_s
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError("a benchmark host never got there")
        time.sleep(0.01)


def _held_plan(folder: Path, lease_s: float | None, shutdown: dict[str, float] | None,
               **more: Any) -> dict[str, Any]:
    """Four keyed delegations of `held` (read-only process children); `lease_s` and the
    ladder None: the defaults."""
    agents = {"held": {"entrypoint": "benchmarks.bench_hosts:held", "isolation": "process",
                       "read_only": True, "timeout_s": 120, "retry": {"max_retries": 1},
                       **({"shutdown": shutdown} if shutdown else {})}}
    store = {"lease_s": lease_s} if lease_s is not None else {}
    briefs = [{"key": f"k{i}", "brief": {"agent": "held", "scope": f"k{i}",
                                         "inputs": {"dir": str(folder), "name": f"k{i}"}}}
              for i in range(4)]
    return {"agents": agents, "defaults": {"shutdown": shutdown} if shutdown else {},
            "supervisor": {"store": store, "orphan_grace_s": 0}, "briefs": briefs, **more}


def outage_round(server: Any, parent: Path) -> float:
    """Seconds from the database's return, after 3x `lease_s` away, to the first delegation
    settled (its host, fenced meanwhile, joins again and runs its own old work)."""
    import psycopg

    url = server.database()
    folder = Path(tempfile.mkdtemp(dir=parent))
    host = _host(url, _held_plan(folder, LEASE_S, FAST, hold=True), folder)
    try:
        _first_line(host)
        _wait(lambda: all((folder / f"k{i}.starts").exists() for i in range(4)))
        server.stop("fast")
        (folder / "gate").write_text("")  # the work may end now: nothing can be written
        time.sleep(3 * LEASE_S)  # the outage itself (the scenario, not a wait for an event)
        server.start()
        back = time.monotonic()

        def settled() -> bool:
            try:
                with psycopg.connect(url, connect_timeout=2) as con:
                    row = con.execute("SELECT count(*) FROM delegations"
                                      " WHERE status IS NOT NULL").fetchone()
            except psycopg.Error:
                return False
            return row is not None and row[0] > 0

        _wait(settled, LEASE_S + 60)
        return time.monotonic() - back
    finally:
        if host.poll() is None:
            host.kill()
        host.wait()


def takeover_round(server: Any, parent: Path, lease_s: float | None = LEASE_S,
                   shutdown: dict[str, float] | None = FAST) -> float:
    """Seconds from a host's SIGKILL to its first delegation running on the other host
    (`lease_s` and the ladder None: the defaults)."""
    url = server.database()
    folder = Path(tempfile.mkdtemp(dir=parent))  # a round's own: late writers miss it
    plan = _held_plan(folder, lease_s, shutdown)
    victim = _host(url, plan, folder)
    taker = _host(url, {**plan, "briefs": [], "hold": True}, folder)
    try:
        _first_line(victim)
        _first_line(taker)
        starts = [folder / f"k{i}.starts" for i in range(4)]
        _wait(lambda: all(p.exists() for p in starts))
        killed = time.time()
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        _wait(lambda: any(len(p.read_text().split()) >= 2 for p in starts))
        first = min(float(p.read_text().split()[1]) for p in starts
                    if len(p.read_text().split()) >= 2)
        return first - killed
    finally:
        (folder / "gate").write_text("")
        for proc in (victim, taker):
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def throughput_run(server: Any, hosts: int, n: int, parent: Path) -> float:
    """Delegations settled per second with `hosts` host processes, `n` each: from the
    start to the last host's last summary (each host's lines read as they come, so a
    host process's own stop is not counted)."""
    import threading

    url = server.database()
    folder = Path(tempfile.mkdtemp(dir=parent))
    agents = {"nap": {"entrypoint": "benchmarks.bench_hosts:nap", "read_only": True}}
    supervisor = {"store": {"lease_s": 10}, "max_concurrent": 8}
    go = folder / "go"
    procs = []
    for h in range(hosts):
        briefs = [{"key": f"h{h}-{i}", "brief": {"agent": "nap", "scope": f"h{h}-{i}"}}
                  for i in range(n)]
        procs.append(_host(url, {"agents": agents, "supervisor": supervisor,
                                 "briefs": briefs, "wait_for": str(go)}, folder))
    for proc in procs:
        _first_line(proc)
    done: list[float] = []

    def read(proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        summaries = 0
        for line in proc.stdout:
            summaries += line.startswith('{"summary"')
            if summaries == n:
                done.append(time.monotonic())
        proc.wait()

    readers = [threading.Thread(target=read, args=(proc,)) for proc in procs]
    start = time.monotonic()
    go.write_text("")
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()
    if len(done) != hosts:
        raise RuntimeError("a benchmark host did not settle all it dispatched")
    return hosts * n / (max(done) - start)


def renewal_traffic(server: Any, open_delegations: int) -> float:
    """Lease statements a host makes per `lease_s / 3`, with that many delegations open."""
    from supervisor import Routing, Zeus

    routing = Routing.from_dict({"version": 1, "agents": {
        "wait": {"entrypoint": "benchmarks.bench_hosts:held", "read_only": True,
                 "timeout_s": 120}},
        "supervisor": {"store": {"lease_s": 1.5}, "max_concurrent": 256}})
    with tempfile.TemporaryDirectory() as tmp, Zeus.start(routing,
                                                            store=server.database()) as zeus:
        for i in range(open_delegations):
            zeus.dispatch({"agent": "wait", "scope": f"w{i}",
                           "inputs": {"dir": tmp, "name": f"w{i}"}})
        host = zeus._host
        assert host is not None
        before, t0 = host.keeper.renewals, time.monotonic()
        time.sleep(3.0)
        made, took = host.keeper.renewals - before, time.monotonic() - t0
        (Path(tmp) / "gate").write_text("")
    return made / (took / (1.5 / 3))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks hosts")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=240, help="delegations per host")
    args = parser.parse_args(argv)
    from tests._postgres import PostgresServer, find_bin_dir

    bin_dir = find_bin_dir()
    if bin_dir is None:
        print("skipped: no PostgreSQL server here (apt-get install postgresql)")
        return
    server = PostgresServer(bin_dir)
    rows: list[Row] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            takeovers = [takeover_round(server, folder) for _ in range(args.rounds)]
            rows.append(Row(
                "takeover: SIGKILL to a delegation running again", statistics.median(takeovers),
                LEASE_S + 2, "s", baseline_name="lease_s + 2", target="ratio<=1.0",
                note=f"lease_s {LEASE_S}, ladder 1 s; rounds "
                     f"{', '.join(f'{t:.2f}' for t in takeovers)}"))
            at_default = [takeover_round(server, folder, None, None)
                          for _ in range(max(1, args.rounds // 2))]
            rows.append(Row(
                "takeover at the default lease_s (10) and ladder", statistics.median(at_default),
                10 + 5, "s", baseline_name="lease_s + 5", target="ratio<=1.0",
                note=f"rounds {', '.join(f'{t:.2f}' for t in at_default)}"))
            healed = [outage_round(server, folder) for _ in range(max(1, args.rounds // 2))]
            rows.append(Row(
                "database back after 3x lease_s: to the first settled", statistics.median(healed),
                LEASE_S + 10, "s", baseline_name="lease_s + 10", target="ratio<=1.0",
                note=f"lease_s {LEASE_S}, no host restarted; rounds "
                     f"{', '.join(f'{t:.2f}' for t in healed)}"))
            one, three = [], []
            for r in range(args.rounds):  # side by side, each first in turn
                for hosts in ((1, 3) if r % 2 == 0 else (3, 1)):
                    (one if hosts == 1 else three).append(
                        throughput_run(server, hosts, args.n, folder))
            rows.append(Row(
                "throughput: three hosts against one (8 in flight)", statistics.median(three),
                statistics.median(one), "/s", baseline_name="one host", target="ratio>=2.5",
                note=(f"50 ms thread agent, {args.n} per host; one host "
                      f"{min(one):.0f}-{max(one):.0f}/s, "
                      f"three {min(three):.0f}-{max(three):.0f}/s")))
        idle = renewal_traffic(server, 0)
        busy = renewal_traffic(server, 200)
        rows.append(Row("lease statements per lease_s/3, 200 open", busy, idle, "st",
                        baseline_name="idle", target="value<=1.05",
                        note="the lease keeper's one statement renews and looks for expired"
                             " hosts"))
    finally:
        server.close()
    report("hosts", rows)


if __name__ == "__main__":
    main()
