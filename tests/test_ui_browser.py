"""`zeus ui` in a real headless Chromium over a demo run's journal: every delegation in the
tree, a bar per attempt on the timeline, a settlement appended during the test changing
its row without a reload, the keyboard, a phone's width. Skipped without Chromium."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from supervisor import journal as jr
from tests._ui import (
    WAIT_S,
    append,
    chromium,
    chromium_missing,
    needs_ui_extra,
    serving,
    shared_store,
    tool_journal,
    withhold_settlement,
)

needs_ui_extra()
_MISSING = chromium_missing()

pytestmark = [
    pytest.mark.browser,
    pytest.mark.process,
    pytest.mark.realtime,
    pytest.mark.skipif(_MISSING is not None, reason=f"no headless Chromium: {_MISSING}"),
]

if _MISSING is None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

ROWS = "#tree-rows .row[data-id]"
SHOWN = f"""return {{
    rows: [...document.querySelectorAll('{ROWS}')].map((r) => r.dataset.id),
    bars: [...document.querySelectorAll('#timeline-body .bar')].map((b) => b.dataset.attempt),
    status: document.querySelector('.row[data-id="apollo-7"]').dataset.status}}"""


FOCUSED = "document.activeElement && document.activeElement.textContent"
REDRAW = "document.getElementById('filter').dispatchEvent(new Event('input'))"  # the tree again


def wait(driver: Any, script: str) -> Any:
    """Wait (bounded) until `script` returns something true in the page; return it."""
    return WebDriverWait(driver, WAIT_S).until(lambda d: d.execute_script(script))


def test_the_page_shows_the_demo_live_and_a_settlement_changes_its_row_without_a_reload(
    demo_journal: Path, tmp_path: Path
) -> None:
    cut = tmp_path / "cut.jsonl"
    rest = withhold_settlement(demo_journal, cut, "apollo-7")
    run, full = jr.load(cut).run, jr.load(demo_journal).run
    with serving(cut) as ui, chromium(tmp_path / "profile") as driver:
        driver.get(ui.url)
        wait(driver, "return window.zeusUi.connected && window.zeusUi.renders > 0")
        shown = driver.execute_script(SHOWN)  # in one script: the page redraws while open
        assert shown["rows"] == _tree_order(run)
        assert sorted(shown["bars"]) == _attempts(run)
        assert shown["status"] == "in progress"
        assert driver.find_element(By.ID, "live").text == "live"  # the run goes on
        driver.execute_script("window.notReloaded = true")
        append(cut, rest)
        wait(driver, """return document.querySelector('.row[data-id="apollo-7"]')
                            .dataset.status === 'completed'""")
        assert driver.execute_script("return window.notReloaded") is True
        shown = driver.execute_script(SHOWN)
        assert shown["rows"] == _tree_order(full) and sorted(shown["bars"]) == _attempts(full)
        assert driver.find_element(By.ID, "runinfo").text.endswith("stopped")
        # Its Zeus stopped: never "live" beside "stopped" again.
        wait(driver, "return document.getElementById('live').textContent === 'stopped'")
        assert "on" not in driver.find_element(By.ID, "live").get_attribute("class").split()
        shot = tmp_path / "zeus-ui.png"
        driver.save_screenshot(str(shot))
        print(f"screenshot: {shot}")
    assert shot.stat().st_size > 10_000
    assert json.loads(rest[0])["status"] == "completed"


def test_the_keyboard_moves_through_the_tree_opens_a_delegation_and_goes_back(
    demo_journal: Path, tmp_path: Path
) -> None:
    with serving(demo_journal) as ui, chromium(tmp_path / "profile") as driver:
        driver.get(ui.url)
        wait(driver, "return window.zeusUi.connected && window.zeusUi.renders > 0")
        ActionChains(driver).send_keys("j", "j", "j", "k").perform()  # to what has focus
        # The page redraws its rows whenever an event or a refresh comes, and an element
        # found before a redraw is stale after it: what has focus is read in the page.
        wait(driver, f"return {FOCUSED} === 'talos-1'")
        driver.execute_script(REDRAW)
        assert driver.execute_script(f"return {FOCUSED}") == "talos-1"  # its place kept
        ActionChains(driver).send_keys(Keys.ENTER).perform()
        opened = "return location.hash === '#d/talos-1' && !document.getElementById('detail')"
        wait(driver, opened + ".hidden")
        wait(driver, "return document.querySelectorAll('#detail tbody tr').length > 3")
        assert "talos-1-a3" in driver.find_element(By.ID, "detail").text
        ActionChains(driver).send_keys(Keys.ESCAPE).perform()
        wait(driver, "return !document.getElementById('overview').hidden")


def test_the_page_fits_a_phones_width(demo_journal: Path, tmp_path: Path) -> None:
    with serving(demo_journal) as ui, chromium(tmp_path / "profile", 390, 844) as driver:
        driver.get(ui.url)
        wait(driver, "return window.zeusUi.renders > 0")
        width = driver.execute_script("return window.innerWidth")
        scroll = driver.execute_script("return document.documentElement.scrollWidth")
        assert scroll <= width, f"the page is {scroll}px wide on a {width}px screen"
        assert len(driver.find_elements(By.CSS_SELECTOR, ROWS)) == 13


TOOLS = """const bar = document.querySelector('#timeline-body .bar[data-attempt="d1-a1"]')
    .getBoundingClientRect();
