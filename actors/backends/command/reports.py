"""What a command's output says, reported to Zeus: the `StreamSink`s of the two command paths
(`actors.speaks.StreamReader` calls them as it reads, in the thread that reads the pipes).

`MessageReports` sends the child's messages itself (`CommandChild`, the backend's hub
thread) and owns the attempt's progress counter; `ContextReports` reports through the
attempt's `Context` (`CommandWork`, a worker's main thread), whose counter it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from actors.context import Context
from actors.models import Usage
from actors.protocol import AgentSession, Charge, Heartbeat, Partial, ToolCall

__all__ = ["ContextReports", "MessageReports"]


class MessageReports:
    """The child's messages, sent through `emit`; `count` is its progress counter."""

    __slots__ = ("_attempt_id", "_emit", "_interval_s", "_last_beat", "_on_ended", "count")

    def __init__(self, attempt_id: str, interval_s: float, emit: Callable[[object], None], *,
                 on_ended: Callable[[], None]) -> None:
        self._attempt_id = attempt_id
        self._interval_s = interval_s
        self._emit = emit
        self._on_ended = on_ended
        self._last_beat = float("-inf")
        self.count = 0

    def _next(self) -> int:
        self.count += 1
        return self.count

    def progress(self, lines: int) -> None:
        """Lines are progress: a heartbeat says so at once, then at most once an interval
        (as `Context.heartbeat` sends them; the liveness beat carries the rest)."""
        self.count += lines
        now = time.monotonic()
        if now - self._last_beat >= self._interval_s:
            self._last_beat = now
            self._emit(Heartbeat(self._attempt_id, self.count))

    def partial(self, item: object) -> None:
        self._emit(Partial(self._attempt_id, self._next(), item))

    def charge(self, usage: Usage, *, cached_input_tokens: int = 0) -> None:
        self._emit(Charge(self._attempt_id, self._next(), usage, cached_input_tokens))

    def tool(self, name: str, *, read_only: bool, running: bool | None,
             call_id: str | None = None, detail: str | None = None) -> None:
        self._emit(ToolCall(self._attempt_id, self._next(), name, read_only, running, call_id,
                            detail))

    def session(self, session_id: str) -> None:
        self._emit(AgentSession(self._attempt_id, self._next(), session_id))

    def note(self, text: str | None) -> None:
        self._emit(Heartbeat(self._attempt_id, self._next(), text))

    def ended(self) -> None:
        self._on_ended()


class ContextReports:
    """The same, through the attempt's `Context` (which counts the progress)."""

    __slots__ = ("_ctx", "_on_ended")

    def __init__(self, ctx: Context, on_ended: Callable[[], None]) -> None:
        self._ctx = ctx
        self._on_ended = on_ended

    def progress(self, lines: int) -> None:
        for _ in range(lines):
            self._ctx.heartbeat()

    def partial(self, item: object) -> None:
        self._ctx.partial(item)

    def charge(self, usage: Usage, *, cached_input_tokens: int = 0) -> None:
        self._ctx.charge(usage.calls, usage.input_tokens, usage.output_tokens, usage.cost,
                         cached_input_tokens=cached_input_tokens)

    def tool(self, name: str, *, read_only: bool, running: bool | None,
             call_id: str | None = None, detail: str | None = None) -> None:
        self._ctx.report_tool(name, read_only=read_only, running=running, call_id=call_id,
                              detail=detail)

    def session(self, session_id: str) -> None:
        self._ctx.agent_session(session_id)

    def note(self, text: str | None) -> None:
        self._ctx.heartbeat(text)

    def ended(self) -> None:
        self._on_ended()
