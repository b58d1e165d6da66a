"""`zeus timeouts EVENTS.jsonl [--all] [--markdown]`: the timeout tracking table and log.

The tracking table has a row per delegation: agent, timeout, status, whether
partial results are OK, elapsed time, attempts (after a fallback, each agent
with its own timeout: `talos -> hermes`, `1.5s -> 180s`). The timeout log lists
every attempt that hit its deadline or went stale: when, after how long, and what
followed (a retry, a fallback, the settlement). `--markdown` prints both as
Markdown tables, ready to keep as a timeout log file. Exit status: 0 when the
journal could be read (whatever its delegations did), 2 for bad input.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from rich.table import Table

from supervisor import journal as jr
from supervisor.cli.commands import EXIT_BAD_INPUT, EXIT_OK, console, print_table
from supervisor.cli.commands.tree import load_or_fail, shown_runs
from supervisor.cli.render import seconds, status_mark
from supervisor.store import path_or_url

__all__ = ["add_parser", "log_rows", "run", "tracking_table_rows"]

_TRACKING = ("Agent", "Delegation", "Timeout", "Status", "Partial OK?", "Elapsed", "Attempts")
_LOG = ("Time", "Delegation", "Attempt", "Agent", "Kind", "After", "Deadline", "Then")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "timeouts",
        help="the timeout tracking table and timeout log of an event journal",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("journal", metavar="EVENTS.jsonl", type=path_or_url,
                        help="the journal file, or a store (a file or a postgresql:// URL)")
    parser.add_argument(
        "--all", action="store_true", help="every run the file holds, not only the last"
    )
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.set_defaults(run=run)


def _yes_no(value: bool | None, markdown: bool) -> str:
    if value is None:
        return "?"
    if markdown:
        return "✅" if value else "❌"
    return "yes" if value else "no"


def _timeout(value: float | None) -> str:
    return "-" if value is None else f"{value:g}s"


def _clock(ts: float | None) -> str:
    if ts is None:
        return "-"
    return time.strftime("%H:%M:%S", time.localtime(ts)) + f".{int(ts * 1000) % 1000:03d}"


def tracking_table_rows(run: jr.Run, *, markdown: bool = False) -> list[list[str]]:
    """The tracking table as text cells, one row per delegation (after a fallback, each
    agent's timeout)."""
    chains = {d.id: d.agent_timeouts for d in run.delegations.values()}
    rows = []
    for row in jr.tracking_rows(run):
        status = row.status.replace("_", " ")
        if markdown:
            status = f"{status_mark(row.status)[0]} {status}"
        rows.append(
            [
                _names(row.agent) if markdown else row.agent,
                row.delegation_id,
                " -> ".join(_timeout(t) for t in chains[row.delegation_id] or [row.timeout_s]),
                status,
                _yes_no(row.partial_ok, markdown),
                seconds(row.elapsed_s),
                str(row.attempts),
            ]
        )
    return rows


def _names(agents: str) -> str:
    """Agent names as Markdown code spans, `talos` -> `hermes`: a bare name, or one with
    an @ before it, mentions a person of that name once pasted into an issue."""
    return " -> ".join(f"`{name}`" for name in agents.split(" -> "))


def log_rows(run: jr.Run, *, markdown: bool = False) -> list[list[str]]:
    """The timeout log as text cells, one row per timed-out or stale attempt."""
    return [
        [
            _clock(e.ts),
            e.delegation_id,
            e.attempt_id,
            _names(e.agent or "?") if markdown else e.agent or "?",
            e.kind,
            seconds(e.elapsed_s),
            seconds(e.deadline_s),
            e.then or "-",
        ]
        for e in run.timeouts
    ]


def _markdown(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    journal = load_or_fail(args.journal, "timeouts")
    if journal is None:
        return EXIT_BAD_INPUT
    runs = shown_runs(journal, args.all)
    out = console()
    for r in runs:
        title = f" (run {r.index} of {len(journal.runs)})" if len(journal.runs) > 1 else ""
        tracking = tracking_table_rows(r, markdown=args.markdown)
        log = log_rows(r, markdown=args.markdown)
        if args.markdown:
            print(f"## Timeout tracking{title}\n\n{_markdown(_TRACKING, tracking)}\n")
            body = _markdown(_LOG, log) if log else "No timeouts."
            print(f"## Timeout log{title}\n\n{body}\n")
        elif out.is_terminal:
            table = Table(title=f"Timeout tracking{title}", title_justify="left")
            for header in _TRACKING:
                table.add_column(header, justify="right" if header == "Attempts" else "left")
            for cells, row in zip(tracking, jr.tracking_rows(r), strict=True):
                table.add_row(*cells, style=status_mark(row.status)[1])
            out.print(table)
            if log:
                print_table(out, _LOG, log, title=f"Timeout log{title}")
            else:
                out.print("[dim]No timeouts.[/]")
        else:
            if tracking:
                print_table(out, _TRACKING, tracking, title=f"Timeout tracking{title}")
            else:
                out.print(f"Timeout tracking{title}\n(no delegations)")
            out.print()
            if log:
                print_table(out, _LOG, log, title=f"Timeout log{title}")
            else:
                out.print(f"Timeout log{title}\nNo timeouts.")
    return EXIT_OK
