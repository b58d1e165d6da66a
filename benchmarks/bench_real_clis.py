"""The real agent CLIs (Claude Code, Codex, Gemini CLI, OpenCode, installed from npm in
tests/real_clis), one turn each under Zeus against the same program run alone, side by
side in one run, offline: `python -m benchmarks real_clis [--quick] [--cli NAME ...]
[--rounds R] [--at-once N] [--profile]` (writes benchmarks/results/real_clis.json).

The benchmark runs itself again inside a network namespace with only loopback
(tests/real_clis/netns.py: `unshare -n`, as root), where each CLI is pointed at a
scripted model server of the tests' own (tests/real_clis/model_server.py) that answers
every request at once with a `<subtask_summary>` block saying `Status: completed`. Where
the CLIs, `unshare` or root are missing, it says what to install and measures nothing.

- **The argv Zeus runs** is read first, once per CLI: the agent's program is a wrapper
  that writes its arguments to a file and then runs the CLI. The side "alone" runs
  exactly that argv, with `subprocess.run(argv, stdin=DEVNULL, capture_output=True)`,
  in the same folder and environment.
- **A warm turn**: one Zeus, started and warmed by two dispatches before the clock
  starts; `dispatch()` to the summary in the host's hands, against the run alone,
  alternating R rounds (5; `--quick`: 3), each side first in turn; medians. Target:
  at most 1.1x.
- **The first dispatch after `Zeus.start`**: a fresh Zeus per round (its start not
  timed), its first `dispatch()` to the summary, less the median of the runs alone.
  Target: at most 0.3 s over.
- **N turns at once** (16; `--quick`: 4): N dispatches on one warm Zeus, until the last
  summary, against the same N argvs started together alone until the last exits; R
  rounds alternating; medians. Target: at most 1.15x.

`--profile`: one more warm turn of each CLI with cProfile on every thread Zeus runs
(set before Zeus starts its threads), printed by own time.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import io
import os
import pstats
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors import Brief, Status
from benchmarks._table import Row, report
from supervisor import Routing, Zeus

ROOT = Path(__file__).resolve().parent.parent
COMPLETED = """I read it; nothing needed changing.

<subtask_summary>
Status: completed
Agent: bench
Scope: one turn

Changes:
- none

Findings:
- the turn was answered

Validation:
- none

Risks / Follow-up: none
</subtask_summary>
"""
SCOPE = "Answer in one turn, without tools."


def _harness() -> Any:
    """The tests' real-CLI harness (tests/real_clis), imported on first use: the
    benchmarks package runs without it."""
    sys.path.insert(0, str(ROOT))
    from tests.real_clis import clis, model_server, netns

    return clis, model_server, netns


# -- one CLI, set up ----------------------------------------------------------------------
class Bench:
    """One CLI against its own model server, HOME and folder; the agent's routing."""

    def __init__(self, name: str, tmp: Path) -> None:
        clis, model_server, _netns = _harness()
        self.name = name
        every = dataclasses.replace(model_server.final(COMPLETED), times=None)  # each request
        self.server = model_server.ModelServer([every])
        self.server.__enter__()
        self.setup = clis.cli_setup(name, tmp / name / "home", self.server.url)
        self.work = tmp / name / "work"
        self.work.mkdir(parents=True)
        self.env = os.environ | self.setup.env
        self.argv = self._zeus_argv(tmp / name)

    def close(self) -> None:
        self.server.close()

    def routing(self, program: str | None = None, *, at_once: int = 1) -> Routing:
        clis, _server, _netns = _harness()
        policy = clis.agent(self.setup, timeout_s=120)
        if program is not None:
            policy["command"] = [program]
        return Routing.from_dict({"version": 1, "agents": {"bench": policy},
                                  "supervisor": {"max_concurrent": max(16, at_once)}})

    def start(self, program: str | None = None, *, at_once: int = 1) -> Zeus:
        return Zeus.start(self.routing(program, at_once=at_once))

    def _zeus_argv(self, tmp: Path) -> list[str]:
        """The argv Zeus runs for the brief, from one turn through a wrapper that writes
        its arguments down (NUL-separated) and then runs the CLI."""
        record = tmp / "argv"
        wrapper = tmp / "record-argv"
        wrapper.write_text("#!/bin/sh\nprintf '%s\\0' \"$@\" > " + shlex.quote(str(record))
                           + "\nexec " + shlex.quote(self.setup.program) + ' "$@"\n')
        wrapper.chmod(0o755)
        with self.start(str(wrapper)) as zeus:
            summary = zeus.dispatch(self.brief()).result(timeout=120)
        if summary.status is not Status.completed:
            raise RuntimeError(f"{self.name} under Zeus: {summary.status} ({summary.error})")
        return [self.setup.program, *record.read_bytes().decode().split("\0")[:-1]]

    def brief(self) -> Brief:
        return Brief(agent="bench", scope=SCOPE)

    def alone(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.argv, cwd=self.work, env=self.env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)


