"""`zeus validate [PATH] [--no-import]`: check a routing file and print its agent table.

PATH defaults to routing.yml in the current directory, else the pantheon Zeus
ships with (as for `zeus dispatch` and `zeus demo`). A routing file is code:
each entrypoint is imported to check it (its module's import-time code runs),
from the installed packages or else the current directory. `--no-import` checks
a file you do not trust yet: entrypoints are checked for their form only, and
nothing is imported. A Pantheon routing.yml (one with a `delegation:` section)
is read too, and the command says what it mapped and what it ignored. On a bad
file it prints every problem (file:line: key path: what was found and what is
allowed) on stderr and exits 2; so does an agent that could not run (neither
`entrypoint:` nor `command:`, unless `--registered NAME` says the host registers
it in code) and a file with no agents. A command that pastes a brief's text into
a shell script (`sh -c "... {scope}"`) is warned about on stderr, and so is a
command that speaks lines or jsonl but runs an agent CLI (`speaks: codex` reads it). `--explain
[AGENT]` prints each agent's effective policy (or AGENT's) with every default
made visible: the deadline and the stop ladder after it, the heartbeat and stale
thresholds, the retry waits, the fallback chain with each step's timeout, and
what an attempt and the whole delegation can take at most, and for a program what
it speaks and its argv. A program (`command:`'s first word, else the agent CLI's usual
name) not on PATH is an error naming it and the agent's `command:` key.
Exit status: 0 for a valid file, 2 for a bad one.
"""

from __future__ import annotations

import argparse
import random
import re
import shlex
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

from rich.text import Text

from actors.speaks import CLI_PROGRAMS, Invocation, cli_argv
from supervisor.cli.commands import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    console,
    import_beside,
    print_fitted,
    print_table,
)
from supervisor.cli.commands.dispatch import default_routing, unknown_agent
from supervisor.errors import RoutingError
from supervisor.routing import OWNER, AgentPolicy, Routing
from supervisor.routing.commands import cli_warning, shell_warning
from supervisor.rules.backoff import backoff_delay

__all__ = ["add_parser", "agent_rows", "explain", "missing_programs", "policy_lines", "run"]

ALL = ""  # `--explain` without an agent: every agent
HEADERS = ("agent", "role", "kind", "timeout", "retries", "backoff", "fallback", "partial OK",
           "effort", "isolation", "sessions")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check a routing.yml and print its agent table",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("path", metavar="PATH", nargs="?", default=None, help="the routing "
                        "file (default: routing.yml here, else the shipped pantheon)")
    parser.add_argument("--no-import", action="store_true", help="do not import entrypoints "
                        "(no code from the file runs); check their form only")
    parser.add_argument("--registered", metavar="NAME", action="append", default=[],
                        help="an agent the host registers in code (zeus.register), so it "
                        "needs no entrypoint or command here; repeat it, or give NAME,NAME")
    parser.add_argument(
        "--explain",
        metavar="AGENT",
        nargs="?",
        const=ALL,
        default=None,
        help="print every agent's effective policy (or AGENT's), each default made visible",
    )
    parser.set_defaults(run=run)


def _seconds(value: float) -> str:
    return f"{value:g}s"


def _short(role: str | None, width: int = 28) -> str:
    """A role as a column: Pantheon's are sentences, so keep the part before the explanation."""
    if not role:
        return "-"
    role = re.split(r":|\s[\u2014\u2013-]\s|,", role, maxsplit=1)[0].strip() or role
    return role if len(role) <= width else role[: width - 1].rstrip() + "…"


def _row(name: str, policy: AgentPolicy) -> list[str]:
    retry = policy.retry
    fallback = policy.fallback or "-"
    if fallback == OWNER:
        fallback = "zeus (owner)"
    return [
        name,
        _short(policy.role),
        policy.kind,
        _seconds(policy.timeout_s),
        str(retry.max_retries),
        retry.backoff.value if retry.max_retries else "-",
        fallback,
        "yes" if policy.partial_ok else "no",
        policy.reasoning_effort or "-",
        (f"process ({policy.speaks})" if policy.speaks_cli else "process (command)")
        if policy.runs_program else policy.isolation,
        str(policy.session_max),
    ]


def agent_rows(routing: Routing) -> list[list[str]]:
    """One row per agent, in file order, with the columns of `HEADERS`."""
    return [_row(name, policy) for name, policy in routing.agents.items()]


