"""`zeus blocked STORE`: what waits for a person in a store, with each reason.

A delegation settles `blocked` when it cannot go on without its owner: a writer whose
host died while it ran (its outcome is unknown: something may have been written), an
agent that said it is blocked, a stateful performer whose session is gone. Each row
gives its id, key, agent, when it settled and why. What a host that is gone left open is
listed too, as unknown: the next Zeus on the store recovers it, and a writer then settles
blocked. Read-only: the store's live Zeus, if any, runs on. Then, once its changes are
checked: `zeus resume STORE ID --routing F` runs it again, `zeus resolve STORE ID --status
S --note N --routing F` settles it by hand (F: the routing its host runs). Exit status: 0
when the store could be read (whatever it holds), 2 for bad input.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from typing import Any

from supervisor.cli.commands import EXIT_BAD_INPUT, EXIT_OK, console, print_table
from supervisor.errors import StoreError
from supervisor.rules.recovery import split_verbs_hint
from supervisor.store import blocked_delegations, left_by_gone_hosts, path_or_url

__all__ = ["add_parser", "run"]

_HEADERS = ("ID", "Key", "Agent", "Since", "Reason")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "blocked",
        help="what waits for a person in a store, with each reason",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("store", metavar="STORE", type=path_or_url,
                        help="the store: a file or a postgresql:// URL")
    parser.set_defaults(run=run)


UNKNOWN = "unknown: its host is gone, recovery will decide"


def run(args: argparse.Namespace) -> int:
    try:
        found = blocked_delegations(args.store)
        unknown = left_by_gone_hosts(args.store)
    except StoreError as exc:
        print(f"zeus blocked: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    out = console()
    if not found and not unknown:
        out.print(f"Nothing in {args.store} waits for a person.", soft_wrap=True)
        return EXIT_OK
    now = time.time()
    reasons = [split_verbs_hint(summary.error or "(no reason given)") for _, summary in found]
    rows = [[d.id, d.key or "-", summary.agent, _ago(now - (d.settled_at or now)), said]
            for (d, summary), (said, _) in zip(found, reasons, strict=True)]
    rows += [[d.id, d.key or "-", d.agent, f"host gone {_ago(now - (seen or now))}", UNKNOWN]
             for d, seen in unknown]
    print_table(out, _HEADERS, rows, title=f"Waiting for a person in {args.store}")
    if found:
        routings = {routing for _, routing in reasons if routing}
        flag = f"--routing {shlex.quote(routings.pop())}" if len(routings) == 1 else (
            "--routing F")
        where = shlex.quote(str(args.store))
        out.print(f"Check each blocked one's changes, then `zeus resume {where} ID {flag}` to "
                  f"run it again, or `zeus resolve {where} ID {flag} --status completed "
                  "--note ...` to settle it" + ("." if flag != "--routing F" else
                                                 " (F: the routing file its host runs)."),
                  soft_wrap=True, markup=False, highlight=False)
    if unknown:
        out.print(f"{len(unknown)} delegation(s) were open when their host stopped: the next "
                  "Zeus on the store recovers them (its host started again, or `zeus run "
                  f"PLAN --store {shlex.quote(str(args.store))}`), running again what may run "
                  "again and blocking each writer here.", soft_wrap=True, markup=False,
                  highlight=False)
    return EXIT_OK


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit} ago"
    return f"{seconds:.0f}s ago"
