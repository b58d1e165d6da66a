"""`zeus mcp [--routing F] [--log F]`: serve Zeus to MCP clients over stdio.

An MCP client starts this command and talks JSON-RPC on its standard input and
output: tools `delegate`, `status`, `result`, `cancel`, `send`, `tree` and
`agents` on the agents of the routing (F, else routing.yml in the current
directory, else the pantheon Zeus ships with). With --log the event journal is
appended to F, as `zeus run` does. Needs the `mcp` extra.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from supervisor.cli.commands import EXIT_BAD_INPUT, EXIT_OK
from supervisor.cli.commands.dispatch import load_routing
from supervisor.cli.live import open_journal
from supervisor.errors import SupervisorError

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "mcp",
        help="serve Zeus as an MCP server on stdio",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("--routing", metavar="F", type=Path, help="the routing file")
    parser.add_argument("--log", metavar="F", type=Path, help="append the event journal to F")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        from supervisor.integrations.mcp import serve
    except ImportError as exc:  # said as `zeus ui` says it, the command named once
        missing = getattr(exc.__cause__, "name", None) or exc.name or "mcp"
        print(f"zeus mcp: needs the mcp extra ({missing} is missing): "
              "pip install 'zeus-supervisor[mcp]'", file=sys.stderr)
        return EXIT_BAD_INPUT
    routing = load_routing(args.routing, "mcp")
    if routing is None:
        return EXIT_BAD_INPUT
    if args.log is not None:
        try:
            open_journal(args.log).close()  # say now, not from inside the server, if it cannot
        except SupervisorError as exc:
            print(f"zeus mcp: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
    serve(routing, log=args.log)
    return EXIT_OK
