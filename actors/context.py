"""`Context`: what a work function uses to report to Zeus. Runs in the child's thread."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from actors.clock import Clock
from actors.errors import Cancelled
from actors.mail import CancelSignal, Flag, Inbox
from actors.models import Brief, Summary, Usage
from actors.protocol import AgentSession, Charge, DelegateRequest, Heartbeat, Partial, ToolCall
from actors.usage import usage_from

__all__ = ["MAX_PARTIALS_SENT", "Context", "Fence"]

# The most partial results one attempt sends; the rest are counted, not sent, so
# a child that floods `partial()` cannot fill Zeus's mailbox (thread or process).
MAX_PARTIALS_SENT = 10_000

# What `receive()` waits with once the work passes stops on itself: never set.
_NEVER = CancelSignal()


@dataclass(frozen=True, slots=True)
class Fence:
    """A token a child passes to a system that checks it; a larger epoch wins.

    `epoch` grows each time the delegation moves to another host (or is reopened), so a
    system that remembers the largest epoch it saw for a delegation can refuse the
    writes of an older one. `str(fence)` is `<delegation id>:<epoch>`, as a command
    agent gets it in `ZEUS_FENCE`; `Fence.parse` reads it back.
    """

    delegation_id: str
    epoch: int

    def __str__(self) -> str:
        return f"{self.delegation_id}:{self.epoch}"

    @classmethod
    def parse(cls, text: str) -> Fence:
        """The fence `str(fence)` wrote (a command's `ZEUS_FENCE`); `ValueError` saying
        what is wrong otherwise."""
        delegation_id, colon, epoch = text.rpartition(":")
        if not colon or not delegation_id or not epoch.isdigit() or int(epoch) < 1:
            raise ValueError(f"not a fence: {text!r}; expected <delegation id>:<epoch>, "
                             "an epoch of 1 or more (ZEUS_FENCE=apollo-1:2)")
        return cls(delegation_id, int(epoch))


class Context:
    """The child's side of one attempt.

    Every reporting call (`heartbeat`, `partial`, `charge`, `tool_call`, `tool`)
    advances the progress counter; heartbeats are sent at most once per
    `interval_s`, everything else at once. Every call is also a cancellation
    point: once Zeus has asked the attempt to stop (or a charge went over the
    budget the attempt was given), it raises `actors.Cancelled` (unless the work
    passes stops on itself: `pass_cancel_on`). All methods are called from the
    work function's thread (or, in an `async def` work function, its event loop
    thread); `receive()` from any thread.
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
        cancel_event: Flag | None = None,
        heartbeat_interval_s: float = 1.0,
        session: dict[str, Any] | None = None,
        previous_partials: list[Any] | None = None,
        depth: int = 1,
        framing: str = "",
        previous_error: str | None = None,
        reasoning_effort: str | None = None,
        budget_left: dict[str, float] | None = None,
        inbox: Inbox | None = None,
        epoch: int = 1,
        previous_blocker: str | None = None,
        note: str | None = None,
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
        # How the previous attempt of this delegation ended ("stale: no progress ..."), if any.
        self.previous_error = previous_error
        # Once a person resumed the delegation from `blocked` (`zeus.resume(id, note=...)`):
        # why it was blocked, and the person's note (None: none given); None on a first run.
        self.previous_blocker = previous_blocker
        self.note = note
        self.reasoning_effort = reasoning_effort
        self._budget_left = dict(budget_left) if budget_left else None
        self._over_budget = False  # a charge went past `budget_left`: Zeus is stopping it
        self._clock = clock
        self._send = send
        self._cancel = cancel_event if cancel_event is not None else CancelSignal()
        self._passes_stops_on = False  # `pass_cancel_on`: reporting calls never raise
        self._inbox = inbox if inbox is not None else Inbox()
        self._interval = heartbeat_interval_s
        self._epoch = epoch  # the delegation's epoch on its store, as the attempt started
        self._progress = 0
        self._last_beat = float("-inf")
        self._held_note: str | None = None  # a note the interval held back, not yet sent
        self._partials_sent = 0
        self.partials_dropped = 0  # over MAX_PARTIALS_SENT: counted, not sent

    # -- reading -----------------------------------------------------------------
    @property
    def progress(self) -> int:
        """How many reporting calls this attempt has made."""
        return self._progress

    @property
    def fence(self) -> Fence:
        """This delegation's id and epoch, to pass on to a system that checks it: one that
        keeps the largest epoch it saw refuses a host that lost the delegation."""
        return Fence(self.delegation_id, self._epoch)

    @property
    def cancelled(self) -> bool:
        """True once Zeus asked this attempt to stop."""
        return self._cancel.is_set()

    @property
    def over_budget(self) -> bool:
        """True once a charge went past what this attempt was given to spend (it stops for
        that, as Zeus does once the charge reaches it)."""
        return self._over_budget

    def check(self) -> None:
        """Raise `actors.Cancelled` once cancellation is requested."""
        if self._cancel.is_set():
            raise Cancelled(self.attempt_id)

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run `callback()` once cancellation is requested (at once if it was), in the thread
        that requests it; returns a function that unregisters it."""
        if isinstance(self._cancel, CancelSignal):
            return self._cancel.on_set(callback)
        return lambda: None  # a plain event given by a caller: cooperative checks only

    def pass_cancel_on(self, callback: Callable[[], None]) -> Callable[[], None]:
        """For work that runs something outside Python and passes a stop on to it (a
        command's program gets SIGINT): run `callback()` once cancellation is requested,
        as `on_cancel` does, and from now on let no reporting call or `receive()` raise
        `Cancelled`, so that what the work reports while that something winds down
        still reaches Zeus. `check()` and `sleep()` still raise. Returns a function that
        unregisters the callback.
        """
        self._passes_stops_on = True
        return self.on_cancel(callback)

    def _stop_point(self) -> None:
        """A reporting call's cancellation point: Zeus asked to stop, or a charge went over
        the budget (Zeus's request follows; the child need not wait for it)."""
        if (self._over_budget or self._cancel.is_set()) and not self._passes_stops_on:
            raise Cancelled(self.attempt_id)

    def remaining(self) -> float:
        """Seconds left until this attempt's deadline (never negative)."""
        return max(0.0, self.deadline - self._clock.now())

    def sleep(self, seconds: float) -> None:
        """Wait `seconds` on the attempt's clock; raise `Cancelled` if cancelled meanwhile.

        Real time under `SystemClock`; under a test's `FakeClock` it returns once
        the clock is advanced past the wake-up time.
        """
        self.send_held_note()  # what it says while it waits
        cancel = self._cancel
        if isinstance(cancel, CancelSignal):
            woken = self._clock.wait(cancel, seconds)
        else:  # a plain event given by a caller: it cannot wake a clock's sleeper, so real time
            woken = cancel.wait(seconds)
        if woken:
            raise Cancelled(self.attempt_id)

    def receive(self, timeout: float | None = 0) -> object | None:
        """The next message the owner sent (`handle.send`), or None if none came.

        Waits up to `timeout` seconds (0: just look; None: until one comes) and
        raises `actors.Cancelled` if the attempt is cancelled while it waits.
        """
        cancel = _NEVER if self._passes_stops_on else self._cancel
        return self._inbox.get(timeout, cancel, self.attempt_id)

    # -- reporting ---------------------------------------------------------------
    def heartbeat(self, note: str | None = None) -> None:
        """Say "still working"; counts as progress. Sent at most once per interval; a note
        held back meanwhile goes with the next one sent, or before a `sleep` and at the
        attempt's end (`send_held_note`), so the last note said is the one Zeus keeps."""
        self._stop_point()
        self._progress += 1
        if note is not None:
            self._held_note = note
        now = self._clock.now()
        if now - self._last_beat >= self._interval:
            self._last_beat = now
            self._send(Heartbeat(self.attempt_id, self._progress, self._held_note))
            self._held_note = None

    def send_held_note(self) -> None:
        """Send the last heartbeat note if the interval held it back (the work function's
        thread, before it waits and as its attempt ends)."""
        if self._held_note is not None:
            note, self._held_note = self._held_note, None
            self._send(Heartbeat(self.attempt_id, self._progress, note))

    def partial(self, item: Any) -> None:
        """Report a partial result (kept on every outcome); counts as progress.

        Past `MAX_PARTIALS_SENT` in one attempt, results are counted (the summary
        says how many) and not sent.
        """
        self._stop_point()
        self._progress += 1
        if self._partials_sent >= MAX_PARTIALS_SENT:
            self.partials_dropped += 1
            return
        self._partials_sent += 1
        self._send(Partial(self.attempt_id, self._progress, item))

    def charge(
        self,
        calls: int = 0,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost: float = 0.0,
        *,
        cached_input_tokens: int = 0,
    ) -> None:
        """Charge usage against the budgets; the first charge over a cap stops the attempt
        (the next Context call raises `Cancelled`). Spent money is always reported: once
        the attempt was asked to stop, the charge is sent, then `Cancelled` raised.
        `cached_input_tokens`: the part of `input_tokens` that was cached (an agent CLI
        session's totals keep it)."""
        stopped = self._over_budget or self._cancel.is_set()
        self._progress += 1
        usage = Usage(
            calls=calls, input_tokens=input_tokens, output_tokens=output_tokens, cost=cost
        )
        self._send(Charge(self.attempt_id, self._progress, usage, cached_input_tokens))
        left = self._budget_left
        if left is not None:
            for name, used in (("calls", calls), ("input_tokens", input_tokens),
                               ("output_tokens", output_tokens), ("cost", cost)):
                if name in left:
                    left[name] -= used
                    if left[name] < 0:
                        self._over_budget = True  # Zeus stops it too, once the charge arrives
        if stopped and not self._passes_stops_on:
            raise Cancelled(self.attempt_id)

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
        self._stop_point()
        self._progress += 1
        self._send(ToolCall(self.attempt_id, self._progress, name, read_only))

    @contextlib.contextmanager
    def tool(self, name: str, *, read_only: bool = False) -> Iterator[None]:
        """A long tool call: `with ctx.tool("pytest"): ...`. Inside it, staleness uses
        the agent's `heartbeat.stale_in_tool_s`, since such a tool reports nothing."""
        self._stop_point()
        self._progress += 1
        self._send(ToolCall(self.attempt_id, self._progress, name, read_only, running=True))
        try:
            yield
        finally:
            self._progress += 1
            self._send(ToolCall(self.attempt_id, self._progress, name, read_only, running=False))
        self._stop_point()

    def report_tool(self, name: str, *, read_only: bool = False,
                    running: bool | None = None, call_id: str | None = None,
                    detail: str | None = None) -> None:
        """Report a tool call that another program made (an agent CLI's, read from its
        stream): `running` True as a long call starts, False once it ended, None for one
        seen only once it was over; `call_id` the program's own id of the call, if any;
        `detail` what it was called with, in brief. Python work uses `tool_call` and
        `with tool(...)`."""
        self._stop_point()
        self._progress += 1
        self._send(ToolCall(self.attempt_id, self._progress, name, read_only, running, call_id,
                            detail))

    def agent_session(self, session_id: str) -> None:
        """Report the session id of the agent program this work drives (an agent CLI's, an
        SDK's conversation): Zeus keeps it with the attempt, and a follow-up brief in the
        delegation's session (`brief.session`) is given it to resume. Counts as progress."""
        self._stop_point()
        self._progress += 1
        self._send(AgentSession(self.attempt_id, self._progress, session_id))

    def delegate(self, brief: Brief) -> Summary:
        """Delegate `brief` as a child of this delegation and wait for its summary.

        Only orchestrator agents may delegate; a refusal raises `DelegationRefused`.
        """
        self._stop_point()
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
