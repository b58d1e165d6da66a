"""The lease keeper's decisions, on a fake monotonic clock and a scripted lease: what it
pushes to the children, when it calls the lease lost, and what it hands on as expired."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from actors import Brief, Summary
from supervisor.core.lease import TAKE_MARGIN_S, LeaseKeeper
from supervisor.errors import StoreError
from supervisor.store import HostLease, Renewal


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class ScriptedLease(HostLease):
    """Answers each renewal from a script; a step that is an exception is raised. The
    statement itself takes `takes_s` of the fake clock."""

    def __init__(self, clock: Clock, script: list[Renewal | Exception | None],
                 takes_s: float = 0.0) -> None:
        self.clock = clock
        self.script = script
        self.takes_s = takes_s
        self.margins: list[float] = []

    def keep(self, margin_s: float) -> Renewal | None:
        self.margins.append(margin_s)
        self.clock.t += self.takes_s
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return step

    def summaries(self, delegation_ids: Sequence[str]) -> dict[str, Summary]:
        return {}

    def exists(self, delegation_id: str) -> bool:
        return False

    def claim_key(self, key: str, delegation_id: str,
                  brief: Brief) -> tuple[str, Brief, bool]:
        return delegation_id, brief, True

    def close(self) -> None:
        pass


def keeper(lease: ScriptedLease, clock: Clock, *, lease_s: float = 9.0,
           bound_s: float = 2.5) -> tuple[LeaseKeeper, dict[str, list[object]]]:
    seen: dict[str, list[object]] = {"extend": [], "lost": [], "expired": []}

    def expired(hosts: Sequence[str]) -> None:
        seen["expired"].append(tuple(hosts))

    k = LeaseKeeper(lease, lease_s=lease_s, bound_s=bound_s, extend=seen["extend"].append,
                    lost=seen["lost"].append, expired=expired, monotonic=clock)
    return k, seen


def test_a_renewal_pushes_the_end_less_the_bound_measured_from_before_it_was_sent() -> None:
    clock = Clock()
    lease = ScriptedLease(clock, [Renewal(left_s=9.0)], takes_s=0.4)
    k, seen = keeper(lease, clock)
    assert k.tick() == pytest.approx(3.0)  # lease_s / 3
    # Sent at 100.0: the end is 109.0 however long the answer took, never 109.4.
    assert k.until == pytest.approx(109.0)
    assert seen["extend"] == [pytest.approx(106.5)]
    assert lease.margins == [TAKE_MARGIN_S]  # past an expired lease and its host's bound
    assert seen["lost"] == []


def test_the_bound_never_takes_more_than_half_the_lease() -> None:
    clock = Clock()
    k, seen = keeper(ScriptedLease(clock, [Renewal(left_s=4.0)]), clock, lease_s=4.0,
                     bound_s=10.0)
    k.tick()
    assert seen["extend"] == [pytest.approx(102.0)]


def test_a_refused_renewal_is_the_lease_lost_at_once_and_every_child_told_to_stop() -> None:
    clock = Clock()
    k, seen = keeper(ScriptedLease(clock, [Renewal(left_s=9.0), None]), clock)
    k.tick()
    clock.t += 3.0
    assert k.tick() is None
    assert seen["lost"] == ["the lease ended or another host took it over"]
    assert seen["extend"][-1] == pytest.approx(103.0)  # now: stop
    assert k.tick() is None  # lost for good: no more statements
    assert seen["lost"] == ["the lease ended or another host took it over"]


def test_the_database_away_is_retried_with_backoff_until_the_lease_would_end() -> None:
    clock = Clock()
    away = StoreError("connection refused")
    k, seen = keeper(ScriptedLease(clock, [Renewal(left_s=9.0), away, away, away,
                                           Renewal(left_s=9.0)]), clock)
    k.tick()
    waits = []
    for _ in range(3):
        clock.t += 1.0
        waits.append(k.tick())
    assert all(w is not None and 0 < w <= 1.0 for w in waits)
    assert waits == sorted(waits)  # backing off
    assert seen["lost"] == []
    clock.t += 1.0
    assert k.tick() == pytest.approx(3.0)  # back in time: nothing lost
    assert k.until == pytest.approx(113.0)


def test_no_renewal_before_the_lease_ends_is_the_lease_lost() -> None:
    clock = Clock()
    away = StoreError("connection refused")
    k, seen = keeper(ScriptedLease(clock, [Renewal(left_s=9.0), away, away]), clock)
    k.tick()
    clock.t += 5.0
    wait = k.tick()
    assert wait is not None and wait <= 1.0
    clock.t += 4.0  # 109.0: the lease's end
    assert k.tick() is None
    assert len(seen["lost"]) == 1 and "could not be renewed" in str(seen["lost"][0])


def test_a_retry_never_waits_past_the_lease_end() -> None:
    clock = Clock()
    away = StoreError("down")
    k, _seen = keeper(ScriptedLease(clock, [Renewal(left_s=9.0)] + [away] * 8), clock)
    k.tick()
    clock.t = 108.9
    wait = k.tick()
    assert wait is not None and wait <= 0.1 + 1e-9


def test_expired_hosts_are_handed_on_with_the_renewal() -> None:
    clock = Clock()
    k, seen = keeper(ScriptedLease(clock, [Renewal(left_s=9.0, expired=("h2", "h3")),
                                           Renewal(left_s=9.0)]), clock)
    k.tick()
    k.tick()
    assert seen["expired"] == [("h2", "h3")]


def test_start_pushes_the_first_lease_before_any_renewal() -> None:
    clock = Clock()
    k, seen = keeper(ScriptedLease(clock, []), clock)
    k.start()
    k.stop()
    assert seen["extend"][0] == pytest.approx(106.5)


def test_the_next_look_comes_when_another_hosts_lease_becomes_takeable() -> None:
    clock = Clock()
    k, _seen = keeper(ScriptedLease(clock, [Renewal(left_s=9.0, next_s=1.2),
                                           Renewal(left_s=9.0, next_s=7.0)]), clock)
    assert k.tick() == pytest.approx(1.25)  # not a whole renewal period later
    assert k.tick() == pytest.approx(3.0)  # never later than the next renewal
