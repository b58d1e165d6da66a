"""The lease deadline a host shares with its worker processes, in a file each maps.

A host on a shared store holds a lease and, after each renewal, tells its process
backend until when it holds it (`ProcessBackend.extend_lease`). The backend writes
that time into a small file of its own; each worker maps the same file and reads it
(`actors.backends.process.worker_lease`), with no message per worker and nothing needed from
the host when it is frozen: a worker that finds the time passed stops its work and
exits by itself.

- **Who writes.** The host's process (`HostLease`, any thread, under its lock): the
  backend that made the file, or a backend of a later host on the same machine that
  picked up a worker that waited for it (`HostLease.adopt`, by the path the worker
  gave in its hello). **Who reads.** Each worker process (`LeaseView`), which learns
  the path with its jobs.
- **The format.** `<directory>/<writer pid>-<8 hex>.lease`, owner-only (0600), in the
  backend's private directory (its store's children directory, or `<tmp>/zeus-<uid>`):
  exactly 8 bytes, one float64 in this machine's byte order at offset 0, a
  `CLOCK_MONOTONIC` time (`time.monotonic()`, one clock for every process of a Linux
  machine). 0.0 (or a file that is absent): no lease, nothing is bounded. The value is
  written with one aligned 8-byte store into the shared mapping (a native `struct`
  pack is one `memcpy` of 8 bytes), which x86-64 and arm64 make whole: a reader sees
  the old time or the new one.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import os
import secrets
import stat
import struct
import threading
from collections.abc import Callable

from actors.osproc import process_running

__all__ = ["NO_LEASE", "SIZE", "HostLease", "LeaseFile", "LeaseView", "remove_stale",
           "valid_until"]  # fmt: skip

SIZE = 8
NO_LEASE = 0.0
_SUFFIX = ".lease"
_VALUE = struct.Struct("d")  # native: one memcpy of 8 bytes, in and out


def valid_until(until: float | None) -> float:
    """The value to write for `until` (None: `NO_LEASE`); `ValueError` for a time that is
    not a finite monotonic time above 0."""
    if until is None:
        return NO_LEASE
    if isinstance(until, bool) or not isinstance(until, int | float):
        raise ValueError(f"a lease deadline is a time.monotonic() time or None, "
                         f"not {type(until).__name__}")  # fmt: skip
    if not (math.isfinite(until) and until > 0.0):
        raise ValueError(f"a lease deadline must be a finite time.monotonic() time above 0 "
                         f"(got {until!r}); None says there is no lease")  # fmt: skip
    return float(until)


class LeaseFile:
    """The writer's end: one mapped file (the host's process; any thread)."""

    def __init__(self, path: str, fd: int, *, owned: bool) -> None:
        self.path = path
        self.owned = owned  # made here: removed by `close`
        self._map = mmap.mmap(fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(fd)
        self._lock = threading.Lock()

    @classmethod
    def create(cls, directory: str) -> LeaseFile:
        """A new file in `directory` (which must exist and be the user's alone), holding
        `NO_LEASE`."""
        path = os.path.join(directory, f"{os.getpid()}-{secrets.token_hex(4)}{_SUFFIX}")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, _VALUE.pack(NO_LEASE))
        except BaseException:
            os.close(fd)
            os.unlink(path)
            raise
        return cls(path, fd, owned=True)

    @classmethod
    def adopt(cls, path: str) -> LeaseFile | None:
        """The file of a host that is gone, which a worker picked up here still reads; None
        if it is not there or not such a file (the worker then stops at its last time)."""
        try:
            fd = _open_checked(path, os.O_RDWR)
        except OSError:
            return None
        return cls(path, fd, owned=False)

    def write(self, until: float | None) -> None:
        """Say that the lease holds until `until` (None: there is no lease)."""
        value = valid_until(until)
        with self._lock:
            if not self._map.closed:
                _VALUE.pack_into(self._map, 0, value)

    def read(self) -> float | None:
        with self._lock:
            return None if self._map.closed else _value(self._map)

    def close(self, *, remove: bool | None = None) -> None:
        """Unmap it, and remove the file if it was made here (or as `remove` says)."""
        with self._lock:
            if not self._map.closed:
                self._map.close()
        if self.owned if remove is None else remove:
            with contextlib.suppress(OSError):
                os.unlink(self.path)


class HostLease:
    """A backend's lease files (the host's process; any thread): the one it writes, made by
    the first extension in `directory()`, and those of hosts before it that workers picked
    up here still read (adopted), all written with every extension."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._own: LeaseFile | None = None
        self._adopted: dict[str, LeaseFile] = {}
        self._until: float | None = None
        self._closed = False
        self.path: str | None = None  # the file jobs name (read without the lock)

    def extend(self, until: float | None, directory: Callable[[], str]) -> bool:
        """Write `until` everywhere (None: no lease); True when this made the file."""
        valid_until(until)  # bad input fails here, in the caller
        made = False
        with self._lock:
            if self._closed:
                return False
            self._until = until
            if self._own is None:
                if until is None:
                    return False
                self._own, made = LeaseFile.create(directory()), True
            self._own.write(until)
            for adopted in self._adopted.values():
                adopted.write(until)
            self.path = self._own.path
        return made

    def adopt(self, path: str) -> None:
        """A worker being picked up reads `path` (of a host before this one): written from
        now on too, at once if a lease is held (else from the first extension)."""
        with self._lock:
            if self._closed or path == self.path:
                return
            adopted = self._adopted.get(path)
            if adopted is None:
                adopted = LeaseFile.adopt(path)
                if adopted is None:
                    return  # gone: the worker stops at the last time it read
                self._adopted[path] = adopted
            if self._own is not None:
                adopted.write(self._until)

    def close(self) -> None:
        """Every worker has ended: remove the files, and those of writers gone."""
        with self._lock:
            self._closed = True
            files = [*self._adopted.values(), *([self._own] if self._own else [])]
            self._adopted.clear()
            self._own = self.path = None
        for file in files:
            file.close(remove=True)
        if files:
            remove_stale(os.path.dirname(files[0].path))


class LeaseView:
    """The reader's end: the file mapped read-only (a worker process; its caller locks)."""

    def __init__(self, path: str) -> None:
        """`OSError` if `path` is not a regular file of this user's of `SIZE` bytes."""
        fd = _open_checked(path, os.O_RDONLY)
        try:
            self._map = mmap.mmap(fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ)
        finally:
            os.close(fd)
        self.path = path

    def read(self) -> float | None:
        """The monotonic time the lease holds until, or None: no lease."""
        return _value(self._map)

    def close(self) -> None:
        self._map.close()


def remove_stale(directory: str) -> None:
    """Remove the lease files in `directory` whose writer is gone (its pid runs no more);
    a file of a writer that may run is left."""
    try:
        names = [name for name in os.listdir(directory) if name.endswith(_SUFFIX)]
    except OSError:
        return
    for name in names:
        pid, _, _ = name.partition("-")
        if pid.isdigit() and process_running(int(pid), None) is False:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, name))


def _value(view: mmap.mmap) -> float | None:
    (value,) = _VALUE.unpack_from(view, 0)
    return value if value > 0.0 else None  # NaN too: never written


def _open_checked(path: str, flags: int) -> int:
    fd = os.open(path, flags | os.O_NOFOLLOW)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_size != SIZE:
        os.close(fd)
        raise PermissionError(f"{path} is not a lease file of this user's ({SIZE} bytes)")
    return fd
