"""`tracing()`: the supervision tree as OpenTelemetry spans, from the event stream.

```python
with Zeus.start(routing, log=["events.jsonl", tracing()]) as zeus: ...
```

One span per delegation (a child of the span current where the host
dispatched it, or of its parent delegation's span) and one per attempt inside
it; attributes `zeus.agent`, `zeus.delegation_id`, `zeus.attempt`,
`zeus.status`, `zeus.outcome` and usage; span events `retry`, `stale`,
`timeout`, `budget_exceeded`, `kill`, `fenced`, `fallback`, `cancel`. Spans are
timed by the journal's own `ts`. Without `tracing()` among the `log=` targets
nothing of this runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from supervisor.integrations._extras import missing_extra

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import Span, Status, StatusCode, Tracer, TracerProvider
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise missing_extra("supervisor.integrations.otel", "otel", exc) from exc

__all__ = ["Tracing", "tracing"]

Event = dict[str, Any]

# Journal events that become span events on the attempt span, and their names there.
_ATTEMPT_EVENTS = {
    "attempt.stale": "stale",
    "attempt.timed_out": "timeout",
    "attempt.budget_exceeded": "budget_exceeded",
    "attempt.killed": "kill",
    "attempt.fenced": "fenced",
}
# ... and on the delegation span.
_DELEGATION_EVENTS = {
    "retry.scheduled": "retry",
    "fallback.dispatched": "fallback",
    "delegation.cancel_requested": "cancel",
    "group.restarted": "group_restart",
}
_FINE = ("completed", "partial")  # statuses whose span is not an error


def tracing(tracer_provider: TracerProvider | None = None) -> Tracing:
    """An event sink for `Zeus.start(log=...)` (the global tracer provider by default)."""
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    return Tracing(provider.get_tracer("zeus-supervisor"))


class Tracing:
    """The sink. `on_dispatch` runs in the host's thread, `__call__` in Zeus's thread."""

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer
        self._lock = threading.Lock()
        self._at_dispatch: dict[str, otel_context.Context] = {}
        self._delegations: dict[str, Span] = {}
        self._attempts: dict[str, Span] = {}
        self._handlers: dict[str, Callable[[Event], None]] = {
            "delegation.dispatched": self._dispatched,
            "delegation.settled": self._settled,
            "attempt.started": self._attempt_started,
            "attempt.completed": self._attempt_ended,
            "attempt.failed": self._attempt_ended,
            "zeus.stopped": self._stopped,
        }

    def on_dispatch(self, delegation_id: str) -> None:
        """Remember the host's current context: the delegation span's parent."""
        current = otel_context.get_current()
        with self._lock:
            self._at_dispatch[delegation_id] = current

    def __call__(self, event: Event) -> None:
        name = event["event"]
        handler = self._handlers.get(name)
        if handler is not None:
            handler(event)
        elif name in _ATTEMPT_EVENTS:
            span = self._attempts.get(event["attempt_id"] or "")
            if span is not None:
                span.add_event(_ATTEMPT_EVENTS[name], _scalars(event), _ns(event))
        elif name in _DELEGATION_EVENTS:
            span = self._delegations.get(event["delegation_id"] or "")
            if span is not None:
                span.add_event(_DELEGATION_EVENTS[name], _scalars(event), _ns(event))

    def _dispatched(self, event: Event) -> None:
        delegation_id = event["delegation_id"]
        with self._lock:
            host = self._at_dispatch.pop(delegation_id, None)
        parent = self._delegations.get(event["parent_id"] or "")
        context = trace.set_span_in_context(parent) if parent is not None else host
        self._delegations[delegation_id] = self._tracer.start_span(
            f"delegation {event['agent']}",
            context=context,
            start_time=_ns(event),
            attributes={
                "zeus.agent": event["agent"],
                "zeus.delegation_id": delegation_id,
                "zeus.depth": event.get("depth", 1),
                "zeus.timeout_s": event.get("timeout_s") or 0.0,
            },
        )

    def _attempt_started(self, event: Event) -> None:
        delegation = self._delegations.get(event["delegation_id"])
        if delegation is None:
            return
        attributes = {
            "zeus.agent": event["agent"],
            "zeus.delegation_id": event["delegation_id"],
            "zeus.attempt": event.get("attempt", 0),
        }
        if event.get("pid") is not None:
            attributes["zeus.pid"] = event["pid"]
        self._attempts[event["attempt_id"]] = self._tracer.start_span(
            f"attempt {event['agent']}",
            context=trace.set_span_in_context(delegation),
            start_time=_ns(event),
            attributes=attributes,
        )

    def _attempt_ended(self, event: Event) -> None:
        span = self._attempts.pop(event["attempt_id"], None)
        if span is None:
            return
        outcome = event.get("outcome", "completed")
        span.set_attribute("zeus.outcome", outcome)
        if outcome != "completed":
            span.set_status(Status(StatusCode.ERROR, event.get("error") or outcome))
        span.end(_ns(event))

    def _settled(self, event: Event) -> None:
        span = self._delegations.pop(event["delegation_id"], None)
        if span is None:
            return
        status = event["status"]
        attributes = {"zeus.status": status, "zeus.attempts": event.get("attempts", 0)}
        usage = event.get("usage") or {}
        if any(usage.values()):  # a delegation that charged nothing carries no usage
            attributes.update({f"zeus.usage.{k}": v for k, v in usage.items()})
            attributes["gen_ai.usage.input_tokens"] = usage.get("input_tokens", 0)
            attributes["gen_ai.usage.output_tokens"] = usage.get("output_tokens", 0)
        span.set_attributes(attributes)
        if status not in _FINE:
            span.set_status(Status(StatusCode.ERROR, event.get("error") or status))
        span.end(_ns(event))

    def _stopped(self, event: Event) -> None:
        """Zeus settles everything before it stops; end whatever a lost event left open."""
        for spans in (self._attempts, self._delegations):
            while spans:
                spans.popitem()[1].end(_ns(event))


def _ns(event: Event) -> int:
    return int(event["ts"] * 1e9)


def _scalars(event: Event) -> dict[str, Any]:
    """An event's own fields that a span event can carry (str, bool, int, float)."""
    skip = ("event", "ts", "delegation_id", "attempt_id", "parent_id", "agent")
    return {
        k: v for k, v in event.items()
        if k not in skip and isinstance(v, str | bool | int | float)
    }
