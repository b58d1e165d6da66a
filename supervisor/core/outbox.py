"""The host's dispatches to Zeus, coalesced: one wake of Zeus's thread per burst.

On a thread that runs an event loop, `Zeus.dispatch()` does not put its
`Dispatch` in Zeus's mailbox: it queues it here, and the first one queued in
a step of the loop schedules a single flush for the end of that step
(`loop.call_soon`). The flush puts the whole burst in the mailbox as one
`Burst`, which Zeus's thread takes in one turn. A thousand dispatches in one
step of the loop then cost the host no wait for the GIL while Zeus's thread
handles the first ones, and Zeus's thread one wake-up instead of a thousand.

What makes the order hold: every other message the host sends (`_tell`,
`_ask`, from any thread) flushes what is queued before it is sent, so Zeus
hears of a dispatch before anything sent after it (a cancel right after the
dispatch, a snapshot, the stop). A host that blocks on a handle right after
dispatching (`handle.result()`, `handle.future.result()`) flushes first. And
a loop that blocks in anything else, so that its step does not end, is
flushed by a backstop thread after `BACKSTOP_S`: a dispatch is never left
unstarted because its loop stopped turning.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable

from supervisor.core.messages import Burst
from supervisor.errors import ZeusStopped

__all__ = ["BACKSTOP_S", "Outbox", "running_loop"]

# How long a burst may wait for its loop's step to end before the backstop sends it.
BACKSTOP_S = 0.005

# The running event loop of the calling thread, or None (asyncio's own C helper).
running_loop: Callable[[], asyncio.AbstractEventLoop | None] = asyncio._get_running_loop


class Outbox:
    """Dispatches queued on event loops' threads, until their step ends. Thread-safe."""

    def __init__(self, put: Callable[[object], None]) -> None:
        self._put = put  # one message into Zeus's mailbox (ZeusStopped once it is gone)
        self._pending: list[object] = []
        self._lock = threading.Lock()
        self._loops: set[asyncio.AbstractEventLoop] = set()  # with a flush scheduled
        self._closed = False
        self._count = 0  # dispatches posted so far: the backstop waits while it grows
        self._backstop = _Backstop(self._unstick, lambda: self._count)

    def post(self, message: object, loop: asyncio.AbstractEventLoop) -> None:
        """`loop`'s thread: queue `message` for the end of the loop's current step.
        `ZeusStopped` once the outbox is closed (Zeus stopped)."""
        with self._lock:
            if self._closed:
                raise ZeusStopped("Zeus is stopped; start a new one")
            self._pending.append(message)
            self._count += 1
            if loop in self._loops:
                return
            self._loops.add(loop)
        loop.call_soon(self._end_of_step, loop)
        self._backstop.arm()

    def flush(self) -> None:
        """Any thread: put what is queued in the mailbox now, as one message, in order."""
        if not self._pending:  # the common case, without the lock
            return
        with self._lock:  # held while putting: bursts reach the mailbox in the order taken
            pending, self._pending = self._pending, []
            if pending:
                self._put(Burst(pending))

    def close(self) -> None:
        """Flush, then refuse what comes after (Zeus is stopping); stops the backstop."""
        self.flush()
        with self._lock:
            self._closed = True
            self._loops.clear()
        self._backstop.close()
        self.flush()  # queued between the first flush and the lock

    def _unstick(self) -> None:
        """The backstop's flush. It forgets which loops have a flush scheduled: one closed
        before its step ended would be held here for good (a loop whose flush is still to
        come schedules another on its next dispatch, and flushes twice, harmlessly)."""
        with self._lock:
            self._loops.clear()
        self.flush()

    def _end_of_step(self, loop: asyncio.AbstractEventLoop) -> None:
        """`loop`'s thread, once the step that queued the burst is done."""
        with self._lock:
            self._loops.discard(loop)
        with contextlib.suppress(ZeusStopped):  # gone: its stop settled what it had
            self.flush()


class _Backstop:
    """A thread that flushes a burst its loop did not flush within `BACKSTOP_S`.

    Armed once per burst; it wakes, waits until `BACKSTOP_S` pass with no dispatch
    posted (a loop still dispatching is not stuck, and a flush in the middle of its
    burst would wake Zeus's thread beside it), and flushes: nothing, as a rule, the
    loop's step having ended first. Started on the first burst, so a Zeus
    whose host has no event loop has no such thread."""

    def __init__(self, flush: Callable[[], None], posted: Callable[[], int]) -> None:
        self._flush = flush
        self._posted = posted
        self._cv = threading.Condition(threading.Lock())
        self._armed = False
        self._closed = False
        self._thread: threading.Thread | None = None

    def arm(self) -> None:
        with self._cv:
            if self._armed or self._closed:
                return
            self._armed = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="zeus-outbox",
                                                daemon=True)
                self._thread.start()
            else:
                self._cv.notify()

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        cv = self._cv
        while True:
            with cv:
                while not self._armed and not self._closed:
                    cv.wait()
                seen = -1
                while not self._closed and self._posted() != seen:  # still dispatching
                    seen = self._posted()
                    cv.wait(BACKSTOP_S)  # woken early only by `close`
                if self._closed:
                    return
                self._armed = False  # a burst armed from here on arms it again
            with contextlib.suppress(ZeusStopped):
                self._flush()
