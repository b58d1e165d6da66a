"""A worker whose supervisor is gone, waiting to be picked up (docs/design.md, "Reattach").

Runs in the worker process, only once its supervisor has gone (the end of its pipes
or socket closed) and its last job carried `orphan` (`actors.backends.jobs.Orphan`):
nothing here is touched while a supervisor lives.

- `Held`: what the worker would have sent meanwhile, in order, to be sent to the
  next supervisor before anything live.
- `Listener`: the socket it listens on, `<directory>/<pid>.sock` (bound under a
  temporary name and renamed into place once it listens, so that a socket that is
  there always answers), and the one connection it serves at a time: the connector
  must pass `multiprocess.connection`'s challenge with the store's key, both ways,
  within `AUTH_TIMEOUT_S` (a connector that says nothing, or a wrong key, is hung up
  on and the worker waits on); it is then sent the worker's `Hello` and answers with
  `ATTACH_FRAME` or `STOP_FRAME`, or hangs up (the worker waits on, its grace clock
  running).
- `stop_now`: nothing to wait for (no `orphan`, or an idle worker without a
  session): SIGKILL to its group and all below it at once, as without a store.
- `stop_all`: the end of the grace, or a `Stop`: the kill ladder, run by the worker
  on itself: SIGTERM to everything below it (it is a subreaper: what left its
  group is below it too), `term_s`, then SIGKILL to all of that, its group and itself.
  Its own code is not sent SIGTERM (it must live to send the SIGKILL); its caller
  sets the attempt's cancel event instead.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import NoReturn

from multiprocess.connection import Connection, answer_challenge, deliver_challenge

from actors import wire as _wire
from actors.backends import frames
from actors.osproc import ProcessTree, kill_descendants, process_running

__all__ = [
    "AUTH_TIMEOUT_S",
    "Attached",
    "Held",
    "Listener",
    "address",
    "authenticate",
    "exit_now",
    "readable",
    "set_timeouts",
    "stop_all",
    "stop_now",
]

AUTH_TIMEOUT_S = 1.0  # for the challenge, both ways, and the hello
_BACKLOG = 16
_POLL_S = 0.01  # how often `stop_all` looks whether what it sent SIGTERM to has ended


def address(directory: str, pid: int) -> str:
    """Where the worker `pid` listens while it waits."""
    return f"{directory}/{pid}.sock"


def set_timeouts(sock: socket.socket, seconds: float) -> None:
    """Bound each blocking send and receive on `sock` (0: no bound) in the kernel, so that
    the fd stays blocking for code that reads it directly (`multiprocess`'s `Connection`)."""
    whole = int(seconds)
    timeval = struct.pack("ll", whole, int((seconds - whole) * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)


def readable(sock: socket.socket, timeout_s: float) -> bool:
    """Whether `sock` becomes readable within `timeout_s` (poll: any fd number)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(max(0.0, timeout_s) * 1000.0))


def authenticate(sock: socket.socket, key: bytes, *, listening: bool) -> bool:
    """The challenge of `multiprocess.connection`, both ways, on a blocking `sock` whose
    timeouts are set; False on a wrong key, silence or a hang-up."""
    conn = Connection(os.dup(sock.fileno()))
    try:
        if listening:
            deliver_challenge(conn, key)
            answer_challenge(conn, key)
        else:
            answer_challenge(conn, key)
            deliver_challenge(conn, key)
    except Exception:  # noqa: BLE001 - whatever a stranger's bytes provoke: not authenticated
        return False
    finally:
        conn.close()
    return True


class Held:
    """The frames a worker would have sent while no supervisor is attached, in order.

    Consecutive liveness beats are kept as the last one. `finished` is the id of the
    attempt whose `Finished` is among them; `charges`, the charges among them (kept by the
    link once sent). Guarded by the worker's send lock.
    """

    __slots__ = ("beat_last", "charges", "finished", "frames")

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.charges: list[bytes] = []
        self.beat_last = False
        self.finished: str | None = None

    def keep(self, data: bytes, beat: bool = False, charge: bool = False) -> None:
        if beat and self.beat_last:
            self.frames[-1] = data
        else:
            self.frames.append(data)
        if charge:
            self.charges.append(data)
        self.beat_last = beat


class Attached:
    """A connector that authenticated, read the hello and said `Attach` (or `Stop`)."""

    __slots__ = ("reader", "sock", "stop")

    def __init__(self, sock: socket.socket, reader: _wire.FrameReader, stop: bool) -> None:
        self.sock = sock
        self.reader = reader
        self.stop = stop


class Listener:
    """The socket a waiting worker listens on (the worker's waiting thread only)."""

    def __init__(self, directory: str, key: bytes, pid: int) -> None:
        self.address = address(directory, pid)
        self._key = key
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        temporary = f"{directory}/.{pid}.new"  # no longer than the address: it fits too
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            self._sock.bind(temporary)
            self._sock.listen(_BACKLOG)
            os.replace(temporary, self.address)  # a stale socket of this pid goes
        except OSError:
            self._sock.close()
            raise

    def hide(self) -> None:
        """Take the socket's name away, listening on (any thread: the worker is stopping)."""
        with contextlib.suppress(OSError):
            os.unlink(self.address)

    def close(self) -> None:
        """Stop listening and take the socket's name away (nobody finds this worker)."""
        with contextlib.suppress(OSError):
            os.unlink(self.address)
        self._sock.close()

    def next_owner(self, deadline: float, hello: Callable[[], bytes]) -> Attached | None:
        """Serve connections one at a time until one says `Attach` or `Stop`; None once
        the monotonic time `deadline` has passed."""
        while (left := deadline - time.monotonic()) > 0:
            if not readable(self._sock, left):
                continue
            try:
                sock, _ = self._sock.accept()
            except OSError:
                continue
            got = self._serve(sock, deadline, hello)
            if got is not None:
                return got
            sock.close()
        return None

    def _serve(
        self, sock: socket.socket, deadline: float, hello: Callable[[], bytes]
    ) -> Attached | None:
        sock.setblocking(True)
        set_timeouts(sock, AUTH_TIMEOUT_S)
        if not authenticate(sock, self._key, listening=True):
            return None
        try:
            _wire.write_frame(sock.fileno(), hello())
        except OSError:
            return None
        set_timeouts(sock, 0.0)
        reader = _wire.FrameReader(sock.fileno())
        while (left := deadline - time.monotonic()) > 0:
            if not readable(sock, left):
                continue
            try:
                messages = reader.read()
            except OSError:
                messages = None
            if messages is None:
                return None  # it hung up: wait for the next one
            for data in messages:
                if data == frames.ATTACH_FRAME or data == frames.STOP_FRAME:
                    return Attached(sock, reader, stop=data == frames.STOP_FRAME)
        return None


def stop_now() -> NoReturn:
    """The supervisor is gone and nobody will pick this worker up: kill the whole group,
    this process included, and everything below it, so nothing it started lingers."""
    kill_descendants()  # those that left the group too
    if os.getpgid(0) == os.getpid():
        os.killpg(0, signal.SIGKILL)
    exit_now(70)


def exit_now(code: int) -> NoReturn:
    """Leave without joining threads or running atexit hooks that agent code left behind."""
    _flush()
    os._exit(code)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def stop_all(term_s: float, keep: Callable[[], None] | None = None) -> NoReturn:
    """The kill ladder on this worker and all below it, by the worker itself (see above);
    `keep()` runs once all below it is killed, before the worker kills itself (it writes
    what the worker held for the next Zeus)."""
    tree = ProcessTree(os.getpid())
    if tree.signal(signal.SIGTERM) and term_s > 0:
        until = time.monotonic() + term_s
        while time.monotonic() < until and any(
            process_running(pid, started) for pid, started in tree.known.items()
        ):
            time.sleep(_POLL_S)
    tree.signal(signal.SIGKILL)
    kill_descendants()  # what started since the last walk
    if keep is not None:
        with contextlib.suppress(Exception):  # nothing may keep it from exiting
            keep()
    _flush()
    with contextlib.suppress(OSError):
        if os.getpgid(0) == os.getpid():
            os.killpg(0, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
    raise SystemExit(70)  # not reached: SIGKILL cannot be caught
