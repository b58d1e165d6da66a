"""The event journal: structlog, one JSON object per line, flushed per event.

Every event carries `ts`, `event`, `delegation_id`, `attempt_id`, `parent_id`
and `agent`; names are API (DESIGN §7). The library never calls
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

__all__ = ["EventLog", "LogOne", "LogTarget"]

_log = logging.getLogger("supervisor")


class _LoggerLike(Protocol):
    def info(self, event: str, **kw: Any) -> Any: ...


LogOne = str | Path | IO[str] | _LoggerLike | Callable[[dict[str, Any]], None] | None
# One target, or several together (`log=["events.jsonl", tracing()]`): each gets every event.
LogTarget = LogOne | list[LogOne] | tuple[LogOne, ...]


class _JournalFile:
    """A structlog "logger" that appends one line per event and flushes it."""

    def __init__(self, stream: IO[str], *, owned: bool) -> None:
        self._stream = stream
        self._owned = owned
        self._lock = threading.Lock()

    def msg(self, line: str) -> None:
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()

    info = msg

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
        self._journals: list[_JournalFile] = []
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
        self.enabled = bool(self._journals or self._hosts or self._sinks)

    def _add(self, target: LogOne) -> None:
        if target is None:
            pass
        elif isinstance(target, str | Path):
            try:
                stream = Path(target).open("a", encoding="utf-8")  # noqa: SIM115 - kept open
            except OSError as exc:
                raise SupervisorError(
                    f"cannot write the event log {str(target)!r}: {exc.strerror}; "
                    "give a writable path or log=None"
                ) from None
            self._journals.append(_JournalFile(stream, owned=True))
        elif hasattr(target, "write"):
            self._journals.append(_JournalFile(cast(IO[str], target), owned=False))
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

    def close(self) -> None:
        for journal in self._journals:
            journal.close()


def _dumps(obj: Any, **kw: Any) -> str:
    kw.setdefault("default", str)
    return json.dumps(obj, **kw)