def _turn(zeus: Zeus, bench: Bench) -> float:
    """One dispatch to its summary, in seconds; a turn that did not complete raises."""
    began = time.perf_counter()
    summary = zeus.dispatch(bench.brief()).result(timeout=120)
    took = time.perf_counter() - began
    if summary.status is not Status.completed:
        raise RuntimeError(f"{bench.name} under Zeus: {summary.status} ({summary.error})")
    return took


def _turns(zeus: Zeus, bench: Bench, n: int) -> float:
    """`n` dispatches at once, until the last summary, in seconds."""
    began = time.perf_counter()
    handles = [zeus.dispatch(bench.brief()) for _ in range(n)]
    summaries = [h.result(timeout=300) for h in handles]
    took = time.perf_counter() - began
    if bad := [s for s in summaries if s.status is not Status.completed]:
        raise RuntimeError(f"{bench.name}: {len(bad)} of {n} turns under Zeus did not "
                           f"complete ({bad[0].status}: {bad[0].error})")
    return took


def _alone(bench: Bench, n: int = 1) -> float:
    """`n` runs of the argv alone started together, until the last exits, in seconds."""
    began = time.perf_counter()
    procs = [bench.alone() for _ in range(n)]
    outs = [p.communicate(timeout=300) for p in procs]
    took = time.perf_counter() - began
    if bad := [(p, err) for p, (_, err) in zip(procs, outs, strict=True) if p.returncode]:
        raise RuntimeError(f"{bench.name} alone exited {bad[0][0].returncode}: "
                           f"{bad[0][1].decode(errors='replace')[-500:]}")
    return took


def _alternate(rounds: int, zeus_side: Callable[[], float],
               alone_side: Callable[[], float]) -> tuple[list[float], list[float]]:
    """Each side once per round, each first in turn."""
    z, a = [], []
    for i in range(rounds):
        if i % 2 == 0:
            z.append(zeus_side())
            a.append(alone_side())
        else:
            a.append(alone_side())
            z.append(zeus_side())
    return z, a


def _spread(xs: list[float]) -> str:
    return f"{min(xs):.2f}-{max(xs):.2f} s"


