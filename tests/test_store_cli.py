"""`zeus tree|timeouts|sweep STORE`: a store (a SQLite file or a PostgreSQL URL) works
where a journal path does."""

from __future__ import annotations

import os
import re
import sqlite3
import time
from pathlib import Path

import pytest

from actors.osproc import process_start_time
from supervisor.cli.main import main
from tests._postgres import is_postgres, open_store
from tests.test_store import end, record, settle, start


def as_if_its_owner(where: str, *, died_at: float | None = None, pid: int = 999_999_998) -> None:
    """The store's owner (a SQLite file's) or host (a PostgreSQL store's, its only one),
    which closed it, as if it had died instead (at `died_at`: its last heartbeat, or the
    end of its lease), or, with `died_at` None and `pid` a running process, as if it
    still held it."""
    alive = died_at is None
    if is_postgres(where):  # a host lives while it holds its lease (the database's clock)
        import psycopg

        lease = "now() + interval '1 minute'" if alive else "to_timestamp(%(at)s)"
        with psycopg.connect(where, autocommit=True) as con:
            con.execute(f"UPDATE hosts SET released = NULL, pid = %(pid)s, lease_until = {lease}",
                        {"pid": pid, "at": died_at})
        return
    con = sqlite3.connect(where)
    if alive:
        con.execute("UPDATE owner SET released = NULL, pid = ?, pid_start_time = ?",
                    (pid, process_start_time(pid)))
    else:
        con.execute("UPDATE owner SET released = NULL, pid = ?, heartbeat = coalesce(?, heartbeat)",
                    (pid, died_at))
    con.commit()
    con.close()


@pytest.fixture
def crashed_store(store_url: str) -> str:
    """A store whose owner "died" (its row says a pid that is not running) mid-delegation."""
    store = open_store(store_url)
    t = time.time()
    record(store, "d1", created=t)
    a1 = start(store, "d1", at=t + 1)
    store.attempt_identity(a1, pid=999_999_999, pid_start_time=1.0, pgid=None, node=None)
    store.commit()
    end(store, a1, "timeout", at=t + 3)
    store.retry_scheduled("d1", after_attempt=a1, due=t + 4, agent="apollo")
    a2 = start(store, "d1", 2, at=t + 4)
    end(store, a2, at=t + 5)
    settle(store, "d1", at=t + 5)
    record(store, "d2", created=t + 6)
    store.commit()
    store.close()
    as_if_its_owner(store_url, died_at=t + 6)
    return store_url


def open_writer(where: str, *, ran_s: float, owner_pid: int | None) -> str:
    """A store whose delegation w1 was dispatched `ran_s` ago and is still open, its
    attempt started at once; the owner is `owner_pid` (None: dead), its last heartbeat
    `ran_s` after the dispatch when dead, now when alive."""
    store = open_store(where)
    t = time.time() - ran_s
    record(store, "w1", created=t)
    start(store, "w1", at=t + 0.01)
    store.commit()
    store.close()
    if owner_pid is None:
        as_if_its_owner(where, died_at=t + ran_s)
    else:
        as_if_its_owner(where, pid=owner_pid)
    return where


def so_far(out: str) -> float:
    found = re.search(r"w1 apollo: in progress ([0-9.]+)s so far", out)
    assert found, out
    return float(found.group(1))


