"""routing.yml: loading, defaults, and errors that name file, line, key path, found and allowed."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from supervisor import AgentPolicy, Routing, RoutingError, UnknownAgent
from supervisor.examples.faulty import flaky
from supervisor.routing import Backoff

ROOT = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, text: str) -> tuple[Path, str]:
    text = textwrap.dedent(text).lstrip("\n")
    path = tmp_path / "routing.yml"
    path.write_text(text, encoding="utf-8")
    return path, text


def line_of(text: str, needle: str, nth: int = 1) -> int:
    """The 1-based line of the nth line containing `needle`."""
    hits = [i for i, line in enumerate(text.splitlines(), 1) if needle in line]
    return hits[nth - 1]


def problems(tmp_path: Path, text: str) -> tuple[str, Path, str]:
    path, text = write(tmp_path, text)
    with pytest.raises(RoutingError) as caught:
        Routing.load(path)
    return str(caught.value), path, text


def assert_names(message: str, path: Path, line: int, key_path: str, *parts: str) -> None:
    prefix = f"{path}:{line}: {key_path}: "
    lines = [ln for ln in message.splitlines() if ln.startswith(prefix)]
    assert lines, f"no line starting {prefix!r} in:\n{message}"
    for part in parts:
        assert part in lines[0], f"{part!r} not in {lines[0]!r}"


# -- good files -------------------------------------------------------------------------------


def test_defaults_are_merged_into_every_agent_and_an_agents_own_keys_win(tmp_path: Path) -> None:
    path, _ = write(tmp_path, """
        defaults:
          isolation: process
          heartbeat: {interval_s: 0.5, stale_after_s: 5}
          retry: {max_retries: 1}
        agents:
          apollo:
            heartbeat: {stale_after_s: 20}
            retry: {backoff: fixed}
          talos:
            isolation: thread
    """)
    routing = Routing.load(path)
    apollo, talos = routing.agent("apollo"), routing.agent("talos")
    assert (apollo.isolation, apollo.heartbeat.interval_s, apollo.heartbeat.stale_after_s) == (
        "process", 0.5, 20.0)
    assert (apollo.retry.max_retries, apollo.retry.backoff) == (1, Backoff.fixed)
    assert talos.isolation == "thread"
    assert routing.source == str(path)
    assert routing.dialect == "native"
    assert (routing.mapped, routing.ignored) == ((), ())


def test_an_agent_added_later_takes_the_defaults(tmp_path: Path) -> None:
    path, _ = write(tmp_path, "defaults: {timeout_s: 7, partial_ok: true}\nagents: {}\n")
    routing = Routing.load(path).with_agent("scout")
    assert (routing.agent("scout").timeout_s, routing.agent("scout").partial_ok) == (7.0, True)


def test_the_designs_example_loads_and_retry_on_is_not_read_as_a_boolean(tmp_path: Path) -> None:
    path, _ = write(tmp_path, """
        version: 1
        defaults:
          isolation: thread
          heartbeat: {interval_s: 1.0, stale_after_s: 10}
          shutdown: {grace_s: 2.0}
        supervisor:
          max_depth: 2
          max_concurrent: 64
          intensity: {max_restarts: 20, within_s: 60}
          budget: {max_cost: 5.0}
        agents:
          apollo:
            role: explorer
            kind: leaf
            timeout_s: 60
            retry: {max_retries: 2, backoff: exponential, initial_s: 1, factor: 2, max_s: 30,
                    jitter: 0.2, on: [timeout, stale, crash, transient]}
            fallback: athena
            partial_ok: true
            reasoning_effort: low
            session_max: 2
            isolation: process
            budget: {max_calls: 50, max_input_tokens: 200000, max_output_tokens: 20000,
                     max_cost: 0.5}
            result: {max_chars: 20000, overflow: truncate, schema: "pkg.models:Report"}
            retry_after_tool_calls: false
            read_only: true
            stateful: false
          athena: {kind: orchestrator}
          talos:
            timeout_s: 30
            command: ["python", "-m", "myagents.hotfix", "{scope}"]
    """)
    routing = Routing.load(path)
    apollo = routing.agent("apollo")
    assert [str(o) for o in apollo.retry.on] == ["timeout", "stale", "crash", "transient"]
    assert (apollo.isolation, apollo.result.schema_, apollo.budget.max_calls) == (
        "process", "pkg.models:Report", 50)
    assert routing.agent("talos").command == ("python", "-m", "myagents.hotfix", "{scope}")


def test_a_duration_in_exponent_notation_is_a_number(tmp_path: Path) -> None:
    path, _ = write(tmp_path, "agents:\n  apollo: {timeout_s: 1e3, heartbeat: {interval_s: 5E-1}}")
    apollo = Routing.load(path).agent("apollo")
    assert (apollo.timeout_s, apollo.heartbeat.interval_s) == (1000.0, 0.5)


def test_an_empty_file_is_a_routing_without_agents(tmp_path: Path) -> None:
    path, _ = write(tmp_path, "# nothing yet\n")
    assert Routing.load(path).agents == {}


def test_grace_and_term_may_be_zero_meaning_kill_at_once(tmp_path: Path) -> None:
    path, _ = write(tmp_path, "agents:\n  talos:\n    shutdown: {grace_s: 0, term_s: 0}\n")
    shutdown = Routing.load(path).agent("talos").shutdown
    assert (shutdown.grace_s, shutdown.term_s) == (0.0, 0.0)


def test_fallback_cycles_are_legal(tmp_path: Path) -> None:
    path, _ = write(tmp_path, """
        agents:
          hermes: {fallback: talos}
          talos: {fallback: hermes}
          themis: {fallback: zeus}
    """)
    routing = Routing.load(path)
    assert [routing.agent(n).fallback for n in ("hermes", "talos", "themis")] == [
        "talos", "hermes", "zeus"]


def test_yaml_merge_keys_are_honoured(tmp_path: Path) -> None:
    path, _ = write(tmp_path, """
        agents:
          hermes: &implementer {timeout_s: 180, stateful: true}
          aphrodite:
            <<: *implementer
            role: frontend
    """)
    aphrodite = Routing.load(path).agent("aphrodite")
    assert (aphrodite.timeout_s, aphrodite.stateful, aphrodite.role) == (180.0, True, "frontend")


def test_an_unknown_agent_is_refused_naming_the_agents_that_exist(tmp_path: Path) -> None:
    path, _ = write(tmp_path, "agents: {apollo: {}}\n")
    with pytest.raises(UnknownAgent, match=r"unknown agent 'hades'.*\['apollo'\]"):
        Routing.load(path).agent("hades")


def test_resolve_work_imports_the_entrypoint_once(tmp_path: Path) -> None:
    path, _ = write(tmp_path, """
        agents:
          dumper: {entrypoint: "supervisor.examples.faulty:flaky"}
          nested: {entrypoint: "json:JSONEncoder.encode"}
          plain: {}
    """)
    routing = Routing.load(path)
    assert routing.resolve_work("dumper") is flaky
    assert routing.resolve_work("dumper") is routing.resolve_work("dumper")
    assert routing.resolve_work("nested") is json.JSONEncoder.encode
    assert routing.resolve_work("plain") is None
    with pytest.raises(UnknownAgent):
        routing.resolve_work("hades")


def test_resolve_work_on_an_entrypoint_given_in_code_says_what_does_not_import() -> None:
    routing = Routing().with_agent("ghost", AgentPolicy(entrypoint="no_such_module_zeus:run"))
    with pytest.raises(RoutingError, match=r"agents\.ghost\.entrypoint: .*does not import"):
        routing.resolve_work("ghost")


# -- errors: what, where, and what is allowed --------------------------------------------------


def test_an_unknown_agent_key_is_refused_with_the_allowed_keys_and_a_suggestion(
    tmp_path: Path,
) -> None:
    message, path, text = problems(tmp_path, """
        agents:
          apollo:
            timout_s: 60
    """)
    assert_names(message, path, line_of(text, "timout_s"), "agents.apollo.timout_s",
                 "unknown key 'timout_s'", "did you mean 'timeout_s'?", "allowed: args, budget, ",
                 "timeout_s")


def test_an_unknown_nested_key_lists_the_keys_of_that_section(tmp_path: Path) -> None:
    message, path, text = problems(tmp_path, """
        agents:
          apollo:
            retry:
              maxretries: 2
    """)
    assert_names(message, path, line_of(text, "maxretries"), "agents.apollo.retry.maxretries",
                 "did you mean 'max_retries'?", "allowed: backoff, factor, initial_s, jitter, "
                 "max_retries, max_s, on")


def test_an_unknown_top_level_key_is_refused(tmp_path: Path) -> None:
    message, path, _ = problems(tmp_path, "agent:\n  apollo: {}\n")
    assert_names(message, path, 1, "agent", "did you mean 'agents'?",
                 "allowed: agents, defaults, supervisor, version")


def test_a_key_that_belongs_to_one_agent_is_refused_in_defaults(tmp_path: Path) -> None:
    message, path, text = problems(tmp_path, """
        defaults:
          entrypoint: "json:dumps"
    """)
    assert_names(message, path, line_of(text, "entrypoint"), "defaults.entrypoint",
                 "unknown key 'entrypoint'", "belong to one agent")


@pytest.mark.parametrize(
    ("value", "allowed"),
    [
        ('"60s"', "allowed: a number of seconds (write 60 for '60s')"),
        ('"500ms"', "(write 0.5 for '500ms')"),
        ("true", "found true; allowed: a number of seconds"),
        ("[60]", "found a list [60]; allowed: a number of seconds"),
    ],
)
def test_a_timeout_of_the_wrong_type_is_refused(tmp_path: Path, value: str, allowed: str) -> None:
    message, path, _ = problems(tmp_path, f"agents:\n  apollo:\n    timeout_s: {value}\n")
    assert_names(message, path, 3, "agents.apollo.timeout_s", allowed)


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("partial_ok", "1", "found 1; allowed: true or false"),
        ("session_max", "1.5", "found 1.5; allowed: an integer"),
        ("isolation", "vm", "found 'vm'; allowed: 'thread', 'process' or 'ray'"),
        ("kind", "boss", "allowed: 'leaf' or 'orchestrator'"),
        ("reasoning_effort", "max", "allowed: 'low', 'medium' or 'high'"),
        ("role", "[a, b]", "allowed: a string"),
        ("budget", "5", "found 5; allowed: a mapping"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_saying_what_is_allowed(
    tmp_path: Path, key: str, value: str, allowed: str
) -> None:
    message, path, _ = problems(tmp_path, f"agents:\n  apollo:\n    {key}: {value}\n")
    assert_names(message, path, 3, f"agents.apollo.{key}", allowed)


def test_a_retry_count_that_is_a_boolean_is_refused(tmp_path: Path) -> None:
    message, path, _ = problems(tmp_path, "agents:\n  a:\n    retry: {max_retries: true}\n")
    assert_names(message, path, 3, "agents.a.retry.max_retries", "found true; allowed: an integer")


def test_an_unknown_retry_outcome_is_refused_naming_its_index(tmp_path: Path) -> None:
    message, path, text = problems(tmp_path, """
        agents:
          apollo:
            retry:
              on:
                - timeout
                - oom
    """)
    assert_names(message, path, line_of(text, "- oom"), "agents.apollo.retry.on[1]",
                 "found 'oom'; allowed: a list of transient, timeout, stale, crash, lost")


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ("", "timeout_s"),
        ("heartbeat", "interval_s"),
        ("heartbeat", "stale_after_s"),
        ("retry", "max_s"),
    ],
)
@pytest.mark.parametrize("value", ["0", "-1"])
def test_zero_and_negative_durations_are_refused(
    tmp_path: Path, section: str, key: str, value: str
) -> None:
    body = f"    {key}: {value}\n" if not section else f"    {section}:\n      {key}: {value}\n"
    message, path, text = problems(tmp_path, "agents:\n  apollo:\n" + body)
    dotted = ".".join(p for p in ("agents.apollo", section, key) if p)
    assert_names(message, path, line_of(text, f"{key}:"), dotted,
                 f"found {value}; allowed: a number of seconds > 0")


def test_a_restart_window_of_zero_seconds_is_refused(tmp_path: Path) -> None:
    message, path, text = problems(tmp_path, """
        supervisor:
          intensity:
            max_restarts: 3
            within_s: 0
    """)
    assert_names(message, path, line_of(text, "within_s"), "supervisor.intensity.within_s",
                 "found 0; allowed: a number of seconds > 0")


def test_a_fallback_to_an_unknown_agent_is_refused(tmp_path: Path) -> None:
    message, path, text = problems(tmp_path, """
        agents:
          apollo:
            fallback: athena
          hermes: {}
    """)
    assert_names(message, path, line_of(text, "fallback"), "agents.apollo.fallback",
                 "unknown agent 'athena'", "allowed: apollo, hermes, or zeus")


def test_a_reviewer_that_is_no_agent_is_refused(tmp_path: Path) -> None:
    message, path, _ = problems(tmp_path, "agents:\n  hermes:\n    review_by: themiss\n")
    assert_names(message, path, 3, "agents.hermes.review_by", "unknown agent 'themiss'",
                 "allowed: hermes")


def test_a_delegation_target_that_is_no_agent_is_refused(tmp_path: Path) -> None:
    message, path, text = problems(tmp_path, """
        agents:
          athena:
            kind: orchestrator
            can_delegate_to: [apollo, hades]
          apollo: {}
    """)
    assert_names(message, path, line_of(text, "can_delegate_to"),
                 "agents.athena.can_delegate_to[1]", "unknown agent 'hades'")


def test_a_misspelt_agent_name_is_named_with_the_agent_it_is_closest_to(tmp_path: Path) -> None:
    message, _, _ = problems(tmp_path, """
        agents:
          notes: {}
          writer: {fallback: nots, review_by: notse}
          planner: {kind: orchestrator, can_delegate_to: [note]}
          other: {fallback: zeu}
    """)
    for key, wrong, meant in (("writer.fallback", "nots", "notes"),
                              ("writer.review_by", "notse", "notes"),
                              ("planner.can_delegate_to[0]", "note", "notes"),
                              ("other.fallback", "zeu", "zeus")):
        assert f"agents.{key}: unknown agent {wrong!r} (did you mean {meant!r}?)" in message


@pytest.mark.parametrize(
    ("entrypoint", "says"),
    [
        ("no_such_module_zeus.agents:run",
         "module 'no_such_module_zeus.agents' does not import (ModuleNotFoundError"),
        ("json:no_such_function", "'json' has no attribute 'no_such_function'"),
        ("string:ascii_letters", "which is a str; allowed: a callable"),
        ("json.dumps", "allowed: 'pkg.module:function'"),
        ("json:loads", "loads(s, *, cls=None"),
        ("json:loads", "cannot be called as work(brief, ctx) (too many positional arguments)"),
    ],
)
def test_an_entrypoint_that_does_not_resolve_is_refused(
    tmp_path: Path, entrypoint: str, says: str
) -> None:
    message, path, _ = problems(tmp_path, f"agents:\n  apollo:\n    entrypoint: '{entrypoint}'\n")
    assert_names(message, path, 3, "agents.apollo.entrypoint", f"found '{entrypoint}'", says)


@pytest.mark.parametrize(
    ("command", "key_path", "found"),
    [
        ('"python -m myagents.hotfix"', "agents.talos.command", "found 'python -m myagents"),
        ("[]", "agents.talos.command", "found a list []"),
        ("[python, 3]", "agents.talos.command[1]", "found 3"),
        ("['', x]", "agents.talos.command[0]", "found ''"),
    ],
)
def test_a_command_that_is_not_a_non_empty_list_of_strings_is_refused(
    tmp_path: Path, command: str, key_path: str, found: str
) -> None:
    message, path, _ = problems(tmp_path, f"agents:\n  talos:\n    command: {command}\n")
    assert_names(message, path, 3, key_path, found, "allowed: a non-empty list of strings")


def test_an_agent_with_both_entrypoint_and_command_is_refused(tmp_path: Path) -> None:
    message, path, _ = problems(tmp_path, """
        agents:
          talos:
            entrypoint: "supervisor.examples.faulty:flaky"
            command: [python, -V]
    """)
    assert_names(message, path, 2, "agents.talos", "give either `entrypoint` or `command`")


def test_a_stale_window_not_longer_than_the_heartbeat_is_refused(tmp_path: Path) -> None:
    message, path, text = problems(tmp_path, """
        agents:
          apollo:
            heartbeat: {interval_s: 5, stale_after_s: 5}
    """)
    assert_names(message, path, line_of(text, "heartbeat"), "agents.apollo.heartbeat.stale_after_s",
                 "stale_after_s 5 is not greater than interval_s 5",
                 "allowed: stale_after_s > interval_s")


def test_an_error_in_defaults_points_at_the_defaults_line_once(tmp_path: Path) -> None:
    message, path, text = problems(tmp_path, """
        defaults:
          timeout_s: -5
        agents:
          apollo: {}
          hermes: {}
          talos: {}
    """)
    assert_names(message, path, line_of(text, "timeout_s"), "defaults.timeout_s", "found -5")
    assert message.count("timeout_s") == 1
    assert message.splitlines()[0] == f"{path}: 1 problem; fix and run `zeus validate {path}`"


def test_a_stale_window_from_defaults_shorter_than_an_agents_heartbeat_points_at_the_agent(
    tmp_path: Path,
) -> None:
    message, path, text = problems(tmp_path, """
        defaults:
          heartbeat: {stale_after_s: 10}
        agents:
          apollo:
            heartbeat:
              interval_s: 30
    """)
    assert_names(message, path, line_of(text, "interval_s"), "agents.apollo.heartbeat.interval_s",
                 "stale_after_s 10 is not greater than interval_s 30")


def test_a_bad_nested_default_points_at_its_line_in_defaults(tmp_path: Path) -> None:
    message, path, text = problems(tmp_path, """
        defaults:
          heartbeat:
            interval_s: 0
        agents:
          apollo:
            heartbeat: {stale_after_s: 30}
    """)
    assert_names(message, path, line_of(text, "interval_s"), "defaults.heartbeat.interval_s",
                 "found 0")
    assert "agents.apollo" not in message


def test_yaml_syntax_errors_name_the_line(tmp_path: Path) -> None:
    message, path, text = problems(tmp_path, """
        agents:
          apollo:
            timeout_s: 60
           retry: {max_retries: 2}
    """)
    assert message.startswith(f"{path}:{line_of(text, 'retry')}: not valid YAML:")


def test_an_unclosed_flow_mapping_names_the_line_where_yaml_gave_up(tmp_path: Path) -> None:
    message, path, _ = problems(tmp_path, "agents:\n  apollo: {timeout_s: 60\n")
    assert message.startswith(f"{path}:3: not valid YAML:")


def test_a_duplicate_key_is_refused_naming_both_lines(tmp_path: Path) -> None:
    message, path, _ = problems(tmp_path, """
        agents:
          apollo: {timeout_s: 60}
          apollo: {timeout_s: 90}
    """)
    assert_names(message, path, 3, "agents.apollo", "duplicate key (the first is on line 2)")


def test_an_agent_called_zeus_is_refused_because_zeus_is_the_owner(tmp_path: Path) -> None:
    message, path, _ = problems(tmp_path, "agents:\n  zeus: {}\n")
    assert_names(message, path, 2, "agents.zeus", "`zeus` is reserved")


def test_an_alias_used_inside_its_own_anchor_is_refused(tmp_path: Path) -> None:
    message, path, _ = problems(tmp_path, "agents: &loop\n  apollo: *loop\n")
    assert message.splitlines()[1].startswith(f"{path}:1: a value contains itself")


def test_a_top_level_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    message, path, _ = problems(tmp_path, "- apollo\n- hermes\n")
    assert message.splitlines()[1].startswith(f"{path}:1: found a list")


def test_a_version_other_than_1_is_refused(tmp_path: Path) -> None:
    message, path, _ = problems(tmp_path, "version: 2\n")
    assert_names(message, path, 1, "version", "found 2; allowed: 1")


def test_every_problem_is_listed_in_line_order(tmp_path: Path) -> None:
    message, path, _ = problems(tmp_path, """
        agents:
          apollo:
            timeout_s: 0
            fallback: nobody
          hermes:
            partial_ok: maybe
    """)
    assert [ln.split(": ")[0] for ln in message.splitlines()] == [
        f"{path}", f"{path}:3", f"{path}:4", f"{path}:6"]
    assert message.splitlines()[0].endswith("3 problems; fix and run " f"`zeus validate {path}`")


def test_a_long_list_of_problems_stays_on_one_screen(tmp_path: Path) -> None:
    body = "".join(f"  a{i}: {{timeout_s: 0}}\n" for i in range(25))
    message, _, _ = problems(tmp_path, "agents:\n" + body)
    lines = message.splitlines()
    assert len(lines) == 12
    assert lines[-1] == "... and 15 more"


def test_a_file_that_cannot_be_read_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(RoutingError, match=r"missing\.yml: cannot read it"):
        Routing.load(tmp_path / "missing.yml")


def test_from_dict_names_the_key_path_without_a_line() -> None:
    with pytest.raises(RoutingError) as caught:
        Routing.from_dict({"agents": {"apollo": {"timeout_s": -1}}}, source="inline")
    assert caught.value.args[0].splitlines()[1] == (
        "inline: agents.apollo.timeout_s: found -1; allowed: a number of seconds > 0"
    )


# -- the repository's routing.yml -----------------------------------------------------------

# agent: timeout, retries, backoff, fallback, partial OK, effort (the per-role timeout
# table's columns; athena, apollo's fallback, is the planner the table does not list).
TABLE = {
    "apollo": (60, 2, "exponential", "athena", True, "low"),
    "hermes": (180, 3, "exponential", "talos", False, "medium"),
    "aphrodite": (180, 3, "exponential", "talos", False, "medium"),
    "demeter": (180, 3, "exponential", "talos", False, "medium"),
    "themis": (120, 2, "exponential", "zeus", False, "high"),
    "prometheus": (300, 2, "exponential", "hermes", False, "medium"),
    "talos": (30, 1, "none", "hermes", True, "low"),
    "gaia": (120, 2, "exponential", "hermes", True, "high"),
}


@pytest.fixture(scope="module")
def repository_routing() -> Routing:
    return Routing.load(ROOT / "routing.yml")


@pytest.mark.parametrize("agent", sorted(TABLE))
def test_the_repository_routing_matches_the_reference_table(
    repository_routing: Routing, agent: str
) -> None:
    policy = repository_routing.agent(agent)
    assert (
        policy.timeout_s, policy.retry.max_retries, policy.retry.backoff.value, policy.fallback,
        policy.partial_ok, policy.reasoning_effort,
    ) == TABLE[agent]


def test_the_repository_routing_has_the_whole_pantheon(repository_routing: Routing) -> None:
    assert set(repository_routing.agents) == {*TABLE, "athena"}
    athena = repository_routing.agent("athena")
    assert (athena.kind, athena.can_delegate_to) == ("orchestrator", ("apollo",))


def test_the_repository_routing_keeps_the_tables_retries_and_marks_explorers_read_only(
    repository_routing: Routing,
) -> None:
    agents = repository_routing.agents
    # A stateful performer would get one follow-up instead of the table's retries and
    # fallback, so no agent of the reference table is stateful.
    assert {n for n, p in agents.items() if p.stateful} == set()
    assert {"apollo", "gaia"} <= {n for n, p in agents.items() if p.read_only}
    assert {n for n, p in agents.items() if p.review_by == "themis"} == {
        "hermes", "aphrodite", "demeter"}


def test_the_repository_routing_sets_defaults_and_supervisor_limits(
    repository_routing: Routing,
) -> None:
    sup = repository_routing.supervisor
    assert (sup.max_depth, sup.max_concurrent, sup.intensity.max_restarts,
            sup.intensity.within_s, sup.budget.max_cost) == (2, 64, 20, 60.0, 5.0)
    for policy in repository_routing.agents.values():
        assert policy.isolation == "thread"
        assert policy.heartbeat.stale_after_s > policy.heartbeat.interval_s
        assert policy.shutdown.grace_s == 2.0


# -- the JSON Schema ----------------------------------------------------------------------------


def test_the_file_schema_knows_every_key_the_repository_routing_uses() -> None:
    import yaml

    schema = Routing.file_schema()
    data = yaml.safe_load((ROOT / "routing.yml").read_text(encoding="utf-8"))
    assert set(data) <= set(schema["properties"])
    defs = schema["$defs"]
    assert set(data["defaults"]) <= set(defs["Defaults"]["properties"])
    assert set(data["supervisor"]) <= set(defs["SupervisorPolicy"]["properties"])
    for policy in data["agents"].values():
        assert set(policy) <= set(defs["AgentPolicy"]["properties"])
    assert schema["additionalProperties"] is False
    assert defs["AgentPolicy"]["additionalProperties"] is False
    assert "entrypoint" not in defs["Defaults"]["properties"]


# -- agent CLIs: standard input, env, the heartbeat's defaults ------------------------------


def test_inputs_via_stdin_is_refused_for_an_agent_cli_on_its_line(tmp_path: Path) -> None:
    message, path, text = problems(tmp_path, """\
