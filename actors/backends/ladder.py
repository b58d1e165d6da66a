"""`KillLadder`: how one child process (a worker, a command's program) is stopped.

The whole ladder, for process workers and command agents alike:

1. cooperative cancel: the child is asked to stop (a worker's `C` message sets
   its `ctx` cancel event; a program gets SIGINT to its group, `interrupt()`);
2. `grace_s`: the supervisor waits, then calls the handle's `kill()` (Zeus's
   side, not here);
3. `terminate(term_s)`: SIGTERM to everything below the child (`ProcessTree`)
   and to its process group;
4. `term_s` later, `escalate()`: SIGKILL to the same;
5. once the child is reaped, `sweep()`: SIGKILL to what is left of its group
   and to every descendant the ladder found, wherever it went.

Every signal is sent in the hub thread, which also reaps: the child cannot be
reaped (and its pid reused) between the check of `reaped` and the signal, and
`/proc` is walked there. A step asked for from another thread is passed to the
hub. `reaped` and `sigkill_sent` are guarded by the owner's `lock`.
"""

from __future__ import annotations

import signal
import threading

from actors.backends.hub import Hub
from actors.osproc import ProcessTree, signal_group

__all__ = ["KillLadder"]


class KillLadder:
    """The signals that stop the child process `pid` and all it started (see the module)."""

    __slots__ = ("_hub", "_lock", "pid", "reaped", "sigkill_sent", "tree")

    def __init__(self, pid: int, hub: Hub, lock: threading.Lock) -> None:
        self.pid = pid
        self.tree = ProcessTree(pid)  # what runs below it, however it left its group
        self._hub = hub
        self._lock = lock
        self.reaped = False  # set by the owner (in the hub thread) once it reaped the child
        self.sigkill_sent = False

    def was_reaped(self) -> None:
        """The owner reaped the child (the hub thread, under the owner's lock): no signal
        goes to its pid from now on, which may be another process's."""
        self.reaped = True

    def interrupt(self, sig: int = signal.SIGINT) -> None:
        """The cooperative cancel of a program: `sig` to its group. What runs below it is
        remembered first, so that it dies with the program even if it left the group and
        the program stops now. Hub thread."""
        with self._lock:
            if self.reaped:
                return
        self.tree.walk()
        signal_group(self.pid, sig)

    def terminate(self, term_s: float) -> None:
        """SIGTERM to the child and everything below it; SIGKILL after `term_s` (at once if
        it is 0)."""
        if term_s > 0:
            if self.signal_all(signal.SIGTERM):
                self._hub.call_later(term_s, self.escalate)
        else:
            self.escalate()

    def escalate(self) -> None:
        """SIGKILL to the child and everything below it, unless it was reaped."""
        with self._lock:
            if self.reaped:
                return
            self.sigkill_sent = True
        self.signal_all(signal.SIGKILL)

    def signal_all(self, sig: int) -> bool:
        """`sig` to the child's group, then to what runs below it outside the group; False
        if it was reaped.

        What runs below it is looked for first: while the child lives, what it adopted
        (daemons, processes that left its group) is found below it; once it is dead, they
        belong to init. The group is signalled before them, so that the child itself
        dies of the signal, not of its own children dying under it (a shell waiting on a
        job would then exit 0).
        """
        if not self._hub.in_hub_thread and not self._hub.closed:

            def in_hub() -> None:
                self.signal_all(sig)

            self._hub.call_later(0.0, in_hub)
            return True
        with self._lock:
            if self.reaped:
                return False
        self.tree.walk()
        signal_group(self.pid, sig)
        self.tree.signal(sig)
        return True

    def sweep(self) -> None:
        """Once the child was reaped (hub thread): SIGKILL to what is left of its group (the
        group outlives its leader) and to what the ladder found below it outside the group."""
        signal_group(self.pid, signal.SIGKILL, or_process=False)
        if self.tree.known:
            self.tree.signal(signal.SIGKILL, root_alive=False)
