"""The durable store on its own, against the same work in memory and against DBOS.

Run: `python -m benchmarks store` (writes benchmarks/results/store.json).

What is measured is the store alone (`SqliteStore`), driven the way Zeus's thread
will drive it: a durable delegation's writes are a record and an attempt (one
commit, the dispatch's turn) then the attempt's end and the settlement (one commit,
the result's turn). Until the store is wired into Zeus, "durable delegation" is
the in-memory no-op delegation through Zeus plus those writes, both measured here.
DBOS (the `bench-dbos` extra) runs a workflow of one no-op step on SQLite at its
default settings; without it installed, its rows are skipped.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from actors import AttemptRecord, Brief, Context, Status, Summary, Usage
from benchmarks._table import Row, report
from supervisor import Routing, Zeus
from supervisor.routing import AgentPolicy
from supervisor.store import SqliteStore

BRIEF = Brief(agent="noop", scope="nothing")
POLICY = AgentPolicy(read_only=True)
RECORD = AttemptRecord(id="x", agent="noop", outcome="completed")


def noop(brief: Brief, ctx: Context) -> None:
    return None


def samples(fn: Callable[[int], None], n: int) -> list[float]:
    """Seconds per call of `fn(i)`, each call timed alone."""
    gc.collect()
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t0)
    return out


def p50(xs: list[float]) -> float:
    return statistics.median(xs)


class Durable:
    """One delegation's writes, two commits (the dispatch's turn and the result's)."""

    def __init__(self, store: SqliteStore, prefix: str) -> None:
        self.store = store
        self.prefix = prefix
        self.summary = Summary(id="x", agent="noop", scope="nothing", status=Status.completed)

    def __call__(self, i: int) -> None:
        s, d, a, now = self.store, f"{self.prefix}{i}", f"{self.prefix}{i}-a1", time.time()
        s.record_delegation(d, key=d, parent_id=None, ordinal=None, agent="noop", brief=BRIEF,
                            policy=POLICY, deadline=now + 120, created=now)
        s.attempt_started(a, delegation_id=d, number=1, agent="noop", started=now,
                          deadline=now + 120)
        s.commit()
        s.attempt_ended(a, outcome="completed", ended=now, error=None, record=RECORD)
        s.settled(d, status=Status.completed, summary=self.summary, at=now)
        s.commit()

    def batch(self, first: int, n: int) -> None:
        """`n` delegations whose writes share each turn's commit (n in flight)."""
        s, now = self.store, time.time()
        for i in range(first, first + n):
            d = f"{self.prefix}{i}"
            s.record_delegation(d, key=d, parent_id=None, ordinal=None, agent="noop",
                                brief=BRIEF, policy=POLICY, deadline=now + 120, created=now)
            s.attempt_started(f"{d}-a1", delegation_id=d, number=1, agent="noop",
                              started=now, deadline=now + 120)
        s.commit()
        for i in range(first, first + n):
            d = f"{self.prefix}{i}"
            s.attempt_ended(f"{d}-a1", outcome="completed", ended=now, error=None,
                            record=RECORD)
            s.settled(d, status=Status.completed, summary=self.summary, at=now)
        s.commit()


@contextlib.contextmanager
def fresh_store(**kw: Any) -> Iterator[SqliteStore]:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore.open(Path(tmp) / "zeus.db", **kw)
        try:
            yield store
        finally:
            store.close()


def bench_writes(rows: list[Row]) -> dict[str, float]:
    n = 2000
    routing = Routing.from_dict({"version": 1, "agents": {}})
    with Zeus.start(routing, agents={"noop": noop}) as zeus:
        samples(lambda i: zeus.dispatch(BRIEF).result(5), 200)  # warm up
        memory = p50(samples(lambda i: zeus.dispatch(BRIEF).result(5), n))
    found: dict[str, float] = {"memory": memory}
    for sync in ("normal", "full"):
        with fresh_store(synchronous=sync) as store:
            write = Durable(store, "w")
            samples(write, 200)
            cost = p50(samples(lambda i, w=write: w(i + 1000), n))  # type: ignore[misc]
        found[sync] = cost
        rows.append(Row(f"store writes of one delegation (synchronous={sync})", cost * 1e6,
                        memory * 1e6, "us", "a no-op delegation through Zeus, in memory",
                        note="record+attempt, commit; end+settle, commit (p50)"))
    with fresh_store() as store:  # 8 in flight: each turn's commit carries 8 of them
        write = Durable(store, "b")
        batch = p50(samples(lambda i: write.batch(i * 8, 8), 300)) / 8
    rows.append(Row("  the same, 8 delegations per turn, per delegation", batch * 1e6,
                    memory * 1e6, "us", "a no-op delegation through Zeus, in memory",
                    note="8 records+attempts in one commit, 8 ends+settles in the next"))
    rows.append(Row("durable no-op delegation (projected)", (memory + found["normal"]) * 1e6,
                    memory * 1e6, "us", "the same delegation in memory", "ratio<=1.5",
                    note="in-memory delegation + the store's writes: the store alone, "
                         "not yet wired into Zeus"))
    with fresh_store() as store:  # one turn of many charges: the per-write cost
        store.record_delegation("d", key=None, parent_id=None, ordinal=None, agent="noop",
                                brief=BRIEF, policy=POLICY, deadline=None, created=0.0)
        store.attempt_started("d-a1", delegation_id="d", number=1, agent="noop", started=0.0,
                              deadline=None)
        store.commit()
        usage = Usage(calls=1, cost=0.001)
        t0 = time.perf_counter()
        for _ in range(100):
            for _ in range(100):
                store.charge("d", "d-a1", usage)
                store.partial("d", "d-a1", "item")
            store.commit()
        per = (time.perf_counter() - t0) / 10_000
    rows.append(Row("one charge + one partial, 100 per turn", per * 1e6, None, "us",
                    note="buffered, then one executemany per kind per commit"))
    return found


