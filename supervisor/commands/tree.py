"""`zeus tree EVENTS.jsonl [--follow] [--all]`: the supervision tree rebuilt from a journal.

Each delegation shows its agent(s), status and duration, its attempts (pid,
outcome, timeout, kill, what followed) and the delegations it made. With
`--follow` the tree is redrawn as the journal grows, until `zeus.stopped` or
Ctrl-C (on a pipe, each event is printed as a line instead, then the tree).
Exit status: 0 when every delegation completed, 1 when some did not (or is
still open), 2 for bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text
from rich.tree import Tree

from supervisor import journal as jr
from supervisor.commands import EXIT_BAD_INPUT, EXIT_INCOMPLETE, EXIT_OK, console

__all__ = ["add_parser", "load_or_fail", "run", "status_mark"]

# status -> (mark, rich style)
_STATUS = {
    "completed": ("✔", "green"),
    "partial": ("◐", "yellow"),
    "timed_out": ("⏱", "red"),
    "failed": ("✘", "red"),
    "cancelled": ("⊘", "magenta"),
    "budget_exceeded": ("¤", "red"),
    "blocked": ("■", "red"),
    "in progress": ("…", "cyan"),
    "unsettled": ("?", "yellow"),
}
_QUIET_EVENTS = {"attempt.heartbeat"}  # too many to print one line each when following
_COMMON = {"ts", "event", "delegation_id", "attempt_id", "parent_id", "agent", "policy"}


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "tree",
        help="the supervision tree rebuilt from an event journal",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("journal", metavar="EVENTS.jsonl", type=Path, help="the journal file")
    parser.add_argument(
        "--follow", "-f", action="store_true", help="keep reading as the journal grows"
    )
    parser.add_argument(
        "--all", action="store_true", help="show every run the file holds, not only the last"
    )
    parser.set_defaults(run=run)


# -- shared with the other journal commands ------------------------------------------------
def status_mark(status: str) -> tuple[str, str]:
    """The mark and rich style of a delegation status."""
    return _STATUS.get(status, ("•", "white"))


def load_or_fail(path: Path, command: str) -> jr.Journal | None:
    """The journal at `path`, or None after saying on stderr why it cannot be read."""
    try:
        journal = jr.load(path)
    except IsADirectoryError:
        print(f"zeus {command}: {path} is a directory; give the journal file", file=sys.stderr)
        return None
    except OSError as exc:
        print(f"zeus {command}: cannot read {path}: {exc.strerror}", file=sys.stderr)
        return None
    for note in journal.notes:
        print(f"zeus {command}: {path}: {note}", file=sys.stderr)
    if journal.events == 0 and journal.notes:
        print(
            f"zeus {command}: {path} holds no Zeus events ({len(journal.notes)} line(s) "
            "skipped); is it the file given as log= ?",
            file=sys.stderr,
        )
        return None
    return journal


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def shown_runs(journal: jr.Journal, all_runs: bool) -> list[jr.Run]:
    return journal.runs if all_runs else [journal.run]


def exit_code(runs: Sequence[jr.Run]) -> int:
    return EXIT_INCOMPLETE if any(r.incomplete() for r in runs) else EXIT_OK


# -- labels ---------------------------------------------------------------------------------
def run_label(run: jr.Run, total: int) -> str:
    who = f"zeus pid {run.zeus_pid}" if run.zeus_pid is not None else "zeus"
    parts = [who]
    if run.routing:
        parts.append(run.routing)
    parts.append(f"{len(run.delegations)} delegation(s)")
    parts.append("stopped" if run.stopped else "no zeus.stopped yet (running, or it crashed)")
    if total > 1:
        parts.append(f"run {run.index} of {total}")
    return ", ".join(parts)


def delegation_label(d: jr.Delegation, run: jr.Run) -> tuple[str, str]:
    """The plain label of a delegation and the status it shows."""
    status = d.status or ("unsettled" if run.stopped else "in progress")
    agents = " -> ".join(d.agents) or "?"
    elapsed = d.elapsed(run.last_ts)
    when = "" if elapsed is None else f" {elapsed:.2f}s" + ("" if d.settled else " so far")
    text = f"{d.id} {agents}: {status}{when}, {len(d.attempts)} attempt(s)"
    if d.timeout_kind:
        text += f", timeout: {d.timeout_kind}"
    if d.cancel_requested:
        text += f", cancel requested ({d.cancel_reason or 'no reason given'})"
    if d.error and status != "completed":
        text += f" - {_short(d.error)}"
    if d.scope:
        text += f'  "{_short(d.scope, 60)}"'
    return text, status


def attempt_label(a: jr.Attempt) -> str:
    head = " ".join(x for x in (a.id, a.agent, f"pid {a.pid}" if a.pid else None,
                                f"on {a.node}" if a.node else None) if x)
    if a.outcome is not None:
        state = a.outcome + ("" if a.duration_s is None else f" after {a.duration_s:.2f}s")
    elif a.fenced is not None:
        state = "fenced"
    else:
        state = "running" + (f", progress {a.progress}" if a.progress is not None else "")
        state += f" ({_short(a.note, 40)})" if a.note else ""
    extras = []
    if a.timed_out_after_s is not None:
        extras.append(f"deadline hit at {a.timed_out_after_s:.2f}s")
    if a.stale_after_s is not None:
        extras.append(f"stale at {a.stale_after_s:.2f}s")
    if a.budget_exceeded:
        extras.append("over budget")
    if a.killed:
        latency = "" if a.kill_latency_s is None else f" in {a.kill_latency_s:.3f}s"
        extras.append(f"stopped: {a.killed}{latency}")
    if a.fenced:
        extras.append(f"fenced: {a.fenced}")
    if a.error and a.outcome != "completed":
        extras.append(_short(a.error))
    if a.then:
        extras.append(f"then {a.then}")
    return f"{head}: {state}" + "".join(f"; {x}" for x in extras)


def _short(text: str, limit: int = 80) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


# -- rendering ------------------------------------------------------------------------------
def render_plain(journal: jr.Journal, runs: Sequence[jr.Run]) -> str:
    lines: list[str] = []

    def walk(d: jr.Delegation, run: jr.Run, depth: int) -> None:
        pad = "  " * depth
        lines.append(pad + delegation_label(d, run)[0])
        lines.extend(f"{pad}  - {attempt_label(a)}" for a in d.attempts)
        for child in d.children:
            walk(child, run, depth + 1)

    for run in runs:
        lines.append(run_label(run, len(journal.runs)))
        for d in run.roots:
            walk(d, run, 1)
        if not run.delegations:
            lines.append("  (no delegations)")
        lines.extend(f"  intensity exceeded: {_intensity(e)}" for e in run.intensity)
    return "\n".join(lines)


def render_rich(journal: jr.Journal, runs: Sequence[jr.Run]) -> Group:
    trees = []
    for run in runs:
        root = Tree(Text(run_label(run, len(journal.runs)), style="bold"))

        def walk(d: jr.Delegation, node: Tree, run: jr.Run = run) -> None:
            label, status = delegation_label(d, run)
            mark, style = status_mark(status)
            branch = node.add(Text(f"{mark} {label}", style=style))
            for a in d.attempts:
                branch.add(Text(attempt_label(a), style="dim"))
            for child in d.children:
                walk(child, branch)

        for d in run.roots:
            walk(d, root)
        if not run.delegations:
            root.add(Text("(no delegations)", style="dim"))
        for e in run.intensity:
            root.add(Text(f"intensity exceeded: {_intensity(e)}", style="bold red"))
        trees.append(root)
    return Group(*trees)


def _intensity(event: jr.Event) -> str:
    return (
        f"{event.get('restarts')} restarts within {event.get('within_s')}s "
        f"under {event.get('delegation_id') or 'the root'}"
    )


def event_line(event: jr.Event) -> str:
    """One event as a line, for following a journal on a pipe."""
    ts = event.get("ts")
    when = (
        time.strftime("%H:%M:%S", time.localtime(ts)) + f".{int(ts * 1000) % 1000:03d}"
        if isinstance(ts, int | float)
        else "--:--:--"
    )
    who = event.get("attempt_id") or event.get("delegation_id") or ""
    rest = " ".join(
        f"{k}={json.dumps(v, default=str)}" for k, v in event.items() if k not in _COMMON
    )
    return " ".join(x for x in (when, str(event.get("event")), str(who), rest) if x)


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
    return exit_code(runs)


def _follow(path: Path, console: Console, all_runs: bool) -> int:
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
            live.update(render_rich(journal, shown_runs(journal, all_runs)))
        else:
            sys.stdout.flush()

    with live if live is not None else contextlib.nullcontext():
        try:
            for event in jr.follow(path, on_note=note, on_idle=refresh):
                journal.apply(event)
                if live is None and event.get("event") not in _QUIET_EVENTS:
                    print(event_line(event))
        except KeyboardInterrupt:
            pass
        refresh()
    if live is None:
        print(render_plain(journal, shown_runs(journal, all_runs)))
    return exit_code(shown_runs(journal, all_runs))