def run(args: argparse.Namespace) -> int:
    if args.explain and args.path is None and args.explain.endswith((".yml", ".yaml")):
        args.path, args.explain = args.explain, ALL  # `--explain routing.yml`: the file
    path = Path(args.path) if args.path is not None else default_routing()
    registered = {name for given in args.registered for name in given.split(",") if name}
    import_beside(path)
    try:
        routing = Routing.load(path, import_entrypoints=not args.no_import,
                               registered=registered)
    except RoutingError as exc:
        print(exc, file=sys.stderr)
        return EXIT_BAD_INPUT
    missing = missing_programs(routing, str(path))  # (Routing.load never looks at PATH)
    for problem in missing:
        print(problem, file=sys.stderr)
    if args.explain is not None:
        status = explain(routing, args.explain)
        return EXIT_BAD_INPUT if missing else status
    if missing:
        return EXIT_BAD_INPUT
    out = console()
    count = len(routing.agents)
    dialect = "Pantheon dialect" if routing.dialect == "pantheon" else "native dialect"
    print_fitted(out, f"{path}: valid, {count} agent{'s' if count != 1 else ''}, {dialect}")
    if routing.agents:
        print_table(out, HEADERS, agent_rows(routing))
    print_fitted(out, _supervisor_line(routing))
    unwired = [name for name, p in routing.agents.items() if not (p.entrypoint or p.runs_program)]
    if unwired:
        print_fitted(out, "no entrypoint or command (the host registers them with "
                     f"zeus.register): {', '.join(unwired)}")
    if args.no_import:
        print_fitted(out, "entrypoints not imported (--no-import): only their form was checked")
    for name, policy in routing.agents.items():
        warning = shell_warning(policy.command) if policy.command else None
        if warning is not None:
            print(f"{path}: warning: agents.{name}.command: {warning}", file=sys.stderr)
        warning = (cli_warning(policy.command, policy.speaks)
                   if policy.command and not policy.speaks_cli else None)
        if warning is not None:
            print(f"{path}: warning: agents.{name}.speaks: {warning}", file=sys.stderr)
    for heading, lines in (("mapped", routing.mapped), ("ignored", routing.ignored)):
        if lines:
            out.print(Text(f"{heading}:"))
            for line in lines:
                print_fitted(out, f"  - {line}", indent=4)
    return EXIT_OK


def _program(policy: AgentPolicy) -> str | None:
    """The program to find on PATH (None: none, `python` is Zeus's own, or a placeholder)."""
    if not policy.runs_program:
        return None
    program = policy.command[0] if policy.command else CLI_PROGRAMS[policy.speaks]
    return None if program in ("python", "python3") or "{" in program else program


def missing_programs(routing: Routing, source: str) -> list[str]:
    """An error for each agent whose program is not on PATH (naming its `command:` key)."""
    return [f"{source}: agents.{name}: "
            + (f"speaks {p.speaks}, but its program" if p.speaks_cli else "its program")
            + f" {program!r} is not on PATH; install it, or set agents.{name}.command to "
            "where it is" for name, p in routing.agents.items()
            if (program := _program(p)) is not None and shutil.which(program) is None]