def bench_dbos(rows: list[Row], durable_s: float, lookup_s: float) -> None:
    try:
        from dbos import DBOS, SetWorkflowID
    except ImportError:
        rows.append(Row("DBOS baseline", float("nan"), None, "", note="skipped: "
                        "`pip install zeus-supervisor[bench-dbos]`"))
        return
    logging.getLogger("dbos").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        DBOS(config={"name": "bench", "system_database_url": f"sqlite:///{tmp}/dbos.sqlite",
                     "log_level": "WARNING"})  # otherwise its defaults

        @DBOS.step()
        def step() -> None:
            return None

        @DBOS.workflow()
        def workflow() -> None:
            step()

        DBOS.launch()
        try:
            def run(i: int) -> None:
                with SetWorkflowID(f"wf-{i}"):
                    workflow()

            samples(run, 50)
            first = p50(samples(lambda i: run(i + 1000), 500))
            again = p50(samples(lambda i: run(i + 1000), 500))
        finally:
            DBOS.destroy()
    rows.append(Row("durable delegation vs DBOS workflow (1 no-op step)", durable_s * 1e6,
                    first * 1e6, "us", "DBOS on SQLite, default settings (p50)", "ratio<=0.1",
                    note="Zeus projected, as above"))
    rows.append(Row("settled summary by key vs DBOS same workflow id again", lookup_s * 1e6,
                    again * 1e6, "us", "DBOS: the workflow called again under its id (p50)",
                    "ratio<=0.2", note="store.summary_by_key"))


def bench_lookup(store: SqliteStore, n: int) -> float:
    return p50(samples(lambda i: store.summary_by_key(f"w{1000 + i % n}"), 2000))


def bench_recovery(rows: list[Row]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "zeus.db"
        store = SqliteStore.open(path)
        now = time.time()
        for i in range(10_000):
            d = f"open{i}"
            store.record_delegation(d, key=d, parent_id=None, ordinal=None, agent="noop",
                                    brief=BRIEF, policy=POLICY, deadline=now + 600, created=now)
            store.attempt_started(f"{d}-a1", delegation_id=d, number=1, agent="noop",
                                  started=now, deadline=now + 600)
        store.close()
        dead_owner(path)
        gc.collect()
        t0 = time.perf_counter()
        again = SqliteStore.open(path)
        opened = time.perf_counter() - t0
        found = again.open_delegations()
        total = time.perf_counter() - t0
        again.close()
    assert len(found) == 10_000 and again.previous_owner is not None
    rows.append(Row("recovery read of 10,000 open delegations", total, None, "s",
                    target="value<=2", note=f"open+claim {opened:.3f} s, then the open set "
                                            "with attempts (the store's part of Zeus.start)"))


def dead_owner(path: Path) -> None:
    """As if the store's owner had died instead of closing: its row names a pid gone."""
    con = sqlite3.connect(path)
    con.execute("UPDATE owner SET released = NULL, pid = 999999999")
    con.commit()
    con.close()


def bench_startup(rows: list[Row]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "zeus.db"
        store = SqliteStore.open(path)
        write = Durable(store, "s")
        for i in range(100_000):
            s, d, a, now = store, f"s{i}", f"s{i}-a1", time.time()
            s.record_delegation(d, key=d, parent_id=None, ordinal=None, agent="noop",
                                brief=BRIEF, policy=POLICY, deadline=now + 120, created=now)
            s.attempt_started(a, delegation_id=d, number=1, agent="noop", started=now,
                              deadline=now + 120)
            s.attempt_ended(a, outcome="completed", ended=now, error=None, record=RECORD)
            s.settled(d, status=Status.completed, summary=write.summary, at=now)
            if i % 5000 == 4999:
                s.commit()
        store.commit()
        store.close()
        size = path.stat().st_size
        times = []
        for _ in range(3):
            gc.collect()
            t0 = time.perf_counter()
            again = SqliteStore.open(path)
            counts = again.counts()
            times.append(time.perf_counter() - t0)
            again.close()
    assert counts.settled == 100_000
    rows.append(Row("start-up with 100,000 settled delegations kept", min(times), None, "s",
                    target="value<=0.5", note=f"open (read-only check, claim, prune) + "
                                              f"counts; file {size / 1e6:.0f} MB"))


def main(argv: list[str] | None = None) -> None:
    rows: list[Row] = []
    found = bench_writes(rows)
    durable = found["memory"] + found["normal"]
    with fresh_store() as store:
        write = Durable(store, "w")
        for i in range(2000):
            write(1000 + i)
        lookup = bench_lookup(store, 2000)
    bench_dbos(rows, durable, lookup)
    bench_recovery(rows)
    bench_startup(rows)
    report("store", rows)


if __name__ == "__main__":
    main()