def test_zeus_tree_of_a_crashed_store_counts_an_open_delegation_to_the_owners_last_heartbeat(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = open_writer(store_url, ran_s=2.0, owner_pid=None)
    assert main(["tree", str(path)]) == 0
    assert so_far(capsys.readouterr().out) == pytest.approx(2.0, abs=0.01)


def test_zeus_tree_of_a_store_whose_owner_runs_counts_an_open_delegation_to_now(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = open_writer(store_url, ran_s=100.0, owner_pid=os.getpid())
    assert main(["tree", str(path)]) == 0
    assert 100.0 <= so_far(capsys.readouterr().out) < 160.0  # loose: the real clock


def test_zeus_tree_reads_a_store(crashed_store: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["tree", str(crashed_store)])
    out = capsys.readouterr().out
    assert code == 0  # it could read the store (d2 never settled: the tree says so)
    assert "no zeus.stopped yet" in out
    assert "d1 apollo: completed" in out and "d1-a1 apollo pid 999999999: timeout" in out
    assert "d2 apollo: in progress" in out


def test_zeus_timeouts_reads_a_store(
    crashed_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["timeouts", str(crashed_store)])
    out = capsys.readouterr().out
    assert code == 0
    log = out.split("Timeout log", 1)[1]
    assert "d1-a1" in log and "deadline" in log and "retry in 1.00s" in log


def test_zeus_sweep_reads_a_store(crashed_store: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sweep", "--dry-run", str(crashed_store)])
    out = capsys.readouterr().out
    assert code == 0 and "999999999" in out and "not running" in out


def test_a_sqlite_file_that_is_not_a_store_is_bad_input_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A file's bytes only (tests/test_store_postgres.py refuses a database that is not one).
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    before = path.read_bytes()
    assert main(["tree", str(path)]) == 2
    assert "not a Zeus store" in capsys.readouterr().err
    assert path.read_bytes() == before


def test_zeus_run_again_after_a_crash_shows_the_lost_attempt_as_lost_in_its_final_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plan.yml").write_text("- {agent: apollo, scope: scan the routes}\n")
    store = open_store(tmp_path / "zeus.db")
    t = time.time() - 5
    record(store, "d1", key="plan:1", created=t)  # as the crashed run dispatched it
    a1 = start(store, "d1", at=t + 0.1)
    store.attempt_identity(a1, pid=999_999_999, pid_start_time=1.0, pgid=None, node=None)
    store.commit()
    store.close()
    as_if_its_owner(str(tmp_path / "zeus.db"), died_at=t + 1)
    assert main(["run", "plan.yml", "--store", "zeus.db"]) == 0
    tree = capsys.readouterr().out.rsplit("</subtask_summary>", 1)[1]
    assert "- d1-a1 apollo pid 999999999: lost after" in tree, tree
    assert "running" not in tree


def test_zeus_blocked_right_after_a_host_crash_lists_what_it_left_open_as_unknown(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    open_writer(store_url, ran_s=2.0, owner_pid=None)
    assert main(["blocked", store_url]) == 0
    out = capsys.readouterr().out
    [row] = [line for line in out.splitlines() if line.startswith("w1 ")]
    assert "host gone" in row and "unknown: its host is gone, recovery will decide" in row
    assert "the next Zeus on the store recovers them" in out


def test_zeus_blocked_lists_nothing_open_while_its_host_lives(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    open_writer(store_url, ran_s=2.0, owner_pid=os.getpid())
    assert main(["blocked", store_url]) == 0
    assert "Nothing in" in capsys.readouterr().out


def test_zeus_run_again_of_a_settled_plan_shows_what_had_settled_in_its_final_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plan.yml").write_text("- {agent: apollo, scope: scan the routes}\n")
    assert main(["run", "plan.yml", "--store", "zeus.db"]) == 0
    capsys.readouterr()
    assert main(["run", "plan.yml", "--store", "zeus.db"]) == 0  # nothing runs again
    tree = capsys.readouterr().out.rsplit("</subtask_summary>", 1)[1]
    assert "zeus: 0 open, 1 settled" in tree
    assert ("apollo-1 apollo: completed" in tree
            and "settled before this run (from the store)" in tree), tree
    assert "- apollo-1-a1 apollo: completed after" in tree


def test_a_junk_file_given_as_a_store_is_said_not_to_be_one_by_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junk = tmp_path / "zeus.db"
    junk.write_bytes(b"\x00\x01 not a store\n" * 40)
    (tmp_path / "plan.yml").write_text("- {agent: apollo, scope: s}\n")
    for argv in (["tree", str(junk)], ["timeouts", str(junk)], ["sweep", "--dry-run", str(junk)],
                 ["blocked", str(junk)], ["resume", str(junk), "x"],
                 ["run", str(tmp_path / "plan.yml"), "--store", str(junk)]):
        assert main(argv) == 2, argv
        said = capsys.readouterr().err
        assert said.startswith(f"zeus {argv[0]}: {junk}: is not a Zeus store (not an SQLite "
                               "file)"), said
    assert junk.read_bytes() == b"\x00\x01 not a store\n" * 40
