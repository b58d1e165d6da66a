"""The durable store on its own, against the same work in memory and against DBOS.

Run: `python -m benchmarks store` (writes benchmarks/results/store.json).

Two parts. Through Zeus: a no-op delegation dispatched and settled by a Zeus with
a store against one without (two Zeus, alternating rounds), keyed lookups of settled
delegations by a Zeus started on the store, throughput with 8 in flight with and
without a store, and `Zeus.start` recovering 10,000 open delegations. The store
alone (`SqliteStore`), driven the way Zeus's thread drives it: a record and an
attempt (one commit) then the attempt's end and the settlement (one commit).
DBOS (the `bench-dbos` extra) runs a workflow of one no-op step at its default
settings, on SQLite and on the same PostgreSQL server as Zeus; without it installed,
its rows are skipped. The engines side by side
(`python -m benchmarks store engines` runs only these): the same no-op delegation in
memory, on SQLite and on PostgreSQL (`ZEUS_BENCH_POSTGRES`, else a throwaway local
server), in alternating rounds.
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


def bench_wired(rows: list[Row]) -> tuple[float, float]:
    """A no-op delegation through Zeus with a store against one without, alternating;
    keyed lookups of settled ones by a Zeus restarted on the store; throughput with 8
    in flight. Returns (durable p50, keyed lookup p50) in seconds."""
    routing = Routing.from_dict({"version": 1, "agents": {}})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "zeus.db"
        with Zeus.start(routing, agents={"noop": noop}) as memory, \
                Zeus.start(routing, agents={"noop": noop}, store=path) as durable:
            for zeus in (memory, durable):
                samples(lambda i, z=zeus: z.dispatch(BRIEF).result(5), 200)  # type: ignore[misc]
            in_memory: list[float] = []
            stored: list[float] = []
            for _ in range(5):  # alternating rounds: the machine's drift hits both
                in_memory += samples(lambda i: memory.dispatch(BRIEF).result(5), 400)
                stored += samples(lambda i: durable.dispatch(BRIEF).result(5), 400)
            flight = {name: _in_flight(zeus, 8, 2000) for name, zeus in
                      (("memory", memory), ("durable", durable))}
            for i in range(2000):
                durable.dispatch(BRIEF, key=f"k{i}").result(5)
        with Zeus.start(routing, agents={"noop": noop}, store=path) as again:
            lookup = p50(samples(lambda i: again.dispatch(BRIEF, key=f"k{i}").result(5), 2000))
    rows.append(Row("durable no-op delegation through Zeus", p50(stored) * 1e6,
                    p50(in_memory) * 1e6, "us", "the same delegation, Zeus without a store",
                    "ratio<=1.5", note="dispatch to settled, p50; synchronous=normal"))
    rows.append(Row("throughput with a store, 8 thread children in flight", flight["durable"],
                    flight["memory"], "/s", "the same without a store", "ratio>=0.8"))
    rows.append(Row("settled delegation by key, Zeus restarted on the store", lookup * 1e6,
                    None, "us", note="dispatch(brief, key=K).result(): the stored summary"))
    return p50(stored), lookup


@contextlib.contextmanager
def postgres_url() -> Iterator[str | None]:
    """A PostgreSQL database for the engines' row: `ZEUS_BENCH_POSTGRES` (a URL), else a
    throwaway local server on a Unix socket (tests/_postgres.py); None without one."""
    import os

    url = os.environ.get("ZEUS_BENCH_POSTGRES")
    if url:
        yield url
        return
    try:
        from tests._postgres import PostgresServer, find_bin_dir
    except ImportError:
        yield None
        return
    bin_dir = find_bin_dir()
    if bin_dir is None:
        yield None
        return
    server = PostgresServer(bin_dir)
    try:
        yield server.database()
    finally:
        server.close()


def bench_engines(rows: list[Row], rounds: int = 5, per_round: int = 400) -> None:
    """A no-op delegation through Zeus in memory, on SQLite and on PostgreSQL, the three
    side by side in alternating rounds: each row gives the median of the rounds' medians
    and their spread (lowest to highest round)."""
    routing = Routing.from_dict({"version": 1, "agents": {}})
    with tempfile.TemporaryDirectory() as tmp, postgres_url() as pg, \
            contextlib.ExitStack() as stack:
        zeuses = {"memory": stack.enter_context(Zeus.start(routing, agents={"noop": noop}))}
        zeuses["sqlite"] = stack.enter_context(
            Zeus.start(routing, agents={"noop": noop}, store=Path(tmp) / "zeus.db"))
        if pg is not None:
            zeuses["postgres"] = stack.enter_context(
                Zeus.start(routing, agents={"noop": noop}, store=pg))
        for zeus in zeuses.values():
            samples(lambda i, z=zeus: z.dispatch(BRIEF).result(5), 200)  # type: ignore[misc]
        medians: dict[str, list[float]] = {name: [] for name in zeuses}
        for _ in range(rounds):
            for name, zeus in zeuses.items():
                medians[name].append(p50(samples(
                    lambda i, z=zeus: z.dispatch(BRIEF).result(5), per_round)))  # type: ignore[misc]
    memory = p50(medians["memory"])
    for name, target in (("sqlite", "ratio<=1.5"), ("postgres", "ratio<=3.0")):
        if name not in medians:
            rows.append(Row(f"durable no-op delegation on {name} (side by side)", float("nan"),
                            None, "us", note="skipped: no PostgreSQL server here"))
            continue
        got = medians[name]
        rows.append(Row(
            f"durable no-op delegation on {name} (side by side)", p50(got) * 1e6,
            memory * 1e6, "us", "the same delegation, Zeus without a store", target,
            note=f"{rounds} rounds of {per_round}: round medians {min(got) * 1e6:.0f}.."
                 f"{max(got) * 1e6:.0f} us; memory {min(medians['memory']) * 1e6:.0f}.."
                 f"{max(medians['memory']) * 1e6:.0f} us"
                 + ("; local server, Unix socket" if name == "postgres" else ""),
            extra={"rounds": got, "memory_rounds": medians["memory"]}))


def _in_flight(zeus: Zeus, width: int, n: int) -> float:
    """Delegations per second with at most `width` in flight."""
    import threading

    gate = threading.Semaphore(width)
    done = threading.Event()
    left = [n]
    lock = threading.Lock()

    def settled(_summary: object) -> None:
        gate.release()
        with lock:
            left[0] -= 1
            if not left[0]:
                done.set()

    t0 = time.perf_counter()
    for _ in range(n):
        gate.acquire()
        zeus.dispatch(BRIEF).add_done_callback(settled)
    done.wait(60)
    return n / (time.perf_counter() - t0)


def bench_zeus_recovery(rows: list[Row]) -> None:
    """`Zeus.start` on a store a dead Zeus left with 10,000 open delegations of a
    read-only thread agent: from the call to its return (each lost, each rerun)."""
    routing = Routing.from_dict({"version": 1, "supervisor": {"max_concurrent": 64},
                                 "agents": {"noop": {"read_only": True,
                                                     "retry": {"max_retries": 1}}}})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "zeus.db"
        left_open(path, 10_000)
        gc.collect()
        t0 = time.perf_counter()
        zeus = Zeus.start(routing, agents={"noop": noop}, store=path)
        took = time.perf_counter() - t0
        rerun = len(zeus.recovered.rerun)
        zeus.stop()
    assert rerun == 10_000
    rows.append(Row("Zeus.start recovering 10,000 open delegations", took, None, "s",
                    target="value<=2", note="each attempt lost, each delegation run again "
                                            "(64 at once, the rest queued)"))


@contextlib.contextmanager
def dbos_workflow(system_database_url: str) -> Iterator[Callable[[int], None] | None]:
    """DBOS (the `bench-dbos` extra) at its defaults on `system_database_url`, launched:
    `run(i)` runs its workflow of one no-op step under the id `wf-<i>`; None without
    DBOS installed."""
    try:
        from dbos import DBOS, SetWorkflowID
    except ImportError:
        yield None
        return
    logging.getLogger("dbos").setLevel(logging.WARNING)
    DBOS(config={"name": "bench", "system_database_url": system_database_url,
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

        yield run
    finally:
        DBOS.destroy()


_NO_DBOS = "skipped: `pip install zeus-supervisor[bench-dbos]`"


def bench_dbos(rows: list[Row], durable_s: float, lookup_s: float) -> None:
    with tempfile.TemporaryDirectory() as tmp, \
            dbos_workflow(f"sqlite:///{tmp}/dbos.sqlite") as run:
        if run is None:
            rows.append(Row("DBOS baseline", float("nan"), None, "", note=_NO_DBOS))
            return
        samples(run, 50)
        first = p50(samples(lambda i: run(i + 1000), 500))
        again = p50(samples(lambda i: run(i + 1000), 500))
    rows.append(Row("durable delegation vs DBOS workflow (1 no-op step)", durable_s * 1e6,
                    first * 1e6, "us", "DBOS on SQLite, default settings (p50)", "ratio<=0.1",
                    note="Zeus with a store, dispatch to settled (p50)"))
    rows.append(Row("settled summary by key vs DBOS same workflow id again", lookup_s * 1e6,
                    again * 1e6, "us", "DBOS: the workflow called again under its id (p50)",
                    "ratio<=0.2", note="Zeus restarted on the store: dispatch(key=K)"))


def bench_dbos_postgres(rows: list[Row], rounds: int = 5, per_round: int = 200) -> None:
    """A durable no-op delegation through Zeus on PostgreSQL against a DBOS workflow of
    one no-op step, each on its own database of the same server, in alternating rounds:
    the median of the rounds' medians and their spread."""
    routing = Routing.from_dict({"version": 1, "agents": {}})
    with postgres_url() as first:
        if first is None:
            rows.append(Row("durable delegation vs DBOS workflow on PostgreSQL", float("nan"),
                            None, "us", note="skipped: no PostgreSQL server here"))
            return
        with dbos_workflow(_another_database(first)) as run:
            if run is None:
                rows.append(Row("DBOS baseline on PostgreSQL", float("nan"), None, "",
                                note=_NO_DBOS))
                return
            zeus_rounds: list[float] = []
            dbos_rounds: list[float] = []
            with Zeus.start(routing, agents={"noop": noop}, store=first) as zeus:
                samples(lambda i: zeus.dispatch(BRIEF).result(5), 100)
                samples(run, 50)
                for r in range(rounds):
                    zeus_rounds.append(p50(samples(
                        lambda i: zeus.dispatch(BRIEF).result(5), per_round)))
                    dbos_rounds.append(p50(samples(
                        lambda i, r=r: run(1000 + r * per_round + i), per_round)))  # type: ignore[misc]
    rows.append(Row(
        "durable delegation vs DBOS workflow (1 no-op step), both on PostgreSQL",
        p50(zeus_rounds) * 1e6, p50(dbos_rounds) * 1e6, "us",
        "DBOS on the same PostgreSQL server, default settings (p50)", "ratio<=0.1",
        note=f"{rounds} alternating rounds of {per_round}: Zeus {min(zeus_rounds) * 1e6:.0f}.."
             f"{max(zeus_rounds) * 1e6:.0f} us, DBOS {min(dbos_rounds) * 1e6:.0f}.."
             f"{max(dbos_rounds) * 1e6:.0f} us; local server, Unix socket",
        extra={"rounds": zeus_rounds, "dbos_rounds": dbos_rounds}))


