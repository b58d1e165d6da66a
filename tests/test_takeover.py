"""What a taker of a shared store does with what a dead host left (docs/design.md,
"Several hosts"), two hosts in one process on a real PostgreSQL, the first one's lease
ended by hand as if its host froze: a writer runs again, since its old child is stopped
by the lease, except one whose thread child was inside a tool call with side effects (no
lease stops a thread), which settles `blocked`; a key the dead host claimed and never
dispatched runs on the taker under its claimed id."""

from __future__ import annotations

import time
from typing import Any

import pytest

from actors import Brief, Context, Status
from supervisor import Routing, Zeus

pytestmark = [pytest.mark.realtime]

WAIT_S = 30.0  # a safety bound on waits, never the thing asserted


def writes_in_a_tool(brief: Brief, ctx: Context) -> str:
    """Under the first epoch, wait inside a side-effect tool call until stopped."""
    if ctx.fence.epoch == 1:
        with ctx.tool("write_file"):
            ctx.partial("inside")  # (the tool call's start is in the same turn or before)
            ctx.sleep(120)
    return "done"


def reads_in_a_tool(brief: Brief, ctx: Context) -> str:
    """Under the first epoch, wait inside a read-only tool call until stopped."""
    if ctx.fence.epoch == 1:
        with ctx.tool("read_file", read_only=True):
            ctx.partial("inside")
            ctx.sleep(120)
    return "done"


def _rows(url: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        return [tuple(r) for r in con.execute(query, args).fetchall()]


@pytest.mark.parametrize(("work", "stored_tool", "status"), [
    (writes_in_a_tool, "write_file", Status.blocked),
    (reads_in_a_tool, None, Status.completed),  # a read-only call: it runs again
])
def test_a_taken_thread_writer_inside_a_side_effect_tool_is_blocked_not_rerun(
        pg_url: str, work: Any, stored_tool: str | None, status: Status) -> None:
    pytest.importorskip("psycopg", reason="pip install 'zeus-supervisor[postgres]'")
    routing = Routing.from_dict({
        "version": 1, "supervisor": {"store": {"lease_s": 2.0}},
        "agents": {"scribe": {"shutdown": {"grace_s": 0.2, "term_s": 0.2}}}})
    agents = {"scribe": work}
    first = Zeus.start(routing, agents=agents, store=pg_url)
    try:
        with Zeus.start(routing, agents=agents, store=pg_url) as taker:
            handle = first.dispatch(Brief(agent="scribe", scope="write the notes"))
            deadline = time.monotonic() + WAIT_S  # until the child's partial is committed
            while not _rows(pg_url, "SELECT 1 FROM partials WHERE delegation_id = %s",
                            handle.id):
                assert time.monotonic() < deadline, "the child never got inside its tool"
                time.sleep(0.02)
            _rows(pg_url, "UPDATE hosts SET lease_until = now() - interval '1 second'"
                  " WHERE id = %s RETURNING 1", first.host_id)  # as if it froze
            summary = taker.handle(handle.id).result(60)
    finally:
        first.stop()
    assert summary.status is status, summary
    if status is Status.blocked:
        assert "'write_file'" in (summary.error or "") and "thread" in (summary.error or "")
    assert _rows(pg_url, "SELECT in_tool FROM attempts WHERE delegation_id = %s ORDER BY"
                 " number", handle.id)[0] == (stored_tool,)


def scouts(brief: Brief, ctx: Context) -> str:
    return f"scouted {brief.scope}"


def test_a_key_a_dead_host_claimed_and_never_dispatched_runs_on_the_taker(pg_url: str) -> None:
    """Host A claims a key and dies before it records the delegation. Host B, asked for
    the key meanwhile, holds a handle on A's claimed id; once A's lease ends, B takes the
    claim over and runs it under that id, and the handle resolves."""
    pytest.importorskip("psycopg", reason="pip install 'zeus-supervisor[postgres]'")
    from supervisor.store.postgres import PostgresStore

    brief = Brief(agent="scout", scope="the routes")
    routing = Routing.from_dict({
        "version": 1, "supervisor": {"store": {"lease_s": 2.0}},
        "agents": {"scout": {"read_only": True}}})
    dead = PostgresStore.open(pg_url, lease_s=2.0)
    try:
        assert dead.lease_keeper().claim_key("ticket-7", "scout-1", brief)[2]
        with Zeus.start(routing, agents={"scout": scouts}, store=pg_url) as taker:
            handle = taker.dispatch(brief, key="ticket-7")  # A's claim: a handle on its id
            assert handle.id == "scout-1" and not handle.done()
            _rows(pg_url, "UPDATE hosts SET lease_until = now() - interval '1 second'"
                  " WHERE id = %s RETURNING 1", dead.host_id)  # as if it died
            summary = handle.result(WAIT_S)
            again = taker.dispatch(brief, key="ticket-7")
    finally:
        dead._con.close()  # it died: no release
        dead.lease_keeper().close()
    assert summary.status is Status.completed and summary.id == "scout-1", summary
    assert summary.output == "scouted the routes" and again.id == "scout-1"
    assert _rows(pg_url, "SELECT k.host, d.status FROM keys k JOIN delegations d ON"
                 " d.id = k.delegation_id") == [(taker.host_id, "completed")]
