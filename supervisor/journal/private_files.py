"""Files Zeus writes for its owner: journals and artifacts, owner-only and inside their folder.

A journal holds scopes and full error texts, and an artifact holds an agent's
whole output, so both are created readable by their owner only (files 0600,
folders 0700, before the umask). An artifact's file name is made from a
delegation id that embeds an agent name, so it is reduced to safe characters
and always lands inside the artifact folder; a symbolic link in its place is
not followed.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import IO

__all__ = ["append_private", "make_private_dir", "safe_file_name", "write_private"]

FILE_MODE = 0o600
DIR_MODE = 0o700
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_MAX_NAME = 200  # file systems allow 255 bytes; leave room for a suffix


def safe_file_name(text: str, suffix: str = "") -> str:
    """`text` as one path component: letters, digits, `_`, `.`, `-`; never `.`, `..` or empty."""
    name = _UNSAFE.sub("_", text).lstrip(".")[:_MAX_NAME] or "_"
    return name + suffix


def make_private_dir(folder: Path) -> None:
    """Create `folder` and any missing parents, each owner-only; an existing one is left as is."""
    missing: list[Path] = []
    for path in (folder, *folder.parents):
        if path.exists():
            break
        missing.append(path)
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made by someone else meanwhile
            path.mkdir(mode=DIR_MODE)


def write_private(folder: Path, name: str, text: str) -> Path:
    """Write `text` to `folder/safe_file_name(name)`, owner-only; return the path.

    The folder is created owner-only when missing; a symbolic link at the file's
    place is refused (`OSError`), so nothing is written outside the folder.
    """
    make_private_dir(folder)
    path = folder / safe_file_name(name)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
    return path


def append_private(path: str | Path) -> IO[str]:
    """`path` opened for appending text, created owner-only when it does not exist."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    return os.fdopen(fd, "a", encoding="utf-8")
