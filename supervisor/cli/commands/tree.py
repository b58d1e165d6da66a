"""`zeus tree EVENTS.jsonl [--follow] [--all]`: the supervision tree rebuilt from a journal.

Each delegation shows its agent(s), status and duration, its attempts (pid,
outcome, timeout, kill, what followed) and the delegations it made. With
`--follow` the tree is redrawn as the journal grows, until `zeus.stopped` or
Ctrl-C (on a pipe, each event is printed as a line instead, then the tree).
Exit status: 0 when the journal could be read (whatever its delegations did:
the tree says that), 2 for bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.text import Text

from supervisor import journal as jr
from supervisor.cli.commands import EXIT_BAD_INPUT, EXIT_OK, console
from supervisor.cli.render import (
    delegation_label,
    delegation_status,
    intensity_text,
    legend,
    plain_event,
    run_label,
)
from supervisor.cli.rows import (
    fit,
    plain_lines,
    rows,
    tree_of,
)
from supervisor.errors import StoreError
from supervisor.store import is_sqlite_file, is_store_url, path_or_url, store_events

__all__ = ["add_parser", "load_or_fail", "run"]

_QUIET_EVENTS = {"attempt.heartbeat"}  # too many to print one line each when following


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "tree",
        help="the supervision tree rebuilt from an event journal",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("journal", metavar="EVENTS.jsonl", type=path_or_url,
                        help="the journal file, or a store (a file or a postgresql:// URL)")
    parser.add_argument(
        "--follow", "-f", action="store_true", help="keep reading as the journal grows"
    )
    parser.add_argument(
        "--all", action="store_true", help="show every run the file holds, not only the last"
    )
    parser.set_defaults(run=run)


# -- shared with the other journal commands ------------------------------------------------
def load_or_fail(path: Path, command: str) -> jr.Journal | None:
    """The journal at `path` (a JSONL journal, or a store read as one), or None after
    saying on stderr why it cannot be read."""
    if is_store_url(path) or is_sqlite_file(path):
        return _load_store(path, command)
    try:
        journal = jr.load(path)
    except IsADirectoryError:
        print(f"zeus {command}: {path} is a directory; give the journal file", file=sys.stderr)
        return None
    except OSError as exc:
        print(f"zeus {command}: cannot read {path}: {exc.strerror}", file=sys.stderr)
        return None
    problem = jr.no_events(path, journal)
    if problem is not None:  # not a journal: one line, not one per line skipped
        print(f"zeus {command}: {problem}", file=sys.stderr)
        return None
    for note in journal.notes:
        print(f"zeus {command}: {path}: {note}", file=sys.stderr)
    return journal


def _load_store(path: Path, command: str) -> jr.Journal | None:
    journal = jr.Journal()
    try:
        for event in store_events(path):
            journal.apply(event)
    except StoreError as exc:
        print(f"zeus {command}: {exc}", file=sys.stderr)
        return None
    return journal


def shown_runs(journal: jr.Journal, all_runs: bool) -> list[jr.Run]:
    return journal.runs if all_runs else [journal.run]


# -- rendering ------------------------------------------------------------------------------
def render_plain(journal: jr.Journal, runs: Sequence[jr.Run]) -> str:
    lines: list[str] = []
    for run in runs:
        head = Text(run_label(run, len(journal.runs)))
        lines += plain_lines(head, rows(run, label=_unmarked(run)))
        if not run.delegations:
            lines.append("  (no delegations)")
        lines.extend(f"  intensity exceeded: {intensity_text(e)}" for e in run.intensity)
    return "\n".join(lines)


def _row_count(run: jr.Run, detail: int) -> int:
    return len(rows(run, detail))


def _unmarked(run: jr.Run) -> Callable[[jr.ReplayedDelegation], Text]:
    """A delegation's label without its mark, for plain text (the status word says it)."""
    return lambda d: Text(delegation_label(d, run)[0])


