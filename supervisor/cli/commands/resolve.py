"""`zeus resolve STORE ID --status S --note N [--routing F]`: settle a blocked one by hand.

When a person has found out what a blocked delegation did (`zeus blocked STORE` lists
them), this settles it with status S (completed, failed, cancelled, partial, ...) and
the note N, which its summary keeps (`zeus.handle(id)` and `dispatch(key=...)` give it
from then on), journalled as `delegation.resolved` with who. It opens the store as its
owner (refused while a live Zeus owns it: use `zeus.resolve(id, status, note)` in that
host); the routing as for `zeus resume`. Exit status: 0 when it was settled, 2 for bad
input (a busy or bad store, an id that is not blocked, an unknown status).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from actors import Status
from supervisor.cli.commands import EXIT_OK, console
from supervisor.cli.commands.resume import as_owner

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "resolve",
        help="settle a blocked delegation of a store by hand, with a status and a note",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("store", metavar="STORE", type=Path, help="the store file")
    parser.add_argument("id", metavar="ID", help="the blocked delegation's id")
    parser.add_argument("--status", metavar="S", required=True,
                        choices=[s.value for s in Status if s is not Status.blocked],
                        help="the status it ends with")
    parser.add_argument("--note", metavar="N", required=True,
                        help="what you found: kept in its summary")
    parser.add_argument("--routing", metavar="F", type=Path,
                        help="the routing its host runs (default: ./routing.yml)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    summary, code = as_owner(args, "resolve",
                             lambda zeus: zeus.resolve(args.id, args.status, args.note))
    if summary is None:
        return code
    console().print(f"{summary.id} resolved: {summary.status.value} ({args.note})",
                    soft_wrap=True, markup=False, highlight=False)
    return EXIT_OK
