"""A command agent's attempt from `start()` to its `Finished`: under a worker process
(`ProcessBackend(commands_in_workers=True)`) against under the supervisor process (the
default), the two alternating in one run.

Run: `python -m benchmarks.bench_command [--n 200]` (writes benchmarks/results/command.json).

The backend alone, no Zeus. Programs: `true` (what the path itself costs) and
`python -c pass` (a program that takes a while to start). Warm: the agent's
worker is idle and takes the attempt; cold: `session_max: 0`, a new worker per
attempt (a fork-server round trip before the program's own fork and exec).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors import Brief
from actors.backends import ChildSpec, ProcessBackend
from actors.clock import SystemClock
from actors.protocol import Finished
from benchmarks._table import Row, report

CLOCK = SystemClock()
PROGRAMS = {
    "true": (shutil.which("true") or "/bin/true",),
    "python -c pass": ("python", "-c", "pass"),
}


def spec(n: int, command: tuple[str, ...], session_max: int | None) -> ChildSpec:
    return ChildSpec(
        agent="cmd", delegation_id=f"cmd-{n}", attempt=1, attempt_id=f"cmd-{n}-a1",
        brief=Brief(agent="cmd", scope="s"), deadline=CLOCK.now() + 60.0, clock=CLOCK,
        command=command, heartbeat_interval_s=5.0, session_max=session_max,
    )  # fmt: skip


def one(backend: ProcessBackend, n: int, command: tuple[str, ...], session_max: int | None
        ) -> float:  # fmt: skip
    done = threading.Event()
    outcome: list[Finished] = []

    def send(message: object) -> None:
        if isinstance(message, Finished):
            outcome.append(message)
            done.set()

    started = time.perf_counter()
    backend.start(spec(n, command, session_max), send)
    assert done.wait(30), "no Finished within 30 s"
    took = time.perf_counter() - started
    assert outcome[0].exit_code == 0, outcome[0]
    return took


def measure(n: int) -> list[Row]:
    supervisor = ProcessBackend()
    worker = ProcessBackend(commands_in_workers=True)
    supervisor.prestart()
    worker.prestart()
    rows: list[Row] = []
    try:
        count = 0
        for name, command in PROGRAMS.items():
            for kind, session_max in (("warm", None), ("cold", 0)):
                times: dict[str, list[float]] = {"supervisor": [], "worker": []}
                for i in range(n + 5):  # the first five warm up, alternating
                    for path, backend in (("supervisor", supervisor), ("worker", worker)):
                        count += 1
                        took = one(backend, count, command, session_max)
                        if i >= 5:
                            times[path].append(took)
                for label, pick in (("p50", 0.5), ("p95", 0.95)):
                    got = {k: statistics.quantiles(v, n=100)[int(pick * 100) - 1]
                           for k, v in times.items()}  # fmt: skip
                    rows.append(Row(
                        f"{name}, {kind} worker: start to Finished {label}",
                        got["worker"] * 1e3, got["supervisor"] * 1e3, "ms",
                        "the program under the supervisor process",
                    ))  # fmt: skip
    finally:
        supervisor.close()
        worker.close()
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="attempts per figure and path")
    args = parser.parse_args(argv)
    report("command", measure(args.n))


if __name__ == "__main__":
    main()
