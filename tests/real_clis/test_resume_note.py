"""A blocked real Codex resumed with a person's note (`zeus.resume(id, note=...)`), with a
store and without one: the resumed run continues the same thread, and the model server's
last request holds the thread's history, the agent's blocker and the note."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from supervisor import Brief, Routing, Status, Zeus
from tests.real_clis.clis import BLOCKED_TEXT, agent, cli_setup, processes_of
from tests.real_clis.model_server import ModelServer, final

pytestmark = [pytest.mark.process, pytest.mark.realtime]

COMPLETED = BLOCKED_TEXT.replace("Status: blocked", "Status: completed")
BLOCKER = "blocker: the deploy key is missing; a person must provide it"
NOTE = "the deploy key is in DEPLOY_KEY now"


@pytest.mark.parametrize("store", [False, True])
def test_a_blocked_codex_resumed_with_a_note_is_told_both_in_the_same_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: bool) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    with ModelServer([final(BLOCKED_TEXT), final(COMPLETED)]) as server:
        setup = cli_setup("codex", tmp_path / "home", server.url)
        routing = Routing.from_dict({"version": 1, "agents": {"talos": agent(setup)}})
        with Zeus.start(routing, store=tmp_path / "zeus.db" if store else None) as zeus:
            blocked = zeus.dispatch(Brief(agent="talos", scope="Run the deploy, then report."))
            first = blocked.result(timeout=60)
            assert first.status is Status.blocked, first.error
            done = zeus.resume(blocked.id, note=NOTE).result(timeout=60)
        requests = server.main_requests()
    assert done.status is Status.completed, done.error
    thread = first.attempts[0].session_id
    assert thread and [a.session_id for a in done.attempts] == [thread, thread]
    assert len(requests) == 2
    last = json.dumps(requests[-1].body)
    assert "Run the deploy, then report." in last  # the thread's history
    assert "I ran it; the deploy needs a decision." in last
    assert f"You reported that you were blocked: {BLOCKER}. A person answered: {NOTE}." in last
    assert processes_of(setup.home) == []
    assert os.environ.get("ZEUS_OFFLINE_NETNS") == "1"