version: 1
agents:
  hermes:
    speaks: codex
    inputs_via: stdin
""")
    assert_names(message, path, line_of(text, "inputs_via"), "agents.hermes.inputs_via",
                 "standard input closed", "allowed: argv")


def test_a_lines_command_may_still_take_its_inputs_on_stdin() -> None:
    routing = Routing.from_dict({"version": 1, "agents": {"cat": {
        "command": ["cat"], "inputs_via": "stdin"}}})
    assert routing.agent("cat").inputs_via == "stdin"


def test_env_belongs_to_an_agent_that_runs_a_program(tmp_path: Path) -> None:
    message, path, text = problems(tmp_path, """\
version: 1
agents:
  counter:
    entrypoint: supervisor.examples.explorer:explore
    env: {A: b}
""")
    assert_names(message, path, line_of(text, "env:"), "agents.counter.env", "runs none")
    routing = Routing.from_dict({"version": 1, "agents": {"hermes": {
        "speaks": "claude", "env": {"CLAUDE_CODE_MAX_RETRIES": "1"}}}})
    assert routing.agent("hermes").env == {"CLAUDE_CODE_MAX_RETRIES": "1"}


def test_an_agent_cli_without_a_heartbeat_gets_the_cli_sized_one() -> None:
    routing = Routing.from_dict({"version": 1, "agents": {
        "hermes": {"speaks": "claude"},
        "talos": {"speaks": "codex", "heartbeat": {"stale_after_s": 3}},
        "apollo": {"speaks": "gemini", "heartbeat": {"stale_after_s": 2400}},
        "plain": {"command": ["true"]},
    }})
    hermes = routing.agent("hermes").heartbeat
    assert (hermes.stale_after_s, hermes.in_tool_s, hermes.interval_s) == (120, 1800, 1.0)
    talos = routing.agent("talos").heartbeat  # what it sets is kept; the rest is filled
    assert (talos.stale_after_s, talos.in_tool_s) == (3, 1800)
    apollo = routing.agent("apollo").heartbeat  # never less time inside a tool
    assert (apollo.stale_after_s, apollo.in_tool_s) == (2400, 2400)
    plain = routing.agent("plain").heartbeat  # not a CLI: the general default
    assert (plain.stale_after_s, plain.in_tool_s) == (10, 30)


def test_a_cursor_agent_may_cap_its_tokens_and_with_pricing_its_cost() -> None:
    routing = Routing.from_dict({"version": 1, "agents": {"cursor": {
        "speaks": "cursor", "budget": {"max_input_tokens": 200_000, "max_cost": 1.0},
        "pricing": {"input_per_mtok": 3.0, "output_per_mtok": 15.0}}}})
    budget = routing.agent("cursor").budget
    assert (budget.max_input_tokens, budget.max_cost) == (200_000, 1.0)


def test_a_cursor_cost_cap_without_pricing_is_refused_on_its_line(tmp_path: Path) -> None:
    message, path, text = problems(tmp_path, """\
version: 1
agents:
  cursor:
    speaks: cursor
    budget: {max_cost: 1.0}
""")
    assert_names(message, path, line_of(text, "max_cost"), "agents.cursor.budget.max_cost",
                 "reports tokens, never a cost", "add pricing:")
