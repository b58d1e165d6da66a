"""`zeus ui` in process: the source, the view and the four endpoints over a demo's journal,
through Starlette's own test client."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from supervisor import journal as jr
from supervisor.cli.main import main
from supervisor.errors import SupervisorError
from supervisor.ui import JournalFile, View, open_source
from tests._ui import needs_ui_extra, tool_journal, withhold_settlement
from tests._zygote import run as run_forked
from tests.test_store_cli import open_writer

needs_ui_extra()

from starlette.testclient import TestClient  # noqa: E402

from supervisor.ui.app import create_app  # noqa: E402

LOCAL = "http://127.0.0.1"


def client(path: Path, **options: Any) -> TestClient:
    """A test client; as a context manager it runs the app's poll task (and closes the source)."""
    return TestClient(create_app(open_source(path), **options), base_url=LOCAL)


# -- the source and the view --------------------------------------------------------------
def test_a_journal_source_hands_out_each_line_once_its_newline_is_written(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text('{"event": "zeus.started", "ts": 1}\n{"event": "attempt.st', encoding="utf-8")
    source = JournalFile(path)
    first = source.read_new()
    assert [e["event"] for e in first.events] == ["zeus.started"] and not first.reset
    with path.open("a", encoding="utf-8") as stream:
        stream.write('arted", "ts": 2}\nnot json\n')
    second = source.read_new()
    assert [e["event"] for e in second.events] == ["attempt.started"]
    assert second.notes == ["line 3: skipped: not JSON (Expecting value at column 1)"]
    assert source.read_new().events == []
    source.close()


def test_a_journal_that_shrinks_is_read_again_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text('{"event": "zeus.started"}\n{"event": "zeus.stopped"}\n', encoding="utf-8")
    view = View(JournalFile(path))
    view.refresh()
    assert view.seq == 2
    path.write_text('{"event": "zeus.started"}\n', encoding="utf-8")
    events, reset = view.refresh()
    view.source.close()
    assert reset and len(events) == 1 and view.journal.events == 1


def test_open_source_says_why_a_path_is_not_a_journal(tmp_path: Path) -> None:
    with pytest.raises(SupervisorError, match="does not exist"):
        open_source(tmp_path / "missing.jsonl")
    with pytest.raises(SupervisorError, match="is a directory"):
        open_source(tmp_path)
    store = tmp_path / "zeus.db"
    store.write_bytes(b"SQLite format 3\x00" + bytes(100))
    with pytest.raises(SupervisorError, match=r"zeus\.db"):  # an SQLite file, but no store
        open_source(store)


def test_a_store_is_a_source_whose_new_rows_come_as_new_events(tmp_path: Path) -> None:
    from supervisor import Brief, Zeus
    from supervisor.ui.source import StoreFile

    path = tmp_path / "zeus.db"
    with Zeus.start(agents={"a": lambda brief, ctx: "ok"}, store=path) as zeus:
        zeus.dispatch(Brief(agent="a", scope="first")).result(10)
        source = open_source(path)
        assert isinstance(source, StoreFile)
        first = source.read_new()
        assert not first.reset
        assert [e["event"] for e in first.events if e["delegation_id"] == "a-1"][-1] == (
            "delegation.settled")
        assert source.read_new().events == []  # nothing written since
        zeus.dispatch(Brief(agent="a", scope="second")).result(10)
        more = source.read_new()
        assert not more.reset
        assert {e["delegation_id"] for e in more.events} == {"a-2"}
        source.close()
    before = path.read_bytes()
    assert open_source(path).read_new().events[-1]["event"] == "zeus.stopped"
    with client(path) as c:  # one host, its own file: no hosts to show, no owner to name
        body = c.get("/api/tree").json()
    assert body["hosts"] is None and [d["host"] for d in body["delegations"]] == [None, None]
    assert path.read_bytes() == before  # read only: the store is never changed


def test_a_delegation_settled_by_hand_says_who_and_why_in_the_tree_and_its_page(
    tmp_path: Path,
) -> None:
    from supervisor import Brief, Report, Zeus

    path = tmp_path / "zeus.db"
    with Zeus.start(agents={"a": lambda brief, ctx: Report(blocked="a person must look")},
                    store=path) as zeus:
        blocked = zeus.dispatch(Brief(agent="a", scope="s"), key="k").result(10)
        zeus.resolve(blocked.id, "completed", "done by hand on the replica")
        plain = zeus.dispatch(Brief(agent="a", scope="t")).result(10)
    with client(path) as c:
        tree = {d["id"]: d for d in c.get("/api/tree").json()["delegations"]}
        page = c.get(f"/api/delegations/{blocked.id}").json()
    said = tree[blocked.id]["resolved"]
    assert said is not None and said["note"] == "done by hand on the replica" and said["by"]
    assert tree[blocked.id]["status"] == "completed" and tree[plain.id]["resolved"] is None
    assert page["resolved"] == said and page["summary"]["status"] == "completed"
    js = (Path(create_app.__code__.co_filename).parent / "assets" / "app.js").read_text("utf-8")
    assert js.count("settled by hand") == 2  # the tree's badge, the page's fact


# -- the endpoints --------------------------------------------------------------------------
def test_the_tree_gives_the_demos_delegations_as_zeus_tree_rebuilds_them(
    demo_journal: Path,
) -> None:
    run = jr.load(demo_journal).run
    with client(demo_journal) as c:
        body = c.get("/api/tree").json()
    got = [(d["id"], d["agent"], d["status"], d["parent_id"]) for d in body["delegations"]]
    parents = {c.id: d.id for d in run.delegations.values() for c in d.children}
    want = [
        (d.id, d.agent, d.status, parents.get(d.id)) for d in run.delegations.values()
    ]
    assert got == want
    assert {d["status"] for d in body["delegations"]} >= {
        "completed", "partial", "timed_out", "budget_exceeded", "cancelled",
    }
    attempts = {d["id"]: [a["id"] for a in d["attempts"]] for d in body["delegations"]}
    assert attempts == {d.id: [a.id for a in d.attempts] for d in run.delegations.values()}
    assert body["tracking"] == [
        {**row.__dict__} for row in jr.tracking_rows(run)
    ]
    assert [t["attempt_id"] for t in body["timeouts"]] == [t.attempt_id for t in run.timeouts]


def test_a_delegation_gives_its_settlement_attempts_partial_results_and_every_event(
    demo_journal: Path,
) -> None:
    events, _ = jr.read_events(demo_journal)
    with client(demo_journal) as c:
        body = c.get("/api/delegations/talos-1").json()
    assert body["agents"] == ["talos", "hermes"] and body["status"] == "completed"
    assert body["events"] == [e for e in events if e.get("delegation_id") == "talos-1"]
    assert body["summary"]["event"] == "delegation.settled" and body["open"] is None
    assert [a["outcome"] for a in body["attempts"]] == ["timeout", "timeout", "completed"]
    assert body["fallbacks"] == 1 and body["retries"] == 1
    partials = [e for e in body["events"] if e["event"] == "attempt.partial"]
    assert [p["item"] for p in body["partial_results"]] == [e["item"] for e in partials]


def test_an_open_delegation_shows_its_open_state(demo_journal: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.jsonl"
    withhold_settlement(demo_journal, cut, "athena-1")
    with client(cut) as c:
        row = next(d for d in c.get("/api/tree").json()["delegations"] if d["id"] == "athena-1")
        body = c.get("/api/delegations/athena-1").json()
    assert row["status"] == "in progress"
    assert body["summary"] is None and body["open"]["attempt"] == "athena-1-a1"


def test_a_run_whose_zeus_stopped_is_over_and_one_still_open_is_not(
    demo_journal: Path, tmp_path: Path
) -> None:
    cut = tmp_path / "cut.jsonl"
    withhold_settlement(demo_journal, cut, "athena-1")
    with client(demo_journal) as c:
        stopped = c.get("/api/tree").json()["run"]
    with client(cut) as c:
        running = c.get("/api/tree").json()["run"]
    assert stopped["owner_gone"] is True and stopped["ended_ts"] == stopped["last_ts"]
    assert running["owner_gone"] is False and running["ended_ts"] is None


def test_a_store_whose_owner_died_is_over_its_time_stopping_at_the_last_heartbeat(
    tmp_path: Path,
) -> None:
    path = open_writer(str(tmp_path / "zeus.db"), ran_s=2.0, owner_pid=None)
    with client(path) as c:
        run = c.get("/api/tree").json()["run"]
    assert run["stopped_ts"] is None  # it crashed: no zeus.stopped
    assert run["owner_gone"] is True
    assert run["ended_ts"] - run["started_ts"] == pytest.approx(2.0, abs=0.01)


def test_an_attempt_picked_up_again_after_a_restart_says_so(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    base = {"parent_id": None, "agent": "apollo"}
    events = [
        {"ts": 1.0, "event": "zeus.started", "delegation_id": None, "attempt_id": None, **base},
        {"ts": 1.0, "event": "delegation.dispatched", "delegation_id": "d1", "attempt_id": None,
         "scope": "s", **base},
        {"ts": 1.0, "event": "attempt.started", "delegation_id": "d1", "attempt_id": "d1-a1",
         "attempt": 1, **base},
        {"ts": 5.0, "event": "zeus.started", "delegation_id": None, "attempt_id": None, **base},
        {"ts": 5.0, "event": "attempt.reattached", "delegation_id": "d1",
         "attempt_id": "d1-a1", "attempt": 1, "pid": 4242, **base},
        {"ts": 6.0, "event": "attempt.started", "delegation_id": "d2", "attempt_id": "d2-a1",
         "attempt": 1, **base},
    ]
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    with client(path) as c:
        reattached = c.get("/api/delegations/d1").json()["attempts"]
        fresh = c.get("/api/delegations/d2").json()["attempts"]
    assert [(a["id"], a.get("reattached")) for a in reattached] == [("d1-a1", True)]
    assert [(a["id"], a.get("reattached")) for a in fresh] == [("d2-a1", None)]


def test_an_attempts_tool_calls_and_the_one_it_is_in_reach_the_tree(tmp_path: Path) -> None:
    with client(tool_journal(tmp_path / "events.jsonl", reads=203)) as c:
        (a,) = c.get("/api/tree").json()["delegations"][0]["attempts"]
    assert a["tools_left_out"] == 5 and len(a["tools"]) == 200  # the latest, for the timeline
    assert a["tools"][-2:] == [
        {"tool": "Bash", "side_effects": True, "call_id": "t1", "started_ts": 72.0,
         "ended_ts": 80.0, "duration_s": 8.0},
        {"tool": "pytest", "side_effects": False, "call_id": "t2", "started_ts": 82.0},
    ]
    assert a["tools"][0] == {"tool": "read", "side_effects": False, "ended_ts": 71.005}
    assert a["in_tool"] == a["tools"][-1]


def test_the_page_shows_live_only_while_the_run_can_change_and_says_a_reattach() -> None:
    js = (Path(create_app.__code__.co_filename).parent / "assets" / "app.js").read_text("utf-8")
    badge = js.split("function badge()", 1)[1].split("function follow()", 1)[0]
    assert js.count('textContent = "live"') == 1 and 'textContent = "live"' in badge
    assert badge.index("run.owner_gone") < badge.index('"live"')  # asked before "live"
    assert js.count("picked up again after a restart") == 2  # the attempts table, the timeline


def test_an_unknown_delegation_or_run_is_a_404_with_a_json_error(demo_journal: Path) -> None:
    with client(demo_journal) as c:
        response = c.get("/api/delegations/zeus-999")
        assert response.status_code == 404
        assert response.json() == {"error": f"no delegation 'zeus-999' in {demo_journal}"}
        response = c.get("/api/tree?run=7")
        assert response.status_code == 404 and "no run 7" in response.json()["error"]


def test_the_page_is_one_document_that_fetches_nothing_from_outside(demo_journal: Path) -> None:
    with client(demo_journal) as c:
        response = c.get("/")
    page = response.text
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    csp = response.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp
    assert not re.search(r"""(src|href|url)\s*[=(]\s*["']?(https?:)?//""", page)
    for endpoint in ("/api/tree", "/api/delegations/", "/api/events"):
        assert endpoint in page
    assert "/*SCRIPT*/" not in page and "/*STYLE*/" not in page


def test_it_only_reads_no_method_but_get_is_served(demo_journal: Path) -> None:
    with client(demo_journal) as c:
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            assert c.request(method, "/api/tree").status_code == 405
        assert c.request("POST", "/api/delegations/talos-1").status_code == 405


def test_a_page_on_another_site_pointing_its_name_here_is_refused(demo_journal: Path) -> None:
    with client(demo_journal) as c:
        response = c.get("/api/tree", headers={"host": "attacker.example"})
    assert response.status_code == 400


def test_with_a_token_every_request_must_carry_it(demo_journal: Path) -> None:
    with client(demo_journal, token="s3cret", hosts=None) as c:
        refused = c.get("/api/tree")
        assert refused.status_code == 401 and "token" in refused.json()["error"]
        assert refused.headers["www-authenticate"] == "Bearer"
        assert c.get("/", params={"token": "wrong"}).status_code == 401
        assert c.get("/api/tree", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/", params={"token": "s3cret"}).status_code == 200
        assert c.get("/api/tree", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_serving_never_changes_the_journal_or_its_owner_only_mode(
    demo_journal: Path, tmp_path: Path
) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(demo_journal.read_bytes())
    path.chmod(0o600)
    with client(path) as c:
        assert c.get("/api/tree").status_code == 200
        assert c.get("/api/delegations/apollo-1").status_code == 200
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes() == demo_journal.read_bytes()


def test_the_tree_follows_lines_appended_while_it_serves(
    demo_journal: Path, tmp_path: Path
) -> None:
    cut = tmp_path / "cut.jsonl"
    rest = withhold_settlement(demo_journal, cut, "apollo-7")
    with client(cut) as c:
        before = c.get("/api/tree").json()
        settled = json.loads(rest[0])
        with cut.open("a", encoding="utf-8") as stream:
            stream.write(rest[0])
        # the poll task folds it in on its own loop; the next answers show it
        for _ in range(2000):
            after = c.get("/api/tree").json()
            if after["seq"] > before["seq"]:
                break
    row = next(d for d in after["delegations"] if d["id"] == "apollo-7")
    assert row["status"] == settled["status"] == "completed"


# -- the command ----------------------------------------------------------------------------
def test_another_address_without_a_token_exits_2_saying_why(
    demo_journal: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ui", str(demo_journal), "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "--host 0.0.0.0" in err and "--token" in err


def test_a_missing_journal_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ui", str(tmp_path / "nope.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.process
def test_a_file_that_is_no_journal_exits_2_with_zeus_trees_words(tmp_path: Path) -> None:
    junk = tmp_path / "junk.txt"
    junk.write_text("hello\nnot a journal\n", encoding="utf-8")
    said = {}
    for command in ("ui", "tree"):
        done = run_forked("supervisor.cli", [command, str(junk)], timeout=60)  # tests/_zygote.py
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        said[command] = done.stderr.removeprefix(f"zeus {command}: ")
    assert said["ui"] == said["tree"]
    assert "nor a journal (no Zeus events: 2 line(s) skipped)" in said["ui"]


def test_an_empty_journal_or_one_whose_first_line_is_being_written_is_served(
    tmp_path: Path,
) -> None:
    empty, partial = tmp_path / "empty.jsonl", tmp_path / "partial.jsonl"
    empty.write_text("", encoding="utf-8")
    partial.write_text('{"ts": 1.0, "event": "zeus.sta', encoding="utf-8")
    for path in (empty, partial):
        assert isinstance(open_source(path), JournalFile)


def test_without_the_ui_extra_zeus_ui_names_it_and_exits_2(demo_journal: Path) -> None:
    code = (
        "import sys; sys.modules['starlette'] = None\n"
        "from supervisor.cli.main import main\n"
        f"sys.exit(main(['ui', {str(demo_journal)!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2
    assert "zeus-supervisor[ui]" in done.stderr and "starlette" in done.stderr


def test_run_ui_without_a_journal_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "plan.yml"
    plan.write_text("briefs:\n  - agent: apollo\n    scope: Scan for TODO\n", encoding="utf-8")
    assert main(["run", str(plan), "--ui"]) == 2
    assert "--log" in capsys.readouterr().err
    assert main(["run", "--help"]) == 0
    helped = " ".join(capsys.readouterr().out.split())
    assert "--ui follow the journal in a browser (needs --log F" in helped  # as it says
