"""`zeus sweep EVENTS.jsonl|STORE [--dry-run] [--grace S]`: stop the child processes a crashed
supervisor left running.

The journal names every child process Zeus started, by pid and start time. A
process is stopped (SIGTERM to its process group, then SIGKILL after the grace)
only while it is alive and its start time is the recorded one, so a pid that
the system has since given to another process is never signalled; neither is
anything while the supervisor that wrote the journal still runs. `--dry-run`
says what would be stopped. Given a store, it first stops the workers that wait
to be picked up by the store's next Zeus (nobody supervises them) and names them.
Exit status: 0 when nothing recorded is left
running (with `--dry-run`: when the journal could be read), 1 when something
could not be stopped or its supervisor still runs, 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Any

from supervisor import journal as jr
from supervisor.cli.commands import EXIT_BAD_INPUT, EXIT_INCOMPLETE, EXIT_OK, console, print_table
from supervisor.cli.commands.tree import load_or_fail
from supervisor.journal.sweep_waiting import sweep_waiting
from supervisor.store import is_sqlite_file, is_store_url, path_or_url

__all__ = ["add_parser", "run"]

_HEADERS = ("PID", "Attempts", "Agent", "Result", "Detail")
_LEFT_RUNNING = {jr.SweepAction.failed, jr.SweepAction.supervisor_running}


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="stop the child processes a crashed supervisor left running",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("journal", metavar="EVENTS.jsonl|STORE", type=path_or_url,
                        help="the journal file, or a store (a file or a postgresql:// URL)")
    parser.add_argument(
        "--dry-run", action="store_true", help="say what would be stopped; signal nothing"
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds between SIGTERM and SIGKILL (default 1)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.grace < 0:
        print(f"zeus sweep: --grace must be 0 or more, not {args.grace}", file=sys.stderr)
        return EXIT_BAD_INPUT
    journal = load_or_fail(args.journal, "sweep")
    if journal is None:
        return EXIT_BAD_INPUT
    is_store = is_store_url(args.journal) or is_sqlite_file(args.journal)
    waiting = sweep_waiting(args.journal, dry_run=args.dry_run) if is_store else []
    seen = {(r.target.pid, r.target.pid_start_time) for r in waiting}
    results = waiting + [
        r for r in jr.sweep(journal, dry_run=args.dry_run, grace_s=args.grace)
        if (r.target.pid, r.target.pid_start_time) not in seen
    ]
    if not results:
        print("The journal names no child processes (thread children have none); nothing to do.")
        return EXIT_OK
    rows = [
        [
            str(r.target.pid),
            ", ".join(r.target.attempt_ids),
            r.target.agent or "?",
            str(r.action),
            r.detail,
        ]
        for r in results
    ]
    out = console()
    print_table(out, _HEADERS, rows, title=f"Child processes named by {args.journal}")
    counts = Counter(str(r.action) for r in results)
    out.print(", ".join(f"{n} {action}" for action, n in counts.items()))
    if args.dry_run:  # it only read: its job was to say, and it said
        return EXIT_OK
    return EXIT_INCOMPLETE if any(r.action in _LEFT_RUNNING for r in results) else EXIT_OK
