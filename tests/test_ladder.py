"""The one kill ladder (process workers and command agents share it), step by step, with a
hub that runs nothing by itself and signals that are recorded instead of sent."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

import pytest

from actors.backends import ladder as _ladder
from actors.backends.ladder import KillLadder

PID = 4242


class StillHub:
    """A hub whose timers run only when the test says so."""

    def __init__(self, *, in_hub_thread: bool = True, closed: bool = False) -> None:
        self.in_hub_thread = in_hub_thread
        self.closed = closed
        self.timers: list[tuple[float, Callable[[], None]]] = []

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        self.timers.append((delay, callback))

    def run_timers(self) -> None:
        timers, self.timers = self.timers, []
        for _, callback in timers:
            callback()


class RecordedTree:
    """Stands for `ProcessTree`: what was signalled below the child, and walks."""

    def __init__(self, sent: list[tuple[str, int]], known: dict[int, float | None]) -> None:
        self.sent = sent
        self.known = known

    def walk(self) -> None:
        self.sent.append(("walk", 0))

    def signal(self, sig: int, *, root_alive: bool = True) -> int:
        self.sent.append(("tree" if root_alive else "tree-after-death", sig))
        return 1


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    record: list[tuple[str, int]] = []

    def signal_group(pid: int, sig: int, *, or_process: bool = True) -> None:
        assert pid == PID
        record.append(("group" if or_process else "group-left", sig))

    monkeypatch.setattr(_ladder, "signal_group", signal_group)
    return record


def ladder_on(hub: StillHub, sent: list[tuple[str, int]], known: Any = None) -> KillLadder:
    ladder = KillLadder(PID, hub, threading.Lock())  # type: ignore[arg-type]
    ladder.tree = RecordedTree(sent, known or {})  # type: ignore[assignment]
    return ladder


def test_terminate_sends_sigterm_to_the_group_then_below_it_and_sigkill_after_term_s(
    sent: list[tuple[str, int]],
) -> None:
    hub = StillHub()
    ladder = ladder_on(hub, sent)
    ladder.terminate(2.5)
    assert sent == [("walk", 0), ("group", signal.SIGTERM), ("tree", signal.SIGTERM)]
    assert [delay for delay, _ in hub.timers] == [2.5]
    assert not ladder.sigkill_sent
    hub.run_timers()
    assert sent[3:] == [("walk", 0), ("group", signal.SIGKILL), ("tree", signal.SIGKILL)]
    assert ladder.sigkill_sent


def test_terminate_with_no_term_s_goes_straight_to_sigkill(sent: list[tuple[str, int]]) -> None:
    hub = StillHub()
    ladder = ladder_on(hub, sent)
    ladder.terminate(0.0)
    assert sent == [("walk", 0), ("group", signal.SIGKILL), ("tree", signal.SIGKILL)]
    assert ladder.sigkill_sent and not hub.timers


def test_a_child_reaped_before_term_s_gets_no_sigkill(sent: list[tuple[str, int]]) -> None:
    hub = StillHub()
    ladder = ladder_on(hub, sent)
    ladder.terminate(1.0)
    ladder.reaped = True  # the hub reaped it meanwhile: its pid may be someone else's now
    hub.run_timers()
    assert sent == [("walk", 0), ("group", signal.SIGTERM), ("tree", signal.SIGTERM)]
    assert not ladder.sigkill_sent


@pytest.mark.parametrize("step", ["terminate", "escalate", "interrupt"])
def test_a_reaped_child_is_never_signalled(sent: list[tuple[str, int]], step: str) -> None:
    hub = StillHub()
    ladder = ladder_on(hub, sent)
    ladder.reaped = True
    getattr(ladder, step)(*([1.0] if step == "terminate" else []))
    assert sent == [] and hub.timers == []
    assert not ladder.sigkill_sent


def test_a_signal_asked_for_outside_the_hub_thread_is_sent_from_the_hub(
    sent: list[tuple[str, int]],
) -> None:
    hub = StillHub(in_hub_thread=False)
    ladder = ladder_on(hub, sent)
    assert ladder.signal_all(signal.SIGKILL) is True
    assert sent == [] and len(hub.timers) == 1
    hub.in_hub_thread = True
    hub.run_timers()
    assert sent == [("walk", 0), ("group", signal.SIGKILL), ("tree", signal.SIGKILL)]


def test_a_closed_hub_lets_the_caller_send_the_signal_itself(sent: list[tuple[str, int]]) -> None:
    ladder = ladder_on(StillHub(in_hub_thread=False, closed=True), sent)
    assert ladder.signal_all(signal.SIGTERM) is True
    assert sent == [("walk", 0), ("group", signal.SIGTERM), ("tree", signal.SIGTERM)]


def test_interrupt_remembers_what_runs_below_then_signals_the_group_only(
    sent: list[tuple[str, int]],
) -> None:
    ladder = ladder_on(StillHub(), sent)
    ladder.interrupt()
    assert sent == [("walk", 0), ("group", signal.SIGINT)]


@pytest.mark.parametrize(
    ("known", "expected"),
    [
        ({}, [("group-left", signal.SIGKILL)]),
        ({99: 1.0}, [("group-left", signal.SIGKILL), ("tree-after-death", signal.SIGKILL)]),
    ],
)
def test_the_sweep_kills_what_is_left_of_the_group_and_what_the_ladder_found(
    sent: list[tuple[str, int]], known: dict[int, float | None], expected: list[Any]
) -> None:
    ladder = ladder_on(StillHub(), sent, known)
    ladder.reaped = True
    ladder.sweep()
    assert sent == expected
