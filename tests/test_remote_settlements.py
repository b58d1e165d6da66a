"""Handles on delegations another host runs, set from the store as they settle
(`supervisor.core.remote`): polled by hand here, with a scripted store."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from actors import Status, Summary
from supervisor.core.future import DelegationFuture
from supervisor.core.remote import RemoteSettlements
from supervisor.errors import StoreError, ZeusStopped


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
