"""The fake clock drives `ctx.sleep`: a sleeping child wakes when the test moves time,
or, with `autojump_threshold`, when every sleeper has waited that long in real time.

No test here sleeps: each waits for the sleepers it expects (`wait_for_sleepers`)
and then moves the clock, or waits for the result the jump brings.
"""

from __future__ import annotations

import threading

import pytest

from actors import Brief, Cancelled, Context, Status
from actors.clock import FakeClock
from actors.mail import CancelSignal
from supervisor import Routing, Zeus
from supervisor.testing import EventRecorder, sync
from tests._support import FOREVER_S, WAIT_S, wait_cancelled
from tests.conftest import Recorder, ZeusFactory


def sleeper(clock: FakeClock, seconds: float) -> tuple[threading.Thread, CancelSignal, list[str]]:
    """A thread sleeping `seconds` on `clock`; the list says how the sleep ended."""
    signal, ended = CancelSignal(), []

    def run() -> None:
        ended.append("cancelled" if clock.wait(signal, seconds) else "woke")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, signal, ended


def test_a_sleep_on_the_fake_clock_ends_when_the_clock_passes_its_wake_up_and_not_before() -> None:
    clock = FakeClock()
    thread, _, ended = sleeper(clock, 5.0)
    clock.wait_for_sleepers(1)
    clock.advance(4.999)  # its timer is not due: nothing can have woken it
    assert ended == [] and clock.sleepers() == 1
    clock.advance(0.001)  # due: the timer runs in this call and wakes it
    thread.join(WAIT_S)
    assert ended == ["woke"]
    assert clock.sleepers() == 0 and clock.pending() == []


def test_a_cancel_wakes_a_sleeper_on_the_fake_clock_without_moving_time() -> None:
    clock = FakeClock()
    thread, signal, ended = sleeper(clock, 60.0)
    clock.wait_for_sleepers(1)
    signal.set()
    thread.join(WAIT_S)
    assert ended == ["cancelled"]
    assert clock.now() == 1000.0
    assert clock.pending() == []  # its wake-up timer is cancelled with it


@pytest.mark.parametrize("seconds", [0.0, -1.0, float("nan")])
def test_a_sleep_of_no_time_returns_at_once_as_a_real_wait_does(seconds: float) -> None:
    clock = FakeClock()
    assert clock.wait(CancelSignal(), seconds) is False
    signal = CancelSignal()
    signal.set()
    assert clock.wait(signal, seconds) is True
    assert clock.pending() == [] and clock.sleepers() == 0


def test_a_sleep_forever_sets_no_timer_and_ends_on_cancel() -> None:
    clock = FakeClock()
    thread, signal, ended = sleeper(clock, float("inf"))
    clock.wait_for_sleepers(1)
    assert clock.pending() == []
    clock.advance(10**9)
    assert ended == []
    signal.set()
    thread.join(WAIT_S)
    assert ended == ["cancelled"]


