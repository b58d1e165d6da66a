"""Crossing the process boundary: what may go down a child's pipe, and how it is encoded.

Both sides use these functions (the supervisor process and the child). Messages
are pickled with the standard library when it can (about 1 µs for a heartbeat)
and with dill when it cannot (closures, lambdas: about 20 µs more). Work
functions always go through dill with `recurse=True`: a lambda or closure then
carries only the globals it uses, so the child never imports the module that
defined it (a test module, a host's heavy `__main__`). Everything is checked
here, before it is sent: an object that cannot cross becomes a `CrossingError`
that names its type, never a hung pipe.
"""

from __future__ import annotations

import pickle
from typing import Any

import dill

from actors._protocol import Charge, Finished, Heartbeat, Partial, ToolCall

__all__ = [
    "DELEGATE",
    "CrossingError",
    "dumps",
    "dumps_dill",
    "dumps_work",
    "loads",
    "pack",
    "type_name",
    "unpack",
]

_PICKLE = b"p"
_DILL = b"d"

# The child's messages go as tuples (kind, *fields): a slotted dataclass pickles
# through `dataclasses.fields()`, about 15 µs a message each way.
Message = Heartbeat | Partial | Charge | ToolCall | Finished
_MESSAGES: tuple[type[Message], ...] = (Heartbeat, Partial, Charge, ToolCall, Finished)
_KIND = {cls: kind for kind, cls in enumerate(_MESSAGES)}
DELEGATE = len(_MESSAGES)  # (DELEGATE, request id, brief): a `ctx.delegate()` request


class CrossingError(TypeError):
    """An object cannot cross the process boundary (it cannot be pickled, even by dill)."""


def type_name(obj: object) -> str:
    """`module.QualName` of an object's type, for error messages."""
    cls = type(obj)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


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


def pack(message: Message) -> tuple[Any, ...]:
    """A protocol message as a plain tuple for the wire."""
    cls = type(message)
    return (_KIND[cls], *[getattr(message, name) for name in cls.__slots__])


def unpack(packed: tuple[Any, ...]) -> Message:
    """The protocol message that `pack` flattened."""
    message: Message = _MESSAGES[packed[0]](*packed[1:])
    return message


def loads(data: bytes | memoryview) -> Any:
    """Decode what `dumps` encoded (raises what unpickling raises)."""
    view = memoryview(data)
    if view[:1] == _PICKLE:
        return pickle.loads(view[1:])
    return dill.loads(bytes(view[1:]))
