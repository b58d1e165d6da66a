"""The mark a worker leaves in its store's children directory before it runs a job
(docs/design.md, "Reattach": no attempt's code runs before it can be found).

`<pid>.job` holds the attempt the worker `pid` runs (or ran last), its start time and
process group, written whole (a temporary file renamed over it) before the job's work
starts. A cold start sends the job before the supervisor has committed the worker's
pid, so a supervisor that dies in that window leaves an attempt the store knows by id
alone: its mark is where recovery finds the process, to pick it up, or to stop it and
see it exit before anything runs again. A mark whose process is gone is stale: the
reader removes it.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass

from actors.osproc import process_running, process_start_time

__all__ = ["JobMark", "leave_mark", "read_marks"]

_SUFFIX = ".job"


@dataclass(frozen=True, slots=True)
class JobMark:
    attempt_id: str
    pid: int
    start_time: float | None
    pgid: int | None


def leave_mark(directory: str, attempt_id: str) -> None:
    """Say, before the job runs, that this process runs `attempt_id` (the worker's main
    thread). A directory that cannot be written is passed over: the pid's commit still
    names the worker, as before marks."""
    pid = os.getpid()
    body = json.dumps({"attempt_id": attempt_id, "pid": pid,
                       "start_time": process_start_time(pid), "pgid": os.getpgrp()})
    path = os.path.join(directory, f"{pid}{_SUFFIX}")
    temporary = f"{path}.{os.getpid()}.tmp"
    with contextlib.suppress(OSError):
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, body.encode())
        finally:
            os.close(fd)
        os.replace(temporary, path)


def read_marks(directory: str) -> dict[str, JobMark]:
    """The marks of the workers that still run, by attempt id (recovery, Zeus's thread);
    stale ones are removed."""
    try:
        names = [name for name in os.listdir(directory) if name.endswith(_SUFFIX)]
    except OSError:
        return {}
    marks: dict[str, JobMark] = {}
    for name in names:
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8") as file:
                raw = json.load(file)
            mark = JobMark(str(raw["attempt_id"]), int(raw["pid"]),
                           None if raw.get("start_time") is None else float(raw["start_time"]),
                           None if raw.get("pgid") is None else int(raw["pgid"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # torn or foreign: not a mark to act on
        if process_running(mark.pid, mark.start_time) is False:
            with contextlib.suppress(OSError):
                os.unlink(path)
            continue
        marks[mark.attempt_id] = mark
    return marks
