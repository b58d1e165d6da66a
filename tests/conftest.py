"""Shared fixtures: a fake clock, an event recorder, a Zeus factory, and the stores (a
SQLite file, or a fresh database on the session's throwaway PostgreSQL)."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.clock import FakeClock
from supervisor import Routing, Zeus
from supervisor.testing import EventRecorder

Recorder = EventRecorder


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


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One real `zeus demo` run for the session (a `tests._ui.DemoRun`): its own test
    judges it (tests/test_demo.py), the `zeus ui` tests read its journal."""
    from tests._ui import run_demo_once

    return run_demo_once(tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="session")
def demo_journal(demo_run: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real `zeus demo` run's journal for the session's `zeus ui` tests: the session's
    run, or, when a loaded machine pushed that one off its design, one made again."""
    from tests._ui import run_demo

    if demo_run.code == 0:
        return Path(demo_run.log)
    return run_demo(tmp_path_factory.mktemp("demo-again") / "demo.jsonl")


RAY_SKIP = "the ray extra is not installed (pip install 'zeus-supervisor[ray]')"


@pytest.fixture(scope="session", autouse=True)
def _shut_ray_down() -> Iterator[None]:
    """Whatever Ray a test left connected goes down with the session."""
    yield
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """The session's throwaway PostgreSQL (tests/_postgres.py); skipped without one."""
    from tests._postgres import SKIP, PostgresServer, find_bin_dir

    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip(SKIP)
    server = PostgresServer(bin_dir)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def pg_url(pg_server: Any) -> str:
    """A fresh, empty database on the session's PostgreSQL: its URL."""
    return str(pg_server.database())


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a store lives, once per engine: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "zeus.db")
    return str(request.getfixturevalue("pg_url"))
