"""Where `zeus ui` reads a run from: a `Source` of journal events, read and never written.

A source hands out the events written since it was last asked (`read_new`),
as the journal file holds them (docs/design.md, events). `JournalFile` is the
JSONL journal that `log=` writes, tailed as it grows; `StoreFile` a durable store
(docs/design.md, the store), read only, whose records it hands out as the events
they stand for, so the page needs no second reader. `open_source` picks the
source for a path and says why a path cannot be one.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from supervisor.errors import SupervisorError
from supervisor.journal import Event, load, no_events, parse_line

__all__ = ["Batch", "JournalFile", "Source", "StoreDatabase", "StoreFile", "open_source"]

_SQLITE_MAGIC = b"SQLite format 3\x00"


@dataclass(frozen=True)
class Batch:
    """What a source read in one call: new events, notes on lines skipped, and whether
    it started over (a truncated journal): then what was read before is void. `hosts`
    is a shared store's hosts as just read, each with its lease and how many open
    delegations it owns (None: the source has no hosts, or did not read them)."""

    events: list[Event] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reset: bool = False
    hosts: list[Event] | None = None


class Source(ABC):
    """A run's events, read only. Called from one thread at a time (the server's loop)."""

    @property
    @abstractmethod
    def label(self) -> str:
        """What the page calls the source (a path)."""

    @abstractmethod
    def read_new(self) -> Batch:
        """The events written since the last call; the first call gives them all."""

    @abstractmethod
    def close(self) -> None:
        """Let go of what the source holds open."""


class JournalFile(Source):
    """A JSONL journal, tailed: a line counts once its newline is written (a torn
    last line waits for the rest), a garbled line becomes a note, and a file that
    shrinks is read again from its start. The file is opened read-only, so its
    owner-only mode is never touched."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._stream: IO[bytes] | None = None
        self._buffer = b""
        self._line = 0

    @property
    def label(self) -> str:
        return str(self._path)

    def read_new(self) -> Batch:
        if self._stream is None:
            self._stream = self._path.open("rb")
        reset = os.fstat(self._stream.fileno()).st_size < self._stream.tell()
        if reset:
            self._stream.seek(0)
            self._buffer, self._line = b"", 0
        chunk = self._stream.read()
        if not chunk:
            return Batch(reset=reset)
        *complete, self._buffer = (self._buffer + chunk).split(b"\n")
        events: list[Event] = []
        notes: list[str] = []
        for raw in complete:
            self._line += 1
            line = raw.decode("utf-8", errors="replace").strip().lstrip("\ufeff")
            if not line:
                continue
            try:
                events.append(parse_line(line))
            except ValueError as exc:
                notes.append(f"line {self._line}: skipped: {exc}")
        return Batch(events, notes, reset)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None


class StoreFile(Source):
    """A durable store, read only (never claimed, never written): its rows read again
    as events whenever the file or its write-ahead log changed. New rows come after
    the ones already read; a store claimed by a new Zeus since is read from its start."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._wal = path.with_name(path.name + "-wal")
        self._seen: list[Event] = []
        self._stamp: tuple[tuple[int, int] | None, ...] = ()

    @property
    def label(self) -> str:
        return str(self._path)

    def read_new(self) -> Batch:
        from supervisor.store import store_events

        stamp = tuple(_stat(p) for p in (self._path, self._wal))
        if stamp == self._stamp:
            return Batch()
        self._stamp = stamp
        events = list(store_events(self._path))
        seen = self._seen
        grown = (len(events) >= len(seen) and (not seen or (
            events[0] == seen[0] and events[len(seen) - 1] == seen[-1])))
        self._seen = events
        if grown:
            return Batch(events[len(seen):])
        return Batch(events, reset=True)

    def close(self) -> None:
        self._seen = []


def _stat(path: Path) -> tuple[int, int] | None:
    """When the file last changed and its size; None when there is none."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size


class StoreDatabase(Source):
    """A PostgreSQL store, read only (one read-only transaction a poll): its rows read
    again as events at every poll, new ones given when they changed, and its hosts
    (their leases, what each owns) every time."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._seen: list[Event] = []

    @property
    def label(self) -> str:
        from supervisor.store.pg_schema import shown

        return shown(self._url)

    def read_new(self) -> Batch:
        from supervisor.store import store_events

        events = list(store_events(self._url))
        hosts = events[0].get("hosts") if events else None
        hosts = [h for h in hosts if isinstance(h, dict)] if isinstance(hosts, list) else []
        seen = self._seen
        if events == seen:
            return Batch(hosts=hosts)
        self._seen = events
        if seen and len(events) >= len(seen) and events[1:len(seen)] == seen[1:]:
            # grown: the hosts' leases move in `zeus.started`, which is no news (they
            # come as `hosts`); a delegation taken over names a new host: read again
            return Batch(events[len(seen):], hosts=hosts)
        return Batch(events, reset=True, hosts=hosts)

    def close(self) -> None:
        self._seen = []


def open_source(path: Path | str) -> Source:
    """The source at `path` (or a PostgreSQL store's URL); `SupervisorError` says why it
    cannot be read."""
    if isinstance(path, str):
        from supervisor.store import is_store_url, store_events

        if not is_store_url(path):
            path = Path(path)
        else:
            next(iter(store_events(path)))  # StoreError when it is no store
            return StoreDatabase(path)
    if path.is_dir():
        raise SupervisorError(f"{path} is a directory; give the journal file (log=)")
    try:
        with path.open("rb") as stream:
            head = stream.read(len(_SQLITE_MAGIC))
    except FileNotFoundError:
        raise SupervisorError(f"{path} does not exist; give the journal file (log=)") from None
    except OSError as exc:
        raise SupervisorError(f"cannot read {path}: {exc.strerror}") from None
    if head == _SQLITE_MAGIC:
        from supervisor.store.schema import inspect

        inspect(path)  # StoreError (a SupervisorError) for an SQLite file that is no store
        return StoreFile(path)
    _check_journal(path)
    return JournalFile(path)


_PREFIX = 64 * 1024  # a journal says so in its first line; junk is read whole to say how much


def _check_journal(path: Path) -> None:
    """`SupervisorError`, as `zeus tree` words it, for a file whose lines are no Zeus events.

    An empty file, or one whose first line is still being written, is a journal to come
    (`zeus run --ui` starts the page before the first event)."""
    with path.open("rb") as stream:
        *complete, _ = stream.read(_PREFIX).split(b"\n")
    lines = [raw.decode("utf-8", errors="replace").strip().lstrip("\ufeff") for raw in complete]
    lines = [line for line in lines if line]
    for line in lines:
        try:
            parse_line(line)
        except ValueError:
            continue
        return
    if lines:
        problem = no_events(path, load(path))
        if problem is not None:
            raise SupervisorError(problem)
