"""The operator's verbs on a store's blocked delegations (docs/design.md, "The store"):
`zeus.resume(id)` runs one again as a new attempt, `zeus.resolve(id, status, note)`
settles it by hand, both journalled with who and why; a verb on anything not blocked is
`NotBlocked`; `dispatch(key=K)` on a blocked key says which verb to use. The verbs run
on both engines (a SQLite file, a PostgreSQL database); the stores left by a dead host
are built here as a SQLite file's owner leaves them."""

from __future__ import annotations

import getpass
import json
import shlex
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text

from actors import Brief, Context, Report, Status, Summary
from actors.osproc import process_start_time
from supervisor import NotBlocked, StoreError, UnknownDelegation, Zeus
from supervisor.routing import AgentPolicy
from supervisor.store import SqliteStore

WRITER = AgentPolicy(isolation="thread")  # neither read_only nor idempotent


class Agent:
    """Blocked on the runs `blocks` counts (a person must look), completed on the others."""

    def __init__(self, blocks: tuple[int, ...] = (1,)) -> None:
        self.runs = 0
        self.blocks = blocks

    def __call__(self, brief: Brief, ctx: Context) -> Any:
        self.runs += 1
        ctx.charge(calls=1, cost=0.25)
        if self.runs in self.blocks:
            return Report(blocked="the migration needs a person to approve it")
        return Report(output=f"run {self.runs}", changes=["db/migrations/0042.sql"])


def start(store: Path | str, agent: Agent | None = None, events: list[dict[str, Any]] | None = None,
          ) -> Zeus:
    zeus = Zeus.start(store=store, log=(events.append if events is not None else None),
                      agents={"hermes": agent or Agent()})
    return zeus


BRIEF = Brief(agent="hermes", scope="apply the migration")


def test_resume_runs_a_blocked_delegation_again_keeping_its_id_key_spend_and_history(
    store_url: str,
) -> None:
    store, agent, events = store_url, Agent(), []
    with start(store, agent, events) as zeus:
        blocked = zeus.dispatch(BRIEF, key="ticket-42").result()
        assert blocked.status is Status.blocked
        resumed = zeus.resume(blocked.id, note="approved by the DBA")
        summary = resumed.result()
        assert resumed.id == blocked.id
        assert zeus.dispatch(BRIEF, key="ticket-42").result() == summary  # the same key
        assert zeus.handle(blocked.id).result() == summary
    assert summary.status is Status.completed and summary.output == "run 2"
    assert [a.id for a in summary.attempts] == [f"{blocked.id}-a1", f"{blocked.id}-a2"]
    assert summary.usage.calls == 2 and summary.usage.cost == pytest.approx(0.5)
    assert agent.runs == 2
    [said] = [e for e in events if e.get("event") == "delegation.resumed"]
    assert said["delegation_id"] == blocked.id
    assert said["who"] == getpass.getuser() and said["why"] == "approved by the DBA"
    with start(store) as again:  # what the store keeps: the resumed run's summary
        assert again.handle(blocked.id).result() == summary
        assert again.recovered.rerun == () and again.recovered.blocked == ()


@pytest.mark.parametrize("status", [Status.completed, "completed", "failed"])
def test_resolve_settles_a_blocked_delegation_by_hand_with_the_note_in_its_summary(
    store_url: str, status: Status | str
) -> None:
    store, agent, events = store_url, Agent(), []
    with start(store, agent, events) as zeus:
        blocked = zeus.dispatch(BRIEF, key="ticket-7").result()
        summary = zeus.resolve(blocked.id, status, "checked by hand: the migration had run")
        assert zeus.handle(blocked.id).result() == summary
        assert zeus.dispatch(BRIEF, key="ticket-7").result() == summary
    assert summary.status is Status(status) and agent.runs == 1
    text = summary.render()
    assert "checked by hand: the migration had run" in text
    assert f"by {getpass.getuser()}" in text and "needs a person to approve" in text
    assert summary.usage == blocked.usage and summary.attempts == blocked.attempts
    [said] = [e for e in events if e.get("event") == "delegation.resolved"]
    assert said["status"] == Status(status).value and said["who"] == getpass.getuser()
    assert said["why"] == "checked by hand: the migration had run"
    with start(store) as again:
        assert again.handle(blocked.id).result() == summary
        with pytest.raises(NotBlocked, match=f"settled {Status(status).value}, not blocked"):
            again.resolve(blocked.id, "completed", "twice")


