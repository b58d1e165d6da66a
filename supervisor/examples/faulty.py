"""Agents that misbehave on purpose, for demos and tests of the supervisor.

- `flaky`: fails transiently on its first attempt(s), then succeeds.
- `hang`: blocks in `time.sleep`, ignoring cancellation: a truly hung child that
  only a kill (process isolation) or a fence (thread isolation) can end.
- `spendthrift`: charges usage until a budget stops it.
- `crash`: dies without a result (`os._exit`, or a segfault), in a process child only.

Their knobs come from `brief.inputs` (a dict); each says which below.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from typing import Any

from actors import Brief, Context, Report, TransientError
from supervisor.examples._common import price

__all__ = ["crash", "flaky", "hang", "spendthrift"]


def _inputs(brief: Brief) -> dict[str, Any]:
    return brief.inputs if isinstance(brief.inputs, dict) else {}


def flaky(brief: Brief, ctx: Context) -> Report:
    """Raise `TransientError` on attempts up to `fail_times` (default 1), then succeed."""
    fail_times = int(_inputs(brief).get("fail_times", 1))
    ctx.heartbeat(f"attempt {ctx.attempt}")
    ctx.charge(calls=1, input_tokens=500, output_tokens=40, cost=price(500, 40))
    if ctx.attempt <= fail_times:
        raise TransientError(
            f"upstream unavailable (attempt {ctx.attempt} of the {fail_times} that fail)"
        )
    ctx.partial(f"succeeded on attempt {ctx.attempt}")
    return Report(output={"attempt": ctx.attempt}, findings=[f"succeeded on attempt {ctx.attempt}"])


def hang(brief: Brief, ctx: Context) -> Report:
    """Block in `time.sleep(seconds)` (default an hour), deaf to cancellation.

    It reports once first, so the hang is "alive but no progress" (stale), not a slow start.
    """
    seconds = float(_inputs(brief).get("seconds", 3600.0))
    ctx.heartbeat("about to call a tool that never answers")
    ctx.partial("started")
    time.sleep(seconds)  # deliberately not ctx.sleep(): this child ignores cancellation
    return Report(output={"slept_s": seconds}, findings=[f"woke up after {seconds}s"])


def spendthrift(brief: Brief, ctx: Context) -> Report:
    """Charge `calls=1, input_tokens, output_tokens` every `interval_s` until stopped.

    A budget cap makes Zeus cancel it; it stops on its own after `max_charges`
    (default 10 000) so that an unbudgeted run still ends.
    """
    opts = _inputs(brief)
    interval = float(opts.get("interval_s", 0.01))
    max_charges = int(opts.get("max_charges", 10_000))
    tokens_in = int(opts.get("input_tokens", 4000))
    tokens_out = int(opts.get("output_tokens", 800))
    for n in range(1, max_charges + 1):
        ctx.check()
        ctx.charge(
            calls=1,
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            cost=price(tokens_in, tokens_out, "high"),
        )
        if interval:
            ctx.sleep(interval)
        if n % 10 == 0:
            ctx.heartbeat(f"{n} calls charged")
    return Report(
        output={"charges": max_charges}, risks=[f"no budget stopped {max_charges} charges"]
    )


def _in_process_child() -> bool:
    """True in a child process started by (multi)process; False in the host's own process."""
    import multiprocessing

    try:
        import multiprocess  # the process backend's library
    except ImportError:  # pragma: no cover - a runtime dependency
        return multiprocessing.parent_process() is not None
    return multiprocess.parent_process() is not None or multiprocessing.parent_process() is not None


def crash(brief: Brief, ctx: Context) -> Report:
    """Die without a result: `how` is `exit` (`os._exit(code)`, default 13), `segfault`
    or `kill` (SIGKILL to itself).

    It refuses (a permanent error) outside a process child, where it would take the
    host down with it, unless `force` is true.
    """
    opts = _inputs(brief)
    how = str(opts.get("how", "exit"))
    if how not in ("exit", "segfault", "kill"):
        raise ValueError(f"unknown crash {how!r}; use exit, segfault or kill")
    if not opts.get("force") and not _in_process_child():
        raise RuntimeError(
            "crash runs only in a process child (isolation: process); in this process "
            "it would kill the host too. Pass inputs={'force': True} if that is the point"
        )
    ctx.partial(f"about to crash ({how})")
    if how == "segfault":
        ctypes.string_at(0)  # reads address 0: SIGSEGV
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(int(opts.get("code", 13)))
