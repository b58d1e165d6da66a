"""Every duration a routing file or a brief gives is finite and at most a week.

A timer the clock cannot schedule (`inf`, `1e10` seconds) would otherwise be
found only when it is due, by the one timer thread of the instance.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from actors.limits import MAX_DURATION_S
from supervisor import AgentPolicy, Brief, Routing, RoutingError

DURATIONS = [
    ("timeout_s", "agents:\n  a:\n    timeout_s: {v}\n", 3, "agents.a.timeout_s"),
    ("stale_after_s", "agents:\n  a:\n    heartbeat: {{stale_after_s: {v}}}\n", 3,
     "agents.a.heartbeat.stale_after_s"),
    ("interval_s", "agents:\n  a:\n    heartbeat:\n      interval_s: {v}\n", 4,
     "agents.a.heartbeat.interval_s"),
    ("grace_s", "agents:\n  a:\n    shutdown: {{grace_s: {v}}}\n", 3, "agents.a.shutdown.grace_s"),
    ("term_s", "agents:\n  a:\n    shutdown: {{term_s: {v}}}\n", 3, "agents.a.shutdown.term_s"),
    ("initial_s", "agents:\n  a:\n    retry: {{initial_s: {v}}}\n", 3, "agents.a.retry.initial_s"),
    ("max_s", "agents:\n  a:\n    retry: {{max_s: {v}}}\n", 3, "agents.a.retry.max_s"),
    ("within_s", "supervisor:\n  intensity:\n    within_s: {v}\n", 3,
     "supervisor.intensity.within_s"),
    ("defaults", "defaults:\n  timeout_s: {v}\nagents: {{a: {{}}}}\n", 2, "defaults.timeout_s"),
]


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "1e10", "604801"])
@pytest.mark.parametrize(("name", "text", "line", "key"), DURATIONS, ids=[d[0] for d in DURATIONS])
def test_a_duration_that_is_not_finite_or_longer_than_a_week_is_refused_with_its_line(
    tmp_path: Path, name: str, text: str, line: int, key: str, value: str
) -> None:
    path = tmp_path / "routing.yml"
    path.write_text(text.format(v=value), encoding="utf-8")
    with pytest.raises(RoutingError) as caught:
        Routing.load(path)
    message = str(caught.value)
    wanted = f"{path}:{line}: {key}: "
    hits = [ln for ln in message.splitlines() if ln.startswith(wanted)]
    assert hits, f"no line starting {wanted!r} in:\n{message}"
    if value != "-.inf":  # -inf is also below the lower bound, which may be said instead
        assert "a finite number of seconds <= 604800 (one week)" in hits[0], hits[0]


def test_a_duration_of_exactly_one_week_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "routing.yml"
    path.write_text(textwrap.dedent("""
        supervisor: {intensity: {within_s: 604800}}
        agents:
          a:
            timeout_s: 604800
            retry: {initial_s: 604800, max_s: 604800}
            heartbeat: {interval_s: 1, stale_after_s: 604800}
            shutdown: {grace_s: 604800, term_s: 604800}
    """), encoding="utf-8")
    policy = Routing.load(path).agent("a")
    assert (policy.timeout_s, policy.retry.max_s, policy.shutdown.grace_s) == (MAX_DURATION_S,) * 3


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 1e10])
def test_a_brief_timeout_must_be_finite_and_at_most_a_week(value: float) -> None:
    with pytest.raises(ValidationError, match="timeout_s"):
        Brief(agent="a", scope="s", timeout_s=value)


@pytest.mark.parametrize("spelled", ["inf", "1e10s", "200h"])
def test_a_parsed_brief_timeout_longer_than_a_week_is_refused(spelled: str) -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        Brief.parse(f"SUBTASK BRIEF\nAgent: a\nScope: s\nTimeout: {spelled}")


def test_a_registered_policy_with_an_endless_timeout_is_refused() -> None:
    with pytest.raises(ValidationError, match="finite"):
        AgentPolicy(timeout_s=float("inf"))


@pytest.mark.parametrize("timeout", [".inf", ".nan", "1e10", "604800001"])
def test_a_pantheon_timeout_longer_than_a_week_is_refused_in_milliseconds(
    tmp_path: Path, timeout: str
) -> None:
    path = tmp_path / "routing.yml"
    path.write_text(textwrap.dedent(f"""
        agents:
          zeus: {{role: orchestrator}}
          apollo: {{role: scout}}
        delegation:
          zeus:
            - {{target: apollo, timeout: {timeout}}}
    """).lstrip(), encoding="utf-8")
    with pytest.raises(RoutingError) as caught:
        Routing.load(path)
    assert (f"{path}:6: delegation.zeus[0].timeout: found " in str(caught.value)
            and "at most 604800000 (one week)" in str(caught.value)), str(caught.value)
