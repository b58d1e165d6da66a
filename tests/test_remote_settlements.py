"""Handles on delegations another host runs, set from the store as they settle
(`supervisor.core.remote`): polled by hand here, with a scripted store, or woken by a
scripted word of settlements."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from actors import Status, Summary
from supervisor.core.handle import DelegationFuture
from supervisor.core.remote import RemoteSettlements
from supervisor.errors import StoreError, ZeusStopped

WAIT_S = 30.0  # a safety bound on waits, never the thing asserted


def _summary(delegation_id: str) -> Summary:
    return Summary(id=delegation_id, agent="a", scope="s", status=Status.completed)


class Store:
    def __init__(self) -> None:
        self.settled: dict[str, Summary] = {}
        self.asked: list[list[str]] = []
        self.away = False

    def read(self, ids: Sequence[str]) -> dict[str, Summary]:
        self.asked.append(sorted(ids))
        if self.away:
            raise StoreError("the database is away")
        return {i: self.settled[i] for i in ids if i in self.settled}


def test_every_watched_id_is_asked_for_at_once_and_set_only_once_it_settled() -> None:
    store = Store()
    remote = RemoteSettlements(store.read, thread=False)  # polled by hand
    one, two, again = DelegationFuture(), DelegationFuture(), DelegationFuture()
    remote.watch("a-1", one)
    remote.watch("a-2", two)
    remote.watch("a-1", again)  # a second handle on the same delegation
    assert remote.poll() == 0 and not one.done()
    store.settled["a-1"] = _summary("a-1")
    assert remote.poll() == 2
    assert one.result(0) is store.settled["a-1"] and again.result(0) is one.result(0)
    assert not two.done() and remote.watching == 1
    assert store.asked[-1] == ["a-1", "a-2"]
    remote.close("stopped")


def test_a_store_away_is_asked_again_at_the_next_poll() -> None:
    store = Store()
    remote = RemoteSettlements(store.read, thread=False)
    future = DelegationFuture()
    remote.watch("a-1", future)
    store.away = True
    store.settled["a-1"] = _summary("a-1")
    assert remote.poll() == 0 and remote.failures == 1 and not future.done()
    store.away = False
    assert remote.poll() == 1 and future.result(0).status is Status.completed
    remote.close("stopped")


def test_closing_fails_what_still_waits_and_refuses_new_watches() -> None:
    remote = RemoteSettlements(Store().read, thread=False)
    future = DelegationFuture()
    remote.watch("a-1", future)
    remote.close("Zeus stopped before the delegation's host settled it")
    with pytest.raises(ZeusStopped, match="host settled it"):
        future.result(0)
    with pytest.raises(ZeusStopped):
        remote.watch("a-2", DelegationFuture())


class Feed:
    """A scripted word of settlements: `say(ids)` is what the next wait hears."""

    def __init__(self) -> None:
        import queue

        self.said: queue.Queue[set[str] | None] = queue.Queue()
        self.closed = threading.Event()

    def wait(self, timeout_s: float) -> set[str] | None:
        import queue

        try:
            return self.said.get(timeout=timeout_s)
        except queue.Empty:
            return set()

    def say(self, ids: set[str]) -> None:
        self.said.put(ids)

    def close(self) -> None:
        self.closed.set()


def test_word_of_a_settlement_looks_at_once_and_word_of_others_does_not() -> None:
    store, feed = Store(), Feed()
    looked = threading.Semaphore(0)
    read = store.read

    def counted(ids: Sequence[str]) -> dict[str, Summary]:
        try:
            return read(ids)
        finally:
            looked.release()

    # No poll of its own for an hour: only a watch's first look and the word move it.
    remote = RemoteSettlements(counted, feed=lambda: feed, poll_s=3600, backstop_s=3600)
    future = DelegationFuture()
    remote.watch("a-1", future)
    assert looked.acquire(timeout=WAIT_S)  # the first look, for the new watch
    store.settled["b-9"] = _summary("b-9")
    feed.say({"b-9"})  # another host's delegation, watched by nobody here: no look
    store.settled["a-1"] = _summary("a-1")
    feed.say({"a-1"})
    assert future.result(WAIT_S).id == "a-1"
    assert store.asked == [["a-1"], ["a-1"]]  # two looks: the watch's, then the word's
    remote.close("stopped")
    assert feed.closed.wait(WAIT_S)
