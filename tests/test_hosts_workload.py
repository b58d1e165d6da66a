"""Three hosts on one real PostgreSQL through the database's own failures and their own
(docs/design.md, "Several hosts"; the guide's "When the database goes away"), each with
the same workload: 20 keyed delegations of process children (10 writers, 5 readers and 5
spenders held to `budget: {max_cost: 0.05}`), each running 8 steps of 0.3 s and charging
$0.01 a step (`tests._durable_agents:stepper`), unless a test says otherwise. Whatever
the fault, the work settles as it would without it:

- every writer and reader completes, and every spender settles `budget_exceeded`;
- every charge a child made is counted once, whichever host it was made under;
- no writer ever ran two copies at once, and nothing settles `cancelled`.
"""

from __future__ import annotations

import json
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests._crash import WAIT_S, Host, agent, brief, runs

pytestmark = [pytest.mark.process, pytest.mark.realtime, pytest.mark.timeout(180)]

LEASE_S = 3.0
LADDER = {"grace_s": 0.5, "term_s": 0.5}
CAP = 0.05
STEPPER = "tests._durable_agents:stepper"
KINDS = {"w": ("writer", 10), "r": ("reader", 5), "s": ("spender", 5)}
HOSTS = 3


def _plan(tmp: Path, slot: int, *, steps: int = 8, **supervisor: Any) -> dict[str, Any]:
    """Host `slot`'s plan: its 20 keys (`w0-3`, `r0-1`, `s0-4`, ...), staying up once
    its own have settled (a host that stops cancels what it took over from the others)."""
    process = {"isolation": "process", "shutdown": LADDER}
    agents = {"writer": agent(STEPPER, **process),
              "reader": agent(STEPPER, read_only=True, **process),
              "spender": agent(STEPPER, read_only=True, budget={"max_cost": CAP}, **process)}
    briefs = [brief(kind, tmp, f"{prefix}{slot}-{j}", steps=steps)
              for prefix, (kind, count) in KINDS.items() for j in range(count)]
    return {"agents": agents, "defaults": {"shutdown": LADDER}, "briefs": briefs,
            "supervisor": {"store": {"lease_s": LEASE_S}, **supervisor}, "hold": True}


def _names() -> list[str]:
    return [f"{prefix}{slot}-{j}" for slot in range(HOSTS)
            for prefix, (_, count) in KINDS.items() for j in range(count)]


