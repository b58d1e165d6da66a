"""Running a work function and classifying how it ended. Runs in the child."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import traceback as tb
from collections.abc import Callable
from typing import Any

from actors.context import Context
from actors.errors import Cancelled, TransientError, describe_error
from actors.models import AttemptOutcome, Brief
from actors.protocol import Finished

__all__ = ["Ended", "WorkFunction", "classify_exception", "run_work"]

WorkFunction = Callable[[Brief, Context], Any]

# Failures worth another attempt. `TimeoutError` covers socket.timeout and
# concurrent.futures.TimeoutError on 3.11.
_TRANSIENT: tuple[type[BaseException], ...] = (TransientError, ConnectionError, TimeoutError)


class Ended(BaseException):
    """Raised by a backend's own work function (a command agent's reader in a worker) to end
    its attempt with the `Finished` it made: a program's exit code and its error, in the
    words the other readers of programs use. `run_work` returns it as it is, with its pid.
    """

    def __init__(self, finished: Finished) -> None:
        super().__init__(finished.outcome.value)
        self.finished = finished


def classify_exception(exc: BaseException) -> AttemptOutcome:
    """`cancelled` for `Cancelled`, `transient` for retryable errors, else `error` (permanent).

    `SystemExit` and `KeyboardInterrupt` raised by agent code are permanent
    errors of that attempt and nothing more.
    """
    if isinstance(exc, Cancelled):
        return AttemptOutcome.cancelled
    if isinstance(exc, _TRANSIENT):
        return AttemptOutcome.transient
    return AttemptOutcome.error


def run_work(work: WorkFunction, brief: Brief, ctx: Context, *, pid: int | None = None) -> Finished:
    """Call `work(brief, ctx)` (sync or `async def`) and describe how it ended."""
    try:
        try:
            value = work(brief, ctx)
            if inspect.isawaitable(value):
                value = asyncio.run(_await(value, ctx))
        finally:
            with contextlib.suppress(Exception):  # a channel gone: how it ended says the rest
                ctx.send_held_note()  # its last note, before how it ended
    except Ended as ended:
        finished = ended.finished
        return finished if pid is None else dataclasses.replace(finished, pid=pid)
    except BaseException as exc:  # noqa: BLE001 - every ending of agent code is an outcome
        return Finished(
            ctx.attempt_id,
            classify_exception(exc),
            error=describe_error(exc),
            error_type=type(exc).__name__,
            traceback=_format_traceback(exc),
            pid=pid,
            progress=ctx.progress,
            partials_dropped=ctx.partials_dropped,
        )
    return Finished(
        ctx.attempt_id, AttemptOutcome.completed, value=value, pid=pid, progress=ctx.progress,
        partials_dropped=ctx.partials_dropped,
    )


def _format_traceback(exc: BaseException) -> str | None:
    """The traceback's text, or None if even that fails (agent code decides what it holds)."""
    try:
        return "".join(tb.format_exception(exc))
    except BaseException:  # noqa: BLE001 - the error line says enough then
        return None


async def _await(awaitable: Any, ctx: Context) -> Any:
    """Runs the coroutine as this loop's main task; a stop request cancels that task.

    So `CancelledError` is raised at the `await` the coroutine is blocked in; if
    it ends that way because of the stop request, the attempt ends `Cancelled`.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def cancel_task() -> None:  # the thread that set the cancel signal
        with contextlib.suppress(RuntimeError):  # the loop has closed: the work is over
            loop.call_soon_threadsafe(task.cancel)

    forget = ctx.on_cancel(cancel_task)
    try:
        return await awaitable
    except asyncio.CancelledError:
        if ctx.cancelled:
            raise Cancelled(ctx.attempt_id) from None
        raise
    finally:
        forget()
