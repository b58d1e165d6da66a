"""Whether the reader of standard output is still there (`zeus run plan.yml | head -1`).

A command that runs delegations may write nothing for minutes; the moment its reader
leaves it stops (the README's exit status 141: what it started is cancelled).
`watch_reader(on_gone)` watches standard output when it is a pipe or a socket: a
thread polls its file descriptor, which reports an error or a hang-up as soon as
the other end is closed, without writing a byte. On a terminal or a file nothing
is watched (a write there fails only if the disk does).
"""

from __future__ import annotations

import contextlib
import os
import select
import stat
import sys
import threading
from collections.abc import Callable, Iterator

__all__ = ["watch_reader"]

_GONE = select.POLLERR | select.POLLHUP | select.POLLNVAL


@contextlib.contextmanager
def watch_reader(on_gone: Callable[[], None]) -> Iterator[None]:
    """Call `on_gone()` (in a thread of its own, once) when stdout's reader leaves."""
    fd = _pipe_fd()
    if fd is None:
        yield
        return
    wake_r, wake_w = os.pipe()
    thread = threading.Thread(target=_watch, args=(fd, wake_r, on_gone),
                              name="zeus-reader-watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        os.write(wake_w, b"x")
        thread.join()
        os.close(wake_r)
        os.close(wake_w)


def _pipe_fd() -> int | None:
    """Standard output's file descriptor when it is a pipe or a socket, else None."""
    try:
        fd = sys.stdout.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):  # replaced (a test's capture), or closed
        return None
    return fd if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) else None


def _watch(fd: int, wake: int, on_gone: Callable[[], None]) -> None:
    """Runs in the watch thread: block until `fd` reports its reader gone or `wake` is written."""
    poller = select.poll()
    poller.register(fd, 0)  # no events asked for: only an error or a hang-up is reported
    poller.register(wake, select.POLLIN)
    while True:
        ready = dict(poller.poll())
        if ready.get(wake):
            return
        if ready.get(fd, 0) & _GONE:
            on_gone()
            return