def _rows(url: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        return [tuple(r) for r in con.execute(query, args).fetchall()]


def _start(tmp: Path, url: str, **plan: Any) -> list[Host]:
    hosts = [Host(tmp, url, _plan(tmp, slot, **plan)) for slot in range(HOSTS)]
    for host in hosts:
        host.read_line()
    return hosts


def _until(check: Any, what: str, hosts: list[Host], within_s: float = WAIT_S * 2,
           explain: Any = lambda: "") -> None:
    """Poll `check()` (real processes: a loose bound, never the thing asserted)."""
    deadline = time.monotonic() + within_s
    while not check():
        for host in hosts:
            if host.proc.poll() is not None:
                pytest.fail(f"a host exited: {host.proc.communicate()[1][-3000:]}")
        assert time.monotonic() < deadline, f"{what} never happened{explain()}"
        time.sleep(0.05)


def _all_started(tmp: Path, hosts: list[Host]) -> None:
    _until(lambda: all((tmp / f"{n}.charges").exists() for n in _names()),
           "every delegation under way", hosts)


def _all_settled(url: str, hosts: list[Host]) -> dict[str, dict[str, Any]]:
    """Once every key's delegation is settled in the store: each summary, by key."""
    def settled() -> bool:
        (open_or_missing,) = _rows(
            url, "SELECT %s - count(*) FILTER (WHERE status IS NOT NULL) FROM delegations"
            " WHERE key IS NOT NULL", len(_names()))[0]
        return bool(open_or_missing == 0)

    _until(settled, "every key settling", hosts)
    return {key: json.loads(text) for key, text in
            _rows(url, "SELECT key, summary FROM delegations WHERE key IS NOT NULL")}


def _judge(tmp: Path, url: str, summaries: dict[str, dict[str, Any]], *,
           late: bool = False) -> None:
    """The workload's promises. `late`: a fenced host's children's charges may be
    written after their delegation settled elsewhere (spend is a fact, the settlement a
    decision already made): the store counts them, the summary need not."""
    assert sorted(summaries) == sorted(_names())  # one delegation per key
    wrong = {k: (s["status"], s.get("error")) for k, s in summaries.items()
             if s["status"] != ("budget_exceeded" if k[0] == "s" else "completed")}
    assert not wrong, wrong
    stored = dict(_rows(url, "SELECT d.key, sum(a.calls) FROM delegations d JOIN attempts a"
                             " ON a.delegation_id = d.id GROUP BY d.key"))
    for key, summary in summaries.items():
        outcomes = [a["outcome"] for a in summary["attempts"]]
        assert "cancelled" not in outcomes, (key, outcomes)
        made = len((tmp / f"{key}.charges").read_text().splitlines())
        # each charge counted once: the child notes a charge just before it makes it
        assert stored[key] == made, (key, stored[key], made, outcomes)
        counted = summary["usage"]["calls"]
        assert counted <= made if late else counted == made, (key, counted, made, outcomes)
        assert summary["usage"]["cost"] == pytest.approx(counted * 0.01)
        if key[0] == "w":
            assert not any(overlap for *_, overlap in runs(tmp, key)), (
                f"{key}: a run started while an earlier one was alive")


def _stop(hosts: list[Host]) -> None:
    for host in hosts:
        if host.proc.poll() is None:
            host.kill()


@pytest.mark.parametrize("modes", [("fast", "immediate", "fast")])
def test_three_postgresql_restarts_during_the_run_fail_no_delegation(
    pg_url: str, pg_server: Any, tmp_path: Path, modes: tuple[str, ...]
) -> None:
    hosts = _start(tmp_path, pg_url)
    try:
        _all_started(tmp_path, hosts)
        for mode in modes:  # each restart within the lease, a beat of work between them
            pg_server.stop(mode)
            pg_server.start()
            time.sleep(0.3)  # the fault's schedule, not a synchronisation
        summaries = _all_settled(pg_url, hosts)
        pids = [host.proc.pid for host in hosts]
        assert all(host.proc.poll() is None for host in hosts)
    finally:
        _stop(hosts)
    _judge(tmp_path, pg_url, summaries)
    # nothing ran twice: a restart within the lease fences no host
    assert all(len(s["attempts"]) == 1 for s in summaries.values()), {
        k: [a["outcome"] for a in s["attempts"]] for k, s in summaries.items()
        if len(s["attempts"]) != 1}
    assert len(_rows(pg_url, "SELECT id FROM hosts")) == len(pids)


def test_an_outage_of_three_leases_resolves_every_handle_without_a_host_restarted(
    pg_url: str, pg_server: Any, tmp_path: Path
) -> None:
    hosts = _start(tmp_path, pg_url)
    pids = [host.proc.pid for host in hosts]
    try:
        _all_started(tmp_path, hosts)
        pg_server.stop("fast")
        try:
            time.sleep(3 * LEASE_S)  # the outage itself, not a synchronisation
        finally:
            pg_server.start()
        back = time.monotonic()
        for host in hosts:  # the same processes: each holds once all of its own resolved
            while "holding" not in host.read_line():
                pass
        took = time.monotonic() - back
        summaries = _all_settled(pg_url, hosts)
        _until(lambda: _late_written(tmp_path, pg_url), "the late charges written", hosts, WAIT_S,
               explain=lambda: f": {_uncounted(tmp_path, pg_url)}")
    finally:
        _stop(hosts)
    assert took < LEASE_S + 10.0, took
    assert [host.proc.pid for host in hosts] == pids
    _judge(tmp_path, pg_url, summaries, late=True)
    for key, summary in summaries.items():  # each lost with its fenced host, run again
        if key[0] != "s":
            assert [a["outcome"] for a in summary["attempts"]] == ["lost", "completed"], key
    # every host was fenced and joined again as a new incarnation, in the same process,
    # and what the first ones held went to the new ones
    hosts_rows = _rows(pg_url, "SELECT id, taken_by FROM hosts ORDER BY n")
    assert len(hosts_rows) == 2 * HOSTS
    assert {taken for _, taken in hosts_rows[:HOSTS]} <= {h for h, _ in hosts_rows[HOSTS:]}


def test_a_host_frozen_for_two_leases_loses_no_charge_and_overruns_no_cap(
    pg_url: str, tmp_path: Path
) -> None:
    """SIGSTOP of one host alone (its children run on, charging) for two leases: the
    others take its work over; as it wakes it counts what its children charged."""
    hosts = _start(tmp_path, pg_url)
    try:
        _all_started(tmp_path, hosts)
        frozen = hosts[0]
        frozen.proc.send_signal(signal.SIGSTOP)
        try:
            time.sleep(2 * LEASE_S)  # the freeze itself, not a synchronisation
        finally:
            frozen.proc.send_signal(signal.SIGCONT)
        summaries = _all_settled(pg_url, hosts)
        # what the woken host writes late lands in a turn of its own: until it has
        _until(lambda: _late_written(tmp_path, pg_url), "the late charges written", hosts, WAIT_S,
               explain=lambda: f": {_uncounted(tmp_path, pg_url)}")
    finally:
        _stop(hosts)
    _judge(tmp_path, pg_url, summaries, late=True)
    # the frozen host's own work was taken over: its first attempts were lost
    taken = [k for k in summaries if k[1] == "0"
             and summaries[k]["attempts"][0]["outcome"] == "lost"]
    assert taken, {k: [a["outcome"] for a in s["attempts"]] for k, s in summaries.items()}


def _late_written(tmp: Path, url: str) -> bool:
    """Whether the store counts every charge the children made."""
    return not _uncounted(tmp, url)


def _uncounted(tmp: Path, url: str) -> dict[str, tuple[int, int]]:
    """Each key whose stored calls are not the charges its children made: both."""
    stored = dict(_rows(url, "SELECT d.key, sum(a.calls) FROM delegations d JOIN attempts a"
                             " ON a.delegation_id = d.id GROUP BY d.key"))
    made = {n: len((tmp / f"{n}.charges").read_text().splitlines()) for n in _names()}
    return {n: (stored.get(n, 0), m) for n, m in made.items() if stored.get(n, 0) != m}


def test_twenty_sigkills_each_restarted_within_a_second_settle_nothing_cancelled(
    pg_url: str, tmp_path: Path
) -> None:
    """A random host (seeded) SIGKILLed and started again 0.2-1 s later, 20 times; its
    children wait for it (`orphan_grace_s`). Here the writers and readers take a step
    after another until released, so that every kill lands while they run and charge."""
    rng = random.Random(20)
    plan: dict[str, Any] = {"steps": 0, "orphan_grace_s": 30}
    hosts = _start(tmp_path, pg_url, **plan)
    try:
        _all_started(tmp_path, hosts)
        for _ in range(20):
            slot = rng.randrange(HOSTS)
            hosts[slot].kill()
            time.sleep(rng.uniform(0.2, 1.0))  # the restart's delay is the scenario
            hosts[slot] = Host(tmp_path, pg_url, _plan(tmp_path, slot, **plan))
            hosts[slot].read_line()
        (still_open,) = _rows(pg_url, "SELECT count(*) FROM delegations WHERE status IS"
                              " NULL")[0]
        assert still_open == HOSTS * 15  # every writer and reader ran through every kill
        (tmp_path / "release").write_text("")
        summaries = _all_settled(pg_url, hosts)
    finally:
        _stop(hosts)
    _judge(tmp_path, pg_url, summaries)