def render_rich(journal: jr.Journal, runs: Sequence[jr.Run], height: int | None = None) -> Group:
    """The runs as rich trees; with `height`, the last run's detail folds to fit it."""
    parts: list[RenderableType] = []
    for run in runs:
        budget = None if height is None or run is not runs[-1] else max(1, height - 3)
        body = rows(run, fit(functools.partial(_row_count, run), budget))
        root = tree_of(Text(run_label(run, len(journal.runs)), style="bold"), body)
        if not run.delegations:
            root.add(Text("(no delegations)", style="dim"))
        for e in run.intensity:
            root.add(Text(f"intensity exceeded: {intensity_text(e)}", style="bold red"))
        parts.append(root)
        statuses = {delegation_status(d, run) for d in run.delegations.values()}
        if statuses:
            parts.append(legend(statuses))
    return Group(*parts)


# -- the command ----------------------------------------------------------------------------
def run(args: argparse.Namespace) -> int:
    path: Path = args.journal
    out = console()
    if args.follow:
        return _follow(path, out, args.all)
    journal = load_or_fail(path, "tree")
    if journal is None:
        return EXIT_BAD_INPUT
    runs = shown_runs(journal, args.all)
    if out.is_terminal:
        out.print(render_rich(journal, runs))
        if not args.all and len(journal.runs) > 1:
            out.print(f"[dim]{len(journal.runs) - 1} earlier run(s) in the file: --all[/]")
    else:
        print(render_plain(journal, runs))
    if is_store_url(path):
        print("\n".join(host_lines(journal)))
    return EXIT_OK


def host_lines(journal: jr.Journal) -> list[str]:
    """A shared store's hosts, as its `zeus.started` names them: each one's lease (left,
    ended, released or taken over, and by whom) and how many open delegations it owns."""
    lines = ["hosts:"]
    for h in journal.run.hosts:
        if h["released"] is not None:
            lease = "released"
        elif h["taken_by"] is not None:
            lease = f"taken over by {h['taken_by'][:8]}"
        elif h["lease_left_s"] > 0:
            lease = f"lease {h['lease_left_s']:.1f}s left"
        else:
            lease = f"lease ended {-h['lease_left_s']:.1f}s ago"
        lines.append(f"  {h['id'][:8]}  pid {h['pid']} on {h['host']}  {lease}"
                     f"  owns {h['owns']} open")
    if len(lines) == 1:
        lines.append("  (none)")
    return lines


def _follow(path: Path, console: Console, all_runs: bool) -> int:
    if is_store_url(path) or is_sqlite_file(path):
        print(f"zeus tree: {path} is a store; --follow takes a journal (log=)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not path.is_file():
        why = "is a directory" if path.is_dir() else "does not exist"
        print(f"zeus tree: {path} {why}; give the journal file", file=sys.stderr)
        return EXIT_BAD_INPUT
    journal = jr.Journal()
    live = Live(console=console, refresh_per_second=8) if console.is_terminal else None

    def note(text: str) -> None:
        journal.notes.append(text)
        print(f"zeus tree: {path}: {text}", file=sys.stderr)

    def refresh() -> None:
        if live is not None:
            live.update(render_rich(journal, shown_runs(journal, all_runs), console.height - 1))
        else:
            sys.stdout.flush()

    with live if live is not None else contextlib.nullcontext():
        try:
            t0: float | None = None
            for event in jr.follow(path, on_note=note, on_idle=refresh):
                journal.apply(event)
                if t0 is None and isinstance(event.get("ts"), int | float):
                    t0 = float(event["ts"])
                line = None if live is not None or event.get("event") in _QUIET_EVENTS else (
                    plain_event(event, t0))
                if line is not None:
                    print(line)
        except KeyboardInterrupt:
            pass
        refresh()
    if live is None:
        print(render_plain(journal, shown_runs(journal, all_runs)))
    return EXIT_OK
