"""docs/integrations.md runs as written: each ```python block, skipped when its extra is missing."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from actors import Status, Summary

DOC = Path(__file__).resolve().parent.parent / "docs" / "integrations.md"
# The extra each block names on its first line, and a module it needs.
NEEDS = {
    "mcp": "mcp",
    "pydantic-ai": "pydantic_ai",
    "openai-agents": "agents",
    "langgraph": "langgraph",
    "otel": "opentelemetry.sdk",
}


def blocks() -> list[tuple[str, str]]:
    found = re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.M | re.S)
    named = []
    for code in found:
        match = re.match(r"# pip install 'zeus-supervisor\[([a-z-]+)\]'\n", code)
        assert match, f"a block in {DOC.name} does not start with the extra it needs"
        named.append((match.group(1), code))
    return named


def run(extra: str, code: str, capsys: pytest.CaptureFixture[str]) -> str:
    module = NEEDS[extra]
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        spec = None
    if spec is None:
        pytest.skip(f"the {extra} extra is not installed (pip install -e '.[{extra}]')")
    exec(compile(code, str(DOC), "exec"), {"__name__": "docs"})
    return capsys.readouterr().out


def test_every_integration_has_one_example_and_names_its_extra() -> None:
    assert [extra for extra, _ in blocks()] == [
        "mcp", "pydantic-ai", "openai-agents", "langgraph", "otel", "pydantic-ai"
    ]


@pytest.mark.parametrize("index", [1, 2])
def test_the_agent_sdk_examples_print_the_summary_of_their_delegation(
    index: int, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = Summary.parse(run(*blocks()[index], capsys))
    assert (summary.status, summary.output) == (Status.completed, 3)


def test_the_mcp_example_prints_a_summary_after_a_retry(
    capsys: pytest.CaptureFixture[str],
) -> None:
    summary = Summary.parse(run(*blocks()[0], capsys))
    assert summary.status is Status.completed
    assert [a.outcome.value for a in summary.attempts] == ["transient", "completed"]


def test_the_langgraph_example_prints_the_outputs_in_brief_order(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(*blocks()[3], capsys).strip() == "['ZEUS', 'HERA']"


def test_the_otel_example_prints_its_spans(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the example's journal goes here
    out = run(*blocks()[4], capsys)
    assert out.strip() == "['attempt echo', 'delegation echo', 'request']"
    assert (tmp_path / "zeus-events.jsonl").read_text().count("delegation.settled") == 1


def test_the_usage_example_prices_the_frameworks_tokens(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = run(*blocks()[5], capsys)
    match = re.fullmatch(r"calls=1 input_tokens=(\d+) output_tokens=(\d+) cost=(\S+)\n", out)
    assert match, out
    tokens_in, tokens_out, cost = int(match[1]), int(match[2]), float(match[3])
    assert tokens_in > 0
    assert cost == pytest.approx((tokens_in * 3.0 + tokens_out * 15.0) / 1e6)
