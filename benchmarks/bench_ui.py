"""`zeus ui`, side by side: `/api/tree` over 10,000 delegations against `zeus tree` reading
the same file; the page with 1,000 attempts on its timeline in headless Chromium against
the page over a small run; a live event's way into the browser against `zeus tree
--follow`'s tail; and dispatch overhead with a page following the journal against none.

`python -m benchmarks.bench_ui` (needs the ui extra; the browser rows need Debian's
chromium and chromium-driver, and are left out without them).
"""

from __future__ import annotations

import contextlib
import io
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from actors import Brief, Context
from benchmarks._table import Row, report
from supervisor import Routing, Zeus
from supervisor import journal as jr
from supervisor.cli.main import main as zeus_main
from supervisor.ui import View, open_source, payloads
from tests._ui import WAIT_S, append, chromium, chromium_missing, serving

_WORKER = {"entrypoint": "supervisor.examples.faulty:flaky", "timeout_s": 30,
           "budget": {"max_calls": 50}}
# what `delegation.dispatched` carries: the effective policy
_POLICY = Routing.from_dict({"version": 1, "agents": {"worker": _WORKER}}).agent(
    "worker").model_dump(mode="json")


def synthetic_journal(path: Path, delegations: int, *, retried_every: int = 0,
                      nested_every: int = 10, stopped: bool = True) -> int:
    """A journal shaped like Zeus's: delegations in groups of `nested_every` (an
    orchestrator and its children), every `retried_every`-th one timing out twice and
    then falling back. Returns how many attempts it holds."""
    t = 1.8e9
    lines: list[str] = []

    def event(name: str, d: str | None = None, a: str | None = None, parent: str | None = None,
              agent: str | None = None, **fields: Any) -> None:
        nonlocal t
        t += 0.001
        lines.append(json.dumps({"event": name, "ts": t, "delegation_id": d, "attempt_id": a,
                                 "parent_id": parent, "agent": agent, **fields}))

    event("zeus.started", pid=1, routing="routing.yml")
    attempts = 0
    parent: str | None = None
    for n in range(delegations):
        d = f"worker-{n + 1}"
        parent = None if n % nested_every == 0 else parent
        event("delegation.dispatched", d, None, parent, "worker", scope=f"task {n}", depth=2
              if parent else 1, timeout_s=30.0, policy=_POLICY)
        tries = 3 if retried_every and n % retried_every == 0 else 1
        for k in range(1, tries + 1):
            a = f"{d}-a{k}"
            attempts += 1
            agent = "worker" if k < 3 else "helper"
            event("attempt.started", d, a, parent, agent, attempt=k, pid=None, deadline_s=30.0)
            event("attempt.heartbeat", d, a, parent, agent, progress=1, note="working")
            event("attempt.partial", d, a, parent, agent, item=f"found {n}", progress=2)
            if k < tries:
                event("attempt.timed_out", d, a, parent, agent, elapsed_s=30.0)
                event("attempt.killed", d, a, parent, agent, how="terminate", latency_s=0.02)
                event("attempt.failed", d, a, parent, agent, outcome="timeout", duration_s=30.0,
                      error="deadline of 30 s passed", tool_calls=3, last_tool="read_file")
                if k == 1:
                    event("retry.scheduled", d, a, parent, agent, backoff_s=0.5,
                          next_attempt_id=f"{d}-a2")
                else:
                    event("fallback.dispatched", d, f"{d}-a3", parent, agent, **{
                        "from": "worker", "to": "helper"})
            else:
                event("attempt.completed", d, a, parent, agent, duration_s=0.5)
        event("delegation.settled", d, None, parent, "worker", status="completed",
              duration_s=0.5, attempts=tries, timeout_kind=None, error=None,
              usage={"calls": 3, "input_tokens": 900, "output_tokens": 90, "cost": 0.001})
        if n % nested_every == 0:
            parent = d
    if stopped:
        event("zeus.stopped")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    path.chmod(0o600)
    return attempts


