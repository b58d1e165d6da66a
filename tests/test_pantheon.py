"""The Pantheon dialect: a routing.yml with a `delegation:` section, mapped onto Zeus's policies."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from supervisor import Routing, RoutingError
from supervisor.routing import Backoff

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "pantheon_routing.yml"


@pytest.fixture(scope="module")
def pantheon() -> Routing:
    return Routing.load(FIXTURE)


def load(tmp_path: Path, text: str) -> Routing:
    path = tmp_path / "routing.yml"
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return Routing.load(path)


def problem(tmp_path: Path, text: str) -> tuple[str, Path]:
    path = tmp_path / "routing.yml"
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    with pytest.raises(RoutingError) as caught:
        Routing.load(path)
    return str(caught.value), path


MINIMAL = """
    agents:
      apollo: {role: scout, can_delegate: false}
      athena: {role: planner, can_delegate: true, subagent_can_delegate_to: [apollo]}
    delegation:
      zeus:
        - target: apollo
          timeout: {timeout}
          retry_count: 2
"""


def minimal(timeout: str = "1000", *extra: str) -> str:
    """MINIMAL with apollo's entry timed `timeout` and `extra` lines added to the entry."""
    return MINIMAL.replace("{timeout}", timeout) + "".join(f"          {x}\n" for x in extra)


def test_the_pantheon_fixture_loads_as_the_pantheon_dialect(pantheon: Routing) -> None:
    assert pantheon.dialect == "pantheon"
    assert set(pantheon.agents) == {
        "athena", "apollo", "hermes", "aphrodite", "demeter", "themis", "prometheus", "gaia",
        "mnemosyne", "talos",
    }


@pytest.mark.parametrize(
    ("agent", "timeout_s", "retries", "backoff", "fallback", "sessions"),
    [
        ("apollo", 60.0, 2, Backoff.exponential, "athena", 2),
        ("hermes", 180.0, 3, Backoff.exponential, "talos", 2),
        ("themis", 120.0, 2, Backoff.exponential, "zeus", 1),
        ("prometheus", 300.0, 2, Backoff.exponential, "hermes", 1),
        ("talos", 30.0, 1, Backoff.fixed, "hermes", 1),
        ("gaia", 120.0, 2, Backoff.exponential, "hermes", 1),
    ],
)
def test_delegation_entries_become_the_targets_policies(
    pantheon: Routing, agent: str, timeout_s: float, retries: int, backoff: Backoff,
    fallback: str, sessions: int,
) -> None:
    policy = pantheon.agent(agent)
    assert (policy.timeout_s, policy.retry.max_retries, policy.retry.backoff, policy.fallback,
            policy.session_max) == (timeout_s, retries, backoff, fallback, sessions)


def test_can_delegate_and_subagent_lists_decide_who_may_delegate_to_whom(
    pantheon: Routing,
) -> None:
    assert (pantheon.agent("apollo").kind, pantheon.agent("apollo").can_delegate_to) == ("leaf", ())
    assert pantheon.agent("athena").kind == "orchestrator"
    assert pantheon.agent("athena").can_delegate_to == ("apollo",)
    assert pantheon.agent("themis").can_delegate_to == ("mnemosyne",)


def test_what_has_no_meaning_here_is_kept_as_metadata(pantheon: Routing) -> None:
    metadata = pantheon.agent("apollo").metadata
    assert metadata["model_tier"] == "fast"
    assert metadata["capabilities"][0] == "codebase_discovery"
    assert metadata["skills"] == ["internet-search", "codemap"]
    assert [entry["from"] for entry in metadata["delegation"]] == ["zeus", "athena"]
    assert metadata["delegation"][0]["parallel"] is True
    assert pantheon.agent("apollo").role is not None


def test_the_host_list_wins_over_another_orchestrators_and_the_conflict_is_reported(
    pantheon: Routing,
) -> None:
    assert pantheon.agent("apollo").timeout_s == 60.0  # zeus says 60000 ms, athena 45000
    assert any(
        "delegation.athena[0].timeout: 45000 for apollo; delegation.zeus[1].timeout set it first"
        in line for line in pantheon.ignored
    )


def test_the_routing_says_what_it_mapped(pantheon: Routing) -> None:
    mapped = "\n".join(pantheon.mapped)
    for expected in (
        "agents.*.can_delegate -> kind (7 orchestrator, 3 leaf)",
        "agents.*.subagent_can_delegate_to -> can_delegate_to",
        "delegation.*[].timeout (ms) -> timeout_s (8 agents)",
        "delegation.*[].retry_count -> retry.max_retries",
        "delegation.*[].retry_backoff -> retry.backoff",
        "delegation.*[].fallback_agent -> fallback",
        "delegation.*[].session_max -> session_max",
        "no entry sets a timeout for athena, mnemosyne: the default 120s applies",
    ):
        assert expected in mapped


