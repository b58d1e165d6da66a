"""The checks of one agent's merged policy that pydantic cannot see.

Names of other agents (`fallback`, `review_by`, `can_delegate_to`), entrypoint
imports, the Ray extra, command words, and the heartbeat invariant
(`stale_after_s > interval_s`, `stale_in_tool_s >= stale_after_s`). Each adds its
problems to `Problems`; `Routing` (table) runs them after pydantic's own checks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from supervisor.errors import did_you_mean
from supervisor.routing.commands import command_problems
from supervisor.routing.entrypoints import (
    EntrypointError,
    entrypoint_form_problem,
    import_entrypoint,
)
from supervisor.routing.lines import KeyPath
from supervisor.routing.policies import OWNER, HeartbeatPolicy
from supervisor.routing.problems import WORDS, Problems
from supervisor.routing.ray_policy import MISSING_RAY, ray_installed


def check_agent(
    name: str,
    agent: Mapping[str, Any],
    names: set[str],
    others: Callable[[], str],
    problems: Problems,
    import_entrypoints: bool = True,
) -> None:
    """What pydantic cannot see: names of other agents, imports, and the heartbeat invariant."""
    at: KeyPath = ("agents", name)
    fallback = agent.get("fallback")
    if isinstance(fallback, str) and fallback != OWNER and fallback not in names:
        problems.add((*at, "fallback"), f"unknown agent {fallback!r}"
                     f"{did_you_mean(fallback, [*names, OWNER])}; allowed: {others()}, "
                     "or zeus (give the failure back to the owner)")
    review_by = agent.get("review_by")
    if isinstance(review_by, str) and review_by not in names:
        problems.add((*at, "review_by"), f"unknown agent {review_by!r}"
                     f"{did_you_mean(review_by, names)}; allowed: {others()}")
    targets = agent.get("can_delegate_to")
    if isinstance(targets, list | tuple):
        for index, target in enumerate(targets):
            if isinstance(target, str) and target not in names:
                problems.add((*at, "can_delegate_to", index), f"unknown agent {target!r}"
                             f"{did_you_mean(target, names)}; allowed: {others()}")
    entrypoint = agent.get("entrypoint")
    if isinstance(entrypoint, str) and not import_entrypoints:
        problem = entrypoint_form_problem(entrypoint)
        if problem is not None:
            problems.add((*at, "entrypoint"), problem)
    elif isinstance(entrypoint, str):
        try:
            import_entrypoint(entrypoint)
        except EntrypointError as exc:
            problems.add((*at, "entrypoint"), str(exc))
    if agent.get("isolation") == "ray" and not agent.get("command") and not ray_installed():
        problems.add((*at, "isolation"), MISSING_RAY)
    command = agent.get("command")
    if isinstance(command, list | tuple) and command and command[0] == "":
        problems.add((*at, "command", 0), f"found ''; allowed: {WORDS['command']}")
    if isinstance(command, list | tuple) and all(isinstance(arg, str) for arg in command):
        for index, message in command_problems(command, agent.get("inputs_via", "argv")):
            problems.add((*at, "command", index), message)
    check_speaks(agent, at, problems)
    check_program_input(agent, at, problems)
    check_heartbeat(agent, at, problems)


def speaks_cli(agent: Mapping[str, Any]) -> bool:
    """Whether an agent's mapping (as written, before pydantic) names an agent CLI in
    `speaks:` (`AgentPolicy.speaks_cli` of a built policy)."""
    speaks = agent.get("speaks", "lines")
    return isinstance(speaks, str) and speaks not in ("lines", "jsonl")


def check_program_input(agent: Mapping[str, Any], at: KeyPath, problems: Problems) -> None:
    """An agent CLI's standard input is /dev/null (the CLIs read an open pipe to its end
    before they start), so its inputs cannot come that way; and `env:` is a program's."""
    speaks = agent.get("speaks", "lines")
    cli = speaks_cli(agent)
    if cli and agent.get("inputs_via") == "stdin":
        problems.add((*at, "inputs_via"), f"speaks: {speaks} runs with its standard input "
                     "closed (an agent CLI reads an open one to its end before it starts), so "
                     "the inputs cannot come on it; allowed: argv (the inputs are in the "
                     "prompt) or file")
    if agent.get("env") and not cli and agent.get("command") is None:
        problems.add((*at, "env"), "env: is added to the environment of an agent's "
                     "program, and this agent runs none; give it a command: or speaks: an "
                     "agent CLI, or remove env:")


# The agent CLIs that report tokens and never a cost (docs/agent-clis.md): a cost cap
# holds only on tokens priced by `pricing:`. (Cursor's tokens come only with its result,
# so a cap on it holds at the end.)
_REPORTS_TOKENS_ONLY = frozenset({"codex", "gemini", "cursor"})


def check_speaks(agent: Mapping[str, Any], at: KeyPath, problems: Problems) -> None:
    """`speaks:` against `command:`, `args:` and the budget: a plain stream needs its
    command, `args:` belongs to an agent CLI, and a cap needs the spend it caps."""
    speaks = agent.get("speaks", "lines")
    if not isinstance(speaks, str):
        return
    cli = speaks_cli(agent)
    if "speaks" in agent and not cli and agent.get("command") is None:
        problems.add((*at, "speaks"), f"speaks: {speaks} reads a command's output, but the "
                     "agent has no command:; give it one, or name an agent CLI (claude, "
                     "codex, gemini, opencode, cursor)")
    if agent.get("args") and not cli:
        problems.add((*at, "args"), "args: adds flags to an agent CLI's own (speaks: claude, "
                     f"...); with speaks: {speaks}, put them in command:")
    budget = agent.get("budget")
    if not cli or not isinstance(budget, Mapping):
        return
    if (speaks in _REPORTS_TOKENS_ONLY and budget.get("max_cost") is not None
            and agent.get("pricing") is None):
        problems.add((*at, "budget", "max_cost"), f"speaks: {speaks} reports tokens, never a "
                     "cost, so max_cost needs pricing: {input_per_mtok: ..., output_per_mtok: "
                     "...} to price them as they come; add pricing:, or cap the tokens "
                     "(max_input_tokens, max_output_tokens)")


def check_heartbeat(policy: Mapping[str, Any], at: KeyPath, problems: Problems) -> None:
    beat = policy.get("heartbeat")
    if not isinstance(beat, Mapping):
        return
    defaults = HeartbeatPolicy()
    interval = beat.get("interval_s", defaults.interval_s)
    stale = beat.get("stale_after_s", defaults.stale_after_s)
    in_tool = beat.get("stale_in_tool_s")
    if (positive(in_tool) and positive(stale) and in_tool < stale):
        problems.add((*at, "heartbeat", "stale_in_tool_s"),
                     f"stale_in_tool_s {in_tool} is below stale_after_s {stale}; allowed: "
                     "stale_in_tool_s >= stale_after_s (a long tool call gets more time, "
                     "not less)")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0
               for v in (interval, stale)) or stale > interval:
        return
    # Point at whichever of the two this agent sets itself; else at stale_after_s.
    key = "stale_after_s"
    if at[0] == "agents" and problems.origin((*at, "heartbeat", key))[0] == "defaults" and (
        problems.origin((*at, "heartbeat", "interval_s"))[0] != "defaults"
    ):
        key = "interval_s"
    problems.add((*at, "heartbeat", key),
                 f"stale_after_s {stale} is not greater than interval_s {interval}; allowed: "
                 "stale_after_s > interval_s (several heartbeats fit in the stale window)")


def positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0
