"""`LeaseWatch`: a worker that stops by itself once its host's lease has run out (runs in
the worker process; docs/design.md, "Leases").

A job of a backend whose host holds a lease carries `lease`: the path of the host's
lease file (`actors.backends.process.lease_deadline`) and the attempt's `grace_s` and `term_s`.
The main thread maps the file when a job names one it has not mapped (`take`); the
backstop thread (`actors.backends.backstop`), which never writes to a pipe and so is
never held up by a host that stopped reading, looks at the deadline (`look`): when the
lease is due, and every `POLL_S` in between (a deadline moved earlier is seen that
late), never while no lease is set. Once the deadline has passed with no extension:

1. the running attempt is cancelled (its `ctx` sees it cancelled; a command agent's
   program gets SIGINT);
2. once the attempt has ended, or `grace_s` later (at once for an idle worker; it looks
   every `POLL_S` meanwhile), the worker runs the kill ladder on itself
   (`Link.stop_for_lease`): SIGTERM to everything below it, `term_s`, SIGKILL to all of
   that, its group and itself. A worker waiting to be picked up writes what it held
   first, as when its grace runs out.

So no process of the attempt runs past the deadline + `POLL_S` + `grace_s` + `term_s`
(and the few ms the signals take). What was decided is not undone: an extension that
comes after the deadline has passed changes nothing. A job that comes once the lease
has run out is not run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import NoReturn, Protocol

from actors.backends.process.lease_deadline import LeaseView
from actors.models import AttemptOutcome
from actors.protocol import Finished

__all__ = ["LEASE_ENDED", "POLL_S", "Lease", "LeaseWatch"]

POLL_S = 0.25  # the most a worker sleeps between two looks while a lease is set

# What a job carries: (the lease file's path, grace_s, term_s).
Lease = tuple[str, float, float]


class Keeper(Protocol):
    """The thread that looks (`actors.backends.backstop.Backstop`)."""

    def watch(self, look: Callable[[float], float | None]) -> None: ...

    def poke(self) -> None: ...


class LeaseWatch:
    """The worker's watch over its host's lease (see the module).

    `cancel()` asks the running attempt to stop and says whether one runs;
    `stop(term_s)` is the end of the kill ladder on the worker itself (never returns).
    """

    def __init__(self, cancel: Callable[[], bool], stop: Callable[[float], NoReturn],
                 keeper: Keeper) -> None:  # fmt: skip
        self._cancel = cancel
        self._stop = stop
        self._keeper = keeper
        self._lock = threading.Lock()
        self._view: LeaseView | None = None
        self._grace_s = 0.0
        self._term_s = 0.0
        self._stop_at: float | None = None  # the lease ran out: when the ladder goes on
        self._saw_lease = False  # the last look found a deadline (it wakes by itself)
        self._watched = False

    @property
    def path(self) -> str | None:
        """The lease file it reads (for its hello to a host that picks it up)."""
        view = self._view
        return None if view is None else view.path

    # -- the main thread, with each job ----------------------------------------------
    def take(self, lease: Lease | None, attempt_id: str, pid: int) -> Finished | None:
        """The lease of the job `attempt_id` about to run; its `Finished` if it must not
        run (its host's lease has run out, or cannot be read)."""
        refused = self._take(lease)
        if refused is None:
            return None
        return Finished(attempt_id, refused[0], error=refused[1], pid=pid)

    def _take(self, lease: Lease | None) -> tuple[AttemptOutcome, str] | None:
        if lease is None:
            with self._lock:  # the worker's new host holds no lease: nothing is bounded
                if self._view is not None and self._stop_at is None:
                    self._view.close()
                    self._view = None
            return None
        path, grace_s, term_s = lease
        refused: tuple[AttemptOutcome, str] | None = None
        poke = False
        with self._lock:
            if self._stop_at is not None:
                return AttemptOutcome.cancelled, _RAN_OUT
            if self._view is None or self._view.path != path:
                try:
                    view = LeaseView(path)
                except OSError as exc:
                    return AttemptOutcome.error, (
                        f"its host's lease deadline could not be read ({exc}): not run, since "
                        "nothing would stop it should its host stop renewing")
                if self._view is not None:
                    self._view.close()
                self._view, poke = view, True
            self._grace_s, self._term_s = grace_s, term_s
            until = self._view.read()
            if until is not None and until <= time.monotonic():
                refused, poke = (AttemptOutcome.cancelled, _RAN_OUT), True
            elif until is not None and not self._saw_lease:
                poke = True  # it sleeps until told: it must look now
        if not self._watched:
            self._watched = True
            self._keeper.watch(self.look)  # it looks from now on
        elif poke:
            self._keeper.poke()
        return refused

    # -- the backstop thread ---------------------------------------------------------
    def look(self, now: float) -> float | None:
        """Act on the deadline as of `now`; when to look next (None: only when poked)."""
        with self._lock:
            view = self._view
            if view is None:
                self._saw_lease = False
                return None
            stop_at = self._stop_at
            if stop_at is None:
                until = view.read()
                self._saw_lease = until is not None
                if until is None:
                    return None
                if now < until:
                    return min(until, now + POLL_S)
                stop_at = self._stop_at = now + self._grace_s  # decided: never undone
            term_s = self._term_s
        if not self._cancel():  # idle, or its attempt has ended: nothing to wait for
            self._stop(term_s)
        if now < stop_at:
            return min(stop_at, now + POLL_S)  # the attempt's grace to stop by itself
        self._stop(term_s)


_RAN_OUT = "its host's lease ran out with no extension: the worker stops by itself"
# The error of an attempt its worker cancelled for that.
LEASE_ENDED = "stopped by its own worker: no extension of its host's lease came by its deadline"