def test_the_routing_says_what_it_ignored(pantheon: Routing) -> None:
    ignored = "\n".join(pantheon.ignored)
    for expected in (
        "version: 3.11 is Pantheon's schema version",
        "handoffs, platforms, artifacts, routing_matrix: no meaning for supervision",
        "agents.zeus: the root orchestrator, which Zeus itself plays",
        "model_tier, user_invocable, can_receive_delegation, capabilities, skills}: kept in "
        "metadata",
        "when, model_tier, parallel, prompt_hint, pre_condition, post_condition}: kept in metadata",
        "2 entries that hand back to zeus (delegation.athena[1], delegation.apollo[0])",
    ):
        assert expected in ignored


def test_a_timeout_in_milliseconds_becomes_seconds(tmp_path: Path) -> None:
    routing = load(tmp_path, minimal("1500"))
    assert routing.agent("apollo").timeout_s == 1.5
    assert routing.agent("apollo").retry.max_retries == 2


@pytest.mark.parametrize("timeout", ["0", "-100", '"60s"', "true"])
def test_a_timeout_that_is_not_positive_milliseconds_is_refused_at_its_line(
    tmp_path: Path, timeout: str
) -> None:
    message, path = problem(tmp_path, minimal(timeout))
    assert f"{path}:7: delegation.zeus[0].timeout: found " in message
    assert "allowed: milliseconds > 0" in message


def test_an_unknown_backoff_is_refused_naming_the_two_pantheon_knows(tmp_path: Path) -> None:
    message, path = problem(tmp_path, minimal("1000", "retry_backoff: linear"))
    assert (f"{path}:9: delegation.zeus[0].retry_backoff: found 'linear'; allowed: "
            "'exponential' or 'fixed'") in message


def test_a_negative_retry_count_is_refused(tmp_path: Path) -> None:
    message, path = problem(tmp_path, minimal().replace(
        "retry_count: 2", "retry_count: -1"))
    assert f"{path}:8: delegation.zeus[0].retry_count: found -1; allowed: an integer >= 0" in (
        message)


def test_a_fallback_to_an_unknown_agent_points_at_the_entry_that_names_it(
    tmp_path: Path,
) -> None:
    message, path = problem(tmp_path, minimal("1000", "fallback_agent: hades"))
    assert f"{path}:9: delegation.zeus[0].fallback_agent: unknown agent 'hades'" in message


def test_a_target_that_is_no_agent_is_refused(tmp_path: Path) -> None:
    message, path = problem(tmp_path, minimal().replace(
        "target: apollo", "target: hades"))
    assert f"{path}:6: delegation.zeus[0].target: found 'hades'; allowed: an agent name " in (
        message)


def test_a_subagent_that_is_no_agent_is_refused_at_its_place_in_the_list(tmp_path: Path) -> None:
    message, path = problem(tmp_path, """
        agents:
          athena:
            can_delegate: true
            subagent_can_delegate_to:
              - apollo
              - hades
          apollo: {}
        delegation: {}
    """)
    assert f"{path}:6: agents.athena.subagent_can_delegate_to[1]: unknown agent 'hades'" in (
        message)


def test_an_orchestrator_that_is_no_agent_is_refused(tmp_path: Path) -> None:
    message, path = problem(tmp_path, """
        agents:
          apollo: {}
        delegation:
          hera:
            - target: apollo
    """)
    assert f"{path}:4: delegation.hera: unknown orchestrator 'hera'" in message


def test_can_delegate_must_be_a_boolean(tmp_path: Path) -> None:
    message, path = problem(tmp_path, """
        agents:
          apollo: {can_delegate: sometimes}
        delegation: {}
    """)
    assert f"{path}:2: agents.apollo.can_delegate: found 'sometimes'; allowed: true or false" in (
        message)


def test_zeus_own_sections_may_ride_along_and_apply_as_in_the_native_dialect(
    tmp_path: Path,
) -> None:
    routing = load(tmp_path, minimal() + textwrap.indent(
        textwrap.dedent("""
        defaults:
          isolation: process
        supervisor:
          max_depth: 3
        """), "    "))
    assert routing.agent("athena").isolation == "process"
    assert routing.supervisor.max_depth == 3
    assert any("defaults, supervisor" in line for line in routing.mapped)


def test_keys_outside_pantheons_schema_are_kept_and_reported(tmp_path: Path) -> None:
    routing = load(tmp_path, """
        agents:
          apollo: {color: blue}
        delegation:
          zeus:
            - {target: apollo, priority: 3}
        presets: {}
    """)
    assert routing.agent("apollo").metadata["color"] == "blue"
    assert routing.agent("apollo").metadata["delegation"] == [{"from": "zeus", "priority": 3}]
    ignored = "\n".join(routing.ignored)
    assert "agents.apollo.color: not in Pantheon's schema; kept in metadata" in ignored
    assert "delegation.zeus[0].priority: not in Pantheon's schema; kept in metadata" in ignored
    assert "presets: not a Pantheon v3.11 section (not read)" in ignored