# -- the figures --------------------------------------------------------------------------
def measure(bench: Bench, rounds: int, at_once: int) -> list[Row]:
    rows = []
    with bench.start(at_once=at_once) as zeus:
        _turn(zeus, bench)
        _turn(zeus, bench)
        _alone(bench)  # the page cache and the CLI's own caches, as warm as Zeus's
        z, a = _alternate(rounds, lambda: _turn(zeus, bench), lambda: _alone(bench))
        rows.append(Row(
            f"{bench.name} {bench.setup.version}: one warm turn", statistics.median(z),
            statistics.median(a), "s", "the same argv alone (subprocess.run)",
            target="ratio<=1.1",
            note=f"medians of {rounds}: Zeus {_spread(z)}, alone {_spread(a)}"))
        z_n, a_n = _alternate(rounds, lambda: _turns(zeus, bench, at_once),
                              lambda: _alone(bench, at_once))
        rows.append(Row(
            f"{bench.name}: {at_once} turns at once", statistics.median(z_n),
            statistics.median(a_n), "s", f"{at_once} of the same argv started together",
            target="ratio<=1.15",
            note=f"medians of {rounds}: Zeus {_spread(z_n)}, alone {_spread(a_n)}"))
    firsts = []
    for _ in range(rounds):
        with bench.start() as zeus:
            firsts.append(_turn(zeus, bench))
    over = statistics.median(firsts) - statistics.median(a)
    rows.append(Row(
        f"{bench.name}: the first dispatch after Zeus.start, over the CLI alone", over, None,
        "s", target="value<=0.3",
        note=f"first dispatches {_spread(firsts)} (median {statistics.median(firsts):.2f} s) "
             f"against the warm runs alone (median {statistics.median(a):.2f} s)"))
    return rows


@contextlib.contextmanager
def _profiled() -> Iterator[list[cProfile.Profile]]:
    """Profiles of this thread and of every thread started meanwhile (each its own)."""
    profiles = [cProfile.Profile()]
    lock = threading.Lock()

    def start_thread(_frame: Any, _event: str, _arg: Any) -> None:  # the new thread's
        own = cProfile.Profile()
        with lock:
            profiles.append(own)
        own.enable()  # (replaces this hook)

    threading.setprofile(start_thread)
    profiles[0].enable()
    try:
        yield profiles
    finally:
        profiles[0].disable()
        threading.setprofile(None)  # type: ignore[arg-type]


def profile(bench: Bench) -> str:
    """Own time by function, over every thread, of a Zeus that runs two warm turns of
    `bench`'s CLI (Zeus stopped, so every thread's profile is whole)."""
    out = io.StringIO()
    with _profiled() as profiles, bench.start() as zeus:
        _turn(zeus, bench)
        took = _turn(zeus, bench)
    stats = pstats.Stats(profiles[0], stream=out)
    for own in profiles[1:]:
        with contextlib.suppress(TypeError):  # a thread that never ran a call
            stats.add(own)
    stats.sort_stats("tottime").print_stats(15)
    return f"{bench.name}: the second turn took {took:.2f} s\n" + out.getvalue()


# -- the run ------------------------------------------------------------------------------
def _inside(args: argparse.Namespace) -> None:
    clis, _server, netns = _harness()
    netns.check_isolated()
    rows: list[Row] = []
    profiles = []
    with tempfile.TemporaryDirectory(prefix="zeus-real-clis-") as tmp:
        for name in args.cli or clis.CLIS:
            bench = Bench(name, Path(tmp))
            try:
                rows += measure(bench, args.rounds, args.at_once)
                if args.profile:
                    profiles.append(profile(bench))
            finally:
                bench.close()
    report("real_clis", rows)
    for text in profiles:
        print(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks real_clis")
    parser.add_argument("--quick", action="store_true", help="fewer rounds, 4 at once")
    parser.add_argument("--cli", action="append", help="only this CLI (repeatable)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--at-once", type=int, default=None)
    parser.add_argument("--profile", action="store_true")
    raw = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(raw)
    args.rounds = args.rounds or (3 if args.quick else 5)
    args.at_once = args.at_once or (4 if args.quick else 16)
    _clis, _server, netns = _harness()
    if netns.in_namespace():
        _inside(args)
        return
    if reason := _clis.why_not("the benchmark"):
        print(f"real agent CLIs: not measured: {reason}")
        return
    # Again, inside a network namespace with only loopback: nothing reaches the network.
    subprocess.run(netns.command([sys.executable, "-m", "benchmarks.bench_real_clis", *raw]),
                   cwd=ROOT, env=netns.environment(), check=True)


if __name__ == "__main__":
    main()
