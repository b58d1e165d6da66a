"""Thread children: each attempt runs its work function in a daemon thread of its own.

Threads are pooled: a thread whose attempt ended waits `idle_s` for the next
one before it exits, so a delegation does not pay for a thread start (about
a third of a no-op delegation's cost). One attempt per thread at a time; a
thread that never returns (fenced by Zeus) never goes back to the pool.
Thread-local state of agent code may outlive its attempt in a pooled thread.

New threads are started by the backend's own starter threads, never in Zeus's:
`Thread.start()` waits until the new thread runs, and with thousands of
threads wanting the interpreter lock that wait grew to milliseconds a thread
(over a second, at worst), which held up Zeus's whole mailbox. One starter
begins; a starter that finds more attempts waiting brings in another, up to
`STARTERS`, whose waits overlap: 10,000 threads started in half the time with
eight starters as with one.

A starter that finds no idle thread while a backlog (`BACKLOG` more attempts) waits
behind the one it took first waits up to `linger_s` for a busy thread to come back,
and makes a new thread only if none does. A burst of short attempts then runs on a
few threads instead of the hundreds that all wanted the interpreter lock at once (the
host's event loop waits for that lock too: a 1 ms ticker's longest gap while 1,000
no-op delegations were gathered fell by about half). Without a backlog (a host running
a few at a time) the pool grows to cover them, as before. Once a wait finds none (long
attempts hold every thread), starters make threads at once again until some thread
comes back, so a burst of long attempts is not slowed.
"""

from __future__ import annotations

import queue
import threading

from actors.backends.base import Backend, ChildHandle, ChildSpec, Send
from actors.backends.jobs import Job
from actors.errors import describe_error
from actors.mail import CancelSignal, Inbox, Mail
from actors.models import AttemptOutcome
from actors.protocol import Finished, Heartbeat
from actors.run import run_work

__all__ = ["ThreadBackend", "ThreadChild"]

STARTERS = 8  # threads that start new child threads, each waiting on one start at a time
LINGER_S = 0.002  # how long a starter waits for a busy thread to come back, at most
BACKLOG = STARTERS  # attempts waiting behind the one a starter holds, before it waits at all
_MAKING = threading.Lock()  # taken only while a child's mailbox is made


class ThreadChild(ChildHandle):
    """A running thread attempt. A thread cannot be killed, only asked and then fenced."""

    def __init__(self, spec: ChildSpec, send: Send) -> None:
        if spec.work is None:
            raise ValueError(f"agent {spec.agent!r} has no work function for a thread child")
        self._spec = spec
        self.attempt_id = spec.attempt_id
        self._cancel = CancelSignal()
        self._inbox: Inbox | None = None  # made by the first thread that needs it (`_mailbox`)
        self._send = send
        # Handed to an idle pooled thread (already running, waiting for it): alive as it
        # starts, so that start is its first sign of life and it sends no separate one.
        self.alive = False

    def run(self) -> Finished:
        """Runs in a pooled child thread: the work, and how it ended (not yet sent)."""
        spec = self._spec
        assert spec.work is not None
        if not self.alive:
            # The first sign of life of a new thread: Zeus's stale clock starts here.
            self._send(Heartbeat(spec.attempt_id, 0, liveness=True))
        # Its context is built here, in the child's thread, not in Zeus's.
        job = Job.from_spec(spec, deadline=spec.deadline, hard_stop=None)
        context = job.context(spec.attempt_id, clock=spec.clock, send=self._send,
                              cancel_event=self._cancel, session=spec.session,
                              inbox=self._mailbox())
        return run_work(spec.work, spec.brief, context)

    def report(self, finished: Finished) -> None:
        self._send(finished)

    @property
    def pid(self) -> int | None:
        return None

    @property
    def killable(self) -> bool:
        return False

    def cancel(self) -> None:
        self._cancel.set()

    def put_mail(self, mail: Mail) -> None:
        """Put the owner's message in the child's mailbox (Zeus's thread)."""
        self._mailbox().put(mail.obj)

    def _mailbox(self) -> Inbox:
        """The child's mailbox, made once by whichever thread needs it first: the child's
        as its work starts, Zeus's for mail that comes before (not Zeus's at every start)."""
        inbox = self._inbox
        if inbox is None:
            with _MAKING:
                inbox = self._inbox
                if inbox is None:
                    inbox = self._inbox = Inbox()
        return inbox

    def kill(self) -> None:
        """A thread cannot be killed; Zeus fences it instead."""


