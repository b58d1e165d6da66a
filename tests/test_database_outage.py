"""The database itself fails, and the hosts heal (docs/design.md, "Several hosts"; the
guide's "When the database goes away"), on a real PostgreSQL: a restart within the lease
fails no delegation (the writes wait and land), a dispatch while it is away says so and
names the URL without its password, and a wait on a fenced host's handle never raises
for the fence. Three hosts through restarts and a long outage:
tests/test_hosts_workload.py."""

from __future__ import annotations

import time
from typing import Any

import pytest

from actors import Brief, Context, Status
from supervisor import Routing, StoreError, Zeus
from tests._crash import WAIT_S

pytestmark = [pytest.mark.realtime]

LADDER = {"grace_s": 0.2, "term_s": 0.2}


def steps(brief: Brief, ctx: Context) -> str:
    """A few short steps, each charged (module level: a worker imports it by name)."""
    for _ in range(4):
        ctx.sleep(0.05)
        ctx.charge(calls=1, cost=0.001)
    return f"{brief.scope} done"


def _rows(url: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        return [tuple(r) for r in con.execute(query, args).fetchall()]


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_a_restart_within_the_lease_fails_no_delegation(
    pg_url: str, pg_server: Any, mode: str
) -> None:
    """Two at a time, so that attempts are recorded while the server restarts: each one
    waits for it and starts, where it failed ("free disk space") before."""
    routing = Routing.from_dict({
        "version": 1, "supervisor": {"max_concurrent": 2, "store": {"lease_s": 3.0}},
        "agents": {"scribe": {"shutdown": LADDER},
                   "reader": {"read_only": True, "shutdown": LADDER}}})
    with Zeus.start(routing, agents={"scribe": steps, "reader": steps}, store=pg_url) as zeus:
        handles = [zeus.dispatch(Brief(agent="scribe" if i % 2 else "reader", scope=f"s{i}"),
                                 key=f"k{i}") for i in range(12)]
        handles[0].result(WAIT_S)  # under way: the rest start one after another
        pg_server.stop(mode)
        pg_server.start()
        summaries = [h.result(WAIT_S) for h in handles]
    assert [s.status for s in summaries] == [Status.completed] * 12, [
        (s.id, s.error) for s in summaries if s.status is not Status.completed]
    assert all(len(s.attempts) == 1 for s in summaries)
    assert _rows(pg_url, "SELECT count(*), sum(calls) FROM attempts") == [(12, 48)]


def test_a_host_stopped_while_the_database_restarts_writes_its_last_summaries_when_it_is_back(
    pg_url: str, pg_server: Any
) -> None:
    """`Zeus.stop` while the server is down: its last commit and its release wait for the
    database within the lease, as every write does, and land; the stop does not raise."""
    import threading

    routing = Routing.from_dict({"version": 1, "supervisor": {"store": {"lease_s": 5.0}},
                                 "agents": {"reader": {"read_only": True}}})
    zeus = Zeus.start(routing, agents={"reader": steps}, store=pg_url)
    summary = zeus.dispatch(Brief(agent="reader", scope="s"), key="k").result(WAIT_S)
    assert summary.status is Status.completed
    pg_server.stop("immediate")
    back = threading.Timer(1.0, pg_server.start)  # the restart: over within the lease
    back.start()
    try:
        zeus.stop()  # waits for the database, then writes and releases
    finally:
        back.join()
    assert _rows(pg_url, "SELECT status FROM delegations") == [("completed",)]
    assert _rows(pg_url, "SELECT released IS NOT NULL FROM hosts") == [(True,)]


def test_a_dispatch_while_the_database_is_away_says_so_without_the_password(
    pg_url: str, pg_server: Any
) -> None:
    url = pg_url.replace("zeus@", "zeus:hunter2@")  # (trust: the server never asks for it)
    with Zeus.start(agents={"quick": lambda brief, ctx: "done"}, store=url) as zeus:
        assert zeus.dispatch(Brief(agent="quick", scope="before")).result(WAIT_S).ok
        pg_server.stop("immediate")
        try:
            with pytest.raises(StoreError) as refused:
                for i in range(50):  # the first may be taken before a commit fails
                    zeus.dispatch(Brief(agent="quick", scope=f"q{i}"))
                    time.sleep(0.02)
        finally:
            pg_server.start()
    said = str(refused.value)
    assert "the database does not answer" in said and "free disk space" not in said
    assert "zeus:***@" in said and "hunter2" not in said


def test_the_first_wait_on_a_fenced_hosts_handle_does_not_raise(pg_url: str) -> None:
    """A host whose lease ended is taken over; the taker ends its database sessions. Its
    next look at the store (a handle on the taker's delegation) makes its connection
    again instead of raising "terminating connection due to administrator command"."""
    routing = Routing.from_dict({
        "version": 1, "supervisor": {"store": {"lease_s": 1.0}},
        "agents": {"reader": {"read_only": True, "shutdown": LADDER}}})

    def waits(brief: Brief, ctx: Context) -> str:
        if ctx.fence.epoch == 1 and brief.scope == "held":
            ctx.sleep(60)  # until its host loses the lease
        return f"{brief.scope} done"

    fenced = Zeus.start(routing, agents={"reader": waits}, store=pg_url)
    try:
        with Zeus.start(routing, agents={"reader": waits}, store=pg_url) as taker:
            held = fenced.dispatch(Brief(agent="reader", scope="held"))
            other = taker.dispatch(Brief(agent="reader", scope="other"))
            assert other.result(WAIT_S).ok
            wait_until(lambda: _rows(pg_url, "SELECT 1 FROM attempts WHERE delegation_id ="
                                     " %s", held.id), "the held attempt recorded")
            _rows(pg_url, "UPDATE hosts SET lease_until = now() - interval '1 second'"
                  " WHERE id = %s RETURNING 1", fenced.host_id)  # as if it froze
            wait_until(lambda: _rows(pg_url, "SELECT 1 FROM delegations WHERE id = %s AND"
                                     " owner = %s", held.id, taker.host_id), "the takeover")
            assert fenced.handle(other.id).result(WAIT_S).output == "other done"
            assert fenced.handle(held.id).result(WAIT_S).output == "held done"
    finally:
        fenced.stop()


def wait_until(check: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_S  # a safety bound, never the thing asserted
    while not check():
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.02)