def test_a_delegation_settled_by_hand_says_so_in_zeus_tree_of_its_store_and_of_a_journal(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from supervisor.cli.main import main
    from supervisor.cli.rows import plain_lines, rows
    from supervisor.journal import Journal

    events: list[dict[str, Any]] = []
    with start(store_url, Agent(), events) as zeus:
        blocked = zeus.dispatch(BRIEF, key="ticket-8").result()
        zeus.resolve(blocked.id, "failed", "the migration is not needed")
        other = zeus.dispatch(BRIEF.model_copy(update={"scope": "another"})).result()
    assert main(["tree", store_url]) == 0
    out = capsys.readouterr().out
    [row] = [line for line in out.splitlines() if f" {blocked.id} " in line]
    by = f"settled by hand by {getpass.getuser()}: the migration is not needed"
    assert f"{blocked.id} hermes: failed" in row and by in row
    assert row.count("the migration is not needed") == 1  # its error says it once, here
    [plain] = [line for line in out.splitlines() if f" {other.id} " in line]
    assert "by hand" not in plain
    journal = Journal()  # the host's own journal: its delegation.resolved event
    for event in json.loads(json.dumps(events)):
        journal.apply(event)
    shown = "\n".join(plain_lines(Text(), rows(journal.run)))
    assert f"{blocked.id} hermes: failed" in shown and by in shown


def test_verbs_on_what_is_not_blocked_say_why(store_url: str) -> None:
    release = threading.Event()

    def slow(brief: Brief, ctx: Context) -> str:
        while not release.is_set():
            ctx.sleep(0.01)
        return "done"

    with Zeus.start(store=store_url,
                    agents={"hermes": Agent(blocks=(1, 3)), "slow": slow}) as zeus:
        done = zeus.dispatch(BRIEF).result()  # blocked: its first run
        completed = zeus.resume(done.id).result()
        with pytest.raises(NotBlocked, match="settled completed, not blocked"):
            zeus.resume(completed.id)
        with pytest.raises(NotBlocked, match="settled completed, not blocked"):
            zeus.resolve(completed.id, "failed", "no")
        running = zeus.dispatch(Brief(agent="slow", scope="wait"))
        with pytest.raises(NotBlocked, match="it is open"):
            zeus.resume(running.id)
        with pytest.raises(NotBlocked, match="it is open"):
            zeus.resolve(running.id, "completed", "no")
        release.set()
        running.result()
        with pytest.raises(UnknownDelegation):
            zeus.resume("hermes-99")
        blocked = zeus.dispatch(Brief(agent="hermes", scope="another")).result()
        with pytest.raises(ValueError, match="unknown status 'done'"):
            zeus.resolve(blocked.id, "done", "x")
        with pytest.raises(NotBlocked, match="blocked already"):
            zeus.resolve(blocked.id, Status.blocked, "x")
        with pytest.raises(NotBlocked, match="without a note"):
            zeus.resolve(blocked.id, Status.completed, " ")
    with Zeus.start(agents={"hermes": Agent()}) as memory_only:
        blocked = memory_only.dispatch(BRIEF).result()
        with pytest.raises(StoreError, match="no store"):
            memory_only.resolve(blocked.id, "completed", "done by hand")
        memory_only.resume(blocked.id).result()  # (resume works without a store)
        with pytest.raises(NotBlocked, match="settled completed, not blocked"):
            memory_only.resume(blocked.id)
        with pytest.raises(UnknownDelegation):
            memory_only.resume("hermes-99")


def test_dispatch_on_a_blocked_key_returns_the_blocked_summary_saying_which_verb(
    store_url: str,
) -> None:
    store = store_url
    with start(store) as zeus:
        blocked = zeus.dispatch(BRIEF, key="ticket-9").result()
        again = zeus.dispatch(BRIEF, key="ticket-9").result()
    with start(store) as later:
        stored = later.dispatch(BRIEF, key="ticket-9").result()
    for summary in (again, stored):
        assert summary.status is Status.blocked and summary.id == blocked.id
        assert summary.error is not None and "needs a person to approve" in summary.error
        shown = shlex.quote(store)  # a URL's `?` is quoted
        assert f"zeus resume {shown} {blocked.id}" in summary.error
        assert (f"zeus resolve {shown} {blocked.id} --routing F --status completed --note"
                in summary.error)


def _left_open_by_a_dead_host(store: Path) -> None:
    """The store as a host that died mid-attempt leaves it: a writer's thread attempt
    open (its thread died with that host)."""
    s = SqliteStore.open(store)
    s.record_delegation("hermes-1", key="k", parent_id=None, ordinal=None, agent="hermes",
                        brief=BRIEF, policy=WRITER, deadline=None, created=s.owner.since)
    s.attempt_started("hermes-1-a1", delegation_id="hermes-1", number=1, agent="hermes",
                      started=s.owner.since, deadline=s.owner.since + 60)
    s.commit()
    s.close()


def test_a_recovery_blocked_reason_names_the_store_and_routing_so_its_verb_runs_from_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host, elsewhere = tmp_path / "host", tmp_path / "elsewhere"
    host.mkdir()
    elsewhere.mkdir()
    (host / "routing.yml").write_text(
        "version: 1\nagents:\n  hermes: {entrypoint: tests._durable_agents:quick, "
        "isolation: thread}\n")
    brief = BRIEF.model_copy(update={"inputs": {"dir": str(tmp_path), "name": "m"}})
    s = SqliteStore.open(host / "zeus.db")
    s.record_delegation("hermes-1", key="k", parent_id=None, ordinal=None, agent="hermes",
                        brief=brief, policy=WRITER, deadline=None, created=s.owner.since)
    s.attempt_started("hermes-1-a1", delegation_id="hermes-1", number=1, agent="hermes",
                      started=s.owner.since, deadline=s.owner.since + 60)
    s.commit()
    s.close()
    monkeypatch.chdir(host)  # the host names both by relative paths
    with Zeus.start("routing.yml", store="zeus.db") as zeus:
        reason = zeus.handle("hermes-1").result().error
    assert reason is not None
    verb = reason.split("`")[1]  # the hint's first verb, as a person pastes it
    assert verb == (f"zeus resume {host / 'zeus.db'} hermes-1 --routing {host / 'routing.yml'}")
    monkeypatch.chdir(elsewhere)  # where no routing.yml is
    from supervisor.cli.main import main

    assert main(shlex.split(verb)[1:]) == 0


def test_a_writer_recovery_blocked_is_resumed_once_a_person_checked_its_changes(
    tmp_path: Path,
) -> None:
    store, agent = tmp_path / "zeus.db", Agent()
    agent.runs = 1  # its next run completes
    _left_open_by_a_dead_host(store)
    with Zeus.start(store=store, agents={"hermes": agent}) as zeus:
        assert zeus.recovered.blocked == ("hermes-1",)
        blocked = zeus.handle("hermes-1").result()
        assert blocked.status is Status.blocked and agent.runs == 1  # never a second writer
        assert blocked.error is not None and "outcome is unknown" in blocked.error
        assert f"`zeus resume {store} hermes-1 --routing F`" in blocked.error  # no file
        summary = zeus.resume("hermes-1").result()
    assert summary.status is Status.completed
    assert [a.outcome.value for a in summary.attempts] == ["lost", "completed"]


def test_resume_is_refused_while_a_child_recovery_could_not_stop_still_runs(
    tmp_path: Path,
) -> None:
    store, agent = tmp_path / "zeus.db", Agent(blocks=())
    survivor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        s = SqliteStore.open(store)  # as recovery leaves a child it could not stop
        s.record_delegation("hermes-1", key="k", parent_id=None, ordinal=None, agent="hermes",
                            brief=BRIEF, policy=WRITER, deadline=None, created=s.owner.since)
        s.attempt_started("hermes-1-a1", delegation_id="hermes-1", number=1, agent="hermes",
                          started=s.owner.since, deadline=s.owner.since + 60)
        s.attempt_identity("hermes-1-a1", pid=survivor.pid,
                           pid_start_time=process_start_time(survivor.pid), pgid=None, node=None)
        s.settled("hermes-1", status=Status.blocked, at=s.owner.since, summary=Summary(
            id="hermes-1", agent="hermes", scope=BRIEF.scope, status=Status.blocked,
            error="its child could not be confirmed stopped"))
        s.commit()
        s.close()
        with Zeus.start(store=store, agents={"hermes": agent}) as zeus:
            with pytest.raises(NotBlocked, match=f"pid {survivor.pid}\\) still runs"):
                zeus.resume("hermes-1")
            assert agent.runs == 0  # nothing overlapped it
            survivor.kill()
            survivor.wait()
            summary = zeus.resume("hermes-1").result()
    finally:
        survivor.kill()
        survivor.wait()
    assert summary.status is Status.completed and agent.runs == 1
    assert [a.outcome.value for a in summary.attempts] == ["lost", "completed"]
