"""The example agents, called directly with a real `Context` whose `send` collects messages."""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import actors
from actors import AttemptOutcome, Brief, Cancelled, Context, Status, Summary, TransientError
from actors.clock import FakeClock
from actors.protocol import Charge, DelegateRequest, Heartbeat, Partial, ToolCall
from actors.run import run_work
from supervisor.examples import explorer, faulty, hotfix, implementer, orchestrator, reviewer
from tests._support import Outbox
from tests._zygote import run

ROOT = Path(__file__).resolve().parent.parent


def context(
    brief: Brief,
    outbox: Outbox | None = None,
    *,
    attempt: int = 1,
    session: dict[str, Any] | None = None,
    previous: list[Any] | None = None,
) -> Context:
    outbox = outbox if outbox is not None else Outbox()
    return Context(
        brief=brief,
        agent=brief.agent,
        delegation_id=f"{brief.agent}-1",
        attempt=attempt,
        attempt_id=f"{brief.agent}-1-a{attempt}",
        deadline=1e9,
        clock=FakeClock(),
        send=outbox,
        cancel_event=outbox.cancel,
        heartbeat_interval_s=0.0,
        session=session,
        previous_partials=previous,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A small source tree: two hits for "auth" in two files, one file without."""
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "routes.py").write_text("import os\n\ndef login():\n    check_auth()\n")
    (tmp_path / "api" / "users.py").write_text("def users():\n    return []\n")
    (tmp_path / "core.py").write_text("AUTH_HEADER = 'x'\n")
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\0\0auth")
    return tmp_path


# -- explorer ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("scope", "pattern"),
    [
        ("Scan route files for auth patterns", "route|auth"),
        ('Find "TODO" and "FIXME" in the code', "TODO|FIXME"),
        ("Look for 'session_max' where it is used", "session_max"),
        ("Don't touch: search for retry_count", "Don|touch|retry_count"),
    ],
)
def test_explorer_derives_its_pattern_from_quoted_words_else_keywords(
    scope: str, pattern: str
) -> None:
    assert explorer.pattern_for(scope) == pattern


def test_explorer_refuses_a_scope_that_names_nothing_to_search_for() -> None:
    with pytest.raises(ValueError, match="quote it"):
        explorer.pattern_for("scan all the files")


def test_explorer_reports_each_hit_as_a_partial_path_line_text(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree)
    brief = Brief(agent="apollo", scope="Scan for auth", inputs={"root": str(tree)})
    out = Outbox()

    report = explorer.explore(brief, context(brief, out))

    hits = ["core.py:1: AUTH_HEADER = 'x'", "api/routes.py:4: check_auth()"]  # walk order
    assert [p.item for p in out.of(Partial)] == hits
    assert report.findings == hits
    assert report.output["files_total"] == 4
    assert report.output["files_with_hits"] == 2
    assert any("binary" in r for r in report.risks)  # logo.png: skipped, not matched


def test_explorer_makes_only_read_only_tool_calls_and_charges_what_it_read(tree: Path) -> None:
    brief = Brief(agent="apollo", scope="auth", inputs=str(tree))
    out = Outbox()

    explorer.explore(brief, context(brief, out))

    calls = out.of(ToolCall)
    assert len(calls) == 4 and all(c.read_only for c in calls)
    usage = sum((c.usage for c in out.of(Charge)), actors.Usage())
    assert usage.calls >= 1 and 0 < usage.input_tokens < 1000 and 0 < usage.cost < 0.01


def test_explorer_stops_between_files_once_cancelled(tree: Path) -> None:
    brief = Brief(agent="apollo", scope="auth", inputs={"root": str(tree)})
    out = Outbox()
    out.after(1, ToolCall, lambda _: out.cancel.set())  # cancelled while reading file 1

    with pytest.raises(Cancelled):
        explorer.explore(brief, context(brief, out))

    assert len(out.of(ToolCall)) == 1


def test_explorer_in_slow_mode_is_cut_short_by_cancellation_not_by_its_delay(
    tree: Path,
) -> None:
    brief = Brief(agent="apollo", scope="auth", inputs={"root": str(tree), "delay_s": 60})
    out = Outbox()
    out.cancel.set()  # a 60 s linger per file would time the test out if it were not cut

    with pytest.raises(Cancelled):
        explorer.explore(brief, context(brief, out))

    assert out.of(ToolCall) == []


def test_explorer_does_not_report_again_the_hits_an_earlier_attempt_reported(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree)
    brief = Brief(agent="apollo", scope="auth", inputs=str(tree))
    out = Outbox()

    report = explorer.explore(
        brief, context(brief, out, attempt=2, previous=["core.py:1: AUTH_HEADER = 'x'"])
    )

    assert [p.item for p in out.of(Partial)] == ["api/routes.py:4: check_auth()"]
    assert len(report.findings) == 2


def test_explorer_with_no_inputs_searches_the_current_directory_and_says_so(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree / "api")
    brief = Brief(agent="apollo", scope="Find the word auth")
    out = Outbox()

    report = explorer.explore(brief, context(brief, out))

    assert report.findings == ["routes.py:4: check_auth()"]  # not core.py, one level up
    assert report.output["roots"] == ["."]
    assert report.validation == [
        'searched 2 of 2 file(s) in the current directory for the word "auth"; quote a phrase '
        '("like this") to search for it whole'
    ]
    assert out.of(Heartbeat)[0].note.startswith("2 files in the current directory to search for")


@pytest.mark.parametrize(
    ("scope", "pattern", "read_as"),
    [
        ("find the word supervisor", "supervisor", 'the word "supervisor"'),
        ("Scan route files for auth", "route|auth", 'the words "route", "auth" (any of them)'),
        ('Find "def explore"', "def\\ explore", 'the phrase "def explore"'),
        ('Find "TODO" or "FIXME"', "TODO|FIXME", 'the phrases "TODO", "FIXME" (any of them)'),
    ],
)
def test_explorer_reads_the_scope_as_words_or_quoted_phrases_and_says_which(
    scope: str, pattern: str, read_as: str
) -> None:
    found, how = explorer.read_scope(scope)

    assert found == pattern
    assert how.startswith(read_as)


def test_explorer_stopped_at_max_hits_reports_itself_incomplete_saying_where(
    tree: Path,
) -> None:
    brief = Brief(
        agent="apollo", scope="x", inputs={"root": str(tree), "pattern": ".", "max_hits": 3}
    )

    report = explorer.explore(brief, context(brief))

    assert len(report.findings) == 3
    assert report.incomplete == (
        "stopped at 3 hits, after 3 of 4 files; narrow the search or raise inputs.max_hits"
    )
    assert report.incomplete in report.risks
    uncapped = explorer.explore(Brief(agent="apollo", scope="auth", inputs=str(tree)),
                                context(brief))
    assert uncapped.incomplete is None


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"root": "/no/such/dir"}, "no such file"),
        ({"pattern": "("}, "not a valid regex"),
        (42, "inputs must be"),
    ],
)
def test_explorer_refuses_bad_inputs_with_a_clear_error(inputs: Any, message: str) -> None:
    brief = Brief(agent="apollo", scope="auth", inputs=inputs)
    with pytest.raises(ValueError, match=message):
        explorer.explore(brief, context(brief))


# -- reviewer ----------------------------------------------------------------------------
BAD = """\
import os
import json as j
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from pathlib import Path

def f(p: "Path") -> None:
    try:
        pass
    except:
        pass
    assert (p, "never false")
    cast("TYPE_CHECKING", 1)
"""


def test_builtin_linter_finds_unused_imports_bare_excepts_and_always_true_asserts() -> None:
    problems = reviewer.lint_source(BAD, "bad.py")

    assert [str(p) for p in problems] == [
        "bad.py:1:1: F401 `os` imported but unused",
        "bad.py:2:1: F401 `json` imported but unused",
        "bad.py:11:5: E722 do not use bare `except:`; catch `Exception` or narrower",
        "bad.py:13:5: F631 assertion is always true; remove the parentheses",
    ]


def test_builtin_linter_reports_the_compilers_warnings() -> None:
    source = 'import re\nre.compile("\\d")\nif re is 1:\n    pass\n'
    assert [p.code for p in reviewer.lint_source(source, "w.py")] == ["W605", "F632"]


def test_builtin_linter_reports_a_syntax_error_and_respects_noqa() -> None:
    assert [p.code for p in reviewer.lint_source("def f(:\n", "x.py")] == ["E999"]
    assert [p.code for p in reviewer.lint_source("return 1\n", "x.py")] == ["E999"]
    assert (
        reviewer.lint_source("import os  # noqa: F401\n__all__ = ['sys']\nimport sys\n", "x.py")
        == []
    )


def test_reviewer_rejects_files_with_problems_and_says_which(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "good.py").write_text("def g() -> int:\n    return 1\n")
    brief = Brief(
        agent="themis", scope="review", inputs={"root": str(tmp_path), "linter": "builtin"}
    )
    out = Outbox()

    report = reviewer.review(brief, context(brief, out))

    assert report.output["verdict"] == "reject"
    assert report.output["by_code"] == {"E722": 1, "F401": 2, "F631": 1}
    assert report.output["files"] == 2
    assert all(c.read_only for c in out.of(ToolCall))
    assert sum(c.usage.calls for c in out.of(Charge)) == 1


def test_reviewer_approves_clean_files(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text("def g() -> int:\n    return 1\n")
    brief = Brief(agent="themis", scope="review", inputs=[str(tmp_path / "good.py")])

    report = reviewer.review(brief, context(brief))

    assert report.output["verdict"] == "approve"
    assert report.findings == []


def test_reviewer_with_the_linter_it_finds_agrees_that_an_unused_import_is_a_problem(
    tmp_path: Path,
) -> None:
    (tmp_path / "bad.py").write_text("import os\n")
    brief = Brief(agent="themis", scope="review", inputs={"root": str(tmp_path)})

    report = reviewer.review(brief, context(brief))

    assert report.output["linter"] == reviewer.choose_linter()
    assert report.output["verdict"] == "reject"
    assert "bad.py:1:" in report.findings[0] and "os" in report.findings[0]


def test_reviewer_refuses_a_tree_without_python_files_and_an_unknown_linter(
    tmp_path: Path,
) -> None:
    brief = Brief(agent="themis", scope="review", inputs=str(tmp_path))
    with pytest.raises(ValueError, match="no Python files"):
        reviewer.review(brief, context(brief))
    with pytest.raises(ValueError, match="unknown linter"):
        reviewer.choose_linter("pylint")


def test_reviewer_stops_between_files_once_cancelled(tmp_path: Path) -> None:
    for name in "abc":
        (tmp_path / f"{name}.py").write_text("x = 1\n")
    brief = Brief(
        agent="themis", scope="review", inputs={"root": str(tmp_path), "linter": "builtin"}
    )
    out = Outbox()
    out.after(2, ToolCall, lambda _: out.cancel.set())

    with pytest.raises(Cancelled):
        reviewer.review(brief, context(brief, out))

    assert len(out.of(ToolCall)) == 2


# -- hotfix (a command agent) ----------------------------------------------------------
def test_hotfix_strips_trailing_whitespace_and_keeps_one_final_newline() -> None:
    assert hotfix.fix_text("a  \nb\t\n\n\n") == "a\nb\n"
    assert hotfix.fix_text("a") == "a\n"
    assert hotfix.fix_text("") == ""


def test_hotfix_dry_run_prints_progress_a_diff_and_a_result_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("app.py").write_text("x = 1   \n")
    Path("ok.py").write_text("y = 2\n")

    code = hotfix.main(["Strip trailing whitespace in app.py and ok.py"])

    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert "hotfix: app.py: needs a fix" in out and "hotfix: ok.py: clean" in out
    assert "-x = 1   " in out and "+x = 1" in out
    assert out[-1] == "result: 1 of 2 file(s) need a fix (dry run; pass --apply to write)"
    assert Path("app.py").read_text() == "x = 1   \n"


def test_hotfix_apply_writes_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("app.py").write_text("x = 1   \n")

    assert hotfix.main(["fix app.py", "--apply"]) == 0

    assert Path("app.py").read_text() == "x = 1\n"
    assert capsys.readouterr().out.splitlines()[-1] == "result: fixed 1 of 1 file(s)"


@pytest.mark.process
@pytest.mark.parametrize(
    ("scope", "message"),
    [("   ", "empty scope"), ("fix nothere/app.py", "nothere/app.py: no such file")],
)
def test_hotfix_as_a_command_exits_2_with_a_message_on_stderr_for_bad_input(
    tmp_path: Path, scope: str, message: str
) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = run("supervisor.examples.hotfix", [scope], cwd=tmp_path, env=env,
               timeout=30)  # forked: tests/_zygote.py
    assert done.returncode == 2
    assert done.stdout == ""
    assert message in done.stderr


@pytest.mark.process
def test_hotfix_as_a_command_prints_one_line_per_file_and_the_result_on_stdout(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.py").write_text("a = 1\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = run("supervisor.examples.hotfix", ["check a.py"], cwd=tmp_path, env=env,
               timeout=30)  # forked: tests/_zygote.py
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "hotfix: check a.py",
        "hotfix: checking 1 file(s)",
        "hotfix: a.py: clean",
        "result: clean: 1 file(s) checked, nothing to fix",
    ]


@pytest.mark.process
def test_hotfix_as_a_command_stops_cleanly_on_sigint_the_cooperative_cancel(
    tmp_path: Path,
) -> None:
    for name in "abc":
        (tmp_path / f"{name}.py").write_text("x = 1\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(
        [sys.executable, "-m", "supervisor.examples.hotfix", "check .", "--delay", "30"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=env,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "hotfix: check .\n"
        assert proc.stdout.readline() == "hotfix: checking 3 file(s)\n"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130
    assert "hotfix: interrupted; 0 file(s) needing a fix found so far" in err


# -- orchestrator ------------------------------------------------------------------------
class DelegatingOutbox(Outbox):
    """Answers each `ctx.delegate()` by running the real explorer in place.

    `statuses` maps a word of a sub-brief's scope to a forced status; its hits then
    come back as partial results only.
    """

    def __init__(self, statuses: dict[str, Status] | None = None) -> None:
        super().__init__()
        self.briefs: list[Brief] = []
        self.statuses = statuses or {}

    def __call__(self, message: object) -> None:
        super().__call__(message)
        if isinstance(message, DelegateRequest):
            brief = message.brief
            self.briefs.append(brief)
            report = explorer.explore(brief, context(brief))
            forced = next((s for w, s in self.statuses.items() if w in brief.scope), None)
            message.reply(
                Summary(
                    id=f"{brief.agent}-{len(self.briefs) + 1}",
                    agent=brief.agent,
                    scope=brief.scope,
                    status=forced or Status.completed,
                    findings=[] if forced else report.findings,
                    partial_results=list(report.findings),
                    error="timed out after 60s" if forced else None,
                )
            )


def test_orchestrator_delegates_one_explorer_per_directory_and_merges_their_findings(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree)
    brief = Brief(agent="athena", scope="Scan for auth", inputs={"root": str(tree)})
    out = DelegatingOutbox()

    report = orchestrator.orchestrate(brief, context(brief, out))

    assert [b.inputs["paths"] for b in out.briefs] == [
        [str(tree / "core.py"), str(tree / "logo.png")],
        [str(tree / "api")],
    ]
    assert {b.agent for b in out.briefs} == {"apollo"}
    assert all(b.inputs["pattern"] == "auth" for b in out.briefs)
    assert report.findings == ["core.py:1: AUTH_HEADER = 'x'", "api/routes.py:4: check_auth()"]
    assert report.output["completed"] == 2


def test_orchestrator_keeps_the_partial_results_of_a_part_that_did_not_complete(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree)
    brief = Brief(agent="athena", scope="Scan for auth", inputs={"root": str(tree)})
    out = DelegatingOutbox({"api": Status.timed_out})

    report = orchestrator.orchestrate(brief, context(brief, out))

    assert "api/routes.py:4: check_auth()" in report.findings
    assert report.output["completed"] == 1
    assert report.risks == [
        f"{tree / 'api'}: apollo-3 timed_out: timed out after 60s (1 partial hit(s) kept)"
    ]


def test_orchestrator_raises_the_refusal_when_no_part_could_be_delegated(tree: Path) -> None:
    brief = Brief(agent="athena", scope="auth", inputs=str(tree))
    out = Outbox()

    def refuse(message: object) -> None:
        assert isinstance(message, DelegateRequest)
        message.reply(actors.DelegationRefused("max_depth 1: delegations cannot delegate"))

    out._hooks.extend([(DelegateRequest, 1, refuse), (DelegateRequest, 2, refuse)])

    with pytest.raises(actors.DelegationRefused, match="max_depth"):
        orchestrator.orchestrate(brief, context(brief, out))


def test_orchestrator_split_merges_the_parts_beyond_max_parts_into_the_last(
    tmp_path: Path,
) -> None:
    for name in "abcd":
        (tmp_path / name).mkdir()
    parts = orchestrator.split([tmp_path], max_parts=2)
    assert parts == [[tmp_path / "a"], [tmp_path / "b", tmp_path / "c", tmp_path / "d"]]


# -- implementer -------------------------------------------------------------------------
def test_implementer_writes_the_change_and_records_a_tool_call_with_side_effects(
    tmp_path: Path,
) -> None:
    brief = Brief(agent="hermes", scope="add refresh token rotation", inputs=str(tmp_path))
    out = Outbox()

    report = implementer.implement(brief, context(brief, out))

    assert (tmp_path / "CHANGES.md").read_text() == "- add refresh token rotation\n"
    assert [(c.name, c.read_only) for c in out.of(ToolCall)] == [("write_file", False)]
    assert report.changes == [f"{tmp_path / 'CHANGES.md'} — created (+1 line(s))"]
    assert out.of(Charge)[0].usage.calls == 1


def test_implementer_retried_does_not_make_the_change_twice(tmp_path: Path) -> None:
    brief = Brief(agent="hermes", scope="add a line", inputs={"workdir": str(tmp_path)})
    implementer.implement(brief, context(brief))
    out = Outbox()

    report = implementer.implement(brief, context(brief, out, attempt=2))

    assert (tmp_path / "CHANGES.md").read_text() == "- add a line\n"
    assert report.changes == [] and out.of(ToolCall) == []


def test_implementer_without_a_workdir_uses_a_temp_dir_and_keeps_it_for_the_session() -> None:
    session: dict[str, Any] = {}
    first = Brief(agent="hermes", scope="first change")
    report = implementer.implement(first, context(first, session=session))
    workdir = Path(report.output["workdir"])
    try:
        second = Brief(agent="hermes", scope="second change")
        implementer.implement(second, context(second, session=session))
        assert (workdir / "CHANGES.md").read_text() == "- first change\n- second change\n"
        assert session["files"] == [str(workdir / "CHANGES.md")]
    finally:
        (workdir / "CHANGES.md").unlink()
        workdir.rmdir()


def test_implementer_cancelled_before_writing_writes_nothing(tmp_path: Path) -> None:
    brief = Brief(agent="hermes", scope="x", inputs={"workdir": str(tmp_path), "delay_s": 60})
    out = Outbox()
    out.cancel.set()

    with pytest.raises(Cancelled):
        implementer.implement(brief, context(brief, out))

    assert list(tmp_path.iterdir()) == []


def test_implementer_refuses_a_file_outside_its_workdir(tmp_path: Path) -> None:
    brief = Brief(agent="hermes", scope="x", inputs={"workdir": str(tmp_path), "file": "../x"})
    with pytest.raises(ValueError, match="inside the workdir"):
        implementer.implement(brief, context(brief))


# -- faulty agents -----------------------------------------------------------------------
def test_flaky_fails_transiently_on_its_first_attempt_and_succeeds_on_the_next() -> None:
    brief = Brief(agent="flaky", scope="x")

    first = run_work(faulty.flaky, brief, context(brief, attempt=1))
    second = run_work(faulty.flaky, brief, context(brief, attempt=2))

    assert first.outcome is AttemptOutcome.transient
    assert second.outcome is AttemptOutcome.completed
    with pytest.raises(TransientError):
        faulty.flaky(
            Brief(agent="f", scope="x", inputs={"fail_times": 2}), context(brief, attempt=2)
        )


def test_hang_ignores_cancellation_and_returns_only_when_its_sleep_ends() -> None:
    brief = Brief(agent="hang", scope="x", inputs={"seconds": 0.01})
    out = Outbox()
    # Cancelled once it has reported (every Context call is a cancellation point, so a
    # cancel before its reports would stop it there): its sleep does not listen.
    out.after(1, Partial, lambda _: out.cancel.set())

    report = faulty.hang(brief, context(brief, out))

    assert report.output == {"slept_s": 0.01}
    assert [p.item for p in out.of(Partial)] == ["started"]


def test_spendthrift_charges_until_a_budget_stop_cancels_it() -> None:
    brief = Brief(agent="spend", scope="x", inputs={"interval_s": 0})
    out = Outbox()
    out.after(5, Charge, lambda _: out.cancel.set())  # Zeus cancels on the charge over the cap

    with pytest.raises(Cancelled):
        faulty.spendthrift(brief, context(brief, out))

    assert len(out.of(Charge)) == 5
    assert out.of(Charge)[0].usage.input_tokens == 4000


def test_spendthrift_without_a_budget_still_ends() -> None:
    brief = Brief(agent="spend", scope="x", inputs={"interval_s": 0, "max_charges": 20})
    out = Outbox()
    report = faulty.spendthrift(brief, context(brief, out))
    assert len(out.of(Charge)) == 20 and len(out.of(Heartbeat)) == 2
    assert report.risks == ["no budget stopped 20 charges"]


def test_crash_refuses_to_run_in_the_hosts_own_process() -> None:
    brief = Brief(agent="crash", scope="x")
    with pytest.raises(RuntimeError, match="only in a process child"):
        faulty.crash(brief, context(brief))


def _crash_in_child(how: str) -> None:
    faulthandler.disable()  # no traceback dump on the expected segfault
    brief = Brief(agent="crash", scope="x", inputs={"how": how})
    faulty.crash(brief, context(brief))


@pytest.mark.process
@pytest.mark.parametrize(("how", "exitcode"), [("exit", 13), ("segfault", -11), ("kill", -9)])
def test_crash_in_a_process_child_dies_without_a_result(how: str, exitcode: int) -> None:
    import multiprocess

    child = multiprocess.get_context("fork").Process(target=_crash_in_child, args=(how,))
    child.start()
    child.join(timeout=20)
    assert child.exitcode == exitcode
