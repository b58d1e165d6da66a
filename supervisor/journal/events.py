"""The event journal: structlog, one JSON object per line, flushed per event.

Every event carries `ts`, `event`, `delegation_id`, `attempt_id`, `parent_id`
and `agent`; names are API (docs/design.md, "Events"). The library never calls
`structlog.configure()`: with `log=` a path (or an open text file) Zeus writes
its own JSON lines through a private structlog pipeline; with `log=` a
structlog logger (`structlog.get_logger()`), events go through the host's
configuration instead; with a callable, it gets each event dict. `log=` may
list several of these: each gets every event.
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

__all__ = ["EventLog", "JournalFile", "LogOne", "LogTarget"]

_log = logging.getLogger("supervisor")


class _LoggerLike(Protocol):
    def info(self, event: str, **kw: Any) -> Any: ...


LogOne = str | Path | IO[str] | _LoggerLike | Callable[[dict[str, Any]], None] | None
# One target, or several together (`log=["events.jsonl", tracing()]`): each gets every event.
LogTarget = LogOne | list[LogOne] | tuple[LogOne, ...]


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
    """Emits the pinned events to every target; cheap when nobody listens (`enabled` False).

    A callable sink may also define `on_dispatch(delegation_id)`: it is called in the
    host's thread as the host dispatches (before Zeus's thread sees the delegation), so
    a sink can capture what is current there (a tracing context, say).
    """

    def __init__(self, target: LogTarget, wall: Callable[[], float]) -> None:
        self._wall = wall
        self._journals: list[JournalFile] = []
        self._hosts: list[_LoggerLike] = []
        self._sinks: list[Callable[[dict[str, Any]], None]] = []
        targets = list(target) if isinstance(target, list | tuple) else [target]
        try:
            for one in targets:
                self._add(one)
        except SupervisorError:
            self.close()
            raise
        self._loggers: list[Any] = [
            structlog.wrap_logger(
                journal,
                processors=[structlog.processors.JSONRenderer(serializer=_dumps)],
                wrapper_class=structlog.BoundLogger,
                context_class=dict,
                cache_logger_on_first_use=True,
            )
            for journal in self._journals
        ]
        self._dispatch_hooks: list[Callable[[str], None]] = [
            hook for sink in self._sinks if callable(hook := getattr(sink, "on_dispatch", None))
        ]
        self.failures = 0  # events that could not be written
        self._writes = bool(self._journals or self._hosts or self._sinks)
        # `handle.events()` subscribers: while there are some, events are built for them too.
        self.subscriptions = Subscriptions(self._subscribers_changed)
        self.enabled = self._writes

    def _subscribers_changed(self, active: bool) -> None:
        self.enabled = self._writes or active

    def _add(self, target: LogOne) -> None:
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
            self._journals.append(JournalFile(stream, owned=True))
        elif hasattr(target, "write"):
            self._journals.append(JournalFile(cast(IO[str], target), owned=False))
        elif hasattr(target, "info"):
            self._hosts.append(cast(_LoggerLike, target))
        elif callable(target):
            self._sinks.append(target)
        else:
            raise SupervisorError(
                f"log= takes a path, an open text file, a structlog logger or a callable "
                f"(or a list of them), not {type(target).__name__}"
            )

    def dispatching(self, delegation_id: str) -> None:
        """Tell the sinks that care that the host is dispatching; runs in the host's thread."""
        for hook in self._dispatch_hooks:
            try:
                hook(delegation_id)
            except Exception:  # noqa: BLE001 - a broken sink never stops a dispatch
                self._failed("a dispatch")

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
        for logger in self._loggers:
            try:
                logger.info(event, **record)
            except Exception:  # noqa: BLE001 - a full disk never stops a decision
                self._failed(event)
        for host in self._hosts:
            try:
                host.info(event, **record)
            except Exception:  # noqa: BLE001 - a broken host logger never stops a decision
                self._failed(event)
        for sink in self._sinks:
            try:
                sink({"event": event, **record})
            except Exception:  # noqa: BLE001 - a broken sink never stops a decision
                self._failed(event)

    def _failed(self, event: str) -> None:
        self.failures += 1
        if self.failures == 1:
            _log.exception("the event log failed on %s; events that fail are dropped", event)

    def publish(self, event: str, *, delegation_id: str, **fields: Any) -> None:
        """An event for `handle.events()` subscribers only, never journaled."""
        if self.subscriptions.wants(delegation_id):
            self.subscriptions.publish({"event": event, "ts": round(self._wall(), 6),
                                        "delegation_id": delegation_id, **fields})

    def close(self) -> None:
        for journal in self._journals:
            journal.close()


def _dumps(obj: Any, **kw: Any) -> str:
    kw.setdefault("default", str)
    return json.dumps(obj, **kw)
