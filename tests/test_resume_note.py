"""A person's answer reaches the blocked agent (docs/guide.md, "When something is
blocked"): `zeus.resume(id, note=...)` and `zeus resume STORE ID --note N` give the next
attempt the blocker and the note, a work function in `ctx.previous_blocker` and
`ctx.note`, an agent CLI in the prompt of the session it was blocked in; with a store or
without one. Claude's `permission_denials` are its blocker when its reply has no block.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actors import Brief, Context, Report, Status
from actors.speaks.invocation import prompt_text
from supervisor import NotBlocked, Routing, Zeus
from tests._agent_clis import TRANSCRIPTS, FakeClis, fake_clis

__all__ = ["fake_clis"]  # the fixture, used below

BLOCKER = "the migration needs a DBA's approval"
NOTE = "approved by the DBA"


class Migrate:
    """Blocked until a person answers; what each run's ctx said."""

    def __init__(self) -> None:
        self.seen: list[tuple[str | None, str | None, str | None]] = []

    def __call__(self, brief: Brief, ctx: Context) -> Report:
        self.seen.append((ctx.previous_blocker, ctx.note, ctx.previous_error))
        if ctx.note is None:
            return Report(blocked=BLOCKER)
        return Report(output=f"migrated: {ctx.note}")


@pytest.mark.parametrize("store", [None, "zeus.db"])
def test_a_work_function_finds_the_blocker_and_the_note_in_its_ctx(
        tmp_path: Path, store: str | None) -> None:
    agent, events = Migrate(), []
    with Zeus.start(agents={"migrate": agent}, log=events.append,
                    store=None if store is None else tmp_path / store) as zeus:
        blocked = zeus.dispatch(Brief(agent="migrate", scope="Add the index"), key="k")
        assert blocked.result().status is Status.blocked
        done = zeus.resume(blocked.id, note=NOTE).result()
        assert zeus.dispatch(Brief(agent="migrate", scope="Add the index"),
                             key="k").result() == done
        with pytest.raises(NotBlocked, match="settled completed"):
            zeus.resume(blocked.id, note="again")
    assert done.status is Status.completed and done.output == f"migrated: {NOTE}"
    assert done.id == blocked.id and len(done.attempts) == 2
    assert agent.seen == [(None, None, None), (BLOCKER, NOTE, None)]
    [said] = [e for e in events if e["event"] == "delegation.resumed"]
    assert said["why"] == NOTE  # the note is in the journal


def test_without_a_store_a_resume_with_no_note_says_none_and_keeps_the_blocker() -> None:
    agent = Migrate()
    with Zeus.start(agents={"migrate": agent}) as zeus:
        blocked = zeus.dispatch(Brief(agent="migrate", scope="Add the index")).result()
        again = zeus.resume(blocked.id).result()  # blocked once more: no note
        assert again.status is Status.blocked and again.error == BLOCKER
        assert zeus.resume(again.id, note=NOTE).result().status is Status.completed
    assert agent.seen[1:] == [(BLOCKER, None, None), (BLOCKER, NOTE, None)]


# -- an agent CLI (the fakes of tests/fixtures/agent_clis) -------------------------------

CLI_BLOCKER = ("blocked: the fixture database credentials are not in this environment; "
               "someone must provide TEST_DATABASE_URL")
CLI_NOTE = "TEST_DATABASE_URL is set now (scenario: resume)"  # the fake replays `resume`


def _routing(**supervisor: Any) -> Routing:
    return Routing.from_dict({"version": 1, "supervisor": supervisor, "agents": {"hermes": {
        "speaks": "claude", "timeout_s": 30, "shutdown": {"grace_s": 0.5, "term_s": 0.5}}}})


def _resumed_prompt_quotes_both(fake_clis: FakeClis, session: str) -> None:
    first, second = fake_clis.calls()
    assert first["resume"] is None and second["resume"] == session
    prompt = second["prompt"]
    assert f"You reported that you were blocked: {CLI_BLOCKER}" in prompt
    assert f"A person answered: {CLI_NOTE.rstrip('.')}" in prompt
    assert "A previous attempt of this subtask ended" not in prompt
    assert "Fix the failing test" in prompt  # the brief, as before


@pytest.mark.process
@pytest.mark.realtime
@pytest.mark.parametrize("store", [False, True])
def test_a_blocked_cli_resumed_with_a_note_continues_its_session_told_both(
        tmp_path: Path, fake_clis: FakeClis, monkeypatch: pytest.MonkeyPatch,
        store: bool) -> None:
    monkeypatch.setenv("ZEUS_FAKE_CLI_SCENARIO", "blocked")
    with Zeus.start(_routing(**({"orphan_grace_s": 5} if store else {})),
                    store=tmp_path / "zeus.db" if store else None) as zeus:
        blocked = zeus.dispatch(Brief(agent="hermes", scope="Fix the failing test"))
        first = blocked.result(timeout=60)
        assert first.status is Status.blocked and first.error == \
            f"the agent reported Status: blocked: {CLI_BLOCKER}"
        done = zeus.resume(blocked.id, note=CLI_NOTE).result(timeout=60)
    assert done.status is Status.completed, done.error
    session = first.attempts[0].session_id
    assert session is not None and done.attempts[1].session_id == session
    _resumed_prompt_quotes_both(fake_clis, session)


