"""`zeus validate [PATH] [--no-import]`: check a routing file and print its agent table.

PATH defaults to routing.yml in the current directory, else the pantheon Zeus
ships with (as for `zeus dispatch` and `zeus demo`). A routing file is code:
each entrypoint is imported to check it (its module's import-time code runs),
from the installed packages or else the current directory. `--no-import` checks
a file you do not trust yet: entrypoints are checked for their form only, and
nothing is imported. A Pantheon routing.yml (one with a `delegation:` section)
is read too, and the command says what it mapped and what it ignored. On a bad
file it prints every problem (file:line: key path: what was found and what is
allowed) on stderr and exits 2. A command that pastes a brief's text into a
shell script (`sh -c "... {scope}"`) is warned about on stderr.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from rich.text import Text

from supervisor.cli.commands import EXIT_BAD_INPUT, EXIT_OK, console, print_table
from supervisor.cli.commands.dispatch import default_routing
from supervisor.errors import RoutingError
from supervisor.routing import OWNER, AgentPolicy, Routing
from supervisor.routing.commands import shell_warning

__all__ = ["add_parser", "agent_rows", "run"]

HEADERS = (
    "agent",
    "role",
    "kind",
    "timeout",
    "retries",
    "backoff",
    "fallback",
    "partial OK",
    "effort",
    "isolation",
    "sessions",
)


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check a routing.yml and print its agent table",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument(
        "path",
        metavar="PATH",
        nargs="?",
        default=None,
        help="the routing file (default: routing.yml here, else the shipped pantheon)",
    )
    parser.add_argument(
        "--no-import",
        action="store_true",
        help="do not import entrypoints (no code from the file runs); check their form only",
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
        "process (command)" if policy.command else policy.isolation,
        str(policy.session_max),
    ]


def agent_rows(routing: Routing) -> list[list[str]]:
    """One row per agent, in file order, with the columns of `HEADERS`."""
    return [_row(name, policy) for name, policy in routing.agents.items()]


def run(args: argparse.Namespace) -> int:
    path = Path(args.path) if args.path is not None else default_routing()
    try:
        routing = Routing.load(path, import_entrypoints=not args.no_import)
    except RoutingError as exc:
        print(exc, file=sys.stderr)
        return EXIT_BAD_INPUT
    out = console()
    count = len(routing.agents)
    dialect = "Pantheon dialect" if routing.dialect == "pantheon" else "native dialect"
    out.print(Text(f"{path}: valid, {count} agent{'s' if count != 1 else ''}, {dialect}"))
    if routing.agents:
        print_table(out, HEADERS, agent_rows(routing))
    sup = routing.supervisor
    caps = ", ".join(
        f"{name} {value:g}" for name, value in sup.budget.model_dump().items() if value is not None
    )
    out.print(
        Text(
            f"supervisor: max_depth {sup.max_depth}, max_concurrent {sup.max_concurrent}, "
            f"at most {sup.intensity.max_restarts} restarts within "
            f"{_seconds(sup.intensity.within_s)}, tree budget: {caps or 'none'}"
        )
    )
    unwired = [name for name, p in routing.agents.items() if not (p.entrypoint or p.command)]
    if unwired:
        out.print(
            Text(
                f"no entrypoint or command (register them with zeus.register): {', '.join(unwired)}"
            )
        )
    if args.no_import:
        out.print(Text("entrypoints not imported (--no-import): only their form was checked"))
    for name, policy in routing.agents.items():
        warning = shell_warning(policy.command) if policy.command else None
        if warning is not None:
            print(f"{path}: warning: agents.{name}.command: {warning}", file=sys.stderr)
    for heading, lines in (("mapped", routing.mapped), ("ignored", routing.ignored)):
        if lines:
            out.print(Text(f"{heading}:"))
            for line in lines:
                out.print(Text(f"  - {line}"))
    return EXIT_OK
