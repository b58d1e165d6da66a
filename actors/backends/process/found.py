"""The process backend after a crash (docs/design.md, "Reattach"): the workers of a store
that outlived their Zeus, found for the next one (`ProcessBackend.find_waiting`), and
those nobody picks up stopped (`stop_left`). Runs in Zeus's thread, inside recovery,
before anything is confirmed gone or run again.

A worker is found by its socket in the store's children directory (`find_waiting` of
`actors.backends.process.reattach`), or, when it has just seen its Zeus die and does not listen
yet, by its pid (`wait_for_listener`). One whose pid the store never got is named first
by the mark it left before it ran its job (`read_marks`). One whose grace ran out is
gone, and what it held is in its file (`read_held`): a `LeftWorker`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
from collections.abc import Sequence

from actors.backends.base import Found, StoredChild, WaitingChild
from actors.backends.process.left_behind import Held, read_held, read_marks
from actors.backends.process.reattach import ReattachPlace, Waiting, find_waiting, wait_for_listener
from actors.osproc import process_running

__all__ = ["LISTEN_WAIT_S", "STOP_WAIT_S", "LeftWorker", "WorkerSearch"]

# A child that still runs but whose socket is not there yet has just seen its Zeus go
# (the last one died a moment ago): how long recovery waits for it to listen.
LISTEN_WAIT_S = 2.0
# How long a worker told to stop has to run its kill ladder and exit before recovery
# kills it (its term_s, and more).
STOP_WAIT_S = 10.0


class LeftWorker(WaitingChild):
    """A worker whose grace ran out before this Zeus came: gone, and what it held left in
    its file (removed by `release` once recovery committed it)."""

    gone = True

    def __init__(self, held: Held, child: StoredChild) -> None:
        self.held = held
        self.agent = child.agent
        self.attempt_id = child.attempt_id
        self.pid = child.pid
        self.finished = held.finished
        self.session_key = None

    def left(self) -> list[object]:
        return self.held.messages()

    def release(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.held.path)


class WorkerSearch:
    """The process backend's search for its waiting workers; it remembers what it found
    until `stop_left` stops whatever was not picked up (`picked`)."""

    def __init__(self, place: ReattachPlace | None) -> None:
        self._place = place
        self._found: dict[int, Waiting] = {}  # by pid: found, neither picked up nor stopped

    def find(self, children: Sequence[StoredChild]) -> Found:
        """The workers of `children` (open attempts of the store) that waited, the idle
        ones, and those that are gone but left what they held."""
        place = self._place
        if place is None:
            return Found()
        found = Found(searched=True)
        held: dict[str, Held] | None = None
        if any(c.pid is None for c in children):
            # Its pid never reached the store: the worker's mark names it while it runs,
            # and what it left once it is gone (it stopped itself for its host's lease).
            marks = read_marks(place.directory)  # once: each worker that still runs
            for c in children:
                mark = marks.get(c.attempt_id) if c.pid is None else None
                if mark is None and c.pid is None:
                    held = read_held(place.directory) if held is None else held
                    left = held.get(c.attempt_id)
                    mark = left.mark if left is not None else None
                if mark is not None:
                    found.named[c.attempt_id] = dataclasses.replace(
                        c, pid=mark.pid, pid_start_time=mark.start_time, pgid=mark.pgid)
        everyone = find_waiting(place)
        self._found.update((w.pid, w) for w in everyone)
        waiting = {w.attempt_id: w for w in everyone if w.attempt_id is not None}
        for c in children:
            c = found.named.get(c.attempt_id, c)
            if c.pid is None:
                continue  # never started its job: nothing of it can wait
            w = waiting.pop(c.attempt_id, None)
            if w is None and process_running(c.pid, c.pid_start_time):
                w = wait_for_listener(place, c.pid, c.pid_start_time, timeout_s=LISTEN_WAIT_S)
                if w is not None:
                    self._found[w.pid] = w
            if w is None:
                if held is None:
                    held = read_held(place.directory)
                left = held.get(c.attempt_id)
                if left is not None:
                    found.waiting[c.attempt_id] = LeftWorker(left, c)
                continue  # else confirmed gone (or killed) by recovery, then lost
            if w.pid != c.pid or w.attempt_id != c.attempt_id:
                continue  # not the process the store names: never supervised as it
            found.waiting[c.attempt_id] = w
        # Attempts the store does not hold open: a worker that finished one whose end the
        # last Zeus had committed is idle, like those that ran none.
        found.idle = [w for w in everyone if w.attempt_id is None]
        found.idle += [w for w in waiting.values() if w.finished]
        return found

    def picked(self, waiting: Waiting) -> None:
        """`waiting` was handed to the backend (attached, or closed when it could not be)."""
        self._found.pop(waiting.pid, None)

    def stop_left(self) -> None:
        """Tell each worker found and not picked up to stop (it runs the kill ladder on its
        job and itself), and wait until each has exited: nothing runs again beside a job
        that is still stopping. One still there after `STOP_WAIT_S` is killed with its
        process group."""
        workers, self._found = list(self._found.values()), {}
        for w in workers:
            w.stop()
        left = [w for w in workers if process_running(w.pid, w.start_time) is not False]
        give_up = time.monotonic() + STOP_WAIT_S
        while left and time.monotonic() < give_up:
            time.sleep(0.01)  # Zeus's thread, inside recovery: nothing else runs yet
            left = [w for w in left if process_running(w.pid, w.start_time) is not False]
        for w in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(w.pid, signal.SIGKILL)  # a worker leads its own process group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(w.pid, signal.SIGKILL)
