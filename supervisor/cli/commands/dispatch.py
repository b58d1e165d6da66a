"""`zeus dispatch AGENT "scope" [--inputs JSON | --inputs-text TEXT] [--json] [--log F] ...`.

One delegation, supervised: it prints the `<subtask_summary>` block (or, with
`--json`, the summary as JSON) on standard output. `--inputs` takes JSON
(anything else is refused); `--inputs-text` passes plain text as it is. While it runs, the live tree
is drawn on standard error when that is a terminal. The routing is F, else
routing.yml in the current directory, else the pantheon Zeus ships with.
Exit status: 0 when the delegation completed, 1 when it did not, 2 for bad
input (an unknown agent, an agent with no work function, a bad routing file, a
bad option).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from actors import Brief, Summary
from supervisor.cli.commands import (
    EXIT_BAD_INPUT,
    EXIT_INCOMPLETE,
    EXIT_OK,
    console,
    import_beside,
)
from supervisor.cli.live import LiveTree, open_journal
from supervisor.cli.reader import watch_reader
from supervisor.core.zeus import Zeus
from supervisor.errors import RoutingError, SupervisorError, did_you_mean
from supervisor.routing import DEFAULT_ROUTING, Routing
from supervisor.routing.bounded import BoundExceeded, loads_json_bounded

__all__ = [
    "add_parser",
    "agent_problem",
    "brief_problem",
    "brief_problems",
    "default_routing",
    "inputs_or_problem",
    "load_routing",
    "run",
    "unknown_agent",
]


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "dispatch",
        help="run one delegation and print its summary",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("agent", metavar="AGENT", help="the agent, as routing names it")
    parser.add_argument("scope", metavar="SCOPE", help="what to do, in a sentence")
    parser.add_argument("--routing", metavar="F", type=Path, help="the routing file")
    parser.add_argument(
        "--partial-ok",
        action="store_true",
        default=None,
        help="on a timeout, settle with the partial results found so far",
    )
    parser.add_argument("--timeout", metavar="S", type=float, help="each attempt's deadline")
    given = parser.add_mutually_exclusive_group()
    given.add_argument(
        "--inputs", metavar="JSON", help="the brief's inputs, as JSON (a string is '\"...\"')"
    )
    given.add_argument(
        "--inputs-text", metavar="TEXT", help="the brief's inputs: TEXT as a plain string"
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--log", metavar="F", type=Path, help="append the event journal to F")
    parser.set_defaults(run=run)


# -- shared with `zeus run` and `zeus demo` ------------------------------------------------
def default_routing() -> Path:
    """routing.yml in the current directory when there is one, else the shipped pantheon."""
    here = Path("routing.yml")
    return here if here.is_file() else DEFAULT_ROUTING


def load_routing(path: Path | None, command: str) -> Routing | None:
    """The routing at `path` (default: `default_routing()`), or None after saying why not."""
    path = path if path is not None else default_routing()
    import_beside(path)
    try:
        return Routing.load(path)
    except RoutingError as exc:
        print(f"zeus {command}: {exc}", file=sys.stderr)
        return None


def brief_problems(exc: ValidationError) -> str:
    """A brief's validation errors as `field: what is wrong (found X)`, joined by `; `."""
    return "; ".join(brief_problem(err) for err in exc.errors())


def brief_problem(err: Any) -> str:
    """One of a brief's validation errors (pydantic's) as `field: what is wrong (found X)`."""
    field = ".".join(str(p) for p in err["loc"]) or "brief"
    found = f" (found {json.dumps(err['input'], default=str)})" if "input" in err else ""
    if err["type"] in ("missing", "extra_forbidden"):
        found = ""
    return f"{field}: {err['msg'].lower()}{found}"


def inputs_or_problem(raw: str | None, text: str | None) -> tuple[Any, str | None]:
    """The brief's inputs from `--inputs JSON` or `--inputs-text TEXT`, or why not."""
    if text is not None:
        return text, None
    if raw is None:
        return None, None
    try:
        return loads_json_bounded(raw), None
    except BoundExceeded as exc:
        return None, f"--inputs: {exc}"
    except ValueError as exc:
        return None, (
            f"--inputs: {raw!r} is not JSON ({exc}); quote a string as JSON "
            f"('\"...\"') or pass plain text with --inputs-text"
        )


def unknown_agent(name: str, routing: Routing) -> str:
    """Why `name` cannot run: unknown, with the closest known name and the known ones."""
    known = ", ".join(routing.agents) or "none"
    return (
        f"unknown agent {name!r}{did_you_mean(name, routing.agents)}; "
        f"{routing.source} defines: {known}"
    )


def agent_problem(name: str, routing: Routing) -> str | None:
    """Why the CLI cannot run agent `name`: unknown, or without a work function; else None.

    The CLI registers nothing in code, so an agent needs its `entrypoint:` or `command:`.
    """
    if name not in routing.agents:
        return unknown_agent(name, routing)
    policy = routing.agents[name]
    if policy.entrypoint or policy.runs_program:
        return None
    return (
        f"agent {name!r} has no work function in {routing.source}: give it `entrypoint: "
        "pkg.module:function` or `command: [program, arg, ...]` (a host can zeus.register "
        "one in code; the CLI cannot)"
    )


# -- the command ---------------------------------------------------------------------------
def run(args: argparse.Namespace) -> int:
    routing = load_routing(args.routing, "dispatch")
    if routing is None:
        return EXIT_BAD_INPUT
    inputs, problem = inputs_or_problem(args.inputs, args.inputs_text)
    if problem is not None:
        print(f"zeus dispatch: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        brief = Brief(
            agent=args.agent,
            scope=args.scope,
            inputs=inputs,
            partial_ok=args.partial_ok,
            timeout_s=args.timeout,
        )
    except ValidationError as exc:
        problems = brief_problems(exc).replace("timeout_s:", "--timeout:")
        print(f"zeus dispatch: bad brief: {problems}", file=sys.stderr)
        return EXIT_BAD_INPUT
    problem = agent_problem(args.agent, routing)
    if problem is not None:
        print(f"zeus dispatch: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    journal: IO[str] | None = None
    try:
        if args.log is not None:
            journal = open_journal(args.log)
        summary = _supervise(routing, brief, journal)
    except SupervisorError as exc:
        print(f"zeus dispatch: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        if journal is not None:
            journal.close()
    if args.json:
        print(summary.model_dump_json(indent=2))
    else:
        print(summary.render())
    return EXIT_OK if summary.ok else EXIT_INCOMPLETE


def _supervise(routing: Routing, brief: Brief, journal: IO[str] | None) -> Summary:
    err = console(stderr=True)
    live = LiveTree(err if err.is_terminal else None, journal=journal, transient=True)
    with Zeus.start(routing, log=live) as zeus:
        handle = zeus.dispatch(brief)
        handle.add_done_callback(live.add_summary)
        with live.show(zeus), watch_reader(live.output_gone):
            (summary,) = live.results([handle])
    if live.write_error:
        print(f"zeus dispatch: {live.write_error}", file=sys.stderr)
    return summary
