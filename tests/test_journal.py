"""Reading the journal: tolerant parsing, the rebuilt tree, follow, the timeout table, sweep,
and the `zeus tree` / `zeus timeouts` / `zeus sweep` commands."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from rich.console import Console

from actors.osproc import same_start
from supervisor import journal as jr
from supervisor.cli.commands import tree as tree_cmd
from supervisor.cli.main import main
from tests._support import terminal

T0 = 1_700_000_000.0


def ev(
    event: str,
    t: float,
    delegation_id: str | None = None,
    attempt_id: str | None = None,
    *,
    parent_id: str | None = None,
    agent: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """An event as Zeus writes it, `t` seconds after T0."""
    if agent is None and delegation_id is not None:
        agent = delegation_id.split("-")[0]
    return {
        "ts": T0 + t,
        "event": event,
        "delegation_id": delegation_id,
        "attempt_id": attempt_id,
        "parent_id": parent_id,
        "agent": agent,
        **fields,
    }


def dispatched(
    t: float,
    d: str,
    *,
    parent: str | None = None,
    timeout: float = 60,
    partial_ok: bool = False,
    scope: str = "do it",
) -> dict[str, Any]:
    policy = {
        "timeout_s": timeout,
        "partial_ok": partial_ok,
        "isolation": "thread",
        "fallback": None,
        "retry": {"max_retries": 2, "backoff": "exponential"},
    }
    return ev(
        "delegation.dispatched",
        t,
        d,
        parent_id=parent,
        scope=scope,
        depth=2 if parent else 1,
        policy=policy,
        timeout_s=timeout,
    )


def started(
    t: float,
    d: str,
    n: int,
    *,
    pid: int | None = None,
    start: float | None = None,
    deadline: float = 60,
    agent: str | None = None,
    parent: str | None = None,
) -> dict[str, Any]:
    return ev(
        "attempt.started",
        t,
        d,
        f"{d}-a{n}",
        parent_id=parent,
        agent=agent,
        attempt=n,
        pid=pid,
        pid_start_time=start,
        deadline_s=deadline,
    )


def story() -> list[dict[str, Any]]:
    """apollo-1 times out, is retried and completes; athena-2 delegates hermes-3, which
    goes stale and settles failed; themis-4 is still running when the journal ends."""
    return [
        ev("zeus.started", 0, pid=4242, routing="routing.yml"),
        dispatched(0.1, "apollo-1", partial_ok=True, scope="Scan route files for auth"),
        started(0.1, "apollo-1", 1, pid=5001, start=T0 + 0.05),
        ev("attempt.heartbeat", 1.0, "apollo-1", "apollo-1-a1", progress=3, note="routes.py"),
        ev("attempt.timed_out", 60.1, "apollo-1", "apollo-1-a1", elapsed_s=60.0),
        ev("attempt.killed", 60.2, "apollo-1", "apollo-1-a1", how="kill", latency_s=0.02, pid=5001),
        ev(
            "attempt.failed",
            60.2,
            "apollo-1",
            "apollo-1-a1",
            outcome="timeout",
            error="deadline of 60 s passed",
            duration_s=60.1,
        ),
        ev(
            "retry.scheduled",
            60.2,
            "apollo-1",
            "apollo-1-a1",
            backoff_s=1.25,
            next_attempt_id="apollo-1-a2",
        ),
        started(61.5, "apollo-1", 2, pid=5002, start=T0 + 61.45),
        ev("attempt.completed", 63.5, "apollo-1", "apollo-1-a2", duration_s=2.0),
        ev(
            "delegation.settled",
            63.5,
            "apollo-1",
            status="completed",
            duration_s=63.4,
            attempts=2,
            timeout_kind=None,
            error=None,
        ),
        dispatched(64.0, "athena-2", timeout=120),
        started(64.0, "athena-2", 1, deadline=120),
        dispatched(65.0, "hermes-3", parent="athena-2", timeout=180),
        started(65.0, "hermes-3", 1, parent="athena-2", deadline=119),
        ev("attempt.stale", 75.0, "hermes-3", "hermes-3-a1", parent_id="athena-2", elapsed_s=10.0),
        ev(
            "attempt.fenced",
            77.0,
            "hermes-3",
            "hermes-3-a1",
            parent_id="athena-2",
            reason="did not stop within grace_s",
        ),
        ev(
            "attempt.failed",
            77.0,
            "hermes-3",
            "hermes-3-a1",
            parent_id="athena-2",
            outcome="stale",
            error="no progress for 10 s",
            duration_s=12.0,
        ),
        ev(
            "delegation.settled",
            77.0,
            "hermes-3",
            parent_id="athena-2",
            status="blocked",
            duration_s=12.0,
            attempts=1,
            timeout_kind="stale",
            error="a second writer",
        ),
        ev("attempt.completed", 80.0, "athena-2", "athena-2-a1", duration_s=16.0),
        ev(
            "delegation.settled",
            80.0,
            "athena-2",
            status="completed",
            duration_s=16.0,
            attempts=1,
            timeout_kind=None,
            error=None,
        ),
        dispatched(81.0, "themis-4", timeout=120),
        started(81.0, "themis-4", 1, pid=5004, start=T0 + 80.9, deadline=120),
        ev("attempt.heartbeat", 90.0, "themis-4", "themis-4-a1", progress=7, note="lint"),
    ]


def write(path: Path, events: list[dict[str, Any]], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events) + tail)
    return path


@pytest.fixture
def journal_file(tmp_path: Path) -> Path:
    return write(tmp_path / "events.jsonl", story())


# -- reading -----------------------------------------------------------------------------
def test_reader_skips_a_torn_last_line_with_a_note_and_keeps_every_whole_event(
    tmp_path: Path,
) -> None:
    path = write(tmp_path / "e.jsonl", story(), tail='{"ts": 1700000091.0, "event": "attem')

    events, notes = jr.read_events(path)

    assert events == story()
    assert len(notes) == 1
    assert notes[0].startswith(f"line {len(story()) + 1}: skipped: not JSON")
    assert notes[0].endswith("(the last line: a torn write?)")


def test_reader_skips_blank_and_garbled_lines_anywhere_with_a_note_each(tmp_path: Path) -> None:
    first, second = story()[:2]
    path = tmp_path / "e.jsonl"
    path.write_text(
        f'{json.dumps(first)}\n\n  \n[1, 2]\n{{"no": "name"}}\n\x00\x00\n{json.dumps(second)}\n'
    )

    events, notes = jr.read_events(path)

    assert events == [first, second]
    assert notes == [
        "line 4: skipped: a JSON list, not an event object",
        "line 5: skipped: an object without an `event` name",
        "line 6: skipped: not JSON (Expecting value at column 1)",
    ]


def test_reader_of_a_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        jr.read_events(tmp_path / "nope.jsonl")


# -- the rebuilt tree --------------------------------------------------------------------
def test_tree_nests_delegations_by_parent_id_each_with_its_attempts_in_order(
    journal_file: Path,
) -> None:
    run = jr.load(journal_file).run

    assert [d.id for d in run.roots] == ["apollo-1", "athena-2", "themis-4"]
    athena = run.delegations["athena-2"]
    assert [c.id for c in athena.children] == ["hermes-3"]
    assert [a.id for a in run.delegations["apollo-1"].attempts] == ["apollo-1-a1", "apollo-1-a2"]
    assert run.zeus_pid == 4242 and run.routing == "routing.yml" and not run.stopped


def test_tree_keeps_each_attempts_pid_outcome_timing_and_how_it_was_stopped(
    journal_file: Path,
) -> None:
    run = jr.load(journal_file).run
    first, second = run.delegations["apollo-1"].attempts
    hermes = run.delegations["hermes-3"].attempts[0]
    themis = run.delegations["themis-4"].attempts[0]

    assert (first.pid, first.pid_start_time, first.number) == (5001, T0 + 0.05, 1)
    assert (first.outcome, first.timed_out_after_s, first.killed) == ("timeout", 60.0, "kill")
    assert first.then == "retry in 1.25s as apollo-1-a2"
    assert first.death_confirmed and not second.death_confirmed
    assert (second.outcome, second.duration_s, second.started_ts) == ("completed", 2.0, T0 + 61.5)
    assert (hermes.outcome, hermes.stale_after_s, hermes.fenced) == (
        "stale",
        10.0,
        "did not stop within grace_s",
    )
    assert not themis.ended and (themis.progress, themis.note) == (7, "lint")


def test_tree_keeps_each_delegations_final_status(journal_file: Path) -> None:
    run = jr.load(journal_file).run
    settled = {d.id: (d.status, d.duration_s, d.timeout_kind) for d in run.delegations.values()}
    assert settled == {
        "apollo-1": ("completed", 63.4, None),
        "athena-2": ("completed", 16.0, None),
        "hermes-3": ("blocked", 12.0, "stale"),
        "themis-4": (None, None, None),
    }
    assert [d.id for d in run.incomplete()] == ["hermes-3", "themis-4"]
    assert run.delegations["apollo-1"].partial_ok is True


def test_tree_follows_a_fallback_to_the_agents_that_ran_it() -> None:
    journal = jr.Journal()
    for event in [
        dispatched(0, "apollo-1"),
        started(0, "apollo-1", 1),
        ev(
            "attempt.failed",
            1,
            "apollo-1",
            "apollo-1-a1",
            outcome="crash",
            error="SIGSEGV",
            duration_s=1,
        ),
        ev(
            "fallback.dispatched",
            1,
            "apollo-1",
            "apollo-1-a1",
            **{"from": "apollo", "to": "athena"},
        ),
        started(1, "apollo-1", 2, agent="athena"),
    ]:
        journal.apply(event)

    d = journal.run.delegations["apollo-1"]
    assert d.agents == ["apollo", "athena"]
    assert d.attempts[0].then == "fallback apollo -> athena"


def test_tree_nests_a_child_whose_parent_id_names_the_parents_attempt() -> None:
    journal = jr.Journal()
    for event in [
        dispatched(0, "athena-1"),
        started(0, "athena-1", 1),
        dispatched(1, "apollo-2", parent="athena-1-a1"),
    ]:
        journal.apply(event)
    assert [c.id for c in journal.run.delegations["athena-1"].children] == ["apollo-2"]


def test_a_journal_with_two_runs_keeps_their_trees_apart(tmp_path: Path) -> None:
    first = [ev("zeus.started", 0, pid=1), dispatched(0, "apollo-1"), ev("zeus.stopped", 5)]
    second = [ev("zeus.started", 10, pid=2), dispatched(10, "apollo-1", scope="again")]

    journal = jr.load(write(tmp_path / "e.jsonl", first + second))

    assert [r.zeus_pid for r in journal.runs] == [1, 2]
    assert journal.runs[0].stopped and not journal.run.stopped
    assert journal.run.delegations["apollo-1"].scope == "again"
    assert journal.run.first_line == 4


# -- the timeout tracking table and log -------------------------------------------------
def test_tracking_rows_give_agent_timeout_status_partial_ok_and_elapsed(
    journal_file: Path,
) -> None:
    rows = jr.tracking_rows(jr.load(journal_file).run)

    assert [
        (r.agent, r.timeout_s, r.status, r.partial_ok, r.elapsed_s, r.attempts) for r in rows
    ] == [
        ("apollo", 60, "completed", True, 63.4, 2),
        ("athena", 120, "completed", False, 16.0, 1),
        ("hermes", 180, "blocked", False, 12.0, 1),
        ("themis", 120, "in progress", False, pytest.approx(9.0), 1),  # to the last event
    ]


def test_tracking_rows_call_an_open_delegation_unsettled_once_zeus_stopped(
    journal_file: Path,
) -> None:
    run = jr.load(write(journal_file, [*story(), ev("zeus.stopped", 95)])).run
    assert jr.tracking_rows(run)[-1].status == "unsettled"
    assert jr.tracking_rows(run, now=T0 + 100)[-1].elapsed_s == pytest.approx(19.0)


def test_timeout_log_lists_every_deadline_and_stale_with_what_followed(
    journal_file: Path,
) -> None:
    log = jr.load(journal_file).run.timeouts
    assert log == [
        jr.TimeoutEntry(
            T0 + 60.1, "apollo-1", "apollo-1-a1", "apollo", "deadline", 60.0, 60.0, "retry in 1.25s"
        ),
        jr.TimeoutEntry(
            T0 + 75.0, "hermes-3", "hermes-3-a1", "hermes", "stale", 10.0, 119.0, "settled blocked"
        ),
    ]


# -- follow ------------------------------------------------------------------------------
def test_follow_yields_events_as_they_are_appended_and_stops_at_zeus_stopped(
    tmp_path: Path,
) -> None:
    path = tmp_path / "e.jsonl"
    lines = [json.dumps(e) + "\n" for e in story()[:3]] + [json.dumps(ev("zeus.stopped", 9)) + "\n"]
    path.write_text(lines[0])
    # Each time the reader waits, the writer appends the next piece: the third line arrives
    # torn in two, and nothing after zeus.stopped is read.
    pieces = iter([lines[1], lines[2][:10], lines[2][10:], lines[3] + lines[0]])
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        with path.open("a") as f:
            f.write(next(pieces))

    got = list(jr.follow(path, poll_s=0.05, sleep=sleep))

    assert [e["event"] for e in got] == [
        "zeus.started",
        "delegation.dispatched",
        "attempt.started",
        "zeus.stopped",
    ]
    assert waits == [0.05] * 4


def test_follow_notes_a_garbled_line_and_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    path.write_text('{"event": \n' + json.dumps(ev("zeus.stopped", 1)) + "\n")
    notes: list[str] = []

    got = list(jr.follow(path, on_note=notes.append, sleep=lambda s: None))

    assert [e["event"] for e in got] == ["zeus.stopped"]
    assert notes == ["line 1: skipped: not JSON (Expecting value at column 10)"]


def test_follow_stops_on_ctrl_c_while_it_waits(tmp_path: Path) -> None:
    path = write(tmp_path / "e.jsonl", story()[:2])

    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    assert len(list(jr.follow(path, sleep=interrupted))) == 2


def test_follow_stops_when_told_and_notes_a_torn_last_line(tmp_path: Path) -> None:
    path = write(tmp_path / "e.jsonl", story()[:2], tail='{"ev')
    notes: list[str] = []
    idle: list[int] = []

    got = list(
        jr.follow(path, until=lambda: True, on_note=notes.append, on_idle=lambda: idle.append(1))
    )

    assert len(got) == 2 and idle == [1]
    assert notes == ["line 3: skipped: the last line is torn (no newline)"]


# -- sweep: deciding ---------------------------------------------------------------------
def test_sweep_targets_each_started_process_once_and_knows_which_deaths_are_recorded(
    journal_file: Path,
) -> None:
    targets = jr.sweep_targets(jr.load(journal_file))
    assert [(t.pid, t.attempt_ids, t.death_confirmed) for t in targets] == [
        (5001, ("apollo-1-a1",), True),  # killed: the journal saw it die
        (5002, ("apollo-1-a2",), False),  # completed: its process may still be exiting
        (5004, ("themis-4-a1",), False),  # running when the journal ends
    ]


def fake_probe(alive: dict[int, float]) -> Any:
    return lambda pid: alive.get(pid)


def test_sweep_leaves_alone_a_reused_pid_and_reports_what_is_gone(journal_file: Path) -> None:
    # 5002 now belongs to a process started long after; 5004 is gone.
    results = jr.sweep(jr.load(journal_file), probe=fake_probe({5002: T0 + 500}))

    assert [(r.target.pid, r.action) for r in results] == [
        (5001, jr.SweepAction.dead),
        (5002, jr.SweepAction.reused),
        (5004, jr.SweepAction.not_running),
    ]
    assert "left alone" in results[1].detail


def test_sweep_dry_run_names_the_journals_live_processes_and_signals_nothing(
    journal_file: Path,
) -> None:
    results = jr.sweep(
        jr.load(journal_file),
        dry_run=True,
        probe=fake_probe({5002: T0 + 61.45, 5004: T0 + 80.9 + 0.4}),
    )
    assert [r.action for r in results] == [
        jr.SweepAction.dead,
        jr.SweepAction.would_stop,
        jr.SweepAction.would_stop,
    ]


def test_sweep_leaves_alone_a_process_without_a_recorded_start_time(tmp_path: Path) -> None:
    path = write(tmp_path / "e.jsonl", [dispatched(0, "talos-1"), started(0, "talos-1", 1, pid=77)])
    results = jr.sweep(jr.load(path), probe=fake_probe({77: T0}))
    assert [r.action for r in results] == [jr.SweepAction.unverifiable]


def test_sweep_never_signals_a_supervisor_this_process_or_its_parent(tmp_path: Path) -> None:
    events = [
        ev("zeus.started", 0, pid=4242),
        ev("zeus.stopped", 1),
        dispatched(2, "a-1"),
        started(2, "a-1", 1, pid=4242, start=T0),
        dispatched(2, "b-1"),
        started(2, "b-1", 1, pid=os.getpid(), start=T0),
        dispatched(2, "c-1"),
        started(2, "c-1", 1, pid=os.getppid(), start=T0),
    ]
    results = jr.sweep(
        jr.load(write(tmp_path / "e.jsonl", events)),
        probe=fake_probe({4242: T0, os.getpid(): T0, os.getppid(): T0}),
    )
    assert {r.action for r in results} == {jr.SweepAction.protected}


def test_sweep_leaves_everything_to_a_supervisor_that_still_runs(journal_file: Path) -> None:
    # Zeus 4242 is alive and started before its run began: it is the journal's writer.
    results = jr.sweep(
        jr.load(journal_file), probe=fake_probe({4242: T0 - 1, 5002: T0 + 61.45, 5004: T0 + 80.9})
    )
    assert [r.action for r in results] == [
        jr.SweepAction.dead,
        jr.SweepAction.supervisor_running,
        jr.SweepAction.supervisor_running,
    ]


def test_sweep_treats_a_supervisor_pid_started_after_its_run_as_reused(
    journal_file: Path,
) -> None:
    results = jr.sweep(
        jr.load(journal_file), dry_run=True, probe=fake_probe({4242: T0 + 3600, 5004: T0 + 80.9})
    )
    assert results[-1].action is jr.SweepAction.would_stop


# -- sweep: real processes ---------------------------------------------------------------
@pytest.fixture
def orphan() -> Iterator[subprocess.Popen[bytes]]:
    """A `sleep` in its own session, as a child of a crashed supervisor would be."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def journal_naming(tmp_path: Path, pid: int, start: float | None) -> jr.Journal:
    events = [
        ev("zeus.started", 0, pid=999_999_999),
        dispatched(0, "talos-1"),
        started(0, "talos-1", 1, pid=pid, start=start),
    ]
    return jr.load(write(tmp_path / "e.jsonl", events))


