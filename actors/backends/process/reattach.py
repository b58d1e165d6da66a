"""Where a store's waiting workers listen, and how they are found (docs/design.md, "Reattach").

With a store, a process worker whose supervisor died keeps its job for the grace
and waits to be picked up (`actors.backends.process.worker_wait`), listening on
`<directory>/<pid>.sock` in the store's children directory (`children_dir`: beside
the store, or in the temporary directory when that path would be too long for a
socket). The directory is the user's alone (0700), and a connector must also know
the key in `<directory>/key` (32 random bytes, 0600): only the store's owner can
pick its workers up.

- `place_for_store` (a Zeus starting on the store) makes the place, `existing_place`
  (recovery, `zeus sweep`) only reads it.
- `find_waiting` knocks on every socket at once (a thread each, up to `_KNOCKERS`):
  connects, authenticates, reads the hello. A socket nobody listens on is removed.
- `wait_for_listener`: for a worker that still runs but has not listened yet.
- A `Waiting` is a worker found, connected and not yet attached: the backend attaches
  it (`ProcessBackend.reattach`, which uses `catch_up` and `Adopted`), or it is told
  to stop (`stop()`), or hung up on (`close()`: it waits on).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import socket
import stat
import tempfile
import time
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from actors import wire as _wire
from actors.backends import frames
from actors.backends.base import WaitingChild
from actors.backends.process.forkserver import sentinel_ready
from actors.backends.process.worker_wait import address, authenticate, readable, set_timeouts
from actors.osproc import process_running, process_start_time, same_start

__all__ = [
    "Adopted",
    "ReattachPlace",
    "SocketPipes",
    "Waiting",
    "catch_up",
    "children_dir",
    "existing_place",
    "find_waiting",
    "place_for_store",
    "runtime_dir",
    "wait_for_listener",
]

_SOCKET_PATH_MAX = 100  # bytes; a unix socket's path may be 107 on Linux, fewer elsewhere
_LONGEST_NAME = "/1234567.sock"  # a pid has at most 7 digits on Linux
_KEY_BYTES = 32
_KNOCKERS = 32  # threads that knock at once
_POLL_S = 0.005  # how often `wait_for_listener` looks for the socket


@dataclass(frozen=True, slots=True)
class ReattachPlace:
    """Where a store's waiting workers listen, the key that opens them, and how long they wait."""

    directory: str  # absolute; mode 0700; holds `<pid>.sock` per waiting worker and `key`
    key: bytes = field(repr=False)  # the auth key (the file `<directory>/key`, 0600)
    grace_s: float  # supervisor.orphan_grace_s (> 0; 0.0 from `existing_place`)

    def address(self, pid: int) -> str:
        """The socket the worker `pid` listens on while it waits."""
        return address(self.directory, pid)


def children_dir(store_path: str | Path) -> Path:
    """`<store path resolved>.children` when `<that>/<7 digit pid>.sock` fits in a unix
    socket path (at most 100 bytes), else `<tempfile.gettempdir()>/zeus-<uid>/<sha256 of
    the resolved store path, 16 hex>`. A store named by a URL (a PostgreSQL database) has
    no file to lie beside: always the second, by the sha256 of the URL."""
    if "://" in str(store_path):
        digest = hashlib.sha256(os.fsencode(str(store_path))).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / f"zeus-{os.getuid()}" / digest
    resolved = Path(store_path).resolve()
    beside = resolved.with_name(resolved.name + ".children")
    if len(os.fsencode(beside)) + len(_LONGEST_NAME) <= _SOCKET_PATH_MAX:
        return beside
    digest = hashlib.sha256(os.fsencode(resolved)).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"zeus-{os.getuid()}" / digest


def place_for_store(store_path: str | Path, grace_s: float) -> ReattachPlace:
    """The place of the store's waiting workers: creates the directory (0700) and the key
    file (0600) if missing, else reads the key. `PermissionError` if either is someone
    else's or not what it should be."""
    if not grace_s > 0:
        raise ValueError(f"grace_s must be > 0 (got {grace_s!r}): with 0 no worker waits")
    directory = children_dir(store_path)
    if directory.parent.name == f"zeus-{os.getuid()}":
        _private_dir(directory.parent)  # the temporary directory's, shared by every user
    _private_dir(directory)
    return ReattachPlace(str(directory), _key(directory / "key"), float(grace_s))


