"""A worker whose supervisor dies just as its job begins, found by three hosts SIGKILLed
and restarted under load (tests/test_hosts_workload.py), where a fresh worker's first
charges were lost, about one in a few hundred:

- its link (`actors.backends.process.worker_link.Link`, in this process, its stops
  recorded instead of carried out): whichever of its two threads comes first, a job is
  either run with somewhere to wait, or never run. Run with nowhere to wait, it charged
  for a worker that was already ending, and the charge died with it;
- what it left once its host's lease stopped it, before its pid reached the store, is
  found by the attempt's id (`WorkerSearch.find`): before, recovery took it for a job
  that never started, and its charges were never counted."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import Usage
from actors.backends import StoredChild, frames
from actors.backends.process import worker_link
from actors.backends.process.found import LeftWorker, WorkerSearch
from actors.backends.process.reattach import ReattachPlace
from actors.backends.process.worker_link import Link
from actors.protocol import Charge


class Stopped(Exception):
    """What `stop_now` would have done: end the worker."""


class Worker:
    """The worker a link serves: it runs `attempt` once its main thread took the job."""

    def __init__(self) -> None:
        self.attempt: str | None = None

    def holding(self) -> tuple[str | None, str | None]:
        return self.attempt, None

    def unanswered(self) -> list[bytes]:
        return []

    def on_control(self, data: bytes) -> None:
        del data

    def on_stop(self) -> None:
        pass

    def lease_path(self) -> str | None:
        return None


@pytest.fixture
def link(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Link, Worker, list[Any]]]:
    stops: list[Any] = []

    def stop_now() -> None:
        stops.append("stop_now")
        raise Stopped

    monkeypatch.setattr(worker_link, "stop_now", stop_now)
    # The waiting thread's work is not this test's: that it would start is enough.
    monkeypatch.setattr(Link, "_wait", lambda self, orphan, deadline: stops.append("waits"))
    jobs_r, jobs_w = os.pipe()
    out_r, out_w = os.pipe()
    worker = Worker()
    yield Link(jobs_r, out_w, worker), worker, stops
    for fd in (jobs_r, jobs_w, out_r, out_w):
        os.close(fd)


def orphan(tmp_path: Path) -> Any:
    return (30.0, str(tmp_path), b"key", 0.5)


def test_a_job_taken_after_the_worker_chose_to_stop_is_never_run(
    link: tuple[Link, Worker, list[Any]], tmp_path: Path
) -> None:
    """The supervisor's pipes close first, with no job taken: nothing to wait for."""
    link_, worker, stops = link
    with pytest.raises(Stopped):
        link_.pipes_gone()
    worker.attempt = "d-1-a1"  # the main thread reads the job that was in the pipe
    assert link_.takes_job(orphan(tmp_path), "apollo") is False
    assert link_.orphan is None and stops == ["stop_now"]


def test_a_job_taken_first_waits_to_be_picked_up_when_the_pipes_close(
    link: tuple[Link, Worker, list[Any]], tmp_path: Path
) -> None:
    """The main thread takes the job first: the pipes closing then find it to wait with."""
    link_, worker, stops = link
    worker.attempt = "d-1-a1"
    assert link_.takes_job(orphan(tmp_path), "apollo") is True
    link_.pipes_gone()
    assert stops == ["waits"]


def test_without_a_store_a_job_taken_first_still_ends_with_its_supervisor(
    link: tuple[Link, Worker, list[Any]]
) -> None:
    """No `orphan` (no store): nothing ever waits, as before."""
    link_, worker, stops = link
    worker.attempt = "d-1-a1"
    assert link_.takes_job(None, "apollo") is True
    with pytest.raises(Stopped):
        link_.pipes_gone()
    assert stops == ["stop_now"]


def test_what_a_worker_left_before_its_pid_was_stored_is_found_by_its_attempt(
    tmp_path: Path
) -> None:
    directory = tmp_path / "children"
    directory.mkdir(mode=0o700)
    charge = frames.report_frame(Charge("d-1-a1", 3, Usage(calls=1, cost=0.01)))
    leaver = subprocess.run(  # a worker that stopped for its lease: it wrote, then exited
        [sys.executable, "-c", "import os, sys\n"
         "from actors.backends.process.left_behind import keep_held\n"
         "keep_held(sys.argv[1], 'd-1-a1', [bytes.fromhex(sys.argv[2])])\n"
         "print(os.getpid())", str(directory), charge.hex()],
        capture_output=True, text=True, check=True)
    place = ReattachPlace(str(directory), b"k" * 32, 30.0)
    found = WorkerSearch(place).find([StoredChild("d-1-a1", "apollo", None, None)])
    assert found.named["d-1-a1"].pid == int(leaver.stdout)
    left = found.waiting["d-1-a1"]
    assert isinstance(left, LeftWorker) and left.pid == int(leaver.stdout)
    (told,) = left.left()
    assert isinstance(told, Charge) and (told.progress, told.usage.calls) == (3, 1)
