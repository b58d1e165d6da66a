"""A result or an error that cannot be read fails its attempt at once, with the real reason.

Neither waits out the deadline to settle `timed_out` under a cause that is not
the one: the attempt is `failed`, and its error says what could not be read.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from actors import AttemptOutcome, Brief, Context, Status
from supervisor import Routing, Zeus
from tests.conftest import ZeusFactory


class _Unreadable:
    """Pickles anywhere; unpickling it calls `int("not a number")`, which raises."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (int, ("not a number",))


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def returns_unreadable(brief: Brief, ctx: Context) -> object:
    return _Unreadable()


def reports_unreadable_partial(brief: Brief, ctx: Context) -> str:
    ctx.partial(_Unreadable())
    ctx.sleep(60)
    return "never"


def raises_unprintable(brief: Brief, ctx: Context) -> None:
    raise _Unprintable()


def _process_routing(agent: str) -> Routing:
    return Routing.from_dict({"version": 1, "agents": {agent: {
        "isolation": "process", "timeout_s": 30, "retry": {"max_retries": 0}}}})


@pytest.mark.process
@pytest.mark.realtime
@pytest.mark.parametrize("work", [returns_unreadable, reports_unreadable_partial])
def test_a_message_that_pickles_in_the_child_but_not_in_the_supervisor_fails_at_once(
    work: Any,
) -> None:
    with Zeus.start(_process_routing("p"), agents={"p": work}) as zeus:
        started = time.monotonic()
        summary = zeus.dispatch(Brief(agent="p", scope="s")).result(15)
        elapsed = time.monotonic() - started
    assert summary.status is Status.failed
    assert summary.attempts[0].outcome is AttemptOutcome.error
    assert "could not be read in the supervisor" in (summary.error or "")
    assert "ValueError: invalid literal for int()" in (summary.error or "")
    assert elapsed < 10.0  # the deadline is 30 s: it did not wait for it


def test_a_thread_child_raising_an_exception_whose_str_raises_fails_with_its_type(
    make_zeus: ZeusFactory,
) -> None:
    zeus = make_zeus({"t": {"timeout_s": 30, "retry": {"max_retries": 0}}},
                     works={"t": raises_unprintable})
    summary = zeus.dispatch(Brief(agent="t", scope="s")).result(10)
    assert summary.status is Status.failed
    assert summary.attempts[0].outcome is AttemptOutcome.error
    assert (summary.error or "").startswith("_Unprintable: <its str() raised RuntimeError>")


@pytest.mark.process
@pytest.mark.realtime
def test_a_process_child_raising_an_exception_whose_str_raises_fails_with_its_type() -> None:
    with Zeus.start(_process_routing("p"), agents={"p": raises_unprintable}) as zeus:
        summary = zeus.dispatch(Brief(agent="p", scope="s")).result(15)
    assert summary.status is Status.failed
    assert summary.attempts[0].outcome is AttemptOutcome.error
    assert (summary.error or "").startswith("_Unprintable: <its str() raised RuntimeError>")
