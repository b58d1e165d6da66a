"""docs/agent-clis.md says what the code does: every CLI and its argv, each decoder's tools,
the jsonl protocol's keys, the summary table, the new routing keys; and the README's and
the guide's agent CLI sections name a routing file Zeus loads."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest
import yaml

from actors.speaks import CLI_PROGRAMS, SPEAKS, Invocation, cli_argv
from actors.speaks.reader import MAX_LINE, STOPPED_LINES
from supervisor import Routing
from supervisor.routing import AgentPolicy

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "agent-clis.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")
GUIDE = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
CLIS = tuple(CLI_PROGRAMS)


def section(heading: str) -> str:
    """The doc's text under `heading` (`## ...` or `### ...`), up to the next heading."""
    match = re.search(rf"^#+ {re.escape(heading)}\n(.*?)(?=^#+ |\Z)", DOC, re.M | re.S)
    assert match, f"docs/agent-clis.md has no section {heading!r}"
    return match.group(1)


def test_the_doc_has_a_section_for_everything_zeus_speaks() -> None:
    assert set(SPEAKS) == {*CLIS, "jsonl", "lines"}
    for speaks in SPEAKS:
        assert section(speaks).strip(), speaks
    for heading in ("How an agent CLI is run", "How it is stopped", "How a run ends",
                    "The `<subtask_summary>` block", "Bad streams", "Sessions",
                    "Live budgets: what is promised, and what is not"):
        assert section(heading).strip(), heading


@pytest.mark.parametrize("cli", CLIS)
def test_each_cli_section_names_every_tool_its_decoder_knows(cli: str) -> None:
    module = importlib.import_module(f"actors.speaks.{cli}")
    text = section(cli)
    for tool in sorted(module.SIDE_EFFECT_TOOLS | module.READ_ONLY_TOOLS):
        assert f"`{tool}`" in text, f"the {cli} section does not name {tool}"
    side_effects = text.split("Side-effect tools:", 1)[1].split("Read-only:", 1)[0]
    assert set(re.findall(r"`(\w+)`", side_effects)) == set(module.SIDE_EFFECT_TOOLS)


@pytest.mark.parametrize("cli", CLIS)
def test_each_cli_section_says_the_source_and_version_its_decoder_follows(cli: str) -> None:
    module = importlib.import_module(f"actors.speaks.{cli}")
    text = " ".join(section(cli).split())
    assert f"`actors/speaks/{cli}.py`" in text
    sources = re.findall(r"\b[\w.-]+/[\w.-]+(?:/[\w.-]+)*\.(?:rs|ts|py)\b", module.__doc__ or "")
    assert sources, cli
    for source in sources:
        assert source in text, f"the {cli} section does not cite {source}"
    version = re.search(r"\b\d+\.\d+\b", (module.__doc__ or "").split("\n\n")[1])
    if version:  # (Cursor's is closed source: no version to follow)
        assert version.group(0) in text, f"the {cli} section does not say {version.group(0)}"


@pytest.mark.parametrize("cli", CLIS)
def test_the_argv_table_is_the_one_zeus_builds(cli: str) -> None:
    row = next(line for line in section("How an agent CLI is run").splitlines()
               if line.startswith(f"| `{cli}` |"))
    built = " ".join(cli_argv(Invocation(cli, args=("ARGS",)), "PROMPT"))
    assert f"`{built}`" in row
    resumed = cli_argv(Invocation(cli, resume="ID"), "PROMPT")
    flag = resumed[resumed.index("ID") - 1]
    assert f"{flag} ID" in row


def test_the_jsonl_section_names_every_key_of_the_protocol() -> None:
    text = section("jsonl")
    protocol = (ROOT / "actors" / "speaks" / "jsonl.py").read_text(encoding="utf-8")
    keys = re.findall(r'^\s+\{"(\w+)":', protocol.split('"""')[1], re.M)
    assert set(keys) == {"partial", "charge", "heartbeat", "tool", "session", "result", "error"}
    for key in keys:
        assert f'{{"{key}":' in text, key


def test_the_summary_table_is_the_one_zeus_acts_on() -> None:
    text = section("The `<subtask_summary>` block")
    for status in ("completed", "partial", "blocked", "timed_out"):
        assert f"| `{status}` |" in text
    assert "`require_summary: true`" in text


