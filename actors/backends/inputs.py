"""How a command agent receives its brief's inputs: `inputs_via: argv | stdin | file`.

- `argv` (the default, as before): `{inputs}` in the command becomes the inputs as
  JSON. Simple, but every local user can read it (`/proc/<pid>/cmdline`, `ps`).
- `stdin`: the inputs as JSON are the FIRST line of the program's standard input;
  standard input stays open after it (later lines are for messages from Zeus), so
  a program reads one line, not to the end. `{inputs}` is refused in the command.
  The supervisor's reader writes that line with `send_first_line`; a worker's writes
  the line and the messages after it with `feed_stdin`, a thread of their own.
- `file`: the inputs as JSON are written to a new owner-only (0600) file; `{inputs}`
  becomes its path, and `ZEUS_INPUTS_FILE` names it too. The file is removed when
  the attempt ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from collections.abc import Callable
from typing import IO, Any, Literal

from actors.mail import Mail

__all__ = [
    "INPUTS_FILE_ENV",
    "InputsVia",
    "feed_stdin",
    "inputs_json",
    "send_first_line",
    "write_inputs_file",
]

InputsVia = Literal["argv", "stdin", "file"]
INPUTS_FILE_ENV = "ZEUS_INPUTS_FILE"
_FEED_LOOK_S = 0.1  # how often `feed_stdin`, waiting for a message, looks if it should stop


def inputs_json(inputs: Any) -> str:
    """The inputs as JSON on one line (`null` for none)."""
    return json.dumps(inputs, default=str, ensure_ascii=False)


def write_inputs_file(inputs: Any) -> str:
    """A new owner-only file holding the inputs as JSON (and a newline); its path."""
    fd, path = tempfile.mkstemp(prefix="zeus-inputs-", suffix=".json")  # mode 0600
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(inputs_json(inputs) + "\n")
    return path


def send_first_line(stdin: IO[bytes], inputs: Any, *, name: str) -> None:
    """Write the inputs line to a program's `stdin` without blocking the caller's thread.

    What the pipe takes at once is written here; a larger rest is written by a daemon
    thread named `name`. A program that closed its standard input (or exited) simply
    does not get the line. The pipe is left open.
    """
    data = (inputs_json(inputs) + "\n").encode("utf-8")
    fd = stdin.fileno()
    os.set_blocking(fd, False)
    try:
        written = os.write(fd, data)
    except BlockingIOError:
        written = 0
    except OSError:  # BrokenPipeError: the program does not read its standard input
        return
    if written < len(data):
        # The thread writes through its own duplicate of the pipe, so closing `stdin`
        # when the attempt ends can never leave it writing to a reused fd number.
        own = os.dup(fd)
        rest = data[written:]
        threading.Thread(target=_write_rest, args=(own, rest), name=name, daemon=True).start()


def _write_rest(fd: int, rest: bytes) -> None:
    """Runs in its own daemon thread: the rest of a long inputs line, blocking; closes `fd`."""
    try:
        os.set_blocking(fd, True)
        view = memoryview(rest)
        while view:
            view = view[os.write(fd, view):]
    except OSError:  # the program exited or closed its standard input
        pass
    finally:
        os.close(fd)


def feed_stdin(
    stdin: IO[bytes],
    first: bytes | None,
    receive: Callable[[float], object | None],
    done: threading.Event,
) -> None:
    """Runs in a thread of its own: write `first` (the inputs line), then each message
    `receive(timeout)` gives as one JSON line, blocking while the pipe is full, until `done`
    is set or the program stops reading; then close `stdin`, which it owns.

    A message that is None is not written (`receive` says "none came" with it).
    """
    fd = stdin.fileno()
    try:
        if first is not None:
            _write_all(fd, first)
        while not done.is_set():
            message = receive(_FEED_LOOK_S)
            if message is None:
                continue
            try:
                line = Mail(message).encode("command").line
            except TypeError:  # checked at the owner's call already
                continue
            assert line is not None
            _write_all(fd, line)
    except OSError:  # BrokenPipeError: the program closed its standard input, or exited
        pass
    finally:
        with contextlib.suppress(OSError):
            stdin.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