def test_ctx_sleep_in_a_child_returns_when_the_test_advances_the_clock(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    def naps(brief: Brief, ctx: Context) -> float:
        started = ctx.remaining()
        ctx.sleep(30)
        return started - ctx.remaining()

    zeus = make_zeus({"n": {"timeout_s": 100, "heartbeat": {"stale_after_s": 1000}}},
                     works={"n": naps})
    handle = zeus.dispatch(Brief(agent="n", scope="s"))
    clock.wait_for_sleepers(1)
    clock.advance(29)
    sync(zeus)
    assert not handle.done()
    clock.advance(1)
    summary = handle.result(WAIT_S)
    assert summary.status is Status.completed
    assert summary.output == 30.0  # thirty seconds of the fake clock, not of real time


def test_ctx_sleep_raises_cancelled_when_zeus_cancels_the_sleeping_child(
    make_zeus: ZeusFactory, clock: FakeClock, recorder: Recorder
) -> None:
    raised: list[type[BaseException]] = []

    def naps(brief: Brief, ctx: Context) -> None:
        try:
            ctx.sleep(30)
        except BaseException as exc:
            raised.append(type(exc))
            raise

    zeus = make_zeus({"n": {"timeout_s": 100}}, works={"n": naps})
    handle = zeus.dispatch(Brief(agent="n", scope="s"))
    clock.wait_for_sleepers(1)
    zeus.cancel(handle.id)
    assert handle.result(WAIT_S).status is Status.cancelled
    assert raised == [Cancelled]
    assert clock.now() == 1000.0  # the cancel came through without time moving


def _zeus(clock: FakeClock, recorder: EventRecorder, **agents: object) -> Zeus:
    routing = Routing.from_dict({"version": 1, "agents": {
        name: {"timeout_s": 100, "heartbeat": {"stale_after_s": 1000}} for name in agents}})
    return Zeus.start(routing, agents=agents, clock=clock, log=recorder)  # type: ignore[arg-type]


def test_autojump_runs_a_child_s_sleeps_to_their_end_without_the_test_moving_time() -> None:
    def naps(brief: Brief, ctx: Context) -> float:
        started = ctx.remaining()
        for seconds in (5, 7, 11):
            ctx.sleep(seconds)
            ctx.heartbeat()
        return started - ctx.remaining()

    clock = FakeClock(autojump_threshold=0.005)
    with _zeus(clock, EventRecorder(), n=naps) as zeus:
        summary = zeus.dispatch(Brief(agent="n", scope="s")).result(WAIT_S)
    assert summary.status is Status.completed
    assert summary.output == 23.0
    assert clock.jumps == 3  # one jump per sleep, each to the sleeper's own wake-up


def test_autojump_jumps_to_the_next_timer_whoever_set_it_so_a_deadline_falls_due() -> None:
    clock, recorder = FakeClock(autojump_threshold=0.005), EventRecorder()
    with _zeus(clock, recorder, w=wait_cancelled) as zeus:
        handle = zeus.dispatch(Brief(agent="w", scope="s", timeout_s=30))
        summary = handle.result(WAIT_S)
    assert (summary.status, summary.timeout_kind) == (Status.timed_out, "deadline")
    assert clock.now() < 1000.0 + FOREVER_S  # it jumped to the deadline, not to the sleep's end
    (timed_out,) = recorder.named("attempt.timed_out")
    assert timed_out["elapsed_s"] == pytest.approx(30.0)


def test_autojump_jumps_from_wake_up_to_wake_up_once_every_sleeper_is_quiet() -> None:
    clock = FakeClock()
    threads = [sleeper(clock, seconds) for seconds in (3.0, 9.0)]
    clock.wait_for_sleepers(2)  # both asleep before time may move
    clock.autojump_threshold = 0.005
    for thread, _, _ in threads:
        thread.join(WAIT_S)
    assert [ended for _, _, ended in threads] == [["woke"], ["woke"]]
    assert clock.now() == 1009.0  # each wake-up reached, none passed
    assert clock.jumps == 2


def jumpers(clock: FakeClock) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"fake-clock-autojump-{id(clock):x}"]


def test_without_autojump_no_thread_moves_the_clock_and_with_it_one_does() -> None:
    clock = FakeClock()
    thread, signal, ended = sleeper(clock, 1.0)
    clock.wait_for_sleepers(1)
    assert jumpers(clock) == []  # it would have started with the first sleeper
    signal.set()
    thread.join(WAIT_S)
    assert clock.now() == 1000.0 and ended == ["cancelled"] and clock.jumps == 0
    clock.autojump_threshold = 0.005
    thread, signal, ended = sleeper(clock, 1.0)
    thread.join(WAIT_S)
    assert ended == ["woke"] and clock.now() == 1001.0 and clock.jumps == 1


@pytest.mark.parametrize("threshold", [-1.0, float("nan")])
def test_an_autojump_threshold_that_is_no_number_of_seconds_is_refused(threshold: float) -> None:
    with pytest.raises(ValueError, match="autojump_threshold"):
        FakeClock(autojump_threshold=threshold)
