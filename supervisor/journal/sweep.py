"""Sweeping the child processes a crashed supervisor left running.

`sweep` stops the child processes the journal says may still run, and only
those: a pid is signalled only while it is alive and its start time is the one
the journal recorded, so a reused pid is never hit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from actors.osproc import ProcessTree, read_stat
from supervisor.journal.replay import Journal
from supervisor.journal.runs import ReplayedAttempt, Run
from supervisor.journal.sweep_ray import RayProbe

__all__ = [
    "SweepAction",
    "SweepResult",
    "SweepTarget",
    "process_start_time",
    "sweep",
    "sweep_targets",
]


def process_start_time(pid: int) -> float | None:
    """When process `pid` started (epoch seconds), or None if it is not running.

    A zombie (dead, not yet reaped) counts as not running. Linux reads
    `/proc/<pid>/stat` (the reading the process backends record in the journal);
    elsewhere psutil, when installed. Raises `NotImplementedError` when neither
    is there.
    """
    if Path("/proc/self/stat").exists():
        stat = read_stat(pid)
        return None if stat is None or stat.dead else stat.start_time
    try:
        import psutil
    except ImportError:
        raise NotImplementedError(
            "cannot read process start times here (no /proc); `pip install psutil`"
        ) from None
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return float(process.create_time())
    except psutil.NoSuchProcess:
        return None


class SweepAction(StrEnum):
    """What `sweep` did with (or found about) one recorded child process."""

    stopped = "stopped"  # it ended after SIGTERM
    killed = "killed"  # it needed SIGKILL
    would_stop = "would stop"  # a dry run: alive, and the journal's process
    not_running = "not running"
    reused = "pid reused"  # alive, but another process: left alone
    unverifiable = "unverifiable"  # no start time to check against: left alone
    dead = "dead"  # the journal records its death (killed, crashed)
    protected = "protected"  # the supervisor, this process or its parent: never signalled
    supervisor_running = "supervisor running"  # its supervisor still runs: left to it
    failed = "failed"  # alive after SIGKILL, or not ours to signal
    ray_ended = "ended by Ray"  # a Ray child whose job Ray has ended (the driver died)


@dataclass(frozen=True)
class SweepTarget:
    """A child process the journal recorded: (pid, start time) names it uniquely."""

    pid: int
    pid_start_time: float | None
    attempt_ids: tuple[str, ...]
    delegation_id: str
    agent: str | None
    run: int
    death_confirmed: bool
    node: str | None = None  # a Ray child: its node, and the cluster and job to ask
    ray_address: str | None = None
    ray_job: str | None = None


@dataclass(frozen=True)
class SweepResult:
    target: SweepTarget
    action: SweepAction
    detail: str


def sweep_targets(journal: Journal) -> list[SweepTarget]:
    """Every child process any run started, one per (pid, start time), in journal order."""
    found: dict[tuple[int, float | None, int, str | None], list[ReplayedAttempt]] = {}
    for run in journal.runs:
        for a in run.attempts.values():
            if a.pid is not None:
                found.setdefault((a.pid, a.pid_start_time, run.index, a.node), []).append(a)
    latest: dict[tuple[int, float | None, str | None], int] = {}
    for pid, start, run_index, node in found:
        latest[(pid, start, node)] = max(run_index, latest.get((pid, start, node), run_index))
    return [
        SweepTarget(
            pid=pid,
            pid_start_time=start,
            attempt_ids=tuple(a.id for a in attempts),
            delegation_id=attempts[-1].delegation_id,
            agent=attempts[-1].agent,
            run=run_index,
            # The last attempt in that process decides: a warm session child lives on.
            death_confirmed=attempts[-1].death_confirmed,
            node=node,
            ray_address=attempts[-1].ray_address,
            ray_job=attempts[-1].ray_job,
        )
        for (pid, start, run_index, node), attempts in found.items()
        # A process a later run reattached is that run's to judge (docs/design.md, "Reattach").
        if latest[(pid, start, node)] == run_index
    ]


def _same(actual: float | None, recorded: float, tolerance_s: float) -> bool:
    return actual is not None and abs(actual - recorded) <= tolerance_s


def _supervisor_alive(run: Run, probe: Callable[[int], float | None], tolerance_s: float) -> bool:
    """The run's supervisor still runs: its pid is alive and started before the run began."""
    if run.stopped or run.zeus_pid is None or run.started_ts is None:
        return False
    try:
        started = probe(run.zeus_pid)
    except NotImplementedError:
        return False
    return started is not None and started <= run.started_ts + tolerance_s