@pytest.mark.process
def test_process_start_time_reads_what_psutil_reads_and_none_for_a_dead_pid() -> None:
    ours = jr.process_start_time(os.getpid())
    assert ours is not None and same_start(ours, psutil.Process().create_time())
    done = subprocess.Popen(["true"])
    done.wait(timeout=10)
    assert jr.process_start_time(done.pid) is None


@pytest.mark.process
def test_sweep_stops_a_live_orphan_with_sigterm_to_its_group(
    tmp_path: Path, orphan: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    start = psutil.Process(orphan.pid).create_time()
    sent = spy_on_signals(monkeypatch)

    results = jr.sweep(journal_naming(tmp_path, orphan.pid, start))

    assert ("killpg", orphan.pid, signal.SIGTERM) in sent  # the spy sees what the sweep sends

    assert [(r.action, r.detail) for r in results] == [
        (jr.SweepAction.stopped, "SIGTERM to its process group")
    ]
    assert orphan.wait(timeout=10) == -signal.SIGTERM


def spy_on_signals(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int]]:
    """Every signal sent through `os.kill` / `os.killpg` from now on (still sent)."""
    sent: list[tuple[str, int, int]] = []

    def spy(name: str) -> Callable[[int, int], None]:
        real = getattr(os, name)

        def send(pid: int, sig: int) -> None:
            sent.append((name, pid, sig))
            real(pid, sig)

        return send

    for name in ("kill", "killpg"):
        monkeypatch.setattr(os, name, spy(name))
    return sent


