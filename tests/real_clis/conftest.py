"""The real agent CLIs run only in a network namespace with only loopback.

A plain `python -m pytest` collects these tests as stand-ins: the first one run starts one
child `python -m pytest` over all of them under `unshare --net` (netns.py), and each
stand-in then reports its test's result there (passed, failed with the child's failure
text, or skipped with its reason). Inside the namespace (ZEUS_OFFLINE_NETNS=1) the tests
run as they are, after /proc/net/dev has shown that loopback is the only device.

Where the CLIs, `unshare` or root are missing, the tests are skipped with the command that
installs them; ZEUS_REQUIRE_REAL_CLIS=1 (CI) makes those skips failures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.real_clis import clis, netns

HERE = Path(__file__).resolve().parent
REPORT = "ZEUS_NETNS_REPORT"  # where the child writes each test's outcome
PER_TEST = 90  # seconds the child may take per test, as a bound on the whole run
RESULTS = pytest.StashKey[dict[str, dict[str, str]]]()


def need(reason: str) -> None:
    """Skip with `reason`, or fail where ZEUS_REQUIRE_REAL_CLIS=1."""
    if os.environ.get(netns.REQUIRE) == "1":
        pytest.fail(f"{netns.REQUIRE}=1 and {reason}", pytrace=False)
    pytest.skip(reason)


# Outside the namespace: stand-ins.
class InnerFailure(Exception):
    """A test failed in the namespace; its text is the child's report."""


class InNamespace(pytest.Item):
    """A stand-in for one test of this folder, run in the namespace's pytest."""

    def runtest(self) -> None:
        if reason := clis.why_not():
            need(reason)
        result = _results(self.session).get(self.nodeid)
        if result is None:
            raise InnerFailure(self.session.stash[RESULTS].get("", {}).get("text", "no report"))
        if result["outcome"] == "skipped":
            pytest.skip(result["text"])
        if result["outcome"] == "failed":
            raise InnerFailure(result["text"])

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None):
        if isinstance(excinfo.value, InnerFailure):
            return f"in the network namespace:\n{excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, self.name


def _mine(item: pytest.Item) -> bool:
    return HERE in Path(item.path).parents


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if netns.in_namespace():
        return
    mine = [n for n, item in enumerate(items) if _mine(item) and isinstance(item, pytest.Function)]
    for n in mine:
        item = items[n]
        proxy = InNamespace.from_parent(item.parent, name=item.name)
        proxy.own_markers.extend(item.own_markers)
        proxy.keywords.update(item.keywords)
        proxy.add_marker(pytest.mark.timeout(PER_TEST * len(mine) + 60))
        items[n] = proxy


def _results(session: pytest.Session) -> dict[str, dict[str, str]]:
    """Run every stand-in's test once in the namespace; each one's outcome by node id."""
    if RESULTS not in session.stash:
        ids = [item.nodeid for item in session.items if isinstance(item, InNamespace)]
        session.stash[RESULTS] = _run_inner(session.config.rootpath, ids)
    return session.stash[RESULTS]


def _run_inner(root: Path, ids: list[str]) -> dict[str, dict[str, str]]:
    with tempfile.TemporaryDirectory(prefix="zeus-netns-") as tmp:
        report = Path(tmp) / "report.json"
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *ids]
        try:
            done = subprocess.run(netns.command(argv), cwd=root, stdin=subprocess.DEVNULL,
                                  env=netns.environment() | {REPORT: str(report)},
                                  capture_output=True, text=True, timeout=PER_TEST * len(ids))
            output = done.stdout + done.stderr
        except subprocess.TimeoutExpired as e:
            output = f"timed out after {e.timeout} s\n{e.stdout or ''}{e.stderr or ''}"
        results = json.loads(report.read_text()) if report.exists() else {}
    results[""] = {"outcome": "failed", "text": f"no report from the namespace:\n{output[-6000:]}"}
    return results


# Inside the namespace: the tests themselves, and their outcomes written down.
_outcomes: dict[str, dict[str, str]] = {}


@pytest.fixture(scope="session", autouse=True)
def offline() -> Iterator[None]:
    """Refuse to run a real CLI anywhere but in the loopback-only namespace."""
    if not netns.in_namespace():
        yield  # only the stand-ins run here
        return
    netns.check_isolated()
    if reason := clis.why_not():
        need(reason)
    yield


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not os.environ.get(REPORT) or not netns.in_namespace():
        return
    seen = _outcomes.setdefault(report.nodeid, {"outcome": "passed", "text": ""})
    if report.failed and seen["outcome"] != "failed":
        text = report.longreprtext
        where = "" if report.when == "call" else f"(in {report.when})\n"
        seen.update(outcome="failed", text=where + text)
    elif report.skipped and seen["outcome"] == "passed":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        seen.update(outcome="skipped", text=reason.removeprefix("Skipped: "))


def pytest_sessionfinish(session: pytest.Session) -> None:
    if (path := os.environ.get(REPORT)) and netns.in_namespace():
        Path(path).write_text(json.dumps(_outcomes), encoding="utf-8")
