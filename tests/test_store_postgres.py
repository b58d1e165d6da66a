"""The PostgreSQL store's own promises, on a real throwaway server: many live hosts on
one store, leases judged by the database's clock, fenced commits that write nothing,
takeover of an expired host's trees in batches without two takers claiming one tree,
databases that are not a Zeus store refused unchanged, and a server restarted with
`pg_ctl stop -m immediate` losing nothing committed (docs/design.md, "The store")."""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from actors import AttemptRecord, Brief, Status, Summary, Usage
from supervisor import StoreError, Zeus
from supervisor.errors import StoreFenced
from supervisor.routing import AgentPolicy

psycopg = pytest.importorskip("psycopg", reason="pip install 'zeus-supervisor[postgres]'")

from supervisor.store.pg_schema import STATEMENTS  # noqa: E402 - psycopg first
from supervisor.store.postgres import PostgresStore  # noqa: E402
from supervisor.store.schema import SCHEMA_VERSION  # noqa: E402

BRIEF = Brief(agent="apollo", scope="scan the routes")
POLICY = AgentPolicy(read_only=True)
WAIT_S = 30.0  # a safety bound on waits, never the thing asserted


def record(store: PostgresStore, d_id: str, *, parent: str | None = None,
           key: str | None = None) -> None:
    store.record_delegation(d_id, key=key, parent_id=parent, ordinal=0 if parent else None,
                            agent="apollo", brief=BRIEF, policy=POLICY, deadline=None,
                            created=10.0)


def start(store: PostgresStore, d_id: str) -> str:
    a_id = f"{d_id}-a1"
    store.attempt_started(a_id, delegation_id=d_id, number=1, agent="apollo", started=11.0,
                          deadline=None)
    return a_id


def settle(store: PostgresStore, d_id: str) -> None:
    store.settled(d_id, status=Status.completed, at=13.0, summary=Summary(
        id=d_id, agent="apollo", scope=BRIEF.scope, status=Status.completed, output="ok"))


def expire(url: str, store: PostgresStore) -> None:
    """End `store`'s lease now, by the database's clock (as if it stopped renewing)."""
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("UPDATE hosts SET lease_until = now() - interval '1 second' WHERE id = %s",
                    (store.host_id,))


