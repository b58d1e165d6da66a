"""The child's cancel signal: set once from any thread, waited on by several."""

from __future__ import annotations

import threading

from actors.mail import CancelSignal


def test_wait_times_out_while_unset_and_returns_at_once_when_set() -> None:
    signal = CancelSignal()
    assert not signal.is_set()
    assert signal.wait(0) is False
    assert signal.wait(0.01) is False
    assert signal.wait(-5) is False  # a negative timeout is no wait, as with Event
    signal.set()
    assert signal.is_set()
    assert signal.wait(None) is True
    assert signal.wait(0) is True


def test_every_waiter_wakes_when_it_is_set() -> None:
    signal = CancelSignal()
    woke: list[bool] = []
    lock = threading.Lock()
    started = threading.Barrier(6)

    def waiter() -> None:
        started.wait()
        result = signal.wait(30)
        with lock:
            woke.append(result)

    threads = [threading.Thread(target=waiter) for _ in range(5)]
    for thread in threads:
        thread.start()
    started.wait()
    signal.set()
    for thread in threads:
        thread.join(30)
    assert woke == [True] * 5


def test_callbacks_run_once_in_the_setting_thread_and_can_be_forgotten() -> None:
    signal = CancelSignal()
    ran: list[str] = []
    signal.on_set(lambda: ran.append("kept"))
    forget = signal.on_set(lambda: ran.append("forgotten"))
    forget()
    signal.set()
    signal.set()  # set once: the callbacks do not run again
    assert ran == ["kept"]
    signal.on_set(lambda: ran.append("late"))  # registered after: runs at once
    assert ran == ["kept", "late"]


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
    setter.join(30)
    assert calls == ["inner", "first"]
