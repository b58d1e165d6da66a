"""`ctx.fence`: the delegation id and its epoch on the store, as every backend hands it to
the child (a thread, a worker process, a command's `ZEUS_FENCE`, a Ray task), 1 in
memory and on a store of one host, and grown on PostgreSQL once another host took the
delegation over (docs/design.md, "Many hosts on one PostgreSQL store")."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from actors import Brief, Context, Fence, Status
from actors.backends import ChildHandle, ChildSpec, ProcessBackend, ThreadBackend, frames
from actors.clock import SystemClock
from supervisor import Routing, StoreError, Zeus
from supervisor.routing import AgentPolicy
from tests._support import Outbox

PY = sys.executable
PRINT_FENCE = (PY, "-c", "import os; print(os.environ['ZEUS_FENCE'])")


def fence_of(brief: Brief, ctx: Context) -> dict[str, Any]:
    """What the child was given (module level: a worker imports it by name)."""
    fence = ctx.fence
    return {"type": type(fence).__name__, "id": fence.delegation_id, "epoch": fence.epoch}


def as_fence(output: dict[str, Any]) -> Fence:
    assert output["type"] == "Fence", output
    return Fence(output["id"], output["epoch"])


def spec(**overrides: Any) -> ChildSpec:
    clock = SystemClock()
    fields: dict[str, Any] = {
        "agent": "talos", "delegation_id": "talos-7", "attempt": 1, "attempt_id": "talos-7-a1",
        "brief": Brief(agent="talos", scope="s"), "deadline": clock.now() + 60.0,
        "clock": clock, "heartbeat_interval_s": 5.0, "term_s": 0.5,
    }
    fields.update(overrides)
    return ChildSpec(**fields)


# -- the value ------------------------------------------------------------------------------


def test_a_fence_is_a_frozen_value_whose_text_reads_back() -> None:
    fence = Fence("apollo-1", 2)
    assert str(fence) == "apollo-1:2"
    assert Fence.parse("apollo-1:2") == fence
    assert Fence.parse("ns:apollo-1:3") == Fence("ns:apollo-1", 3)  # the last colon splits
    with pytest.raises(AttributeError):
        fence.epoch = 3  # type: ignore[misc]
    for bad in ("apollo-1", "apollo-1:", ":2", "apollo-1:zero", "apollo-1:0", "apollo-1:-1"):
        with pytest.raises(ValueError, match="expected <delegation id>:<epoch>"):
            Fence.parse(bad)


def test_a_context_built_without_an_epoch_has_the_first() -> None:
    ctx = Context(brief=Brief(agent="a", scope="s"), agent="a", delegation_id="a-1", attempt=1,
                  attempt_id="a-1-a1", deadline=1e12, clock=SystemClock(), send=lambda m: None)
    assert ctx.fence == Fence("a-1", 1)


# -- each backend carries the spec's epoch to its child ----------------------------------


@pytest.mark.process
@pytest.mark.parametrize("kind", ["thread", "process"])
def test_a_child_sees_the_epoch_its_spec_carried(kind: str) -> None:
    backend = ThreadBackend() if kind == "thread" else ProcessBackend()
    inbox = Outbox()
    try:
        backend.start(spec(work=fence_of, epoch=3), inbox)
        finished = inbox.finished()
    finally:
        backend.close()
    assert as_fence(finished.value) == Fence("talos-7", 3)


@pytest.fixture(params=[False, True], ids=["supervisor", "worker"])
def command_backend(request: pytest.FixtureRequest) -> Iterator[ProcessBackend]:
    """A command's program started by the supervisor's process, or by a worker."""
    backend = ProcessBackend(commands_in_workers=bool(request.param))
    yield backend
    backend.close()


@pytest.mark.process
@pytest.mark.parametrize("via", ["argv", "file"])
def test_a_command_agent_finds_its_fence_in_zeus_fence(
    command_backend: ProcessBackend, via: str
) -> None:
    inbox = Outbox()
    handle: ChildHandle = command_backend.start(
        spec(command=PRINT_FENCE, epoch=4, inputs_via=via), inbox)
    finished = inbox.finished()
    assert finished.outcome.value == "completed", finished
    assert Fence.parse(str(finished.value).strip()) == Fence("talos-7", 4)
    assert handle.pid is not None


def test_a_ray_job_carries_the_epoch() -> None:
    job = frames.read_ray_job(frames.ray_job(spec(epoch=5), b"", "reporter"))
    assert job["epoch"] == 5


# -- under Zeus, in memory: the first epoch ---------------------------------------------------


@pytest.mark.process
def test_children_of_every_local_kind_see_the_first_epoch_in_memory() -> None:
    routing = Routing.from_dict({"version": 1, "agents": {
        "in-thread": {"isolation": "thread"},
        "in-process": {"isolation": "process"},
        "command": {"command": list(PRINT_FENCE)},
    }})
    with Zeus.start(routing, agents={"in-thread": fence_of, "in-process": fence_of}) as zeus:
        handles = {agent: zeus.dispatch(Brief(agent=agent, scope="s"))
                   for agent in ("in-thread", "in-process", "command")}
        summaries = {agent: h.result(30) for agent, h in handles.items()}
    assert all(s.status is Status.completed for s in summaries.values()), summaries
    assert as_fence(summaries["in-thread"].output) == Fence(handles["in-thread"].id, 1)
    assert as_fence(summaries["in-process"].output) == Fence(handles["in-process"].id, 1)
    assert Fence.parse(str(summaries["command"].output).strip()) == Fence(
        handles["command"].id, 1)


def test_a_store_of_one_host_keeps_the_first_epoch(tmp_path: Any) -> None:
    with Zeus.start(agents={"scout": fence_of}, store=tmp_path / "zeus.db") as zeus:
        handle = zeus.dispatch(Brief(agent="scout", scope="s"))
        assert as_fence(handle.result(30).output) == Fence(handle.id, 1)


# -- PostgreSQL: a delegation taken over by another host runs under the next epoch ---------


BRIEF = Brief(agent="scout", scope="scan the routes")
READER = AgentPolicy(read_only=True)


def _open(url: str) -> Any:
    pytest.importorskip("psycopg", reason="pip install 'zeus-supervisor[postgres]'")
    from supervisor.store.postgres import PostgresStore

    return PostgresStore.open(url)


def _record(store: Any, d_id: str) -> None:
    store.record_delegation(d_id, key=None, parent_id=None, ordinal=None, agent="scout",
                            brief=BRIEF, policy=READER, deadline=None, created=10.0)


def _sql(url: str, query: str, *args: Any) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        con.execute(query, args)


def _rows(url: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        return [tuple(r) for r in con.execute(query, args).fetchall()]


def test_the_store_gives_the_epoch_each_host_holds_a_delegation_under(pg_url: str) -> None:
    a, b = _open(pg_url), _open(pg_url)
    try:
        _record(a, "scout-1")
        assert a.epoch("scout-1") == 1  # recorded here, before its commit
        a.commit()
        assert b.epoch("scout-1") == 1  # not b's: as committed
        assert b.epoch("scout-9") == 1  # unknown
        _sql(pg_url, "UPDATE hosts SET lease_until = now() - interval '1 second'"
             " WHERE id = %s", a.host_id)
        assert b.take_over(a.host_id, limit=8) == ["scout-1"]
        assert b.epoch("scout-1") == 2
        assert a.epoch("scout-1") == 1  # the old host still holds the old one: fenced
        b.settled("scout-1", status=Status.blocked, at=12.0, summary=_blocked("scout-1"))
        b.commit()
        b.reopen("scout-1")  # a person resumed it: the next epoch again
        assert b.epoch("scout-1") == 3
    finally:
        for s in (a, b):
            with contextlib.suppress(StoreError):
                s.close()


def _blocked(d_id: str) -> Any:
    from actors import Summary

    return Summary(id=d_id, agent="scout", scope=BRIEF.scope, status=Status.blocked,
                   error="waits for a person")


def test_a_delegation_taken_over_by_another_host_runs_under_epoch_two(pg_url: str) -> None:
    dead = _open(pg_url)
    try:
        _record(dead, "scout-1")
        dead.commit()
        # its process as if gone (another pid): the next host here takes its trees over
        _sql(pg_url, "UPDATE hosts SET pid = 2147483646 WHERE id = %s", dead.host_id)
        routing = Routing.from_dict({"version": 1, "agents": {"scout": {"read_only": True}}})
        with Zeus.start(routing, agents={"scout": fence_of}, store=pg_url) as zeus:
            assert zeus.recovered.rerun == ("scout-1",)
            summary = zeus.handle("scout-1").result(30)
    finally:
        with contextlib.suppress(StoreError):
            dead.close()
    assert summary.status is Status.completed, summary
    assert as_fence(summary.output) == Fence("scout-1", 2)


def waits_out_its_first_epoch(brief: Brief, ctx: Context) -> dict[str, Any]:
    """Under the first epoch, wait to be stopped (its host loses the lease); then say."""
    if ctx.fence.epoch == 1:
        ctx.sleep(120)
    return fence_of(brief, ctx)


@pytest.mark.process
@pytest.mark.realtime
def test_a_live_host_takes_over_a_lost_lease_and_reruns_under_epoch_two(pg_url: str) -> None:
    pytest.importorskip("psycopg", reason="pip install 'zeus-supervisor[postgres]'")
    routing = Routing.from_dict({
        "version": 1, "supervisor": {"store": {"lease_s": 2.0}},
        "agents": {"scout": {"read_only": True, "isolation": "process",
                             "shutdown": {"grace_s": 0.2, "term_s": 0.2}}}})
    agents = {"scout": waits_out_its_first_epoch}
    first = Zeus.start(routing, agents=agents, store=pg_url)
    try:
        with Zeus.start(routing, agents=agents, store=pg_url) as taker:
            handle = first.dispatch(Brief(agent="scout", scope="s"))
            deadline = time.monotonic() + 30  # a safety bound: its attempt is committed
            while not _rows(pg_url, "SELECT 1 FROM attempts WHERE delegation_id = %s",
                            handle.id):
                assert time.monotonic() < deadline, "the first attempt was never recorded"
                time.sleep(0.02)
            _sql(pg_url, "UPDATE hosts SET lease_until = now() - interval '1 second'"
                 " WHERE id = %s", first.host_id)  # as if it froze past its lease
            summary = taker.handle(handle.id).result(60)
    finally:
        first.stop()  # its lease lost, and its sessions ended by the taker: it stops quietly
    assert summary.status is Status.completed, summary
    assert as_fence(summary.output) == Fence(handle.id, 2)