def sql(url: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    """`query` on a connection of its own: its rows (none for a statement without)."""
    with psycopg.connect(url, autocommit=True) as con:
        cur = con.execute(query, args)
        return [tuple(r) for r in cur.fetchall()] if cur.description else []


@pytest.fixture
def opened(pg_url: str) -> Iterator[Any]:
    """`opened(**kwargs)` opens a store on the test's database; all closed at the end."""
    stores: list[PostgresStore] = []

    def factory(**kwargs: Any) -> PostgresStore:
        stores.append(PostgresStore.open(pg_url, **kwargs))
        return stores[-1]

    yield factory
    for s in stores:
        with contextlib.suppress(StoreError):  # a fenced or disconnected one
            s.close()


# -- many hosts ---------------------------------------------------------------------------
def test_many_live_hosts_share_a_store_and_each_sees_only_what_it_owns(
    opened: Any, pg_url: str
) -> None:
    a, b = opened(), opened()
    assert a.host_id != b.host_id and len(a.host_id) == 32
    record(a, "apollo-1", key="ticket-1")
    start(a, "apollo-1")
    a.commit()
    assert [o.delegation.id for o in a.open_delegations()] == ["apollo-1"]
    assert b.open_delegations() == []  # b owns nothing
    found = b.by_key("ticket-1")  # keys are the store's
    assert found is not None and found.id == "apollo-1"
    hosts = {h.id: h for h in b.hosts()}
    assert hosts[a.host_id].owns == 1 and hosts[b.host_id].owns == 0
    assert all(h.lease_left_s > 0 and h.taken_by is None for h in hosts.values())
    assert sql(pg_url, "SELECT owner, epoch FROM delegations") == [(a.host_id, 1)]
    # its sessions are found by name, and end a transaction left idle within the lease
    assert a._con.execute("SHOW idle_in_transaction_session_timeout").fetchone()[0] == "5s"
    assert sql(pg_url, "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
               f"zeus-{a.host_id}") == [(1,)]


def test_a_clean_close_releases_the_host_and_ends_its_lease(opened: Any, pg_url: str) -> None:
    a, b = opened(), opened()
    a.close()
    [gone] = [h for h in b.hosts() if h.id == a.host_id]
    assert gone.released is not None and gone.lease_left_s <= 0
    renewal = b.lease_keeper().keep(0.0)
    assert renewal is not None and renewal.expired == ()  # released: nothing to take over


def test_hosts_that_open_an_empty_database_together_make_one_schema(pg_url: str) -> None:
    stores: list[PostgresStore] = []
    errors: list[BaseException] = []
    go = threading.Barrier(4)

    def open_one() -> None:
        go.wait()
        try:
            stores.append(PostgresStore.open(pg_url))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    try:
        assert errors == [] and len(stores) == 4
        assert sql(pg_url, "SELECT value FROM meta WHERE key = 'schema_version'") == [
            (str(SCHEMA_VERSION),)]
        assert len(stores[0].hosts()) == 4
    finally:
        for s in stores:
            s.close()


# -- the lease and fencing -----------------------------------------------------------------------
def test_the_lease_is_renewed_by_the_database_clock_from_another_thread(opened: Any) -> None:
    a = opened(lease_s=5.0)
    keeper = a.lease_keeper()
    left: list[float | None] = []
    t = threading.Thread(target=lambda: left.append(keeper.renew()))
    t.start()
    t.join(WAIT_S)
    assert left[0] is not None and 4.0 < left[0] <= 5.0


def test_a_host_whose_lease_ended_is_fenced_and_its_commit_writes_nothing(
    opened: Any, pg_url: str
) -> None:
    a = opened()
    record(a, "apollo-1")
    a_id = start(a, "apollo-1")
    a.commit()
    expire(pg_url, a)
    assert a.lease_keeper().renew() is None  # lost: never extended again
    a.charge("apollo-1", a_id, Usage(calls=3))
    record(a, "apollo-2")
    with pytest.raises(StoreFenced) as fenced:
        a.commit()
    assert fenced.value.host_id == a.host_id and a.host_id in str(fenced.value)
    assert "its lease ended or was taken over" in str(fenced.value)  # zeus_fenced's why
    assert a.fenced and not a.writable
    assert sql(pg_url, "SELECT id FROM delegations") == [("apollo-1",)]
    assert sql(pg_url, "SELECT calls FROM attempts") == [(0,)]
    with pytest.raises(StoreFenced):  # and stays fenced
        a.commit()


def test_a_fenced_hosts_charges_are_written_late_each_once_whoever_owns_the_delegation(
    opened: Any, pg_url: str
) -> None:
    """Spend is a fact (docs/design.md): the charges of a fenced commit, and those its
    lost attempts' children send on, are written by `write_late`, which no fence refuses;
    one at or below what the attempt has counted (`charged_progress`) is not counted
    again, and one not numbered (progress 0) always is."""
    a = opened()
    record(a, "apollo-1")
    a_id = start(a, "apollo-1")
    a.charge("apollo-1", a_id, Usage(calls=1, cost=0.5), progress=1)
    a.commit()
    expire(pg_url, a)
    assert a.lease_keeper().renew() is None
    a.charge("apollo-1", a_id, Usage(calls=2, cost=1.0), progress=3)
    with pytest.raises(StoreFenced):
        a.commit()
    assert a.late_pending  # the fenced commit's charge, kept
    a.charge_late(a_id, Usage(calls=1, cost=0.5), 3)  # sent again: counted in the above
    a.charge_late(a_id, Usage(calls=4, cost=2.0), 4)
    a.charge_late(a_id, Usage(calls=8), 0)
    a.write_late()
    assert not a.late_pending
    assert sql(pg_url, "SELECT calls, cost, charged_progress FROM attempts") == [(15, 3.5, 4)]
    a.charge_late(a_id, Usage(calls=16), 4)  # at its progress again: written once only
    a.write_late()
    assert sql(pg_url, "SELECT calls FROM attempts") == [(15,)]
    assert a.usage_of([a_id, "nobody"]) == {a_id: Usage(calls=15, cost=3.5)}


@pytest.mark.parametrize("conforming", ["on", "off"])
def test_a_commit_stores_quotes_backslashes_and_nul_as_given(
        opened: Any, pg_url: str, conforming: str) -> None:
    """A commit's values are bound by psycopg, never inlined: quotes and backslashes
    arrive unchanged whatever the server's `standard_conforming_strings` (a pooler may
    not pass a session's own setting on), a float's infinity too, and a NUL (no PostgreSQL
    text can hold one) arrives as U+FFFD instead of refusing every later commit."""
    sql(pg_url, "DO $$ BEGIN EXECUTE format('ALTER DATABASE %%I SET"
        f" standard_conforming_strings = {conforming}', current_database()); END $$")
    a = opened()
    assert sql(pg_url, "SHOW standard_conforming_strings") == [(conforming,)]
    record(a, "apollo-2", key="\\'); DELETE FROM delegations; --")
    record(a, "apollo-1", key="it's \\ a 'key' é 😀")
    a_id = start(a, "apollo-1")
    a.retry_scheduled("apollo-1", after_attempt=a_id, due=float("inf"), agent="apollo")
    a.attempt_ended(a_id, outcome="error", ended=12.0, error="bad\x00byte 'q' \\n",
                    record=AttemptRecord(id=a_id, agent="apollo", outcome="error"))
    a.commit()
    assert sql(pg_url, "SELECT key FROM delegations ORDER BY id") == [
        ("it's \\ a 'key' é 😀",), ("\\'); DELETE FROM delegations; --",)]
    assert sql(pg_url, "SELECT error FROM attempts") == [("bad\ufffdbyte 'q' \\n",)]
    assert sql(pg_url, "SELECT due FROM retries") == [(float("inf"),)]


def test_a_settlement_is_heard_by_the_hosts_that_watch_it_as_it_commits(opened: Any) -> None:
    """A commit that settles delegations notifies the settled channel with their ids; the
    watching host's `RemoteSettlements` looks at the store when it hears, without waiting
    for its own poll (an hour here)."""
    from supervisor.core.handle import DelegationFuture
    from supervisor.core.remote import RemoteSettlements

    runner, watcher = opened(), opened()
    record(runner, "apollo-1")
    start(runner, "apollo-1")
    runner.commit()
    lease = watcher.lease_keeper()
    feed = lease.settled_feed()
    assert feed.wait(0.0) is None  # made just now: no word to trust yet
    looked = threading.Semaphore(0)

    def read(ids: Any) -> Any:
        try:
            return lease.summaries(ids)
        finally:
            looked.release()

    remote = RemoteSettlements(read, feed=lambda: feed, poll_s=3600, backstop_s=3600)
    future = DelegationFuture()
    remote.watch("apollo-1", future)
    assert looked.acquire(timeout=WAIT_S)  # the watch's first look: not settled yet
    assert not future.done()
    settle(runner, "apollo-1")
    runner.commit()
    assert future.result(WAIT_S).status is Status.completed
    assert remote.polls == 2
    remote.close("done")


def test_a_host_lets_go_of_a_delegation_once_its_settlement_and_last_end_landed(
    opened: Any, pg_url: str
) -> None:
    """What conditions a host's writes (each delegation's epoch, each attempt's delegation)
    does not grow with every delegation it ran; an attempt that ends after its delegation
    settled (a cancel settles first) is still written under its epoch, then let go."""
    a = opened()
    for i in range(1, 51):  # ended, then settled
        record(a, f"apollo-{i}")
        a_id = start(a, f"apollo-{i}")
        a.attempt_ended(a_id, outcome="completed", ended=12.0, error=None,
                        record=AttemptRecord(id=a_id, agent="apollo", outcome="completed"))
        settle(a, f"apollo-{i}")
        a.commit()
    assert len(a._held) == 0
    record(a, "apollo-51")
    a_id = start(a, "apollo-51")
    a.commit()
    settle(a, "apollo-51")  # settled first: its attempt is still being stopped
    a.commit()
    assert len(a._held) == 1
    a.charge("apollo-51", a_id, Usage(calls=2))
    a.attempt_ended(a_id, outcome="cancelled", ended=14.0, error=None,
                    record=AttemptRecord(id=a_id, agent="apollo", outcome="cancelled"))
    a.commit()  # not fenced: still held under epoch 1
    assert len(a._held) == 0
    assert sql(pg_url, "SELECT outcome, calls FROM attempts WHERE id = %s", a_id) == [
        ("cancelled", 2)]


def test_a_dead_hosts_claim_that_was_never_dispatched_is_taken_over_under_its_own_id(
    opened: Any, pg_url: str
) -> None:
    """A key claimed by a host that died before recording its delegation is claimed by
    the next host that asks with the same brief, under the claim's own id: a handle
    another host took on that id then resolves when it runs. A live host's claim, or a
    dead one's of another brief, stands."""
    a, b = opened(), opened()
    other = BRIEF.model_copy(update={"scope": "another scope"})
    assert a.lease_keeper().claim_key("k1", "apollo-1", BRIEF) == ("apollo-1", BRIEF, True)
    assert a.lease_keeper().claim_key("k2", "apollo-2", BRIEF) == ("apollo-2", BRIEF, True)
    assert b.lease_keeper().claim_key("k1", "apollo-100001", BRIEF) == (
        "apollo-1", BRIEF, False)  # its host is live: it may record it yet
    expire(pg_url, a)  # as if it died between its claims and their records
    assert b.lease_keeper().claim_key("k1", "apollo-100002", BRIEF) == (
        "apollo-1", BRIEF, True)
    assert b.lease_keeper().claim_key("k2", "apollo-100003", other) == (
        "apollo-2", BRIEF, False)  # another brief: KeyConflict for it, the claim stands
    assert sql(pg_url, "SELECT key, delegation_id, host FROM keys ORDER BY key") == [
        ("k1", "apollo-1", b.host_id), ("k2", "apollo-2", a.host_id)]


def test_a_settled_delegation_is_claimed_before_another_host_settles_it_again(
    opened: Any, pg_url: str
) -> None:
    """`zeus.resolve` from any host: the blocked delegation is claimed for it first (its
    epoch bumped), so its new settlement is not fenced as another host's."""
    a, b = opened(), opened()
    record(a, "apollo-1")
    a.settled("apollo-1", status=Status.blocked, at=13.0, summary=Summary(
        id="apollo-1", agent="apollo", scope=BRIEF.scope, status=Status.blocked))
    a.commit()
    b.claim_settled("apollo-1")
    settle(b, "apollo-1")
    b.commit()
    assert sql(pg_url, "SELECT status, owner, epoch FROM delegations") == [
        ("completed", b.host_id, 2)]


def test_a_blocked_delegation_reopened_by_another_host_keeps_the_persons_answer(
    opened: Any, pg_url: str
) -> None:
    """`zeus.resume` from any host: the delegation is claimed, opened again, and keeps the
    person's answer (read back by a restart's recovery)."""
    a, b = opened(), opened()
    record(a, "apollo-1")
    a.settled("apollo-1", status=Status.blocked, at=13.0, summary=Summary(
        id="apollo-1", agent="apollo", scope=BRIEF.scope, status=Status.blocked))
    a.commit()
    answer = {"blocker": "needs the DBA's 'yes'", "note": "approved \\ by the DBA"}
    b.reopen("apollo-1", answer)
    stored = b.delegation("apollo-1")
    assert stored is not None and stored.open and stored.answer == answer
    assert sql(pg_url, "SELECT owner, epoch FROM delegations") == [(b.host_id, 2)]


def test_a_write_to_an_attempt_reads_its_own_delegation_not_the_table(opened: Any) -> None:
    """Each conditioned write to an attempt (its pid, a charge, its end) checks one
    delegation row by its key: its cost does not grow with the store. (A check joined to
    the attempt's row was once planned as a scan of every delegation.)"""
    a = opened()
    for i in range(1, 11):  # while the store is small, as when a host starts on a new one
        record(a, f"apollo-{i}")
        a_id = start(a, f"apollo-{i}")
        a.attempt_identity(a_id, pid=1, pid_start_time=1.0, pgid=1, node=None)
        a.charge(f"apollo-{i}", a_id, Usage(calls=1))
        a.attempt_ended(a_id, outcome="completed", ended=12.0, error=None,
                        record=AttemptRecord(id=a_id, agent="apollo", outcome="completed"))
        a.commit()  # each write's plan is cached by now
    for i in range(11, 2001):
        record(a, f"apollo-{i}")
        start(a, f"apollo-{i}")
    a.commit()
    con = a._con
    args = {
        "attempt_identity": (1, 1.0, 1, None, 1, None, None, "apollo-1500-a1", "apollo-1500",
                             a.host_id, 1),
        "charge": (1, 2, 3, 0.5, 7, "apollo-1500-a1", "apollo-1500", a.host_id, 1),
        "attempt_ended": ("completed", 12.0, None, "{}", 1, "apollo-1500-a1", "apollo-1500",
                          a.host_id, 1),
    }
    for kind, row in args.items():
        # The plan a prepared statement keeps whatever its values (a generic plan), as the
        # store's commits prepare each write once a session.
        parts = STATEMENTS[kind].split("%s")
        numbered = "".join(f"{part}${n}" for n, part in enumerate(parts[:-1], 1)) + parts[-1]
        values = psycopg.ClientCursor(con).mogrify(", ".join(["%s"] * len(row)), row)
        with con.transaction(force_rollback=True):
            con.execute(f"PREPARE zeus_plan AS {numbered}".encode())
            con.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            plan = "\n".join(r[0] for r in con.execute(
                f"EXPLAIN (ANALYZE, BUFFERS) EXECUTE zeus_plan ({values})".encode()).fetchall())
            con.execute("DEALLOCATE zeus_plan")
        assert "Seq Scan" not in plan, (kind, plan)
        executed = plan.split("Planning")[0]  # the run's buffers, not the planner's
        pages = max(int(n) for n in re.findall(r"shared hit=(\d+)", executed))
        assert pages < 50, (kind, plan)  # 2,000 delegations fill about 100 pages


def test_a_write_for_a_delegation_another_host_took_is_fenced_whole(
    opened: Any, pg_url: str
) -> None:
    a, b = opened(), opened()
    record(a, "apollo-1")
    a_id = start(a, "apollo-1")
    a.commit()
    expire(pg_url, a)
    assert b.take_over(a.host_id, limit=8) == ["apollo-1"]
    sql(pg_url, "UPDATE hosts SET lease_until = now() + interval '1 minute',"
        " taken_by = NULL WHERE id = %s", a.host_id)  # a's lease as if it never ended
    a.charge("apollo-1", a_id, Usage(calls=1))
    settle(a, "apollo-1")
    with pytest.raises(StoreFenced, match="no longer holds"):
        a.commit()  # the epoch moved on: nothing of the commit lands
    assert sql(pg_url, "SELECT status, owner, epoch FROM delegations") == [
        (None, b.host_id, 2)]
    assert sql(pg_url, "SELECT calls FROM attempts") == [(0,)]
    b.charge("apollo-1", a_id, Usage(calls=2))
    settle(b, "apollo-1")
    b.commit()  # the taker writes under the new epoch
    assert sql(pg_url, "SELECT status FROM delegations") == [("completed",)]
    assert sql(pg_url, "SELECT calls FROM attempts") == [(2,)]


# -- takeover ------------------------------------------------------------------------------------
def test_an_expired_hosts_trees_are_taken_over_in_batches_and_its_sessions_ended(
    opened: Any, pg_url: str
) -> None:
    a, b = opened(), opened()
    slow = opened(bound_s=60.0)  # its children's ladder takes up to a minute
    record(slow, "s1")
    slow.commit()
    for n in (1, 2, 3):
        record(a, f"r{n}")
        record(a, f"r{n}.c", parent=f"r{n}")  # a tree: root and child go together
        start(a, f"r{n}.c")
    record(a, "done")
    settle(a, "done")
    a.commit()
    keeper = b.lease_keeper()

    def expired(margin_s: float = 0.0) -> tuple[str, ...]:
        renewal = keeper.keep(margin_s)
        assert renewal is not None  # b's own lease holds
        return renewal.expired

    assert expired() == () and b.take_over(a.host_id, limit=8) == []  # alive
    expire(pg_url, a)
    expire(pg_url, slow)
    assert expired() == (a.host_id,)  # slow's own bound has not passed yet
    assert expired(margin_s=60) == ()  # nor a's, with a margin of a minute
    renewal = keeper.keep(0.0)
    assert renewal is not None and renewal.next_s is not None and 55 < renewal.next_s <= 60
    assert sql(pg_url, "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
               f"zeus-{a.host_id}") == [(1,)]
    first = b.take_over(a.host_id, limit=2)
    assert first == ["r1", "r1.c", "r2", "r2.c"]  # parents first, two roots
    assert sql(pg_url, "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
               f"zeus-{a.host_id}") == [(0,)]  # a's sessions were ended first
    assert b.take_over(a.host_id, limit=2) == ["r3", "r3.c"]
    assert b.take_over(a.host_id, limit=2) == []
    claimed = b.open_delegations_of(first)
    assert [o.delegation.id for o in claimed] == first
    assert [a_.id for a_ in claimed[1].attempts] == ["r1.c-a1"]
    assert {o.delegation.id for o in b.open_delegations()} == {
        "r1", "r1.c", "r2", "r2.c", "r3", "r3.c"}
    [taken] = [h for h in b.hosts() if h.id == a.host_id]
    assert taken.taken_by == b.host_id and taken.owns == 0
    assert expired() == ()  # taken: it owns nothing open, no one else looks again


def test_two_takers_never_claim_the_same_tree(opened: Any, pg_url: str) -> None:
    a, b, c = opened(), opened(), opened()
    for n in range(40):
        record(a, f"r{n}")
        record(a, f"r{n}.c", parent=f"r{n}")
    a.commit()
    expire(pg_url, a)
    got: dict[str, list[str]] = {b.host_id: [], c.host_id: []}
    go = threading.Barrier(2)

    def take(store: PostgresStore) -> None:
        go.wait()
        while batch := store.take_over(a.host_id, limit=3):
            got[store.host_id].extend(batch)

    threads = [threading.Thread(target=take, args=(s,)) for s in (b, c)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    claimed = got[b.host_id] + got[c.host_id]
    assert sorted(claimed) == sorted([f"r{n}" for n in range(40)]
                                     + [f"r{n}.c" for n in range(40)])  # each once
    for mine in got.values():  # a root and its child always went to one taker
        assert {d for d in mine if d.endswith(".c")} == {f"{d}.c" for d in mine
                                                         if not d.endswith(".c")}
    assert sql(pg_url, "SELECT DISTINCT epoch FROM delegations") == [(2,)]


def test_a_restart_on_the_same_machine_takes_over_what_its_dead_host_left_open(
    opened: Any, pg_url: str
) -> None:
    a = opened()
    record(a, "apollo-1")
    a.commit()
    # a's process as if gone: another pid (this one is alive, and a's lease has not ended)
    sql(pg_url, "UPDATE hosts SET pid = 2147483646 WHERE id = %s", a.host_id)
    again = opened()
    assert [o.delegation.id for o in again.open_delegations()] == ["apollo-1"]
    assert again.previous_owner is not None and again.previous_owner.pid == 2147483646


# -- databases that are not a Zeus store ------------------------------------------------------
def test_a_database_of_another_application_is_refused_unchanged(pg_url: str) -> None:
    sql(pg_url, "CREATE TABLE invoices (id int)")
    with pytest.raises(StoreError, match=r"tables of another application.*invoices"):
        PostgresStore.open(pg_url)
    assert sql(pg_url, "SELECT table_name FROM information_schema.tables WHERE"
               " table_schema = 'public'") == [("invoices",)]


def test_a_store_made_before_attempts_kept_their_tool_call_gains_the_column(
    opened: Any, pg_url: str
) -> None:
    opened().close()
    sql(pg_url, "ALTER TABLE attempts DROP COLUMN in_tool")  # as an older Zeus made it
    again = opened()
    record(again, "apollo-1")
    again.attempt_in_tool(start(again, "apollo-1"), "write_file")
    again.commit()
    assert sql(pg_url, "SELECT in_tool FROM attempts") == [("write_file",)]


def test_a_store_of_a_newer_schema_is_refused_unchanged(pg_url: str) -> None:
    PostgresStore.open(pg_url).close()
    sql(pg_url, "UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    hosts = sql(pg_url, "SELECT count(*) FROM hosts")
    with pytest.raises(StoreError, match=r"schema version 99.*upgrade"):
        PostgresStore.open(pg_url)
    assert sql(pg_url, "SELECT count(*) FROM hosts") == hosts  # no host registered


def test_an_unreachable_database_is_a_store_error_naming_it(tmp_path: Any) -> None:
    url = f"postgresql://zeus@/none?host={tmp_path}"
    with pytest.raises(StoreError, match="cannot connect"):
        PostgresStore.open(url)


# -- the database failing ------------------------------------------------------------------------
def _restart(pg_server: Any) -> None:
    pg_server.stop("immediate")
    pg_server.start()


@pytest.mark.realtime
def test_a_server_restarted_immediately_loses_nothing_committed_and_the_store_goes_on(
    opened: Any, pg_url: str, pg_server: Any
) -> None:
    a = opened()
    record(a, "apollo-1", key="kept")
    a_id = start(a, "apollo-1")
    a.charge("apollo-1", a_id, Usage(calls=2))
    a.commit()
    pg_server.stop("immediate")
    try:
        a.charge("apollo-1", a_id, Usage(calls=1))
        with pytest.raises(StoreError):
            a.commit()  # away: the turn is kept
        assert not a.writable
    finally:
        pg_server.start()
    deadline = time.monotonic() + WAIT_S
    while True:  # reconnects are tried with a backoff: poll
        try:
            a.commit()
            break
        except StoreError:
            assert time.monotonic() < deadline, "the store never reconnected"
            time.sleep(0.05)
    assert a.writable
    assert sql(pg_url, "SELECT calls FROM attempts") == [(3,)]  # both turns, once each
    found = a.by_key("kept")
    assert found is not None and found.id == "apollo-1"


@pytest.mark.realtime
def test_zeus_refuses_new_work_while_the_database_is_away_and_goes_on_after(
    pg_url: str, pg_server: Any
) -> None:
    with Zeus.start(agents={"quick": lambda brief, ctx: "done"}, store=pg_url) as zeus:
        assert zeus.dispatch(Brief(agent="quick", scope="before")).result(WAIT_S).ok
        pg_server.stop("immediate")
        taken = []
        try:
            refused = None
            for i in range(50):  # the first may be taken before a commit fails
                try:
                    taken.append(zeus.dispatch(Brief(agent="quick", scope=f"q{i}")))
                except StoreError as exc:
                    refused = exc
                    break
                # On a shared store a settlement is made known only once it is stored.
                with contextlib.suppress(TimeoutError):
                    taken[-1].result(0.5)
                    pytest.fail("a settlement was made known while the store was away")
            assert refused is not None and "cannot be written" in str(refused)
        finally:
            pg_server.start()
        for handle in taken:  # stored and made known once the database is back
            assert handle.result(WAIT_S).status.value in ("completed", "failed")
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                after = zeus.dispatch(Brief(agent="quick", scope="after"), key="after")
                break
            except StoreError:
                assert time.monotonic() < deadline, "Zeus never wrote the store again"
                time.sleep(0.05)
        assert after.result(WAIT_S).ok
    rows = sql(pg_url, "SELECT status FROM delegations WHERE key = 'after'")
    assert rows == [("completed",)]
    assert sql(pg_url, "SELECT count(*) FROM delegations WHERE status IS NULL") == [(0,)]


# -- read by the CLI and the ui ---------------------------------------------------------------
def test_zeus_tree_and_blocked_read_a_shared_store_with_its_hosts(
    opened: Any, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from supervisor.cli.main import main

    a, b = opened(), opened()
    record(a, "apollo-1")
    start(a, "apollo-1")
    record(b, "apollo-2")
    b.settled("apollo-2", status=Status.blocked, at=13.0, summary=Summary(
        id="apollo-2", agent="apollo", scope=BRIEF.scope, status=Status.blocked,
        error="the migration needs a person"))
    a.commit()
    b.commit()
    b.close()
    assert main(["tree", pg_url]) == 0
    out = capsys.readouterr().out
    assert "apollo-1 apollo: in progress" in out and "apollo-2 apollo: blocked" in out
    hosts = out.split("hosts:", 1)[1]
    assert f"{a.host_id[:8]}  pid " in hosts and "s left  owns 1 open" in hosts
    assert f"{b.host_id[:8]}  pid " in hosts and "released  owns 0 open" in hosts
    assert main(["blocked", pg_url]) == 0
    out = capsys.readouterr().out
    assert "apollo-2" in out and "the migration needs a person" in out and "apollo-1" not in out


def test_the_ui_source_of_a_shared_store_gives_new_rows_as_they_come(
    opened: Any, pg_url: str
) -> None:
    from supervisor.ui.source import open_source

    a = opened()
    record(a, "apollo-1")
    a.commit()
    source = open_source(pg_url)
    first = source.read_new()
    assert [e["event"] for e in first.events] == ["zeus.started", "delegation.dispatched"]
    assert first.events[0]["hosts"][0]["id"] == a.host_id
    assert first.events[1]["host"] == a.host_id  # its owner
    again = source.read_new()
    assert again.events == []  # nothing new, but the hosts as read now
    assert again.hosts is not None and [h["id"] for h in again.hosts] == [a.host_id]
    start(a, "apollo-1")
    a.commit()
    assert [e["event"] for e in source.read_new().events] == ["attempt.started"]


def test_a_database_that_holds_no_store_is_bad_input_for_the_cli_and_left_alone(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from supervisor.cli.main import main

    assert main(["tree", pg_url]) == 2
    assert "no Zeus store there" in capsys.readouterr().err
    assert sql(pg_url, "SELECT count(*) FROM information_schema.tables WHERE"
               " table_schema = 'public'") == [(0,)]


@pytest.mark.realtime
@pytest.mark.parametrize("lease_left_s", [1.0, 10.0])
def test_a_restart_waits_for_the_dead_hosts_workers_only_while_they_stop_for_its_lease(
        opened: Any, pg_url: str, lease_left_s: float) -> None:
    """A host of this machine that is gone, its lease ending in `lease_left_s`, its ladder's
    bound 1 s: with 1 s left, its workers' deadline (the lease's end less the bound) is
    now, and the next host to open waits about that bound for them to finish stopping;
    with 10 s left, they wait to be picked up, and it opens at once."""
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid names no process now
    gone = opened(lease_s=3.0)
    sql(pg_url, "UPDATE hosts SET pid = %s, bound_s = 1.0, lease_until = now() +"
        " make_interval(secs => %s) WHERE id = %s", dead.pid, lease_left_s, gone.host_id)
    began = time.monotonic()
    again = opened(lease_s=3.0)
    took = time.monotonic() - began
    if lease_left_s == 1.0:
        assert 0.8 <= took < WAIT_S, took
    else:
        assert took < 0.8, took
    assert sql(pg_url, "SELECT taken_by FROM hosts WHERE id = %s", gone.host_id) == [
        (again.host_id,)]  # adopted at once after that, as a restart here does
