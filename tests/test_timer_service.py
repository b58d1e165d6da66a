"""The timer service outlives anything: callbacks that raise, times no platform can wait for.

One timer thread serves every deadline, stale check, grace and backoff in a
Zeus; if it died, no delegation of that Zeus would ever time out again.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import pytest

from actors import Brief, Context, Status
from actors.backends.hub import Hub
from actors.clock import FakeClock, SystemClock, TimerError
from supervisor import Routing, Zeus
from supervisor.testing import sync
from tests._support import eventually
from tests.conftest import Recorder, ZeusFactory


class _Custom(BaseException):
    pass


EVERY_KIND = [
    Exception("plain"),
    ValueError("value"),
    OverflowError("timestamp out of range for platform time_t"),
    RecursionError("deep"),
    MemoryError(),
    SystemExit(3),
    KeyboardInterrupt(),
    GeneratorExit(),
    _Custom("a BaseException of its own"),
]


def _raiser(exc: BaseException) -> object:
    def callback() -> None:
        raise exc

    return callback


@pytest.mark.realtime
@pytest.mark.parametrize("exc", EVERY_KIND, ids=lambda e: type(e).__name__)
def test_a_timer_callback_that_raises_anything_leaves_the_other_timers_firing(
    exc: BaseException,
) -> None:
    errors: list[BaseException] = []
    clock = SystemClock(on_error=errors.append)
    fired = threading.Event()
    try:
        now = clock.now()
        clock.call_at(now, _raiser(exc))  # type: ignore[arg-type]
        clock.call_at(now + 0.01, fired.set)
        assert fired.wait(10), "the timer after the failing one never fired"
        assert errors == [exc]
        again = threading.Event()
        clock.call_at(clock.now(), again.set)
        assert again.wait(10)
    finally:
        clock.close()


@pytest.mark.realtime
def test_a_failing_error_hook_does_not_stop_the_timer_thread_either() -> None:
    def broken_hook(exc: BaseException) -> None:
        raise SystemExit("the hook itself")

    clock = SystemClock(on_error=broken_hook)
    fired = threading.Event()
    try:
        clock.call_at(clock.now(), _raiser(KeyboardInterrupt()))  # type: ignore[arg-type]
        clock.call_at(clock.now() + 0.01, fired.set)
        assert fired.wait(10)
    finally:
        clock.close()


@pytest.mark.realtime
@pytest.mark.parametrize("delay", [1e10, 1e300])
def test_a_timer_due_beyond_the_platform_limit_does_not_stop_sooner_ones(delay: float) -> None:
    errors: list[BaseException] = []
    clock = SystemClock(on_error=errors.append)
    fired = threading.Event()
    try:
        far = clock.call_at(clock.now() + delay, fired.clear)
        # The case under test: the timer thread asleep on the far timer when a sooner one comes.
        assert eventually(lambda: clock.parked_until() == far.when), clock.parked_until()
        clock.call_at(clock.now() + 0.01, fired.set)
        assert fired.wait(10)
        assert errors == []
        assert not far.cancelled
    finally:
        clock.close()


@pytest.mark.realtime
def test_the_process_hub_survives_a_timer_beyond_the_platform_limit_and_a_raising_handler(
) -> None:
    hub = Hub(name="test-hub")
    fired = threading.Event()
    try:
        hub.call_later(1e10, fired.clear)
        hub.call_later(0.0, _raiser(SystemExit(1)))  # type: ignore[arg-type]
        hub.call_later(0.02, fired.set)
        assert fired.wait(10)
    finally:
        hub.close()


@pytest.mark.parametrize("when", [float("nan"), float("inf"), float("-inf"), "soon"])
def test_a_time_that_is_not_a_finite_number_is_refused_where_it_is_scheduled(
    when: object,
) -> None:
    clock = SystemClock()
    try:
        with pytest.raises(TimerError, match="cannot schedule a timer"):
            clock.call_at(when, lambda: None)  # type: ignore[arg-type]
        with pytest.raises(TimerError):
            FakeClock().call_at(when, lambda: None)  # type: ignore[arg-type]
    finally:
        clock.close()


def test_a_cancelled_timer_lets_go_of_its_callback_at_once() -> None:
    clock = FakeClock()
    payload = bytearray(10_000)
    timer = clock.call_at(clock.now() + 3600, lambda: payload.clear())
    assert timer.callback is not None
    timer.cancel()
    assert timer.callback is None
    timer.cancel()  # idempotent


def test_cancelled_timers_do_not_pile_up_in_the_heap() -> None:
    clock = FakeClock()
    for _ in range(10_000):
        clock.call_at(clock.now() + 3600, lambda: None).cancel()
    assert len(clock._heap) < 200
    assert clock.pending() == []


def _hang(brief: Brief, ctx: Context) -> None:
    ctx.sleep(60)


@pytest.mark.realtime
@pytest.mark.parametrize("timeout_s", [1e10, float("inf"), float("nan")])
def test_a_delegation_with_an_unkeepable_deadline_never_stops_the_deadlines_of_others(
    timeout_s: float,
) -> None:
    """Validation is bypassed on purpose: the timer service must hold without it."""
    recorder = Recorder()
    r = Routing.from_dict({"version": 1, "agents": {"h": {
        "timeout_s": 30, "heartbeat": {"interval_s": 0.05, "stale_after_s": 3600}}}})
    with Zeus.start(r, agents={"h": _hang}, log=recorder) as zeus:
        bad = zeus.dispatch(Brief.model_construct(agent="h", scope="bad", timeout_s=timeout_s))
        sync(zeus)
        victim = zeus.dispatch(Brief(agent="h", scope="victim", timeout_s=0.2))
        summary = victim.result(10)
        assert summary.status is Status.timed_out
        if timeout_s != timeout_s:  # nan: no timer can be set, so the attempt fails at once
            failed = bad.result(10)
            assert failed.status is Status.failed
            assert "TimerError" in (failed.error or "")
        zeus.cancel(bad.id)
    assert not [e for e in recorder.events if e["event"] == "zeus.internal_error"]


def test_the_attempts_share_one_clock_timer_at_the_soonest_of_their_deadlines(
    make_zeus: ZeusFactory, clock: FakeClock
) -> None:
    """Each attempt's timer is kept by Zeus; the clock holds one, at the soonest, that
    moves to the next as it rings, and none once it rang with no attempt left to time."""

    def sleeps(brief: Brief, ctx: Context) -> None:
        ctx.sleep(3600)  # its own wake-up is a clock timer too, an hour away

    zeus = make_zeus({"h": {"heartbeat": {"stale_after_s": 3600}}}, works={"h": sleeps})
    t0 = clock.now()
    handles = [zeus.dispatch(Brief(agent="h", scope=f"s{n}", timeout_s=t))
               for n, t in enumerate([9, 5, 7])]
    sync(zeus)

    def attempts_timers() -> list[float]:
        return [when for when in clock.pending() if when < t0 + 3600]

    assert attempts_timers() == [t0 + 5]
    for step, handle, next_due in [(5, handles[1], [t0 + 7]), (2, handles[2], [t0 + 9]),
                                   (2, handles[0], [])]:
        clock.advance(step)
        assert handle.result(10).status is Status.timed_out
        sync(zeus)
        assert attempts_timers() == next_due
    assert clock.pending() == []



def test_the_clock_timer_of_an_attempt_that_ended_serves_the_next_and_then_rings_once(
    make_zeus: ZeusFactory, clock: FakeClock
) -> None:
    """One attempt at a time sets one clock timer, not one each: the timer left by an
    attempt that ended in time stays for the next (due later), and rings once, finding
    nothing due, when none is left; it is not set again."""
    zeus = make_zeus({"n": {"heartbeat": {"stale_after_s": 3600}}},
                     works={"n": lambda brief, ctx: None})
    t0 = clock.now()
    assert zeus.dispatch(Brief(agent="n", scope="first", timeout_s=5)).result(10).ok
    sync(zeus)
    assert clock.pending() == [t0 + 5]  # its attempt ended; the clock's timer stays
    clock.advance(1)
    assert zeus.dispatch(Brief(agent="n", scope="second", timeout_s=5)).result(10).ok
    sync(zeus)
    assert clock.pending() == [t0 + 5]  # the next attempt's deadline, t0 + 6, set none
    clock.advance(4)  # it rings: nothing is due, and nothing is left to time
    sync(zeus)
    assert clock.pending() == []
    late = zeus.dispatch(Brief(agent="n", scope="third", timeout_s=5))
    assert late.result(10).ok
    sync(zeus)
    assert clock.pending() == [t0 + 10]  # a new attempt after that sets one again

def test_a_grace_no_timer_can_keep_ends_at_once_with_an_error_event(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    release = threading.Event()

    def deaf(brief: Brief, ctx: Context) -> None:
        release.wait(30)

    zeus = make_zeus({"d": {"timeout_s": 1}}, works={"d": deaf})
    policy = zeus.routing.agents["d"]
    shutdown = policy.shutdown.model_construct(grace_s=float("nan"), term_s=0.0)
    zeus.register("d", deaf, policy.model_copy(update={"shutdown": shutdown}))
    try:
        handle = zeus.dispatch(Brief(agent="d", scope="s"))
        sync(zeus)
        clock.advance(1.0)
        summary = handle.result(10)
    finally:
        release.set()
    assert summary.status is Status.timed_out
    assert summary.attempts[0].fenced
    errors = recorder.named("zeus.internal_error")
    assert errors and "a timer could not be set" in errors[0]["error"]


def test_a_handler_that_unwatches_and_closes_another_ready_fd_is_not_followed_by_its_handler(
) -> None:
    # Two pipes ready in one wake-up; whichever handler runs first unwatches and closes the
    # other's fd (a command's exit handler closing its pipes): the other must not run.
    hub = Hub(name="test-hub")
    holding, gate, checked = threading.Event(), threading.Event(), threading.Event()
    ran: list[int] = []
    (r1, w1), (r2, w2) = os.pipe(), os.pipe()

    def closing(own: int, other: int) -> Callable[[], None]:
        def handler() -> None:
            ran.append(own)
            os.read(own, 1)
            hub.unwatch(other)
            os.close(other)
            hub.call_later(0.0, checked.set)  # runs after the rest of this wake-up

        return handler

    def hold() -> None:  # the hub waits here while both pipes become ready
        holding.set()
        gate.wait(10)

    try:
        hub.call_later(0.0, hold)
        assert holding.wait(10)  # else the first pipe's handler could run, and close, first
        hub.watch(r1, closing(r1, r2))
        hub.watch(r2, closing(r2, r1))
        os.write(w1, b"x")
        os.write(w2, b"x")
        gate.set()
        assert checked.wait(10)
        assert len(ran) == 1, ran
    finally:
        hub.close()
        for fd in [w1, w2, *(ran if len(ran) == 1 else [])]:  # the read end left open
            os.close(fd)
