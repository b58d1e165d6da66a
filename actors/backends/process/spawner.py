"""`Spawner`: one daemon thread that starts child processes, so that no fork, fork-server
round trip or `Popen` happens in the caller's thread (Zeus's mailbox).

Starting a process costs a few ms of system calls and pickling; 300 of them at
once, in Zeus's own thread, held every other decision (deadlines among them)
for seconds. `submit(step)` queues the start and returns at once; the thread
runs the steps in order. A step must not raise (it reports its own failure);
if it does, the error is printed and the thread goes on.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from actors.clock import report_error

__all__ = ["Spawner"]

Step = Callable[[], None]


class Spawner:
    """Runs submitted steps one at a time in a daemon thread started on first use."""

    def __init__(self, name: str = "zeus-spawner") -> None:
        self._name = name
        self._steps: queue.SimpleQueue[Step | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, step: Step) -> bool:
        """Queue `step` (any thread); False once closed (the caller runs nothing then)."""
        with self._lock:
            if self._closed:
                return False
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        self._steps.put(step)
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Run what is queued, then stop the thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        self._steps.put(None)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        """The spawner thread."""
        while True:
            step = self._steps.get()
            if step is None:
                return
            try:
                step()
            except BaseException as exc:  # noqa: BLE001 - the next start must still happen
                report_error(exc, None)
            del step
