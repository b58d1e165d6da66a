"""Crossing the process boundary: how what goes down a child's pipe is encoded and framed
(which frames there are: `actors.backends.frames`).

Both sides use these functions (the supervisor process and the child). Messages
are pickled with the standard library when it can (a heartbeat is a small tuple)
and with dill when it cannot (closures, lambdas: dill is much slower). Work
functions always go through dill with `recurse=True`: a lambda or closure then
carries only the globals it uses, so the child never imports the module that
defined it (a test module, a host's heavy `__main__`). Everything is checked
here, before it is sent: an object that cannot cross becomes a `CrossingError`
that names its type, never a hung pipe.

Messages go down a pipe framed by their length (`write_frame`, `FrameReader`):
plain `os.write` and `os.read` on the pipe's fds, with none of
`multiprocess.Connection`'s own framing and checks on each message, and a reader
that gets a header and its message in one read.

A work function is pickled once (`WorkCache`): the supervisor process keeps its
bytes while the function object lives, under a token, and a warm worker that
has received them keeps the unpickled function under that token, so that later
attempts send the token alone. What a function sent by value captures (closure
cells, the globals it uses) is therefore taken when it is first dispatched, and
in a worker it lives on between attempts as a module function's globals do.
"""

from __future__ import annotations

import functools
import itertools
import os
import pickle
import struct
import types
import weakref
from collections.abc import Callable
from typing import Any

import dill

from actors.models import Brief

__all__ = [
    "CrossingError",
    "FrameReader",
    "TypeNamed",
    "WorkCache",
    "brief_from_wire",
    "brief_to_wire",
    "dumps",
    "dumps_dill",
    "dumps_work",
    "loads",
    "type_name",
    "write_frame",
]

_PICKLE = b"p"
_DILL = b"d"

class CrossingError(TypeError):
    """An object cannot cross the process boundary (it cannot be pickled, even by dill)."""


def type_name(obj: object) -> str:
    """`module.QualName` of an object's type, for error messages."""
    cls = type(obj)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


class TypeNamed:
    """`template` with the type name of `obj` put in, computed only when printed (an error)."""

    __slots__ = ("obj", "template")

    def __init__(self, template: str, obj: object) -> None:
        self.template = template
        self.obj = obj

    def __str__(self) -> str:
        return self.template.format(type_name(self.obj))


def dumps(obj: object, what: object = None) -> bytes:
    """Encode `obj` for the pipe: pickle, else dill; `CrossingError` naming `what` if not."""
    try:
        return _PICKLE + pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - any pickling failure means "try dill"
        return dumps_dill(obj, what)


def dumps_dill(obj: object, what: object = None) -> bytes:
    """Encode `obj` with dill (by value where needed); `CrossingError` naming `what` if it cannot.

    `what` describes the object in the error ("the result (a Foo)"), as a string
    or anything whose `str()` gives one (computed only on failure); by default
    "an object of type Foo".
    """
    try:
        data: bytes = dill.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL, recurse=True)
    except Exception as exc:  # noqa: BLE001 - every reason an object cannot cross
        name = what or f"an object of type {type_name(obj)}"
        raise CrossingError(
            f"{name} cannot cross the process boundary: {type(exc).__name__}: {exc}"
        ) from None
    return _DILL + data


