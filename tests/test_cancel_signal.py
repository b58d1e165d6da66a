"""The attempt's cancel signal: a `threading.Event` that also runs callbacks once set."""

from __future__ import annotations

import threading

from actors.mail import CancelSignal
from tests._support import eventually


def test_it_is_an_event_that_wakes_a_waiting_thread() -> None:
    signal = CancelSignal()
    assert isinstance(signal, threading.Event)
    assert not signal.is_set() and signal.wait(0) is False
    woken: list[bool] = []
    waiter = threading.Thread(target=lambda: woken.append(signal.wait(30)))
    waiter.start()
    signal.set()
    waiter.join(30)
    assert woken == [True] and signal.is_set() and signal.wait(0) is True
    signal.clear()
    assert not signal.is_set()


def test_callbacks_run_once_on_the_first_set_and_at_once_once_set() -> None:
    signal = CancelSignal()
    calls: list[str] = []
    signal.on_set(lambda: calls.append("first"))
    forget = signal.on_set(lambda: calls.append("forgotten"))
    forget()
    signal.set()
    signal.set()
    assert calls == ["first"]
    signal.on_set(lambda: calls.append("late"))
    assert calls == ["first", "late"]


def test_a_callback_may_register_another_and_set_it_again() -> None:
    """Callbacks run outside the signal's lock: one that calls back into it cannot deadlock."""
    signal = CancelSignal()
    calls: list[str] = []

    def first() -> None:
        signal.set()
        signal.on_set(lambda: calls.append("inner"))
        calls.append("first")

    signal.on_set(first)
    setter = threading.Thread(target=signal.set)
    setter.start()
    assert eventually(lambda: calls == ["inner", "first"])
    setter.join(30)
