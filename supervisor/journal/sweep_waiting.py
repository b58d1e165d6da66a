"""Sweeping the workers that wait to be picked up by the next Zeus of a store
(docs/design.md, "Reattach"): `zeus sweep STORE` stops them, since nobody supervises
them, and says which it stopped. A waiting worker is found by its socket beside the
store and answers only to the store's key; told to stop, it stops its job with the
kill ladder (its process group and what left it) and exits.
"""

from __future__ import annotations

import time
from pathlib import Path

from actors.backends.process.reattach import existing_place, find_waiting
from actors.osproc import process_running
from supervisor.journal.sweep import SweepAction, SweepResult, SweepTarget

__all__ = ["sweep_waiting"]

WAITING = "waited to be picked up by the next Zeus"
# How long a worker told to stop may take: its job's ladder (term_s) and its exit.
_STOP_WAIT_S = 10.0


def sweep_waiting(store_path: str | Path, *, dry_run: bool = False) -> list[SweepResult]:
    """Stop every worker waiting for the store's next Zeus (with `dry_run`, only say)."""
    place = existing_place(store_path)
    if place is None:
        return []
    results = []
    for w in find_waiting(place):
        target = SweepTarget(
            pid=w.pid, pid_start_time=w.start_time,
            attempt_ids=(w.attempt_id,) if w.attempt_id else (),
            delegation_id=w.attempt_id.rpartition("-a")[0] if w.attempt_id else "",
            agent=w.agent, run=0, death_confirmed=False,
        )
        if dry_run:
            w.close()
            results.append(SweepResult(target, SweepAction.would_stop, WAITING))
            continue
        w.stop()
        give_up = time.monotonic() + _STOP_WAIT_S
        while process_running(w.pid, w.start_time) and time.monotonic() < give_up:
            time.sleep(0.01)  # a CLI command waiting for a process to end
        if process_running(w.pid, w.start_time):
            results.append(SweepResult(target, SweepAction.failed,
                                       f"{WAITING}; told to stop, it still runs"))
        else:
            results.append(SweepResult(target, SweepAction.stopped,
                                       f"{WAITING}; stopped with its job"))
    return results