def dumps_work(work: object, what: object = None) -> bytes:
    """Encode a work function: by reference when it is importable, else by value (dill).

    The child does not run the host's `__main__`, so anything that the standard
    pickle would name in `__main__` goes by value too.
    """
    try:
        data = pickle.dumps(work, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - a lambda, a closure: by value
        return dumps_dill(work, what)
    if b"__main__" in data:
        return dumps_dill(work, what)
    return _PICKLE + data


def brief_to_wire(brief: Brief) -> Any:
    """A `Brief` as its pickling state (a third of the cost of pickling the model)."""
    if type(brief) is Brief:
        return brief.__getstate__()
    return brief  # a subclass, or not a Brief: pickled as it is


def brief_from_wire(state: Any) -> Brief:
    """The `Brief` that `brief_to_wire` encoded."""
    if type(state) is not dict:
        return state  # type: ignore[no-any-return]
    brief = Brief.__new__(Brief)
    brief.__setstate__(state)
    return brief


class WorkCache:
    """Work functions pickled once: function object -> (token, bytes), while the function lives.

    Keyed by the function object itself (its identity, held weakly), never by
    name: two functions with one `__qualname__`, or a closure made again, get
    bytes and a token of their own. Only plain functions are kept; any other
    callable (a `functools.partial`, an object with `__call__`, whose state may
    change between dispatches) is pickled on every dispatch and has no token.
    A function that cannot be pickled is not kept: each dispatch raises
    `CrossingError` again.

    Thread-safe without a lock (each step is one operation on a dict or a
    counter): an entry goes from a weak reference's callback, which may run
    whenever the collector runs, so a lock here could be taken twice by one thread.
    """

    def __init__(self) -> None:
        self._tokens = itertools.count(1)
        # id(function) -> (weak reference to it, token, bytes)
        self._entries: dict[int, tuple[weakref.ref[Any], int, bytes]] = {}

    def get(self, work: object, what: object = None) -> tuple[int | None, bytes]:
        """`(token, bytes)` for `work`, token None if not kept; `CrossingError` as `dumps_work`."""
        if type(work) is not types.FunctionType:
            return None, dumps_work(work, what)
        key = id(work)
        entry = self._entries.get(key)
        if entry is not None and entry[0]() is work:
            return entry[1], entry[2]
        data = dumps_work(work, what)
        token = next(self._tokens)
        ref = weakref.ref(work, functools.partial(self._forget, key, token))
        self._entries[key] = (ref, token, data)
        return token, data

    def __len__(self) -> int:
        return len(self._entries)

    def _forget(self, key: int, token: int, _: object = None) -> None:
        """The function is being freed: drop its entry, unless another took its id since.

        (None can while this runs: the id is freed after the callbacks.)
        """
        entry = self._entries.get(key)
        if entry is not None and entry[1] == token:
            self._entries.pop(key, None)


def loads(data: bytes | memoryview) -> Any:
    """Decode what `dumps` encoded (raises what unpickling raises)."""
    view = memoryview(data)
    if view[:1] == _PICKLE:
        return pickle.loads(view[1:])
    return dill.loads(bytes(view[1:]))


# -- framing ----------------------------------------------------------------------------

_LENGTH = struct.Struct("!Q")
_SMALL = 1 << 16  # a message up to this size goes with its header in one write
_MOST = 1 << 20  # the most one read asks for (a pipe holds 64 KiB by default)


def write_frame(fd: int, data: bytes) -> None:
    """Write one message to `fd` (a blocking pipe); `OSError` if the reader is gone.

    One writer per fd at a time (the caller's lock): a large message goes in
    several writes.
    """
    size = len(data)
    if size <= _SMALL:
        _write_all(fd, _LENGTH.pack(size) + data)
    else:
        _write_all(fd, _LENGTH.pack(size))
        _write_all(fd, data)


def _write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)
    if written < len(data):  # a signal handler interrupted the write
        view = memoryview(data)
        while written < len(data):
            written += os.write(fd, view[written:])


class FrameReader:
    """Reads the messages `write_frame` wrote to the other end of a pipe or socket. One
    reader per fd.

    `recv(fd, size)` is how one read is made: `os.read` by default; for a socket that
    is written to blocking and read without waiting, one that passes `MSG_DONTWAIT`.
    """

    __slots__ = ("_buffer", "_fd", "_need", "_recv")

    def __init__(self, fd: int, recv: Callable[[int, int], bytes] = os.read) -> None:
        self._fd = fd
        self._recv = recv
        self._buffer = bytearray()
        self._need = _LENGTH.size  # bytes wanted before the next message is complete

    def read(self) -> list[bytes] | None:
        """One read (it blocks if the fd does and nothing is there): the messages now complete.

        None at end of file: the writer is gone. Raises what the read raises
        (`BlockingIOError` for a non-blocking fd with nothing to read).
        """
        chunk = self._recv(self._fd, min(max(_SMALL, self._need - len(self._buffer)), _MOST))
        if not chunk:
            return None
        buffer = self._buffer
        if not buffer and len(chunk) >= _LENGTH.size:
            # The usual case: whole messages, nothing left over from the last read.
            (size,) = _LENGTH.unpack_from(chunk)
            if len(chunk) == _LENGTH.size + size:
                return [chunk[_LENGTH.size :]]
        buffer += chunk
        messages = []
        start = 0
        with memoryview(buffer) as view:
            while len(buffer) - start >= _LENGTH.size:
                (size,) = _LENGTH.unpack_from(buffer, start)
                end = start + _LENGTH.size + size
                if end > len(buffer):
                    self._need = end - start
                    break
                messages.append(bytes(view[start + _LENGTH.size : end]))
                start = end
            else:
                self._need = _LENGTH.size
        del buffer[:start]
        return messages
