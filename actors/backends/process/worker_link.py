"""`Link`: where a worker's reports go and its jobs come from (runs in the worker process).

First the supervisor's pipes. When they are gone (the end of the jobs or control
pipe closed, or writing to the pipe back failed) and the last job carried `orphan`,
a worker that runs or ran an attempt (its last `Finished` is kept until the next job
comes, since a supervisor that died may not have read it), or holds a session, waits
to be picked up
(docs/design.md, "Reattach"): its work goes on, what it sends is held
(`worker_wait.Held`), and a waiting thread listens on its socket
(`worker_wait.Listener`) until a supervisor attaches or the grace is over. A
supervisor that attaches is sent what was held, then the attempt's unanswered
delegation requests, then `CAUGHT_UP_FRAME`; from then on reports go to its socket,
and the waiting thread reads that socket: jobs for the main thread (queued), the
rest for the worker (`on_control`). The same again if that supervisor dies. Without
`orphan`, or with nothing to wait for, the worker stops at once, as it always has.
Whether it waits or not, it stops when its host's lease runs out (`stop_for_lease`,
`actors.backends.process.worker_lease`).

Its charges are kept until the next job comes, while the last job carried `orphan`
(docs/design.md, "Spend is a fact, not a decision"): a supervisor that dies may have
read them and not committed them. A supervisor that attaches is sent them again before
what was held, and the held file keeps them too; a host counts only those above what its
store committed of the attempt (`charged_progress`), so none is counted twice.

`lock` is the worker's send lock: every frame goes under it, and the link changes
under it, so no report is lost or overtakes another when the link changes. The
worker's state lock may be taken with it held, never the other way round. While a
supervisor lives, a report costs what it always did: one write, no lock or thread
more.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from typing import NoReturn, Protocol

from actors import wire as _wire
from actors.backends import frames
from actors.backends.jobs import Orphan
from actors.backends.process.left_behind import keep_held
from actors.backends.process.worker_wait import (
    Attached,
    Held,
    Listener,
    set_timeouts,
    stop_all,
    stop_now,
)
from actors.osproc import process_start_time

__all__ = ["CATCH_UP_SEND_S", "Holder", "Link"]

# The most the held frames may take to be sent: a connector that stops reading (alive,
# but stuck) must not hold the send lock for good, with no grace running.
CATCH_UP_SEND_S = 5.0
_KEEP_WAIT_S = 0.5  # stopping for its lease: the most it waits to write what it held


class Holder(Protocol):
    """What a `Link` asks of the worker it serves."""

    def holding(self) -> tuple[str | None, str | None]:
        """The attempt it runs (None: idle) and the session it holds (None: none)."""

    def unanswered(self) -> list[bytes]:
        """The running attempt's unanswered delegation requests' frames, in their order."""

    def on_control(self, data: bytes) -> None:
        """A cancel, mail or reply from the attached supervisor (the waiting thread)."""

    def on_stop(self) -> None:
        """It is about to be stopped: ask the running attempt to stop."""

    def lease_path(self) -> str | None:
        """The lease file it reads, if its host holds a lease (for the hello)."""


class Link:
    """The worker's link to its supervisor, whichever it is (see the module)."""

    def __init__(self, jobs_fd: int, out_fd: int, worker: Holder) -> None:
        self.lock = threading.Lock()
        self._jobs = _wire.FrameReader(jobs_fd)
        self._worker = worker
        self._pid = os.getpid()
        # Set by the main thread from each job: how to wait if the supervisor goes.
        self.orphan: Orphan | None = None
        self.agent = ""
        # Under the lock: which link (0: the pipes, then each socket attached on), where
        # frames go while it lives, and what is held while none is attached. Jobs come
        # through `_queued` once the pipes are gone (an int in it: that link was lost
        # while the worker was idle, and the main thread decides).
        self._number = 0
        self._out_fd = out_fd
        self._held: Held | None = None
        self._queued: queue.SimpleQueue[bytes | int] | None = None
        self._listener: Listener | None = None  # while it waits: the socket it listens on
        # The last attempt's `Finished`, sent on a link that may have died before its
        # supervisor read it; None once a job came after it (it was read: jobs follow it).
        self._last: tuple[str, bytes] | None = None
        # The charges sent since the last job came (their frames), kept while the job
        # carries `orphan`: sent again to whoever attaches (see the module). Appended
        # under the lock; the main thread starts a new list for each job.
        self._charges: list[bytes] = []
        # Set under the lock once the worker stops because its supervisor is gone and
        # nothing waits: no job is taken from then on (`takes_job`).
        self._stopping = False

    # -- the main thread -------------------------------------------------------------
    def takes_job(self, orphan: Orphan | None, agent: str) -> bool:
        """As a job begins, before it reports anything: how to wait if the supervisor
        goes. False once the worker is stopping, its supervisor gone with nothing to wait
        for: a job still in its pipe then is never run (run, it would charge with nobody
        to tell, and its charges would die with the worker)."""
        with self.lock:
            if self._stopping:
                return False
            self.orphan, self.agent = orphan, agent
            return True

    def next_jobs(self) -> list[bytes]:
        """The next frames for the main thread (jobs, stop); blocks until there are. Ends
        the worker when the supervisor is gone and there is nothing to wait for."""
        while True:
            queued = self._queued
            if queued is None:
                try:
                    messages = self._jobs.read()
                except OSError:
                    messages = None
                if messages is not None:
                    self._last, self._charges = None, []
                    return messages
                number = 0
            else:
                item = queued.get()
                if not isinstance(item, int):
                    self._last, self._charges = None, []
                    return [item]
                number = item
            with self.lock:
                waits = self._lose(number)
                self._stopping = not waits
            if not waits:
                stop_now()

    # -- any thread, with `lock` held ------------------------------------------------
    def send(self, data: bytes, beat: bool = False, charge: bool = False) -> None:
        """Send a report (`beat`: a liveness beat, which the next one may replace while held;
        `charge`: a charge, kept once sent)."""
        held = self._held
        if held is None:
            try:
                _wire.write_frame(self._out_fd, data)
            except OSError:  # the supervisor is gone: held, or (nothing waits) the worker ends
                self._lose(self._number, data, beat, charge)
                return
            if charge and self.orphan is not None:
                self._charges.append(data)
            return
        held.keep(data, beat, charge)

    def send_request(self, data: bytes) -> None:
        """Send a delegation request: never held (a supervisor that attaches is sent the
        attempt's unanswered ones, `Holder.unanswered`)."""
        if self._held is None:
            try:
                _wire.write_frame(self._out_fd, data)
            except OSError:
                self._lose(self._number)

    def finished(self, attempt_id: str, data: bytes) -> None:
        """The attempt's `Finished` (`data`) was just sent: if it is held, the worker waits
        with it. If it was written to the pipe, it is kept until the next job comes: the
        supervisor may die before it reads it, and the worker then waits with it too."""
        if self._held is not None:
            self._held.finished = attempt_id
        else:
            self._last = (attempt_id, data)

    # -- the receiver thread ---------------------------------------------------------
    def pipes_gone(self) -> None:
        """The control pipe's end closed: without `orphan`, the worker ends at once (its
        main thread may be busy); else the waiting thread or the main thread goes on."""
        with self.lock:
            stops = not self._lose(0) and self.orphan is None
            self._stopping = stops
        if stops:
            stop_now()

    # -- losing a supervisor, and waiting for the next -------------------------------
    def _lose(self, number: int, data: bytes | None = None, beat: bool = False,
              charge: bool = False) -> bool:
        """The supervisor of link `number` is gone: whether the worker waits to be picked
        up (from now on, or already; or that link was replaced). `data`: what could not
        be sent, held. False: nothing to wait for (no `orphan`; or idle, with no session
        and nothing held). Called with the lock held."""
        if number != self._number or self._held is not None:
            return True
        orphan = self.orphan
        if orphan is None:
            return False
        attempt_id, session = self._worker.holding()
        last = self._last if attempt_id is None else None
        if attempt_id is None and data is None and session is None and last is None:
            return False
        held = self._held = Held()
        if last is not None:  # its supervisor may never have read it: sent again on attach
            held.keep(last[1])
            held.finished = last[0]
            self._last = None
        if data is not None:
            held.keep(data, beat, charge)
        if self._queued is None:
            self._queued = queue.SimpleQueue()
        deadline = time.monotonic() + orphan[0]
        threading.Thread(target=self._wait, args=(orphan, deadline), name="zeus-child-waiting",
                         daemon=True).start()  # fmt: skip
        return True

    def _wait(self, orphan: Orphan, deadline: float) -> None:
        """The waiting thread: listen until a supervisor attaches (then read its socket),
        or until the grace is over or a connector says stop (then stop everything)."""
        _, directory, key, term_s = orphan
        try:
            listener = self._listener = Listener(directory, key, self._pid)
        except OSError:
            self._stop(term_s)  # nobody could find it: it would wait for nothing
        while True:
            attached = listener.next_owner(deadline, self._hello)
            if attached is None or attached.stop:
                listener.close()
                self._stop(term_s)
            number = self._attach(attached)
            if number is not None:
                break
            attached.sock.close()  # it went away while it was sent what was held
        listener.close()
        self._listener = None
        self._read(attached, number)

    def _hello(self) -> bytes:
        with self.lock:
            attempt_id, session = self._worker.holding()
            held = self._held
            finished = attempt_id is None and held is not None and held.finished is not None
            if finished:
                assert held is not None
                attempt_id = held.finished
        pid = self._pid
        return frames.hello_frame(
            frames.Hello(pid, process_start_time(pid), self.agent, attempt_id, finished, session,
                         self._worker.lease_path())
        )

    def _attach(self, attached: Attached) -> int | None:
        """Send the charges sent before, what was held, the attempt's unanswered requests,
        then `CAUGHT_UP_FRAME`, and go live on the socket; None if it could not all be sent
        (it is held still)."""
        fd = attached.sock.fileno()
        set_timeouts(attached.sock, CATCH_UP_SEND_S)
        with self.lock:
            held = self._held
            assert held is not None
            try:
                for data in (*self._charges, *held.frames):
                    _wire.write_frame(fd, data)
                for data in self._worker.unanswered():
                    _wire.write_frame(fd, data)
                _wire.write_frame(fd, frames.CAUGHT_UP_FRAME)
                set_timeouts(attached.sock, 0.0)  # live: blocking, as the pipes were
            except OSError:
                return None
            self._held, self._out_fd = None, fd
            self._charges.extend(held.charges)  # sent now, and not yet committed either
            self._number += 1
            return self._number

    def _read(self, attached: Attached, number: int) -> None:
        """What the attached supervisor sends: jobs for the main thread, the rest for the
        worker; until it is gone."""
        queued = self._queued
        assert queued is not None
        while True:
            try:
                messages = attached.reader.read()
            except OSError:
                messages = None
            if messages is None:
                break
            for data in messages:
                if frames.is_job(data):
                    queued.put(data)
                else:
                    self._worker.on_control(data)
        with self.lock:
            waits = self._lose(number)
        if waits:
            attached.sock.close()  # nothing writes to it any more: what is sent is held
        else:
            queued.put(number)  # idle: the main thread ends the worker

    def _stop(self, term_s: float) -> NoReturn:
        self._worker.on_stop()
        stop_all(term_s, keep=self._keep_held)

    def stop_for_lease(self, term_s: float) -> NoReturn:
        """Its host's lease ran out (the backstop thread): the kill ladder on the worker, as
        at the end of the grace, and what it held kept if it waits to be picked up. It waits
        on no lock for long: a thread may be stuck writing to a host that stopped reading."""
        listener = self._listener
        if listener is not None:
            listener.hide()  # nobody attaches it any more
        waiting = self._held is not None  # one read: it decides only what is written
        self._worker.on_stop()
        stop_all(term_s, keep=(lambda: self._keep_held(_KEEP_WAIT_S)) if waiting else None)

    def _keep_held(self, wait_s: float = -1) -> None:
        """What it held, written for the next Zeus before it exits: it takes nothing with
        it (the waiting thread, or the backstop thread, once everything below the worker
        is killed). `wait_s`: the most it waits for the lock (-1: as long as it takes)."""
        orphan = self.orphan
        if not self.lock.acquire(timeout=wait_s):
            return
        try:
            held = self._held
            attempt_id, _ = self._worker.holding()
            if held is None or orphan is None:
                return
            attempt_id = attempt_id or held.finished
            data = [*self._charges, *held.frames]
        finally:
            self.lock.release()
        if attempt_id is not None:
            keep_held(orphan[1], attempt_id, data)