def best(fn: Any, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


# -- /api/tree against `zeus tree` ----------------------------------------------------------
def bench_tree(rows: list[Row], folder: Path, n: int = 10_000) -> None:
    path = folder / "big.jsonl"
    synthetic_journal(path, n, retried_every=5)

    def zeus_tree() -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            zeus_main(["tree", str(path)])

    tree_s = best(zeus_tree)
    t0 = time.perf_counter()
    with serving(path) as ui, httpx.Client(timeout=WAIT_S) as client:
        t1 = time.perf_counter()
        first = client.get(ui.base + "/api/tree")
        first_s = time.perf_counter() - t1
        start_s = time.perf_counter() - t0
        again_s = best(lambda: client.get(ui.base + "/api/tree").raise_for_status())
    body = first.json()
    assert len(body["delegations"]) == n, len(body["delegations"])
    size = f"{len(first.content) / 1e6:.1f} MB"
    rows.append(Row(f"/api/tree, {n:,} delegations ({size})", first_s, tree_s, "s",
                    "zeus tree FILE, the same file (read, rebuild, print)", "value<=0.5"))
    rows.append(Row("  the same asked again (kept until the journal grows)", again_s, tree_s,
                    "s", "zeus tree FILE"))
    rows.append(Row("  zeus ui started to that first answer", start_s, tree_s, "s",
                    "zeus tree FILE", note="interpreter, read and rebuild included"))
    # one more event: only the delegations it touched are made again
    view = View(open_source(path))
    view.refresh()
    trees = payloads.TreeCache()
    trees.body(view, view.journal.run)
    beat = {"event": "attempt.heartbeat", "ts": time.time(), "delegation_id": "worker-7",
            "attempt_id": "worker-7-a1", "parent_id": "worker-1", "agent": "worker"}
    append(path, [json.dumps(beat) + "\n"])
    t0 = time.perf_counter()
    view.refresh()
    body = trees.body(view, view.journal.run)
    event_s = time.perf_counter() - t0
    view.source.close()
    assert json.loads(body)["seq"] == view.seq
    rows.append(Row("  the same after one more event", event_s, tree_s, "s",
                    "zeus tree FILE", "value<=0.5", note="only what changed is made again"))


# -- the page in headless Chromium ----------------------------------------------------------
def _rendered_s(path: Path, profile: Path) -> tuple[float, float, int]:
    """Navigation to the page drawn (s), the drawing alone (s), the bars drawn."""
    with serving(path) as ui, chromium(profile) as driver:
        driver.get(ui.url)
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(driver, WAIT_S, poll_frequency=0.01).until(
            lambda d: d.execute_script("return window.zeusUi.firstRenderAt != null"))
        first, draw, bars = driver.execute_script(
            "return [window.zeusUi.firstRenderAt, window.zeusUi.firstRenderMs,"
            " document.querySelectorAll('#timeline-body .bar').length]")
    return first / 1000, draw / 1000, bars


def bench_page(rows: list[Row], folder: Path) -> None:
    big, small = folder / "timeline.jsonl", folder / "small.jsonl"
    attempts = synthetic_journal(big, 500, retried_every=2)
    synthetic_journal(small, 13, retried_every=4)
    _rendered_s(small, folder / "warm")  # the first start of Chromium warms its caches
    base = min(_rendered_s(small, folder / f"s{k}")[0] for k in range(2))
    runs = [_rendered_s(big, folder / f"b{k}") for k in range(2)]
    page_s, draw_s, _ = min(runs)
    assert runs[0][2] == attempts, (runs[0][2], attempts)
    rows.append(Row(f"page with {attempts:,} attempts on its timeline, drawn", page_s, base, "s",
                    "the same page over 13 delegations", "value<=1.0",
                    note="navigation to tree, timeline and table drawn"))
    rows.append(Row("  of which drawing (tree, timeline, table)", draw_s, None, "s"))


# -- a live event -------------------------------------------------------------------------------
def bench_live(rows: list[Row], folder: Path, n: int = 20) -> None:
    path = folder / "live.jsonl"
    synthetic_journal(path, 13, stopped=False)
    beat = {"event": "attempt.heartbeat", "delegation_id": "worker-1", "attempt_id":
            "worker-1-a1", "parent_id": None, "agent": "worker", "progress": 9}
    from selenium.webdriver.support.ui import WebDriverWait

    with serving(path) as ui, chromium(folder / "live-profile") as driver:
        driver.get(ui.url)
        wait = WebDriverWait(driver, WAIT_S, poll_frequency=0.005)
        wait.until(lambda d: d.execute_script("return window.zeusUi.connected"))
        for k in range(n):
            append(path, [json.dumps(beat | {"ts": time.time()}) + "\n"])
            wait.until(lambda d, k=k: d.execute_script("return window.zeusUi.events") > k)
        lags = driver.execute_script("return window.zeusUi.lags")
    # the baseline: `zeus tree --follow`'s tail, `journal.follow`, on the same file
    seen: list[float] = []
    arrived, idle, stop = threading.Event(), threading.Event(), threading.Event()

    def tail() -> None:
        for event in jr.follow(path, until=stop.is_set, on_idle=idle.set):
            if event.get("progress") == 10:
                seen.append(time.time() - event["ts"])
                arrived.set()

    thread = threading.Thread(target=tail, daemon=True)
    thread.start()
    for _ in range(n):
        assert idle.wait(WAIT_S)  # written while it waits, as a journal grows
        idle.clear()
        arrived.clear()
        append(path, [json.dumps(beat | {"ts": time.time(), "progress": 10}) + "\n"])
        assert arrived.wait(WAIT_S)
    stop.set()
    thread.join(WAIT_S)
    rows.append(Row("a journal event in the browser, median", statistics.median(lags) * 1000,
                    statistics.median(seen) * 1000, "ms",
                    "zeus tree --follow's tail of the same file", "value<=200",
                    note=f"{n} events, written to received"))
    rows.append(Row("  the slowest of them", max(lags) * 1000, max(seen) * 1000, "ms",
                    "zeus tree --follow", "value<=200"))


# -- what a page following the journal costs a running Zeus ---------------------------------
def noop(brief: Brief, ctx: Context) -> None:
    return None


def bench_dispatch(rows: list[Row], folder: Path, n: int = 1000, rounds: int = 5) -> None:
    path = folder / "dispatch.jsonl"
    path.touch(mode=0o600)
    r = Routing.from_dict({"version": 1, "agents": {}})
    brief = Brief(agent="noop", scope="nothing")

    def per_delegation() -> float:
        with Zeus.start(r, agents={"noop": noop}, log=str(path)) as zeus:
            for _ in range(100):
                zeus.dispatch(brief).result(5)
            t0 = time.perf_counter()
            for _ in range(n):
                zeus.dispatch(brief).result(5)
            return (time.perf_counter() - t0) / n

    without, beside = [], []
    for _ in range(rounds):  # alternate, so drift on a shared machine hits both
        without.append(per_delegation())
        with serving(path):
            beside.append(per_delegation())
    rows.append(Row("dispatch per no-op delegation, zeus ui following", min(beside) * 1e6,
                    min(without) * 1e6, "us", "the same journal, no page", "ratio<=1.05"))


def main() -> None:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="zeus-bench-ui-") as tmp:
        folder = Path(tmp)
        bench_tree(rows, folder)
        missing = chromium_missing()
        if missing is None:
            bench_page(rows, folder)
            bench_live(rows, folder)
        else:
            print(f"the browser rows are left out: {missing}")
        bench_dispatch(rows, folder)
    report("ui", rows)


if __name__ == "__main__":
    main()
