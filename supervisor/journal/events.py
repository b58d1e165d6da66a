"""The event journal: structlog, one JSON object per line, flushed per event.

Every event carries `ts`, `event`, `delegation_id`, `attempt_id`, `parent_id`
and `agent`; names are API (DESIGN §7). The library never calls
`structlog.configure()`: with `log=` a path (or an open text file) Zeus writes
its own JSON lines through a private structlog pipeline; with `log=` a
structlog logger (`structlog.get_logger()`), events go through the host's
configuration instead.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Protocol, cast

import structlog

from supervisor.errors import SupervisorError
from supervisor.journal.private_files import append_private
from supervisor.journal.streams import Subscriptions

__all__ = ["EventLog", "JournalFile", "LogTarget"]

_log = logging.getLogger("supervisor")


class _LoggerLike(Protocol):
    def info(self, event: str, **kw: Any) -> Any: ...


LogTarget = str | Path | IO[str] | _LoggerLike | Callable[[dict[str, Any]], None] | None


class JournalFile:
    """The one JSONL writer: one line per event, flushed, safe from any thread.

    Zeus's own event log writes through it (as a structlog "logger": `msg`),
    and so does the live view (`write_event`). Write errors (a full disk, a
    closed file) propagate; the caller decides what to do with them.
    """

    def __init__(self, stream: IO[str], *, owned: bool) -> None:
        self._stream = stream
        self._owned = owned
        self._lock = threading.Lock()

    def msg(self, line: str) -> None:
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()

    info = msg

    def write_event(self, event: dict[str, Any]) -> None:
        """`event` as one JSON line (values JSON cannot hold written as text)."""
        self.msg(_dumps(event))

    def close(self) -> None:
        if self._owned:
            with self._lock:
                self._stream.close()


class EventLog:
    """Emits the pinned events; cheap when nobody listens (`enabled` is False)."""

    def __init__(self, target: LogTarget, wall: Callable[[], float]) -> None:
        self._wall = wall
        self._journal: JournalFile | None = None
        self._host: _LoggerLike | None = None
        self._sink: Callable[[dict[str, Any]], None] | None = None
        if target is None:
            pass
        elif isinstance(target, str | Path):
            try:
                stream = append_private(target)  # kept open until close()
            except OSError as exc:
                raise SupervisorError(
                    f"cannot write the event log {str(target)!r}: {exc.strerror}; "
                    "give a writable path or log=None"
                ) from None
            self._journal = JournalFile(stream, owned=True)
        elif hasattr(target, "write"):
            self._journal = JournalFile(cast(IO[str], target), owned=False)
        elif hasattr(target, "info"):
            self._host = cast(_LoggerLike, target)
        elif callable(target):
            self._sink = target
        else:
            raise SupervisorError(
                f"log= takes a path, an open text file, a structlog logger or a callable, "
                f"not {type(target).__name__}"
            )
        self._logger: Any = None
        if self._journal is not None:
            self._logger = structlog.wrap_logger(
                self._journal,
                processors=[structlog.processors.JSONRenderer(serializer=_dumps)],
                wrapper_class=structlog.BoundLogger,
                context_class=dict,
                cache_logger_on_first_use=True,
            )
        self.failures = 0  # events that could not be written
        self._writes = any(x is not None for x in (self._journal, self._host, self._sink))
        # `handle.events()` subscribers: while there are some, events are built for them too.
        self.subscriptions = Subscriptions(self._subscribers_changed)
        self.enabled = self._writes

    def _subscribers_changed(self, active: bool) -> None:
        self.enabled = self._writes or active

    def emit(
        self,
        event: str,
        *,
        delegation_id: str | None = None,
        attempt_id: str | None = None,
        parent_id: str | None = None,
        agent: str | None = None,
        **fields: Any,
    ) -> None:
        if not self.enabled:
            return
        record: dict[str, Any] = {
            "ts": round(self._wall(), 6),
            "delegation_id": delegation_id,
            "attempt_id": attempt_id,
            "parent_id": parent_id,
            "agent": agent,
            **fields,
        }
        if self.subscriptions.active:
            self.subscriptions.publish({"event": event, **record})
        if not self._writes:
            return
        try:
            if self._logger is not None:
                self._logger.info(event, **record)
            if self._host is not None:
                self._host.info(event, **record)
            if self._sink is not None:
                self._sink({"event": event, **record})
        except Exception:  # noqa: BLE001 - a full disk or a broken sink never stops a decision
            self.failures += 1
            if self.failures == 1:
                _log.exception("the event log failed on %s; events that fail are dropped", event)

    def publish(self, event: str, *, delegation_id: str, **fields: Any) -> None:
        """An event for `handle.events()` subscribers only, never journaled."""
        if self.subscriptions.wants(delegation_id):
            self.subscriptions.publish({"event": event, "ts": round(self._wall(), 6),
                                        "delegation_id": delegation_id, **fields})

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()


def _dumps(obj: Any, **kw: Any) -> str:
    kw.setdefault("default", str)
    return json.dumps(obj, **kw)
