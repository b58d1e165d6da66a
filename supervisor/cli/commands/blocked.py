"""`zeus blocked STORE`: what waits for a person in a store, with each reason.

A delegation settles `blocked` when it cannot go on without its owner: a writer whose
host died while it ran (its outcome is unknown: something may have been written), an
agent that said it is blocked, a stateful performer whose session is gone. Each row
gives its id, key, agent, when it settled and why. Read-only: the store's live Zeus, if
any, runs on. Then, once its changes are checked: `zeus resume STORE ID` runs it again,
`zeus resolve STORE ID --status S --note N` settles it by hand. Exit status: 0 when the
store could be read (whatever it holds), 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from supervisor.cli.commands import EXIT_BAD_INPUT, EXIT_OK, console, print_table
from supervisor.errors import StoreError
from supervisor.store import blocked_delegations, path_or_url

__all__ = ["add_parser", "run"]

_HEADERS = ("ID", "Key", "Agent", "Blocked", "Reason")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "blocked",
        help="what waits for a person in a store, with each reason",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("store", metavar="STORE", type=path_or_url,
                        help="the store: a file or a postgresql:// URL")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        found = blocked_delegations(args.store)
    except StoreError as exc:
        print(f"zeus blocked: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    out = console()
    if not found:
        out.print(f"Nothing in {args.store} waits for a person.", soft_wrap=True)
        return EXIT_OK
    now = time.time()
    rows = [[d.id, d.key or "-", summary.agent, _ago(now - (d.settled_at or now)),
             summary.error or "(no reason given)"] for d, summary in found]
    print_table(out, _HEADERS, rows, title=f"Waiting for a person in {args.store}")
    out.print(f"Check each one's changes, then `zeus resume {args.store} ID` to run it again, "
              f"or `zeus resolve {args.store} ID --status completed --note ...` to settle it.",
              soft_wrap=True)
    return EXIT_OK


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit} ago"
    return f"{seconds:.0f}s ago"