# -- --explain: the effective policy, every default made visible --------------------------------
def explain(routing: Routing, agent: str) -> int:
    """Print `agent`'s effective policy (every agent's when it is `ALL`); the exit status."""
    if agent != ALL and agent not in routing.agents:
        print(f"zeus validate: {unknown_agent(agent, routing)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    out = console()
    width = out.size.width if out.is_terminal else None
    names = list(routing.agents) if agent == ALL else [agent]
    for n, name in enumerate(names):
        if n:
            out.print()
        policy = routing.agents[name]
        print_fitted(out, _headline(name, policy), style="bold")
        for label, text in policy_lines(name, policy, routing):
            for line in _labelled(label, text, width):
                out.print(Text(line), soft_wrap=True)
    if agent == ALL:
        out.print()
        print_fitted(out, _supervisor_line(routing))
    return EXIT_OK


def _labelled(label: str, text: str, width: int | None) -> list[str]:
    """`  label       text`, the text wrapped under itself on a terminal."""
    lead = f"  {label:<12}"
    if width is None or width - len(lead) < 20:
        return [lead + text]
    lines = textwrap.wrap(text, width - len(lead), break_long_words=False,
                          break_on_hyphens=False) or [""]
    return [lead + lines[0], *(" " * len(lead) + line for line in lines[1:])]


def _headline(name: str, policy: AgentPolicy) -> str:
    what = ", ".join(x for x in (policy.role, "an orchestrator" if policy.kind ==
                                 "orchestrator" else "a leaf") if x)
    if policy.speaks_cli:
        program = " ".join(policy.command or (CLI_PROGRAMS[policy.speaks],))
        work = f"runs {program} (speaks {policy.speaks}, a process)"
    elif policy.command:
        speaks = "speaks jsonl, " if policy.speaks == "jsonl" else ""
        work = f"runs the command {' '.join(policy.command)} ({speaks}a process)"
    elif policy.entrypoint:
        work = f"runs {policy.entrypoint} in a {policy.isolation}"
    else:
        work = f"no work function here: the host registers it ({policy.isolation})"
    return f"{name} ({what}): {work}"


def _attempt_at_most(policy: AgentPolicy) -> float:
    """The longest an attempt can hold its agent: its deadline, the grace, SIGTERM's wait."""
    stop = policy.shutdown.grace_s + (policy.shutdown.term_s if _killable(policy) else 0.0)
    return policy.timeout_s + stop


def _killable(policy: AgentPolicy) -> bool:
    return policy.runs_program or policy.isolation in ("process", "ray")


def _waits(policy: AgentPolicy) -> list[float]:
    steady = policy.retry.model_copy(update={"jitter": 0.0})
    return [backoff_delay(steady, k, random.Random(0)) for k in
            range(1, policy.retry.max_retries + 1)]


def policy_lines(name: str, policy: AgentPolicy, routing: Routing) -> list[tuple[str, str]]:
    """What each part of `policy` does, as (label, sentence) pairs; nothing left implicit."""
    s, stop = _seconds, policy.shutdown
    if _killable(policy):
        first = "SIGINT to its process group" if policy.runs_program else "a cooperative cancel"
        ladder = (f"past it: {first}, {s(stop.grace_s)} to stop, SIGTERM to its "
                  f"process group, {s(stop.term_s)}, SIGKILL")
    else:
        ladder = (f"past it: a cooperative cancel, {s(stop.grace_s)} to stop, then its thread is "
                  "fenced (a thread cannot be killed: isolation: process can)")
    beat, retry = policy.heartbeat, policy.retry
    in_tool = ("inside `with ctx.tool(...)`" if not policy.runs_program else "inside a tool call"
               + (" its stream reports" if policy.speaks != "lines" else " (lines report none)"))
    waits = ", ".join(s(round(w, 3)) for w in _waits(policy)) or "-"
    if policy.stateful:
        retried = "never replaced (stateful): one follow-up in its session, then blocked"
    elif retry.max_retries:
        on = ", ".join(o.value for o in retry.on)
        if retry.backoff.value == "none":
            retried = f"{retry.max_retries} on {on}, at once (backoff: none)"
        else:
            jitter = f" +/- {retry.jitter * 100:g}%" if retry.jitter else ""
            retried = (f"{retry.max_retries} on {on}; waits {waits} ({retry.backoff.value}"
                       f"{jitter}, at most {s(retry.max_s)})")
        if not policy.retry_after_tool_calls:
            retried += "; not after a tool call with side effects"
    else:
        retried = "none (retry.max_retries: 0)"
    caps, tree = (_caps(policy.budget.model_dump()) or "none of its own",
                  _caps(routing.supervisor.budget.model_dump()))
    lines = [
        ("deadline", f"{s(policy.timeout_s)} an attempt (a brief's timeout_s replaces it); "
                     f"{ladder}: an attempt holds at most {s(_attempt_at_most(policy))}"),
        ("heartbeat", f"every {s(beat.interval_s)}; stale after {s(beat.stale_after_s)} without "
                      f"progress, {s(beat.in_tool_s)} {in_tool}"),
        ("retry", retried),
        ("fallback", _chain(name, routing)),
        ("at most", f"{s(round(_delegation_at_most(name, routing), 3))} for the whole delegation, "
                    "every attempt and wait included"),
        ("partial OK", "yes: a deadline or stale stop after partial results settles partial "
                       "(no retry, no fallback)" if policy.partial_ok else
                       "no: it completes or fails (partial results are kept in the summary)"),
        ("budget", caps + (f"; the whole tree: {tree}" if tree else "")),
        ("sessions", f"{policy.session_max} kept warm" if policy.session_max else "none"),
        ("result", _result(policy)),
        ("effort", policy.reasoning_effort or "none given"),
        ("writes", "no: read_only, an abandoned attempt cannot corrupt anything"
                   if policy.read_only else "yes: a retry waits until the last writer stopped"),
    ]
    if policy.kind == "orchestrator":
        lines.append(("delegates", ", ".join(policy.can_delegate_to)
                      if policy.can_delegate_to is not None else "to any agent"))
    if policy.review_by:
        lines.append(("review", f"a `task` brief is reviewed by {policy.review_by}"))
    if policy.command:
        lines.append(("inputs", f"via {policy.inputs_via}"))
    if policy.runs_program:
        lines += _speaks_lines(name, policy)
    return lines


_SPEAKS = {  # what each stream tells Zeus (docs/agent-clis.md)
    "lines": "each line progress, the output the result (stopped: its last 50 lines partial)",
    "jsonl": "Zeus's JSON lines (partial, charge, heartbeat, tool, session, result, error)",
    "claude": "its session, tools, tokens live (priced by pricing:), total_cost_usd at the end",
    "codex": "its thread, tool items, tokens at its turn's end (priced by pricing:), no cost",
    "gemini": "its session, tools, tokens at its result (priced by pricing:), no cost",
    "opencode": "its session, tools once done, each step's own cost and tokens",
    "cursor": "its session, tools, tokens at its result (priced by pricing:), no cost",
}


def _speaks_lines(name: str, policy: AgentPolicy) -> list[tuple[str, str]]:
    """What a program agent speaks, the argv Zeus runs, its exit grace and its summary."""
    def argv(resume: str | None = None) -> str:
        return shlex.join(cli_argv(Invocation(policy.speaks, program=policy.command or (),
                                              args=policy.args, resume=resume), "PROMPT"))

    lines = [("speaks", f"{policy.speaks}: {_SPEAKS[policy.speaks]} (docs/agent-clis.md)")]
    if policy.speaks_cli:
        lines += [("argv", argv() + ("; with a cost cap, --max-budget-usd LEFT (what may still "
                   "be spent: Claude's own backstop)" if policy.speaks == "claude" else "")),
                  ("follow-up", argv("ID") + " (ID: its session_id, kept with the attempt)")]
    else:
        lines.append(("argv", shlex.join(a.replace("{prompt}", "PROMPT")
                                         for a in policy.command or ())))
    if policy.speaks != "lines":
        lines.append(("exit grace", f"{_seconds(policy.exit_grace_s)}: still running this long "
                      "after its result, it is stopped (SIGINT first), its result kept"))
    lines.append(("summary", "required: a final text without a <subtask_summary> block is an "
                  "error" if policy.require_summary else "read if there: the last "
                  "<subtask_summary> block's status decides; without one the text is the result"))
    return lines


def _result(policy: AgentPolicy) -> str:
    result = policy.result
    size = (f"at most {result.max_chars} characters, then {result.overflow}"
            if result.max_chars else "any size")
    return size + (f"; checked against {result.schema_}" if result.schema_ else "")


def _caps(budget: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in budget.items() if v is not None)


def _chain(name: str, routing: Routing) -> str:
    """`talos (30s) -> hermes (180s) -> talos: tried already, the chain ends`."""
    seen, parts = [name], [f"{name} ({_seconds(routing.agents[name].timeout_s)})"]
    nxt = routing.agents[name].fallback
    while nxt is not None:
        if nxt == OWNER:
            parts.append("zeus: the failure goes back to the owner")
            break
        if nxt in seen:
            parts.append(f"{nxt}: tried already, the chain ends")
            break
        seen.append(nxt)
        parts.append(f"{nxt} ({_seconds(routing.agents[nxt].timeout_s)})")
        nxt = routing.agents[nxt].fallback
    if len(parts) == 1:
        return "none: when its retries are spent, the delegation settles"
    return " -> ".join(parts)


def _delegation_at_most(name: str, routing: Routing) -> float:
    """Every attempt of every agent in the fallback chain at its longest, with the longest
    waits between retries (jitter included)."""
    total, seen = 0.0, set()
    nxt: str | None = name
    while nxt is not None and nxt != OWNER and nxt not in seen:
        seen.add(nxt)
        policy = routing.agents[nxt]
        attempts = 2 if policy.stateful else policy.retry.max_retries + 1
        longest = [min(w * (1 + policy.retry.jitter), policy.retry.max_s)
                   for w in _waits(policy)]
        total += attempts * _attempt_at_most(policy) + sum(longest[: attempts - 1])
        nxt = policy.fallback
    return total


def _supervisor_line(routing: Routing) -> str:
    sup = routing.supervisor
    return (f"supervisor: max_depth {sup.max_depth}, max_concurrent {sup.max_concurrent}, "
            f"at most {sup.intensity.max_restarts} restarts within "
            f"{_seconds(sup.intensity.within_s)}, tree budget: "
            f"{_caps(sup.budget.model_dump()) or 'none'}")