return {
    tools: [...document.querySelectorAll('#timeline-body .tool')].map((t) => {
        const r = t.getBoundingClientRect();
        return [t.dataset.attempt, t.dataset.tool, t.dataset.phase, t.classList.contains('writes'),
                r.left, r.right, r.left >= bar.left - 1 && r.right <= bar.right + 1];
    }),
    right: bar.right,
    inTool: (document.querySelector('.row[data-id="d1"] [data-in-tool]') || {}).textContent}"""


def test_the_timeline_draws_each_tool_call_on_its_attempt_and_the_tree_the_one_in_flight(
    tmp_path: Path,
) -> None:
    journal = tool_journal(tmp_path / "events.jsonl", now=time.time(), reads=1)
    with serving(journal) as ui, chromium(tmp_path / "profile") as driver:
        driver.get(ui.url)
        wait(driver, "return window.zeusUi.renders > 0")
        shown = driver.execute_script(TOOLS)
    read, bash, pytest_ = shown["tools"]
    assert all(on_its_bar for *_, on_its_bar in shown["tools"])
    # `read` was seen only once it was over: a tick
    assert read[:4] == ["d1-a1", "read", "end", False] and read[5] - read[4] <= 3
    # `Bash` (side effects) ran 8 s from 2 s in; `pytest` started at 12 s, still in flight:
    # from its start to the bar's end, which is now
    assert bash[:4] == ["d1-a1", "Bash", "done", True]
    assert pytest_[:4] == ["d1-a1", "pytest", "in-flight", False]
    assert (bash[5] - bash[4]) / (pytest_[4] - bash[4]) == pytest.approx(8 / 10, abs=0.05)
    assert pytest_[5] == pytest.approx(shown["right"], abs=2)
    assert re.match(r"in pytest \d+\.\ds · progress 4$", shown["inTool"]), shown["inTool"]


HOSTS = """return {
    panel: !document.getElementById('hosts').hidden,
    count: document.getElementById('hosts-count').textContent,
    hosts: [...document.querySelectorAll('#hosts-body tr[data-host]')].map((r) => [
        r.dataset.host, r.dataset.lease, r.querySelector('.lease').textContent,
        r.lastElementChild.textContent]),
    badges: Object.fromEntries([...document.querySelectorAll(
        '#tree-rows .row[data-id]')].map((r) => [r.dataset.id,
        (r.querySelector('.badge.host') || {dataset: {}}).dataset.host || null]))}"""


def test_a_shared_stores_page_shows_its_hosts_and_a_badge_for_each_delegations_host(
    pg_url: str, demo_journal: Path, tmp_path: Path
) -> None:
    pytest.importorskip("psycopg", reason="pip install 'zeus-supervisor[postgres]'")
    with shared_store(pg_url) as stores, serving(pg_url) as ui, chromium(
        tmp_path / "profile"
    ) as driver:
        ids = {role: store.host_id for role, store in stores.items()}
        driver.get(ui.url)
        wait(driver, "return window.zeusUi.renders > 0")
        shown = driver.execute_script(HOSTS)
        # the page redraws every second while the store's hosts live: go by the address
        # its link has, not a click on an element the next redraw replaces
        href = driver.execute_script(
            "return document.querySelector('.row[data-id=\"apollo-4\"] a.id').hash")
        driver.execute_script("location.hash = arguments[0]", href)
        wait(driver, "return location.hash === '#d/apollo-4'")
        wait(driver, "return document.querySelector('#detail .facts')")
        detail = driver.find_element(By.ID, "detail").text
        shot = tmp_path / "zeus-ui-hosts.png"
        driver.get(ui.url)
        wait(driver, "return window.zeusUi.renders > 0")
        driver.save_screenshot(str(shot))
        print(f"screenshot: {shot}")
    assert shown["panel"] is True and shown["count"] == "4 · 1 holding a lease"
    rows = {host: (how, words, owns) for host, how, words, owns in shown["hosts"]}
    assert list(rows) == [ids[r] for r in ("live", "released", "taken", "expired")]
    how, words, owns = rows[ids["live"]]
    assert how == "held" and words.endswith("s left") and owns == "3"
    assert rows[ids["released"]] == ("ended", "released", "0")
    assert rows[ids["taken"]] == ("ended", f"taken over by {ids['live'][:8]}", "0")
    how, words, owns = rows[ids["expired"]]
    assert how == "expired" and words.startswith("expired ") and owns == "1"
    assert shown["badges"] == {"apollo-1": ids["live"], "apollo-2": ids["live"],
                               "apollo-3": ids["released"], "apollo-4": ids["live"],
                               "apollo-5": ids["expired"]}
    assert f"host\n{ids['live'][:8]}" in detail
    # a journal has no hosts: no panel, no badge
    with serving(demo_journal) as ui, chromium(tmp_path / "profile2") as driver:
        driver.get(ui.url)
        wait(driver, "return window.zeusUi.renders > 0")
        plain = driver.execute_script(HOSTS)
    assert plain["panel"] is False and plain["hosts"] == []
    assert set(plain["badges"].values()) == {None}


def _attempts(run: jr.Run) -> list[str]:
    """Every attempt that started, by id: one bar each."""
    return sorted(a.id for a in run.attempts.values() if a.started_ts is not None)


def _tree_order(run: jr.Run) -> list[str]:
    out: list[str] = []

    def walk(d: jr.ReplayedDelegation) -> None:
        out.append(d.id)
        for child in d.children:
            walk(child)

    for root in run.roots:
        walk(root)
    return out
