"""`Context`: what a work function uses to report to Zeus. Runs in the child's thread."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from actors._clock import Clock
from actors._errors import Cancelled
from actors._models import Brief, Summary, Usage
from actors._protocol import Charge, DelegateRequest, Heartbeat, Partial, ToolCall
from actors._usage import usage_from

__all__ = ["Context"]


class Context:
    """The child's side of one attempt.

    Every reporting call (`heartbeat`, `partial`, `charge`, `tool_call`) advances
    the progress counter; heartbeats are sent at most once per `interval_s`,
    everything else at once. All methods are called from the work function's
    thread (or, in an `async def` work function, its event loop thread).
    """

    def __init__(
        self,
        *,
        brief: Brief,
        agent: str,
        delegation_id: str,
        attempt: int,
        attempt_id: str,
        deadline: float,
        clock: Clock,
        send: Callable[[object], None],
        cancel_event: threading.Event | None = None,
        heartbeat_interval_s: float = 1.0,
        session: dict[str, Any] | None = None,
        previous_partials: list[Any] | None = None,
        depth: int = 1,
        framing: str = "",
    ) -> None:
        self.brief = brief
        self.agent = agent
        self.delegation_id = delegation_id
        self.attempt = attempt
        self.attempt_id = attempt_id
        self.deadline = deadline
        self.session: dict[str, Any] = session if session is not None else {}
        self.previous_partials: list[Any] = list(previous_partials or [])
        self.depth = depth
        self.framing = framing
        self._clock = clock
        self._send = send
        self._cancel = cancel_event if cancel_event is not None else threading.Event()
        self._interval = heartbeat_interval_s
        self._progress = 0
        self._last_beat = float("-inf")

    # -- reading -----------------------------------------------------------------
    @property
    def progress(self) -> int:
        """How many reporting calls this attempt has made."""
        return self._progress

    @property
    def cancelled(self) -> bool:
        """True once Zeus asked this attempt to stop."""
        return self._cancel.is_set()

    def check(self) -> None:
        """Raise `actors.Cancelled` once cancellation is requested."""
        if self._cancel.is_set():
            raise Cancelled(self.attempt_id)

    def remaining(self) -> float:
        """Seconds left until this attempt's deadline (never negative)."""
        return max(0.0, self.deadline - self._clock.now())

    def sleep(self, seconds: float) -> None:
        """Wait up to `seconds` of real time; raise `Cancelled` if cancelled meanwhile."""
        if self._cancel.wait(seconds):
            raise Cancelled(self.attempt_id)

    # -- reporting ---------------------------------------------------------------
    def heartbeat(self, note: str | None = None) -> None:
        """Say "still working"; counts as progress. Sent at most once per interval."""
        self._progress += 1
        now = self._clock.now()
        if now - self._last_beat >= self._interval:
            self._last_beat = now
            self._send(Heartbeat(self.attempt_id, self._progress, note))

    def partial(self, item: Any) -> None:
        """Report a partial result (kept on every outcome); counts as progress."""
        self._progress += 1
        self._send(Partial(self.attempt_id, self._progress, item))

    def charge(
        self,
        calls: int = 0,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost: float = 0.0,
    ) -> None:
        """Charge usage against the budgets; the first charge over a cap stops the attempt."""
        self._progress += 1
        usage = Usage(
            calls=calls, input_tokens=input_tokens, output_tokens=output_tokens, cost=cost
        )
        self._send(Charge(self.attempt_id, self._progress, usage))

    def charge_usage(self, usage: object) -> None:
        """Charge a framework's own usage counters: a pydantic-ai `RunUsage` or
        `RequestUsage`, or an OpenAI-style usage (`input_tokens`/`output_tokens` or
        `prompt_tokens`/`completion_tokens`). Charge each counter once: a run's
        cumulative usage at its end, or each request's usage as it comes.
        Without a cost of its own, the agent's `pricing` prices the tokens.
        """
        charged = usage_from(usage)
        self.charge(charged.calls, charged.input_tokens, charged.output_tokens, charged.cost)

    def tool_call(self, name: str, *, read_only: bool = False) -> None:
        """Record a tool call. One with side effects blocks retries unless the policy allows."""
        self._progress += 1
        self._send(ToolCall(self.attempt_id, self._progress, name, read_only))

    def delegate(self, brief: Brief) -> Summary:
        """Delegate `brief` as a child of this delegation and wait for its summary.

        Only orchestrator agents may delegate; a refusal raises `DelegationRefused`.
        """
        self.check()
        self._progress += 1
        done = threading.Event()
        box: list[Summary | BaseException] = []

        def reply(result: Summary | BaseException) -> None:
            box.append(result)
            done.set()

        self._send(DelegateRequest(self.attempt_id, brief, reply))
        done.wait()
        result = box[0]
        if isinstance(result, BaseException):
            raise result
        return result