def sweep(
    journal: Journal,
    *,
    dry_run: bool = False,
    grace_s: float = 1.0,
    tolerance_s: float = 1.0,
    probe: Callable[[int], float | None] = process_start_time,
    sleep: Callable[[float], None] = time.sleep,
    ray: RayProbe | None = None,
) -> list[SweepResult]:
    """Stop the recorded child processes that still run: SIGTERM to each one's process
    group, up to `grace_s` to end, then SIGKILL.

    A process is signalled only if it is alive and started within `tolerance_s`
    of the start time the journal recorded (so a reused pid is left alone), and
    never while the supervisor that wrote its run is still running. Every
    recorded process gets a result saying what was done and why. A Ray child is
    never signalled: `ray` asks its cluster whether Ray has ended it.
    """
    ray = ray or RayProbe()
    own = {0, 1, os.getpid(), os.getppid()}
    results = []
    live_runs = {r.index for r in journal.runs if _supervisor_alive(r, probe, tolerance_s)}
    zeus_pids = {r.zeus_pid for r in journal.runs}
    for target in sweep_targets(journal):

        def result(action: SweepAction, detail: str, t: SweepTarget = target) -> None:
            results.append(SweepResult(t, action, detail))

        recorded = target.pid_start_time
        if target.death_confirmed:
            result(SweepAction.dead, "the journal records that it was killed or crashed")
        elif target.node is None and (target.pid in own or target.pid in zeus_pids):
            result(SweepAction.protected, "a supervisor or this process; never signalled")
        elif target.run in live_runs:
            result(
                SweepAction.supervisor_running,
                "the supervisor of this run still runs; stop it instead (zeus.stop)",
            )
        elif target.node is not None:  # a Ray child: never signalled, Ray is asked
            action, detail = ray.verdict(target.node, target.ray_address, target.ray_job,
                                         dry_run)
            result(SweepAction(action), detail)
        elif recorded is None:
            result(
                SweepAction.unverifiable,
                "no start time recorded, so a reused pid cannot be ruled out; left alone",
            )
        else:
            try:
                actual = probe(target.pid)
            except NotImplementedError as exc:
                result(SweepAction.unverifiable, f"{exc}; left alone")
                continue
            if actual is None:
                result(SweepAction.not_running, "already gone")
            elif not _same(actual, recorded, tolerance_s):
                result(
                    SweepAction.reused,
                    f"pid {target.pid} now belongs to a process started at {actual:.2f}, "
                    f"not {recorded:.2f}; left alone",
                )
            elif dry_run:
                result(SweepAction.would_stop, "alive, and the journal's process")
            else:
                action, detail = _stop(target.pid, recorded, grace_s, tolerance_s, probe, sleep)
                result(action, detail)
    return results


def _signal(pid: int, sig: int, group: bool) -> None:
    if group:
        os.killpg(pid, sig)
    else:
        os.kill(pid, sig)


def _stop(
    pid: int,
    recorded: float,
    grace_s: float,
    tolerance_s: float,
    probe: Callable[[int], float | None],
    sleep: Callable[[float], None],
) -> tuple[SweepAction, str]:
    """SIGTERM, wait up to `grace_s`, SIGKILL; to the group when `pid` leads its own."""
    try:
        group = os.getpgid(pid) == pid and pid != os.getpgrp()
    except ProcessLookupError:
        return SweepAction.not_running, "gone before it was signalled"
    where = "process group" if group else "process"

    def gone(within: float) -> bool:
        deadline = time.monotonic() + within
        while True:
            if not _same(probe(pid), recorded, tolerance_s):
                return True
            if time.monotonic() >= deadline:
                return False
            sleep(0.02)

    # What runs below it, however it left its group (a child subreaper keeps the
    # daemons it orphaned): signalled first, while it lives and they are found below it.
    below = ProcessTree(pid)
    try:
        below.signal(signal.SIGTERM)
        _signal(pid, signal.SIGTERM, group)
        if gone(grace_s):
            action, detail = SweepAction.stopped, f"SIGTERM to its {where}"
        else:
            below.signal(signal.SIGKILL)
            _signal(pid, signal.SIGKILL, group)
            if not gone(2.0):
                return SweepAction.failed, f"still alive 2s after SIGKILL to its {where}"
            action, detail = SweepAction.killed, f"SIGKILL to its {where} (SIGTERM ignored)"
    except ProcessLookupError:
        return SweepAction.not_running, "gone before it was signalled"
    except PermissionError:
        return SweepAction.failed, "not permitted to signal it (another user's process?)"
    if group:
        # Descendants the leader left behind still hold its group id: end them too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    below.signal(signal.SIGKILL, root_alive=False)  # and those found below it, wherever now
    return action, detail
