"""`zeus ui` as a real process on a free 127.0.0.1 port: the endpoints over a socket, the
event stream as lines are appended, the token, and `--ui` beside a run."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._ui import (
    WAIT_S,
    append,
    needs_ui_extra,
    serving,
    shared_store,
    withhold_settlement,
)

needs_ui_extra()

import httpx  # noqa: E402

from supervisor.cli.commands.ui import Beside  # noqa: E402

pytestmark = [pytest.mark.process, pytest.mark.realtime]


def sse_frames(lines: Iterator[str]) -> Iterator[dict[str, str]]:
    """Server-Sent Events frames as {field: value}; comments (pings) are skipped."""
    frame: dict[str, str] = {}
    for line in lines:
        if not line:
            if frame:
                yield frame
            frame = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            frame[name] = value.removeprefix(" ")


def test_the_endpoints_answer_over_a_real_socket(demo_journal: Path) -> None:
    with serving(demo_journal) as ui:
        page = httpx.get(ui.base + "/", timeout=WAIT_S)
        tree = httpx.get(ui.base + "/api/tree", timeout=WAIT_S).json()
        one = httpx.get(ui.base + "/api/delegations/hang-1", timeout=WAIT_S).json()
        missing = httpx.get(ui.base + "/api/delegations/nobody-1", timeout=WAIT_S)
    assert page.status_code == 200 and "<title>zeus ui</title>" in page.text
    statuses = {d["id"]: d["status"] for d in tree["delegations"]}
    assert statuses["hang-1"] == "timed_out" and statuses["talos-1"] == "completed"
    assert len(statuses) == 13
    assert one["attempts"][0]["killed"] in ("terminate", "kill")
    assert missing.status_code == 404 and "nobody-1" in missing.json()["error"]


def test_a_line_appended_while_a_client_listens_reaches_the_stream_within_a_second(
    demo_journal: Path, tmp_path: Path
) -> None:
    cut = tmp_path / "cut.jsonl"
    rest = withhold_settlement(demo_journal, cut, "apollo-7")
    with serving(cut) as ui, httpx.stream(
        "GET", ui.base + "/api/events", timeout=httpx.Timeout(WAIT_S)
    ) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        frames = sse_frames(stream.iter_lines())
        ready = next(frames)  # the stream says it listens before anything is appended
        written = time.monotonic()
        append(cut, rest[:1])
        frame = next(f for f in frames if f.get("event", "message") == "message")
        arrived = time.monotonic()
    assert ready["event"] == "ready"
    assert json.loads(frame["data"]) == json.loads(rest[0])
    assert int(frame["id"]) == int(ready["id"]) + 1
    assert arrived - written < 1.0


def test_with_a_token_a_request_without_it_is_refused(demo_journal: Path) -> None:
    with serving(demo_journal, "--token", "t0ken") as ui:
        assert ui.url.endswith("/?token=t0ken")
        bare = httpx.get(ui.base + "/api/tree", timeout=WAIT_S)
        carried = httpx.get(
            ui.base + "/api/tree", headers={"Authorization": "Bearer t0ken"}, timeout=WAIT_S
        )
        first = httpx.get(ui.url, timeout=WAIT_S)
    assert bare.status_code == 401 and "token" in bare.json()["error"]
    assert carried.status_code == 200 and first.status_code == 200


def test_ui_beside_a_run_serves_its_journal_and_stops_with_it(demo_journal: Path) -> None:
    with pytest.raises(RuntimeError, match="the run broke"), Beside(demo_journal, "test") as page:
        tree = httpx.get(page.url + "api/tree", timeout=WAIT_S).json()
        assert len(tree["delegations"]) == 13
        raise RuntimeError("the run broke")
    with pytest.raises(httpx.ConnectError):
        httpx.get(page.url + "api/tree", timeout=WAIT_S)


def test_a_shared_store_shows_each_host_its_lease_what_it_owns_and_whose_each_delegation_is(
    pg_url: str,
) -> None:
    pytest.importorskip("psycopg", reason="pip install 'zeus-supervisor[postgres]'")
    with shared_store(pg_url) as hosts, serving(pg_url) as ui:
        tree = httpx.get(ui.base + "/api/tree", timeout=WAIT_S).json()
        detail = httpx.get(ui.base + "/api/delegations/apollo-4", timeout=WAIT_S).json()
        with httpx.stream("GET", ui.base + "/api/events", timeout=httpx.Timeout(WAIT_S)) as s:
            frames = sse_frames(s.iter_lines())
            assert next(frames)["event"] == "ready"
            renewed = hosts["live"].lease_keeper()
            renewed.renew()  # no new row: the hosts alone changed, and the stream says so
            frame = next(f for f in frames if f.get("event", "message") != "message")
            renewed.close()
        again = httpx.get(ui.base + "/api/tree", timeout=WAIT_S).json()
    ids = {role: store.host_id for role, store in hosts.items()}
    by_id = {h["id"]: h for h in tree["hosts"]}
    assert [h["id"] for h in tree["hosts"]] == [ids[r] for r in
                                               ("live", "released", "taken", "expired")]
    live, released, taken, expired = (by_id[ids[r]] for r in
                                      ("live", "released", "taken", "expired"))
    assert 0 < live["lease_left_s"] <= 60 and live["released"] is None
    assert live["taken_by"] is None and live["owns"] == 3  # apollo-1, -2 and -4
    assert live["pid"] == os.getpid() and live["host"] == socket.gethostname()
    assert released["released"] is not None and released["owns"] == 0
    assert taken["taken_by"] == ids["live"] and taken["owns"] == 0
    assert expired["lease_left_s"] < 0 and expired["taken_by"] is None
    assert expired["released"] is None and expired["owns"] == 1
    owners = {d["id"]: d["host"] for d in tree["delegations"]}
    assert owners == {"apollo-1": ids["live"], "apollo-2": ids["live"],
                      "apollo-3": ids["released"], "apollo-4": ids["live"],
                      "apollo-5": ids["expired"]}
    assert detail["host"] == ids["live"]  # taken over: its owner now, not its first
    assert frame["event"] == "hosts"
    [after] = [h for h in again["hosts"] if h["id"] == ids["live"]]
    assert after["lease_until"] > live["lease_until"]


def test_a_journal_has_no_hosts(demo_journal: Path) -> None:
    with serving(demo_journal) as ui:
        tree = httpx.get(ui.base + "/api/tree", timeout=WAIT_S).json()
    assert tree["hosts"] is None
    assert all(d["host"] is None for d in tree["delegations"])