def test_the_numbers_the_doc_gives_are_the_code_s() -> None:
    assert MAX_LINE == 1 << 20 and "1 MB" in section("Bad streams")
    assert f"last\n{STOPPED_LINES} lines" in section("lines") or \
        f"last {STOPPED_LINES} lines" in " ".join(section("lines").split())
    grace = AgentPolicy().exit_grace_s
    assert f"`exit_grace_s` (default {grace:g})" in " ".join(DOC.split())
    assert "`bad_lines`" in section("Bad streams")


def test_the_doc_s_routing_file_is_one_zeus_loads() -> None:
    block = re.search(r"^```yaml\n(.*?)^```", DOC, re.M | re.S)
    assert block
    routing = Routing.from_dict(yaml.safe_load(block.group(1)), source="agent-clis.md")
    assert routing.agents["hermes"].speaks == "claude"
    assert routing.agents["talos"].command == ("npx", "-y", "@openai/codex")


def test_the_readme_s_agent_cli_section_loads_and_links_the_doc() -> None:
    text = README.split("## Agent CLIs as agents\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"^```yaml\n(.*?)^```", text, re.M | re.S)
    assert block
    routing = Routing.from_dict(yaml.safe_load(block.group(1)), source="README.md")
    assert routing.agents["hermes"].speaks == "claude"
    assert routing.agents["hermes"].fallback == "talos"
    assert routing.agents["talos"].speaks == "codex"
    assert "(docs/agent-clis.md)" in text and "zeus init --agent claude" in text


def test_the_guide_points_to_the_doc() -> None:
    text = GUIDE.split("## Agent CLIs as agents\n", 1)[1].split("\n## ", 1)[0]
    assert "(agent-clis.md)" in text


# The npm package of each CLI the tests run for real (tests/real_clis/package.json).
PACKAGES = {"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex",
            "gemini": "@google/gemini-cli", "opencode": "opencode-ai"}


@pytest.mark.parametrize("cli", CLIS)
def test_each_cli_section_says_the_version_tested_and_how_it_runs_headless(cli: str) -> None:
    text = " ".join(section(cli).split())
    pinned = json.loads((ROOT / "tests" / "real_clis" / "package.json").read_text(
        encoding="utf-8"))["dependencies"]
    if cli in PACKAGES:
        assert "**Tested** with" in text and pinned[PACKAGES[cli]] in text, cli
    else:  # Cursor's CLI is not on npm
        assert "**Not tested** against the real CLI" in text
    assert "**Headless**" in text and "**Live**" in text
    assert "Its standard input is `/dev/null`" in text, cli


def _cli_examples() -> list[tuple[str, str, AgentPolicy]]:
    """(document, agent, its policy) of every agent that speaks a CLI in a routing file the
    README or a page of docs/ shows."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for block in re.findall(r"^```yaml\n(.*?)^```", text, re.M | re.S):
            data = yaml.safe_load(block)
            agents = data.get("agents") if isinstance(data, dict) else None
            if not isinstance(agents, dict) or not any(
                    isinstance(a, dict) and a.get("speaks") in CLIS for a in agents.values()):
                continue
            routing = Routing.from_dict(data, source=path.name, import_entrypoints=False)
            found += [(path.name, name, policy) for name, policy in routing.agents.items()
                      if policy.speaks_cli]
    return found


# How long a CLI's model may think in silence, and a tool it runs (a test suite) may take,
# as docs/design.md sizes a CLI's defaults ("Defaults sized for a CLI"): said here, not
# read from the code, so that the code's defaults are checked too.
MODEL_SILENCE_S, LONG_TOOL_S = 120.0, 1800.0


def test_no_agent_cli_the_docs_show_is_stale_before_its_model_can_answer() -> None:
    examples = _cli_examples()
    assert {doc for doc, _, _ in examples} >= {"README.md", "agent-clis.md", "guide.md"}
    for doc, name, policy in examples:
        beat = policy.heartbeat
        assert beat.stale_after_s >= MODEL_SILENCE_S, (doc, name, beat)
        assert beat.in_tool_s >= LONG_TOOL_S, (doc, name, beat)


def test_the_readme_s_fallback_cli_with_no_heartbeat_gets_the_cli_defaults() -> None:
    text = README.split("## Agent CLIs as agents\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"^```yaml\n(.*?)^```", text, re.M | re.S)
    assert block
    data = yaml.safe_load(block.group(1))
    assert "heartbeat" not in data["agents"]["talos"]  # it relies on the defaults
    beat = Routing.from_dict(data, source="README.md").agents["talos"].heartbeat
    assert (beat.stale_after_s, beat.in_tool_s) == (MODEL_SILENCE_S, LONG_TOOL_S)
    assert "120 s" in text and "1800 s" in text  # and says so