def runtime_dir() -> str:
    """`<tempfile.gettempdir()>/zeus-<uid>`, made the user's alone (0700): where a backend
    without a store's place keeps its private files (its lease file)."""
    directory = Path(tempfile.gettempdir()) / f"zeus-{os.getuid()}"
    _private_dir(directory)
    return str(directory)


def existing_place(store_path: str | Path) -> ReattachPlace | None:
    """The place of a store if its directory and key exist (nothing is created; grace_s is
    0.0): for recovery and `zeus sweep`."""
    directory = children_dir(store_path)
    try:
        key = _read_key(directory / "key")
    except FileNotFoundError:
        return None
    return ReattachPlace(str(directory), key, 0.0)


def _private_dir(path: Path) -> None:
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise PermissionError(
            f"{path} is not a directory of this user's: remove it, or put the store elsewhere "
            "(its waiting children listen there)"
        )
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)


def _key(path: Path) -> bytes:
    """The key in `path`, made first if there is none (whole: written aside, then linked)."""
    with contextlib.suppress(FileNotFoundError):
        return _read_key(path)
    aside = path.with_name(f".key.{os.getpid()}.{secrets.token_hex(4)}")
    key = secrets.token_bytes(_KEY_BYTES)
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(key)
        try:
            os.link(aside, path)
        except FileExistsError:  # another process made it first: theirs is the key
            return _read_key(path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(aside)
    return key


def _read_key(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        key = f.read(_KEY_BYTES + 1)
    if info.st_uid != os.getuid() or len(key) != _KEY_BYTES:
        raise PermissionError(
            f"{path} is not a key this user made ({_KEY_BYTES} bytes): remove it and start "
            "Zeus on the store again"
        )
    if info.st_mode & 0o077:
        os.chmod(path, 0o600)
    return key


@dataclass(eq=False)
class Waiting(WaitingChild):
    """A worker found waiting, authenticated, its hello read; not yet attached (`conn` open)."""

    pid: int
    start_time: float | None  # as osproc.process_start_time
    agent: str
    attempt_id: str | None  # the attempt it runs or ran; None: an idle worker holding a session
    finished: bool  # that attempt's Finished is among its buffered reports
    session_key: str | None
    conn: socket.socket = field(repr=False)  # blocking; authenticated
    lease: str | None = None  # the lease file it reads: the backend that attaches writes it

    def stop(self) -> None:
        """Tell it to stop its job with the kill ladder and exit (for `zeus sweep`, and for a
        worker recovery will not take); closes `conn`. Returns at once."""
        with contextlib.suppress(OSError):
            _wire.write_frame(self.conn.fileno(), frames.STOP_FRAME)
        self.close()

    def close(self) -> None:
        """Hang up without attaching: it goes on waiting (the same grace)."""
        self.conn.close()


def find_waiting(place: ReattachPlace, *, timeout_s: float = 2.0,
                 skip: Collection[int] = ()) -> list[Waiting]:
    """Connect to every `*.sock` in the directory (but those of the pids in `skip`, found
    before and still held), authenticate with the key, read each hello.

    A socket nobody listens on any more (ECONNREFUSED / ENOENT) is unlinked and skipped;
    one that fails authentication or says nothing within `timeout_s` is skipped (not
    unlinked). The sockets are knocked on at once, so that the whole takes about the
    slowest one.
    """
    try:
        skipped = {f"{pid}.sock" for pid in skip}
        names = [name for name in os.listdir(place.directory)
                 if name.endswith(".sock") and name not in skipped]
    except FileNotFoundError:
        return []
    if not names:
        return []
    deadline = time.monotonic() + timeout_s
    paths = [os.path.join(place.directory, name) for name in names]
    with ThreadPoolExecutor(min(_KNOCKERS, len(paths)), "zeus-find-waiting") as pool:
        found = list(pool.map(lambda path: _knock(path, place.key, deadline), paths))
    return [waiting for waiting in found if waiting is not None]


def wait_for_listener(
    place: ReattachPlace, pid: int, start_time: float | None, *, timeout_s: float
) -> Waiting | None:
    """For a worker that still runs but whose socket is not there yet (it has just seen its
    supervisor die): look for its socket until `timeout_s`, or until the process is gone,
    and connect. None if it did not listen in time, or is gone."""
    path = place.address(pid)
    deadline = time.monotonic() + timeout_s
    while True:
        if os.path.exists(path):
            waiting = _knock(path, place.key, deadline)
            if waiting is not None:
                if start_time is None or (waiting.start_time is not None
                                           and same_start(waiting.start_time, start_time)):
                    return waiting
                waiting.close()  # the pid is another process's now
                return None
        if process_running(pid, start_time) is False or time.monotonic() >= deadline:
            return None
        time.sleep(_POLL_S)


def _knock(path: str, key: bytes, deadline: float) -> Waiting | None:
    """Connect to one socket, authenticate, read its hello (see `find_waiting`)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        set_timeouts(sock, max(0.001, deadline - time.monotonic()))
        try:
            sock.connect(path)
        except (ConnectionRefusedError, FileNotFoundError):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # its worker is gone
            sock.close()
            return None
        if not authenticate(sock, key, listening=False):
            sock.close()
            return None
        set_timeouts(sock, max(0.001, deadline - time.monotonic()))
        reader = _wire.FrameReader(sock.fileno())
        messages: list[bytes] | None = []
        while messages == []:
            messages = reader.read()
        if not messages:
            sock.close()
            return None
        hello = frames.read_hello(messages[0])
        set_timeouts(sock, 0.0)
    except Exception:  # noqa: BLE001 - silence (a timeout), a hang-up, a frame that is no hello
        sock.close()
        return None
    return Waiting(hello.pid, hello.start_time, hello.agent, hello.attempt_id, hello.finished,
                   hello.session_key, sock, hello.lease)  # fmt: skip


def catch_up(waiting: Waiting, reader: _wire.FrameReader, timeout_s: float) -> list[bytes] | None:
    """Attach `waiting`: send `ATTACH_FRAME`, then read (`reader`, which does not wait)
    every frame it sends up to `CAUGHT_UP_FRAME`, and those after it in the same read:
    the frames in order, without that one. None if it hangs up or does not catch up
    within `timeout_s`."""
    sock = waiting.conn
    try:
        _wire.write_frame(sock.fileno(), frames.ATTACH_FRAME)
    except OSError:
        return None
    deadline = time.monotonic() + timeout_s
    got: list[bytes] = []
    while (left := deadline - time.monotonic()) > 0:
        if not readable(sock, left):
            continue
        try:
            messages = reader.read()
        except BlockingIOError:
            continue
        except OSError:
            return None
        if messages is None:
            return None
        if frames.CAUGHT_UP_FRAME in messages:
            at = messages.index(frames.CAUGHT_UP_FRAME)
            return got + messages[:at] + messages[at + 1 :]
        got += messages
    return None


class SocketPipes:
    """A reattached worker's one socket, in place of the three pipes of a worker this
    process started: written to blocking (under the worker's send lock), read by the hub
    without waiting (`MSG_DONTWAIT`)."""

    __slots__ = ("conn", "control", "jobs", "reader")

    def __init__(self, sock: socket.socket) -> None:
        self.conn = self.jobs = self.control = sock

        def recv(fd: int, size: int) -> bytes:
            return sock.recv(size, socket.MSG_DONTWAIT)

        self.reader = _wire.FrameReader(sock.fileno(), recv)


class Adopted:
    """A reattached worker's end: it is not this process's child, so a pidfd says when it
    ended, and its exit code is not this process's to read."""

    __slots__ = ("pid", "sentinel", "start_time")

    def __init__(self, pid: int, start_time: float | None, pidfd: int) -> None:
        self.pid = pid
        self.start_time = start_time
        self.sentinel = pidfd

    @classmethod
    def open(cls, pid: int, start_time: float | None) -> Adopted | None:
        """The worker (pid, start time) if it still runs, else None."""
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:  # ProcessLookupError: gone; or no pidfd here
            return None
        now = process_start_time(pid)
        if start_time is not None and (now is None or not same_start(now, start_time)):
            os.close(pidfd)  # the pid is another process's now
            return None
        return cls(pid, start_time, pidfd)

    def ended(self) -> bool:
        return sentinel_ready(self.sentinel)

    @staticmethod
    def exit_code() -> int | None:
        return None

    def release(self) -> None:
        os.close(self.sentinel)

    @staticmethod
    def describe(code: int | None) -> str:
        return "child process died while reattached"