@pytest.mark.process
@pytest.mark.realtime
def test_zeus_resume_store_id_note_continues_the_cli_session(
        tmp_path: Path, fake_clis: FakeClis, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from supervisor.cli.main import main

    monkeypatch.setenv("ZEUS_FAKE_CLI_SCENARIO", "blocked")
    routing = tmp_path / "routing.yml"
    routing.write_text(json.dumps({"version": 1, "agents": {"hermes": {"speaks": "claude"}}}))
    store = tmp_path / "zeus.db"
    with Zeus.start(routing, store=store) as zeus:
        first = zeus.dispatch(Brief(agent="hermes", scope="Fix the failing test")).result(60)
    assert first.status is Status.blocked
    code = main(["resume", str(store), first.id, "--routing", str(routing), "--note", CLI_NOTE])
    assert code == 0, capsys.readouterr()
    assert f"{first.id} resumed: completed" in capsys.readouterr().out
    _resumed_prompt_quotes_both(fake_clis, first.attempts[0].session_id or "")


DENIED = TRANSCRIPTS / "claude" / "real-2.1.328-permission-denied-partial.jsonl"


@pytest.mark.process
@pytest.mark.realtime
def test_claudes_denied_permission_settles_blocked_saying_which(
        fake_clis: FakeClis, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZEUS_FAKE_CLI_TRANSCRIPT", str(DENIED))
    with Zeus.start(_routing()) as zeus:
        summary = zeus.dispatch(Brief(agent="hermes", scope="Clean the build")).result(60)
    assert summary.status is Status.blocked
    assert summary.error == "needs permission for Bash(rm -rf build)"
    assert summary.output == "I could not remove build/: running the command was not allowed."


# -- the prompt ----------------------------------------------------------------------------

BRIEF = Brief(agent="hermes", scope="Fix it")


def test_the_prompt_quotes_the_blocker_and_the_note() -> None:
    said = prompt_text(BRIEF, agent="hermes", blocker="needs permission for Bash(rm -rf build)",
                       note="build/ is generated: remove it.", in_session=True)
    assert ("You reported that you were blocked: needs permission for Bash(rm -rf build). "
            "A person answered: build/ is generated: remove it. Go on with the scope and "
            "report.") in said
    fresh = prompt_text(BRIEF, agent="hermes", blocker="the key is missing", note=None,
                        previous_error="crash: it died")
    assert "A previous attempt of this subtask ended: crash: it died" in fresh
    assert ("This subtask was blocked: the key is missing. A person looked into it and lets "
            "you go on, with no note.") in fresh
    assert "A person" not in prompt_text(BRIEF, agent="hermes", previous_error="crash: it died")


def test_the_prompt_the_guide_shows_is_the_one_a_resumed_cli_gets() -> None:
    guide = (Path(__file__).parent.parent / "docs" / "guide.md").read_text(encoding="utf-8")
    shown = guide.split("You reported that you were blocked", 1)[1].split("\n", 1)[0]
    command = guide.split("zeus resume ops.db coder-1", 1)[1].split("\n", 1)[0]
    note = command.split('--note "', 1)[1].rstrip('"')
    prompt = prompt_text(BRIEF, agent="hermes", blocker="needs permission for Bash(rm -rf build)",
                         note=note, in_session=True)
    assert f"You reported that you were blocked{shown}" in prompt.split("\n\n")


@pytest.mark.process
@pytest.mark.realtime
def test_the_answer_survives_a_host_killed_while_its_answered_run_ran(tmp_path: Path) -> None:
    """The store keeps the person's answer with the delegation it reopens: `zeus resume
    --note` SIGKILLed while the answered run runs, the next Zeus on the store runs the
    delegation again and tells that run the blocker and the note again."""
    import os
    import signal
    import time

    import yaml

    from tests._zygote import forked

    store, routing_file = tmp_path / "zeus.db", tmp_path / "routing.yml"
    routing = {"version": 1, "agents": {"migrate": {
        "entrypoint": "tests._durable_agents:answered", "read_only": True}}}
    routing_file.write_text(yaml.safe_dump(routing))
    brief = Brief(agent="migrate", scope="Add the index",
                  inputs={"dir": str(tmp_path), "name": "m"})
    with Zeus.start(Routing.from_dict(routing), store=store) as zeus:
        blocked = zeus.dispatch(brief, key="k").result()
    assert blocked.status is Status.blocked
    root = Path(__file__).resolve().parent.parent
    cli = forked("supervisor.cli", ["resume", str(store), blocked.id, "--note", NOTE,
                                    "--routing", str(routing_file)], cwd=root,
                 env={**os.environ, "PYTHONPATH": str(root)})
    told = tmp_path / "m.told"
    give_up = time.monotonic() + 60
    while not told.exists():  # the answered run runs: the host dies under it
        assert cli.poll() is None, cli.communicate()
        assert time.monotonic() < give_up, "the answered run never ran"
        time.sleep(0.02)
    os.kill(cli.pid, signal.SIGKILL)
    cli.communicate()  # (its pipes closed)
    (tmp_path / "release").write_text("")
    with Zeus.start(Routing.from_dict(routing), store=store) as zeus:
        assert zeus.recovered.rerun == (blocked.id,)
        done = zeus.handle(blocked.id).result()
    assert done.status is Status.completed and done.output == f"migrated: {NOTE}"
    lines = told.read_text().splitlines()
    assert [json.loads(line) for line in lines] == [[BLOCKER, NOTE]] * 2  # told both times
    assert [a.outcome.value for a in done.attempts] == ["completed", "lost", "completed"]
