"""Shared fixtures: a fake clock, an event recorder, and a Zeus factory."""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from actors import FakeClock
from supervisor import Routing, Zeus


class Recorder:
    """Collects events (called from Zeus's thread) and lets a test wait for one."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._cond = threading.Condition()

    def __call__(self, event: dict[str, Any]) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def named(self, name: str) -> list[dict[str, Any]]:
        with self._cond:
            return [e for e in self.events if e["event"] == name]

    def wait_for(self, name: str, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Block until `count` events called `name` arrived (a safety bound, not an assertion)."""
        with self._cond:
            ok = self._cond.wait_for(
                lambda: sum(e["event"] == name for e in self.events) >= count, timeout
            )
        assert ok, f"no {count} x {name} within {timeout}s; saw {[e['event'] for e in self.events]}"
        return self.named(name)

    def names(self) -> list[str]:
        with self._cond:
            return [e["event"] for e in self.events]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


ZeusFactory = Callable[..., Zeus]


@pytest.fixture
def make_zeus(clock: FakeClock, recorder: Recorder) -> Iterator[ZeusFactory]:
    """`make_zeus(agents={name: policy dict}, supervisor={...}, works={name: fn})`."""
    started: list[Zeus] = []

    def factory(
        agents: dict[str, dict[str, Any]] | None = None,
        *,
        supervisor: dict[str, Any] | None = None,
        works: dict[str, Callable[..., Any]] | None = None,
        seed: int = 7,
        **kwargs: Any,
    ) -> Zeus:
        routing = Routing.from_dict(
            {
                "version": 1,
                "supervisor": supervisor or {},
                "agents": {name: dict(policy) for name, policy in (agents or {}).items()},
            }
        )
        kwargs.setdefault("clock", clock)
        kwargs.setdefault("log", recorder)
        zeus = Zeus.start(routing, rng=random.Random(seed), **kwargs)
        for name, fn in (works or {}).items():
            zeus.register(name, fn)
        started.append(zeus)
        return zeus

    yield factory
    for zeus in started:
        zeus.stop(timeout=5)


def wait_cancelled(brief: Any, ctx: Any) -> None:
    """A work function that reports once, then waits until Zeus cancels it."""
    ctx.heartbeat("started")
    ctx.sleep(60)


RAY_SKIP = "the ray extra is not installed (pip install 'zeus-supervisor[ray]')"


@pytest.fixture(scope="session", autouse=True)
def _shut_ray_down() -> Iterator[None]:
    """Whatever Ray a test left connected goes down with the session."""
    yield
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()