class _PooledThread:
    """One daemon thread that runs attempts handed to it, one at a time."""

    def __init__(self, pool: ThreadBackend, first: ThreadChild) -> None:
        self._pool = pool
        self.jobs: queue.SimpleQueue[ThreadChild | None] = queue.SimpleQueue()  # None: exit
        self.jobs.put(first)
        self.thread = threading.Thread(target=self._loop, name="zeus-child", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        """Runs in this pooled thread: run each job, then wait idle for the next."""
        while True:
            try:
                child = self.jobs.get(timeout=self._pool.idle_s)
            except queue.Empty:
                if self._pool.retire(self):
                    return
                continue  # it was handed a job just as it timed out: the job is coming
            if child is None:
                return
            self.thread.name = f"zeus-child-{child.attempt_id}"
            try:
                finished = child.run()  # run_work catches everything agent code raises
            except BaseException as exc:  # noqa: BLE001 - and if it cannot, Zeus still hears
                finished = Finished(child.attempt_id, AttemptOutcome.error,
                                    error=describe_error(exc), error_type=type(exc).__name__)
            self.thread.name = "zeus-child"
            # Idle first, then report: whatever Zeus starts next may reuse this thread.
            self._pool.rest(self)
            child.report(finished)
            # An idle thread keeps nothing of the attempt it ran (its brief, its context).
            del child, finished


class ThreadBackend(Backend):
    """Starts thread children on pooled daemon threads. Its children run in the host's
    process: one whose host died went with it (`confirm_gone`'s default), and had started
    its work as its attempt was recorded."""

    runs_in_host = True

    def __init__(self, idle_s: float = 30.0, linger_s: float = LINGER_S) -> None:
        self.idle_s = idle_s
        self.linger_s = linger_s
        self._lock = threading.Lock()
        self._idle: dict[_PooledThread, None] = {}  # ordered: the latest to rest goes first
        # Starters waiting for a thread to come back (`_come_back`), and whether they wait:
        # not after a wait that found none, until some thread comes back.
        self._rested = threading.Condition(self._lock)
        self._lingering = 0
        self._linger = True
        self._busy = 0  # threads running an attempt: those a starter may wait for
        self._closed = False
        # Attempts waiting for a new thread, and how many starter threads start them.
        self._unstarted: queue.SimpleQueue[ThreadChild | None] = queue.SimpleQueue()
        self._starters = 0

    def start(self, spec: ChildSpec, send: Send) -> ThreadChild:
        """Called in Zeus's thread: hand the attempt to an idle thread, or to the starter
        (never waits for a thread to start)."""
        child = ThreadChild(spec, send)
        with self._lock:
            worker = self._idle.popitem()[0] if self._idle else None
            if worker is not None:
                self._busy += 1
        if worker is not None:
            child.alive = True  # an idle thread takes it at once
            worker.jobs.put(child)
            return child
        if self._starters == 0:  # only Zeus's thread starts the first starter; if it
            self._add_starter()  # cannot, this attempt fails here and is never queued
        self._unstarted.put(child)  # its new thread sends its first sign of life
        return child

    def _add_starter(self) -> None:
        """One more starter thread, up to `STARTERS` (a process out of threads: fewer)."""
        with self._lock:
            if self._starters >= STARTERS or self._closed:
                return
            self._starters += 1
            n = self._starters
        try:
            threading.Thread(target=self._start_threads, name=f"zeus-thread-starter-{n}",
                             daemon=True).start()
        except RuntimeError:
            with self._lock:
                self._starters -= 1
            if n == 1:  # no starter at all: the attempt asking for one cannot start
                raise

    def _start_threads(self) -> None:
        """Runs in a starter thread: a thread for each attempt that waits for one; more
        waiting behind it brings in another starter."""
        while True:
            child = self._unstarted.get()
            if child is None:
                return
            with self._lock:  # a thread that came back meanwhile takes it instead
                worker = self._come_back()
                if self._closed:
                    continue
                self._busy += 1
            try:
                if worker is not None:
                    worker.jobs.put(child)
                else:
                    _PooledThread(self, child)
            except Exception as exc:  # noqa: BLE001 - e.g. "can't start new thread"
                with self._lock:
                    self._busy -= 1
                child.report(Finished(child.attempt_id, AttemptOutcome.error,
                                      error=f"its thread could not start: {describe_error(exc)}",
                                      error_type=type(exc).__name__))
            del child, worker  # while it waits for the next, it keeps nothing of this one
            if not self._unstarted.empty():
                self._add_starter()

    def _come_back(self) -> _PooledThread | None:
        """An idle thread, or None (always, once closed). With none idle it waits up to
        `linger_s` for a busy one to come back, unless the last wait found none and no
        thread has come back since. A starter's, with the lock held."""
        if (not self._idle and self._linger and self._busy and not self._closed
                and self._unstarted.qsize() >= BACKLOG):
            self._lingering += 1
            self._rested.wait_for(lambda: self._idle or self._closed, self.linger_s)
            self._lingering -= 1
            if not self._idle:
                self._linger = False  # make threads at once, until one comes back
        return self._idle.popitem()[0] if self._idle else None

    def rest(self, worker: _PooledThread) -> None:
        """A thread whose attempt ended becomes idle (unless the backend is closed)."""
        with self._lock:
            self._busy -= 1
            if not self._closed:
                self._idle[worker] = None
                self._linger = True
                if self._lingering:
                    self._rested.notify()

    def retire(self, worker: _PooledThread) -> bool:
        """True when an idle thread may exit: nobody handed it a job meanwhile."""
        with self._lock:
            if worker in self._idle:
                del self._idle[worker]
                return True
            return self._closed

    def close(self) -> None:
        """Idle threads exit now; busy ones exit when their attempt ends; an attempt still
        waiting for a new thread never starts."""
        with self._lock:
            self._closed = True
            idle, self._idle = list(self._idle), {}
            starters = self._starters
            self._rested.notify_all()
        for _ in range(starters):
            self._unstarted.put(None)
        for worker in idle:
            worker.jobs.put(None)