def _another_database(url: str) -> str:
    """A second empty database on the server of `url` (each side gets its own)."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/") + "_dbos"
    with psycopg.connect(url, autocommit=True) as con:
        con.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    return urlunsplit(parts._replace(path="/" + name))


def left_open(path: Path, n: int) -> None:
    """A store at `path` as a dead Zeus left it: `n` delegations each with an open attempt."""
    store = SqliteStore.open(path)
    now = time.time()
    for i in range(n):
        d = f"noop-{i + 1}"
        store.record_delegation(d, key=d, parent_id=None, ordinal=None, agent="noop",
                                brief=BRIEF, policy=POLICY, deadline=None, created=now)
        store.attempt_started(f"{d}-a1", delegation_id=d, number=1, agent="noop",
                              started=now, deadline=now + 600)
    store.close()
    dead_owner(path)


def bench_recovery(rows: list[Row]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "zeus.db"
        left_open(path, 10_000)
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
    if argv and argv[0] == "engines":  # `python -m benchmarks store engines`: those rows only
        bench_engines(rows)
        bench_dbos_postgres(rows)
        report("store-engines", rows)
        return
    bench_engines(rows)
    bench_dbos_postgres(rows)
    durable, lookup = bench_wired(rows)
    bench_writes(rows)
    bench_dbos(rows, durable, lookup)
    bench_zeus_recovery(rows)
    bench_recovery(rows)
    bench_startup(rows)
    report("store", rows)


if __name__ == "__main__":
    main()
