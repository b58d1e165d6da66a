"""The database itself fails, and the hosts heal (docs/design.md, "Several hosts"; the
guide's "When the database goes away"), on a real PostgreSQL: a restart within the lease
fails no delegation (the writes wait and land), a dispatch while it is away says so and
names the URL without its password, an outage longer than the lease needs no host
restarted (each fenced host joins again and takes over what was left, its own
included), and a wait on a fenced host's handle never raises for the fence."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from actors import Brief, Context, Status
from supervisor import Routing, StoreError, Zeus
from tests._crash import WAIT_S, Host, agent, brief, runs, wait_for

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


LEASE_S = 1.5


@pytest.mark.process
def test_an_outage_longer_than_the_lease_needs_no_host_restarted(
    pg_url: str, pg_server: Any, tmp_path: Path
) -> None:
    """Two host processes, each with a reader and a writer under way; the database down
    for three leases: every host is fenced, joins again once it answers, and the work is
    taken over and done (its own old incarnation's too), each handle resolved within
    `lease_s + 10 s` of the return, by the same host processes, no writer twice at once."""
    agents = {"reader": agent(read_only=True, isolation="process", shutdown=LADDER),
              "writer": agent(isolation="process", shutdown=LADDER)}
    names = {0: ["r0", "w0"], 1: ["r1", "w1"]}
    hosts = [Host(tmp_path, pg_url, {
        "agents": agents, "defaults": {"shutdown": LADDER},
        "supervisor": {"store": {"lease_s": LEASE_S}},
        "briefs": [brief("reader" if n[0] == "r" else "writer", tmp_path, n)
                   for n in names[i]],
        # each stays up once its own have settled: a host that stops cancels what it took
        # over, and either may have taken over the other's
        "hold": True}) for i in (0, 1)]
    try:
        for i, host in enumerate(hosts):
            host.read_line()
            for name in names[i]:
                wait_for(tmp_path / f"{name}.started", host)
        pids = [host.proc.pid for host in hosts]
        pg_server.stop("fast")
        try:
            time.sleep(3 * LEASE_S)  # the outage itself, not a synchronisation
        finally:
            pg_server.start()
        back = time.monotonic()
        (tmp_path / "release").write_text("")
        summaries = {}
        for host in hosts:  # the same processes, each holding once all of its own settled
            while "holding" not in (line := host.read_line()):
                if "summary" in line:
                    summaries[line["summary"]["scope"]] = line["summary"]
        took = time.monotonic() - back
    finally:
        for host in hosts:
            if host.proc.poll() is None:
                host.kill()
    assert took < LEASE_S + 10.0, took
    assert [host.proc.pid for host in hosts] == pids
    for name in [*names[0], *names[1]]:
        summary = summaries[name]
        assert summary["status"] == "completed", summary
        assert [a["outcome"] for a in summary["attempts"]] == ["lost", "completed"], summary
        _first, second = runs(tmp_path, name)
        assert not second[2], f"{name}: its first run was still alive as it ran again"
    hosts_rows = _rows(pg_url, "SELECT id, taken_by FROM hosts ORDER BY n")
    assert len(hosts_rows) == 4  # two incarnations of each host process
    assert {taken for _, taken in hosts_rows[:2]} <= {h for h, _ in hosts_rows[2:]}
