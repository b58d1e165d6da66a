"""The store on its own: write-ahead writes grouped per commit, the readers and pruning
by an injected wall clock on both engines (a SQLite file and a PostgreSQL database);
then, of the SQLite file only, its one owner, bad files refused unchanged, a store
that cannot be written, and the store read back as journal events."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from actors import AttemptRecord, Brief, Status, Summary, Usage
from supervisor import Zeus
from supervisor.errors import StoreBusy, StoreError
from supervisor.journal import Journal
from supervisor.routing import AgentPolicy
from supervisor.store import Recovery, SqliteStore, is_sqlite_file, store_events
from supervisor.store.schema import SCHEMA_VERSION
from supervisor.testing import store_full
from tests._postgres import count_rows, open_store

DAY = 86_400.0
BRIEF = Brief(agent="apollo", scope="scan the routes")
POLICY = AgentPolicy(read_only=True)


class Wall:
    """A wall clock that moves only when told."""

    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def record(store: SqliteStore, d_id: str, *, key: str | None = None, parent: str | None = None,
           ordinal: int | None = None, brief: Brief = BRIEF, created: float = 10.0) -> None:
    store.record_delegation(d_id, key=key, parent_id=parent, ordinal=ordinal, agent=brief.agent,
                            brief=brief, policy=POLICY, deadline=created + 60, created=created)


def start(store: SqliteStore, d_id: str, n: int = 1, at: float = 11.0) -> str:
    a_id = f"{d_id}-a{n}"
    store.attempt_started(a_id, delegation_id=d_id, number=n, agent="apollo", started=at,
                          deadline=at + 30)
    return a_id


def end(store: SqliteStore, a_id: str, outcome: str = "completed", at: float = 12.0) -> None:
    store.attempt_ended(a_id, outcome=outcome, ended=at, error=None,
                        record=AttemptRecord(id=a_id, agent="apollo", outcome=outcome))


def settle(store: SqliteStore, d_id: str, status: Status = Status.completed,
           at: float = 13.0) -> Summary:
    summary = Summary(id=d_id, agent="apollo", scope=BRIEF.scope, status=status, output="ok")
    store.settled(d_id, status=status, summary=summary, at=at)
    return summary


@pytest.fixture
def wall() -> Wall:
    return Wall()


@pytest.fixture
def store(store_url: str, wall: Wall) -> Any:
    """A store on each engine."""
    s = open_store(store_url, now=wall)
    yield s
    s.close()


@pytest.fixture
def sqlite_store(tmp_path: Path, wall: Wall) -> Any:
    """A SQLite store, for what only its file has (one owner, the file's faults)."""
    s = SqliteStore.open(tmp_path / "zeus.db", now=wall)
    yield s
    s.close()


def fingerprint(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


# -- writes and readers --------------------------------------------------------------------
def test_nothing_is_durable_before_commit_and_everything_is_after(store: SqliteStore) -> None:
    record(store, "d1", key="k1")
    a = start(store, "d1")
    assert store.counts().open == 0  # buffered, not written
    store.commit()
    assert store.counts().open == 1
    [found] = store.open_delegations()
    assert found.delegation.key == "k1" and found.delegation.brief == BRIEF
    assert found.delegation.policy["read_only"] is True
    assert [x.id for x in found.attempts] == [a] and found.attempts[0].open


def test_one_commit_is_one_transaction(store: SqliteStore, store_url: str) -> None:
    # a second connection sees all of a turn's writes or none of them
    for n in range(5):
        record(store, f"d{n}")
        start(store, f"d{n}")
    assert count_rows(store_url, "delegations") == 0
    store.commit()
    assert count_rows(store_url, "attempts") == 5


def test_charges_partials_identity_and_retries_come_back_for_recovery(
    store: SqliteStore,
) -> None:
    record(store, "d1")
    a1 = start(store, "d1")
    store.attempt_identity(a1, pid=4242, pid_start_time=123.5, pgid=4242, node=None)
    store.charge("d1", a1, Usage(calls=1, input_tokens=10, cost=0.01))
    store.partial("d1", a1, {"path": "a.py"})
    store.commit()
    store.charge("d1", a1, Usage(calls=2, output_tokens=5, cost=0.02))
    store.partial("d1", a1, "b.py")
    end(store, a1, "transient")
    store.retry_scheduled("d1", after_attempt=a1, due=20.0, agent="apollo")
    a2 = start(store, "d1", 2, at=20.0)
    store.charge("d1", a2, Usage(calls=1, cost=0.5))
    store.commit()
    [found] = store.open_delegations()
    assert found.spent == Usage(calls=4, input_tokens=10, output_tokens=5, cost=0.53)
    assert found.partials == ({"path": "a.py"}, "b.py")
    assert found.retry is not None and (found.retry.after_attempt, found.retry.due) == (a1, 20.0)
    first, second = found.attempts
    assert (first.pid, first.pid_start_time, first.pgid, first.outcome) == (
        4242, 123.5, 4242, "transient")
    assert second.open and second.usage.cost == 0.5


def test_an_attempt_whose_child_started_later_keeps_that_start_and_its_deadline(
    store: SqliteStore,
) -> None:
    record(store, "d1")
    a1 = start(store, "d1", at=11.0)  # decided at 11, its deadline 30 s on
    store.attempt_identity(a1, pid=4242, pid_start_time=1.0, pgid=4242, node=None)
    store.commit()
    # its worker took the job at 13: its 30 s count from there (docs/design.md)
    store.attempt_identity(a1, pid=4242, pid_start_time=1.0, pgid=4242, node=None,
                           started=13.0, deadline=43.0)
    store.commit()
    [found] = store.open_delegations()
    [attempt] = found.attempts
    assert (attempt.started, attempt.deadline, attempt.pid) == (13.0, 43.0, 4242)


def test_settled_summaries_are_found_by_id_and_key_and_leave_the_open_set(
    store: SqliteStore,
) -> None:
    record(store, "d1", key="ticket-42")
    end_id = start(store, "d1")
    store.commit()
    end(store, end_id)
    summary = settle(store, "d1")
    store.commit()
    assert store.open_delegations() == []
    assert store.summary("d1") == summary == store.summary_by_key("ticket-42")
    found = store.by_key("ticket-42")
    assert found is not None and found.status is Status.completed and found.brief == BRIEF
    assert store.summary("nope") is None and store.by_key("nope") is None
    assert store.counts().settled == 1


def test_children_come_in_the_order_of_their_parents_delegate_calls(store: SqliteStore) -> None:
    record(store, "p")
    for ordinal in (2, 0, 1):
        record(store, f"p.{ordinal}", parent="p", ordinal=ordinal,
               brief=Brief(agent="apollo", scope=f"part {ordinal}"))
    store.commit()
    assert [c.id for c in store.children("p")] == ["p.0", "p.1", "p.2"]
    # parents before children in the open set (the order recovery walks)
    assert store.open_delegations()[0].delegation.id == "p"


def test_settled_delegations_older_than_keep_days_are_pruned(store_url: str, wall: Wall) -> None:
    store = open_store(store_url, now=wall, keep_days=30)
    record(store, "old")
    record(store, "young")
    record(store, "open")
    settle(store, "old", at=wall.t - 31 * DAY)
    settle(store, "young", at=wall.t - 29 * DAY)
    store.commit()
    assert store.prune() == 1
    assert store.delegation("old") is None and store.delegation("young") is not None
    wall.t += 2 * DAY
    store.close()
    store = open_store(store_url, now=wall, keep_days=30)  # prunes on open
    assert store.delegation("young") is None and store.delegation("open") is not None
    store.close()


# -- one owner (SQLite only: a PostgreSQL store has many live hosts) --------------------------
def test_a_second_opener_in_the_same_live_process_is_refused(sqlite_store: SqliteStore) -> None:
    with pytest.raises(StoreBusy) as err:
        SqliteStore.open(sqlite_store.path)
    assert err.value.pid == os.getpid() and str(os.getpid()) in str(err.value)


def test_a_store_given_up_cleanly_is_claimed_without_a_dead_owner(
    tmp_path: Path, wall: Wall
) -> None:
    SqliteStore.open(tmp_path / "z.db", now=wall).close()
    again = SqliteStore.open(tmp_path / "z.db", now=wall)
    assert again.previous_owner is None
    again.close()


# -- bad files --------------------------------------------------------------------------------
def _sqlite_other(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()


def _newer(path: Path) -> None:
    SqliteStore.open(path).close()
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.commit()
    con.close()


def _torn(path: Path) -> None:
    SqliteStore.open(path).close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _corrupt(path: Path) -> None:
    SqliteStore.open(path).close()
    data = bytearray(path.read_bytes())
    data[4096:] = bytes(range(256)) * ((len(data) - 4096) // 256)  # every page but the first
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(("make", "words"), [
    (lambda p: p.write_text("hello, not a database\n"), "not a Zeus store"),
    (_sqlite_other, "not a Zeus store"),
    (_newer, "newer"),
    (_torn, ""),
    (_corrupt, ""),
], ids=["text", "other-sqlite", "newer-schema", "torn", "corrupt"])
def test_a_bad_file_is_refused_by_name_and_never_changed(
    tmp_path: Path, make: Any, words: str
) -> None:
    path = tmp_path / "zeus.db"
    make(path)
    before = fingerprint(path)
    siblings = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(StoreError) as err:
        SqliteStore.open(path)
    assert str(path) in str(err.value) and words in str(err.value)
    assert "left as it is" in str(err.value) or "cannot" in str(err.value)
    assert fingerprint(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == siblings


@pytest.mark.parametrize("left", ["-wal", ".children"])
def test_an_emptied_store_is_refused_unchanged_while_its_log_or_children_lie_beside_it(
    tmp_path: Path, left: str
) -> None:
    path = tmp_path / "zeus.db"
    beside = tmp_path / f"zeus.db{left}"
    path.write_bytes(b"")  # `: > zeus.db`
    if left == "-wal":
        beside.write_bytes(b"\x37\x7f\x06\x82" + bytes(28))  # what a crash leaves
    else:
        beside.mkdir(mode=0o700)
    siblings = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(StoreError) as err:
        Zeus.start(store=path)
    message = str(err.value)
    assert str(path) in message and "is empty" in message and str(beside) in message
    assert "restore the store from a backup" in message and "left as it is" in message
    assert path.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == siblings


def test_an_empty_file_with_nothing_of_an_earlier_store_beside_it_is_a_new_store(
    tmp_path: Path,
) -> None:
    path = tmp_path / "zeus.db"
    path.write_bytes(b"")
    with Zeus.start(store=path) as zeus:
        assert zeus.recovered == Recovery()
    assert is_sqlite_file(path)


def test_a_missing_directory_is_a_store_error_that_names_it(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        SqliteStore.open(tmp_path / "nowhere" / "zeus.db")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_directory_is_a_store_error(tmp_path: Path) -> None:
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(StoreError, match="cannot create"):
            SqliteStore.open(tmp_path / "zeus.db")
    finally:
        tmp_path.chmod(0o700)


def test_a_full_disk_fails_the_commit_and_keeps_the_turn_for_the_next(
    sqlite_store: SqliteStore,
) -> None:
    store = sqlite_store  # a full disk under a SQLite file
    record(store, "before")
    store.commit()
    with store_full(store):
        for n in range(200):  # more than fits in the pages left
            record(store, f"d{n}", brief=Brief(agent="apollo", scope="x" * 2000))
        with pytest.raises(StoreError, match="cannot write the store") as err:
            store.commit()
        assert store.path in str(err.value)
        assert not store.writable
        assert store.counts().open == 1  # nothing of the failed turn was written
        assert [o.delegation.id for o in store.open_delegations()] == ["before"]
    store.commit()  # room again: the kept turn is written whole
    assert store.writable and store.counts().open == 201


# -- read as a journal ----------------------------------------------------------------------------
def test_a_store_reads_back_as_the_events_a_journal_holds(sqlite_store: SqliteStore) -> None:
    store = sqlite_store
    record(store, "d1", created=10.0)
    a1 = start(store, "d1", at=11.0)
    store.attempt_identity(a1, pid=77, pid_start_time=5.0, pgid=77, node=None)
    store.commit()
    end(store, a1, "transient", at=12.0)
    store.retry_scheduled("d1", after_attempt=a1, due=14.0, agent="apollo")
    a2 = start(store, "d1", 2, at=14.0)
    store.commit()
    end(store, a2, at=15.0)
    settle(store, "d1", at=15.0)
    store.commit()
    assert is_sqlite_file(store.path)
    events = list(store_events(store.path))  # read-only, while the owner holds the store
    assert [(e["event"], e["ts"]) for e in events] == [
        ("zeus.started", 10.0),
        ("delegation.dispatched", 10.0),
        ("attempt.started", 11.0),
        ("attempt.spawned", 11.0),
        ("attempt.failed", 12.0),
        ("retry.scheduled", 12.0),
        ("attempt.started", 14.0),
        ("attempt.completed", 15.0),
        ("delegation.settled", 15.0),
    ]
    journal = Journal()
    for e in events:
        journal.apply(e)
    d = journal.run.delegations["d1"]
    assert d.status == "completed" and [a.outcome for a in d.attempts] == [
        "transient", "completed"]
    assert d.attempts[0].pid == 77 and d.attempts[0].then == "retry in 2.00s"
    assert journal.run.zeus_pid == os.getpid()


def test_a_large_store_is_checked_in_its_small_tables_and_refused_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import supervisor.store.schema as schema

    monkeypatch.setattr(schema, "FULL_CHECK_BYTES", 0)  # every store counts as large
    path = tmp_path / "zeus.db"
    SqliteStore.open(path).close()
    SqliteStore.open(path).close()  # a good one opens
    _corrupt(path)
    before = fingerprint(path)
    with pytest.raises(StoreError, match="corrupt"):
        SqliteStore.open(path)
    assert fingerprint(path) == before


def test_the_core_and_the_cli_import_no_postgresql_driver() -> None:
    import subprocess
    import sys

    code = ("import sys, supervisor, supervisor.cli.main, supervisor.store; "
            "assert 'psycopg' not in sys.modules, 'psycopg imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
