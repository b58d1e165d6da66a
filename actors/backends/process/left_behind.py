"""What a worker leaves in its store's children directory for the next Zeus (docs/design.md,
"Reattach"): the mark of the job it runs, and what it held when its grace ran out.

The mark: no attempt's code runs before it can be found.

`<pid>.job` holds the attempt the worker `pid` runs (or ran last), its start time and
process group, written whole (a temporary file renamed over it) before the job's work
starts. A cold start sends the job before the supervisor has committed the worker's
pid, so a supervisor that dies in that window leaves an attempt the store knows by id
alone: its mark is where recovery finds the process, to pick it up, or to stop it and
see it exit before anything runs again. A mark whose process is gone is stale: the
reader removes it.

What it held: a worker whose grace ran out with no Zeus back runs the kill ladder and
exits, but takes nothing with it. Before it exits it writes the reports it held for the
next Zeus (its charges, partial results, and its `Finished` if the job ended) to
`<pid>.held`, owner-only, as the frames it would have sent; the next Zeus adopts them
whenever it comes (`read_held`), and `LeftChild` replays them as the attempt's reports.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass

from actors.backends import frames as _frames
from actors.backends.base import ChildHandle
from actors.models import AttemptOutcome
from actors.osproc import process_running, process_start_time
from actors.protocol import Finished

__all__ = ["Held", "JobMark", "LeftChild", "keep_held", "leave_mark", "read_held", "read_marks"]

_SUFFIX = ".job"
_HELD = ".held"
_LENGTH = struct.Struct("!I")


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
    _write_whole(os.path.join(directory, f"{pid}{_SUFFIX}"), body.encode())


def read_marks(directory: str) -> dict[str, JobMark]:
    """The marks of the workers that still run, by attempt id (recovery, Zeus's thread);
    stale ones are removed."""
    marks: dict[str, JobMark] = {}
    for path in _files(directory, _SUFFIX):
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


def keep_held(directory: str, attempt_id: str, held: list[bytes]) -> None:
    """Write what the worker held for `attempt_id` (its report frames, in order) where the
    next Zeus finds it (the worker, as its grace ends, before it kills itself)."""
    if not held:
        return
    pid = os.getpid()
    header = json.dumps({"attempt_id": attempt_id, "pid": pid,
                         "start_time": process_start_time(pid), "pgid": os.getpgrp()}).encode()
    _write_whole(os.path.join(directory, f"{pid}{_HELD}"),
                 b"".join(_LENGTH.pack(len(part)) + part for part in (header, *held)),
                 sync=True)


def _files(directory: str, suffix: str) -> list[str]:
    """The paths of the files in `directory` whose names end with `suffix` (none if it
    cannot be read)."""
    try:
        return [os.path.join(directory, name) for name in os.listdir(directory)
                if name.endswith(suffix)]
    except OSError:
        return []


def _write_whole(path: str, data: bytes, *, sync: bool = False) -> None:
    """`data` at `path`, owner-only, whole or not at all (a temporary file renamed over
    it); a directory that cannot be written is passed over."""
    temporary = f"{path}.tmp"
    with contextlib.suppress(OSError):
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)


@dataclass(frozen=True, slots=True)
class Held:
    """What a worker that is gone left for its attempt: the path of its file (to remove once
    adopted) and its report frames, in order. `finished`: its `Finished` is among them.
    `mark`: the worker that left it (None in a file of an older Zeus)."""

    path: str
    frames: tuple[bytes, ...]
    mark: JobMark | None = None

    @property
    def finished(self) -> bool:
        """Whether its job ended by itself, or as the last Zeus had asked (a `Finished`
        that is not the cancel of the grace's own end, which says nothing of the work)."""
        for data in self.frames:
            message = _frames.read_report(data)
            if isinstance(message, Finished) and (
                    message.outcome is not AttemptOutcome.cancelled
                    or message.stop_cause is not None):
                return True
        return False

    def messages(self) -> list[object]:
        """Its reports, as the child's messages (a delegation request is not one: the
        attempt's code no longer runs to wait for an answer)."""
        found: list[object] = []
        for data in self.frames:
            message = _frames.read_report(data)
            if not isinstance(message, _frames.Delegate | _frames.PlacedAt):
                found.append(message)
        return found


def read_held(directory: str) -> dict[str, Held]:
    """What the workers that are gone left, by attempt id (recovery, Zeus's thread); a torn
    file is passed over."""
    found: dict[str, Held] = {}
    for path in _files(directory, _HELD):
        try:
            with open(path, "rb") as file:
                data = file.read()
            parts: list[bytes] = []
            at = 0
            while at < len(data):
                (size,) = _LENGTH.unpack_from(data, at)
                at += _LENGTH.size
                if at + size > len(data):
                    raise ValueError("torn")
                parts.append(data[at:at + size])
                at += size
            header = json.loads(parts[0])
            attempt_id = str(header["attempt_id"])
            mark = None if header.get("start_time") is None else JobMark(
                attempt_id, int(header["pid"]), float(header["start_time"]),
                None if header.get("pgid") is None else int(header["pgid"]))
            found[attempt_id] = Held(path, tuple(parts[1:]), mark)
        except (OSError, ValueError, KeyError, IndexError, struct.error, TypeError):
            continue
    return found


class LeftChild(ChildHandle):
    """The attempt of a worker that is gone, as far as what it left: `replay` puts its
    reports in Zeus's mailbox (the attempt's `Finished` among them), and there is nothing
    left to stop."""

    def __init__(self, held: Held) -> None:
        self._held = held

    @property
    def pid(self) -> int | None:
        return None

    @property
    def killable(self) -> bool:
        return True  # it is gone: nothing is left that could run on

    def cancel(self) -> None:
        return None

    def kill(self) -> None:
        return None  # its `Finished` is in the mailbox already

    def replay(self, send: Callable[[object], None]) -> LeftChild:
        for message in self._held.messages():
            send(message)
        return self