@pytest.mark.process
def test_sweep_never_signals_a_live_pid_whose_start_time_is_not_the_recorded_one(
    tmp_path: Path, orphan: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    start = psutil.Process(orphan.pid).create_time()
    sent = spy_on_signals(monkeypatch)

    results = jr.sweep(journal_naming(tmp_path, orphan.pid, start - 120))

    assert [r.action for r in results] == [jr.SweepAction.reused]
    assert sent == []  # no signal at all, so none on its way to the orphan either
    assert orphan.poll() is None


@pytest.mark.process
def test_sweep_kills_a_child_that_ignores_sigterm_and_what_it_left_in_its_group(
    tmp_path: Path,
) -> None:
    script = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "grandchild = subprocess.Popen(['sleep', '60'])\n"
        "print(grandchild.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        grandchild = int(proc.stdout.readline())
        start = psutil.Process(proc.pid).create_time()

        results = jr.sweep(journal_naming(tmp_path, proc.pid, start), grace_s=0.2)

        assert [(r.action, r.detail) for r in results] == [
            (jr.SweepAction.killed, "SIGKILL to its process group (SIGTERM ignored)")
        ]
        assert proc.wait(timeout=10) == -signal.SIGKILL
        deadline = time.monotonic() + 5
        while jr.process_start_time(grandchild) is not None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert jr.process_start_time(grandchild) is None
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        assert proc.stdout is not None
        proc.stdout.close()


# -- the commands ------------------------------------------------------------------------
def zeus(*argv: str) -> int:
    return main(list(argv))


def test_zeus_tree_prints_plain_text_off_a_terminal_and_exits_0_once_it_read_the_journal(
    journal_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = zeus("tree", str(journal_file))

    out = capsys.readouterr().out.splitlines()
    assert code == 0  # it could do its job; that hermes-3 did not complete is in the tree
    assert (
        out[0] == "zeus pid 4242, routing.yml, 4 delegation(s), no zeus.stopped yet "
        "(running, or it crashed)"
    )
    assert out[1] == (
        '  apollo-1 apollo: completed 63.40s, 2 attempt(s)  "Scan route files for auth"'
    )
    assert out[2] == (
        "    - apollo-1-a1 apollo pid 5001: timeout after 60.10s; deadline hit at "
        "60.00s; ignored the cancel and SIGTERM; killed by SIGKILL after 0.10s; "
        "then retry in 1.25s as apollo-1-a2"
    )
    assert out[6].startswith("    hermes-3 hermes: blocked 12.00s, 1 attempt(s), timeout: stale")
    assert out[-1] == "    - themis-4-a1 themis pid 5004: running, progress 7 (lint)"


def test_zeus_tree_exits_0_when_every_delegation_completed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "e.jsonl", story()[:11])
    assert zeus("tree", str(path)) == 0


def test_zeus_tree_renders_a_rich_tree_on_a_terminal(journal_file: Path) -> None:
    journal = jr.load(journal_file)
    console = Console(file=io.StringIO(), width=200, record=True, force_terminal=True)

    console.print(tree_cmd.render_rich(journal, journal.runs))

    text = console.export_text()
    assert "✔ apollo-1 apollo: completed" in text
    assert "■ hermes-3 hermes: blocked" in text
    assert "… themis-4 themis: in progress 9.00s so far" in text


def test_zeus_tree_follow_on_a_pipe_prints_a_line_per_event_then_the_tree(
    journal_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(journal_file, [*story(), ev("zeus.stopped", 95)])

    code = zeus("tree", "--follow", str(journal_file))

    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[1] == (
        '   0.10s  apollo-1           to apollo: "Scan route files for auth" (timeout 60s)'
    )
    assert not any("attempt.heartbeat" in line for line in out)
    assert out[-1] == "    - themis-4-a1 themis pid 5004: running, progress 7 (lint)"


@pytest.mark.parametrize("command", ["tree", "timeouts", "sweep"])
def test_the_journal_commands_exit_2_with_a_message_for_bad_input(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("hello\nworld\n")

    assert zeus(command, str(tmp_path / "missing.jsonl")) == 2
    assert "No such file or directory" in capsys.readouterr().err
    assert zeus(command, str(tmp_path)) == 2
    assert "is a directory" in capsys.readouterr().err
    assert zeus(command, str(tmp_path / "notes.txt")) == 2
    assert "nor a journal (no Zeus events: 2 line(s) skipped)" in capsys.readouterr().err


def test_zeus_tree_follow_of_a_missing_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert zeus("tree", "-f", str(tmp_path / "missing.jsonl")) == 2
    assert "does not exist" in capsys.readouterr().err


def test_zeus_timeouts_prints_the_tracking_table_and_the_timeout_log(
    journal_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = zeus("timeouts", str(journal_file))

    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[:6] == [
        "Timeout tracking",
        "Agent   Delegation  Timeout  Status       Partial OK?  Elapsed  Attempts",
        "apollo  apollo-1    60s      completed    yes          63.40s   2",
        "athena  athena-2    120s     completed    no           16.00s   1",
        "hermes  hermes-3    180s     blocked      no           12.00s   1",
        "themis  themis-4    120s     in progress  no           9.00s    1",
    ]
    assert out[7] == "Timeout log"
    assert out[9].split()[1:] == [
        "apollo-1",
        "apollo-1-a1",
        "apollo",
        "deadline",
        "60.00s",
        "60.00s",
        "retry",
        "in",
        "1.25s",
    ]
    assert out[10].split()[-2:] == ["settled", "blocked"]


def test_zeus_timeouts_markdown_follows_the_reference_table(
    journal_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    zeus("timeouts", "--markdown", str(journal_file))

    out = capsys.readouterr().out
    assert "| `apollo` | apollo-1 | 60s | ✔ completed | ✅ | 63.40s | 2 |" in out
    assert "| `themis` | themis-4 | 120s | … in progress | ❌ | 9.00s | 1 |" in out
    assert "@" not in out  # a name pasted into an issue mentions nobody
    assert "| `hermes` | stale |" in out.split("## Timeout log", 1)[1]  # the log's agents too


def test_zeus_sweep_with_nothing_recorded_says_so_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "e.jsonl", [dispatched(0, "a-1"), started(0, "a-1", 1)])
    assert zeus("sweep", str(path)) == 0
    assert "names no child processes" in capsys.readouterr().out


@pytest.mark.process
def test_zeus_sweep_dry_run_lists_a_live_orphan_and_leaves_it_running(
    tmp_path: Path, orphan: subprocess.Popen[bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    start = psutil.Process(orphan.pid).create_time()
    events = [dispatched(0, "talos-1"), started(0, "talos-1", 1, pid=orphan.pid, start=start)]
    path = write(tmp_path / "e.jsonl", events)

    assert zeus("sweep", "--dry-run", str(path)) == 0

    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"Child processes named by {path}"
    assert out[2].split()[:4] == [str(orphan.pid), "talos-1-a1", "talos", "would"]
    assert out[-1] == "1 would stop"
    assert orphan.poll() is None


def test_zeus_sweep_dry_run_exits_0_once_it_said_what_it_would_do(
    journal_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = jr.sweep
    alive = fake_probe({4242: T0 - 1, 5002: T0 + 61.45, 5004: T0 + 80.9})  # its Zeus still runs
    monkeypatch.setattr(jr, "sweep", lambda journal, **kw: real(journal, probe=alive, **kw))

    assert zeus("sweep", "--dry-run", str(journal_file)) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 dead, 2 supervisor running"
    assert zeus("sweep", str(journal_file)) == 1  # a sweep that acts: they are left running


def test_the_tracking_table_gives_each_agent_of_a_fallback_chain_its_own_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "e.jsonl", [
        ev("zeus.started", 0, pid=4242),
        dispatched(0, "talos-1", timeout=1.5),
        started(0, "talos-1", 1, deadline=1.486011, agent="talos"),
        ev("attempt.failed", 1.5, "talos-1", "talos-1-a1", outcome="timeout", duration_s=1.5),
        ev("fallback.dispatched", 1.5, "talos-1", "talos-1-a1",
           **{"from": "talos", "to": "hermes"}),
        started(1.5, "talos-1", 2, deadline=179.999739, agent="hermes"),
        ev("delegation.settled", 3.0, "talos-1", status="completed", duration_s=3.0, attempts=2),
    ])

    assert jr.load(path).run.delegations["talos-1"].agent_timeouts == [1.5, 180.0]
    assert zeus("timeouts", str(path)) == 0
    row = capsys.readouterr().out.splitlines()[2]
    assert [cell.strip() for cell in row.split("  ") if cell.strip()][:3] == [
        "talos -> hermes", "talos-1", "1.5s -> 180s"
    ]


@pytest.mark.parametrize("command", ["tree", "timeouts"])
def test_the_journal_commands_on_an_80_column_terminal_fold_no_line(
    journal_file: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    lines = terminal(monkeypatch, width=80)

    assert zeus(command, str(journal_file)) == 0

    shown = lines()
    assert len(shown) > 6
    assert [line for line in shown if len(line) > 80] == []
