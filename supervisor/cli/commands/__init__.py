"""The `zeus` commands: one module each, listed in `supervisor.cli.COMMANDS`.

A command module exposes two functions:

- `add_parser(subparsers)`: add `zeus <name>` with its arguments (and help) to
  the argparse sub-parsers it is given;
- `run(args) -> int`: do the work and return the exit code: `EXIT_OK` (0),
  `EXIT_INCOMPLETE` (1, some delegation did not complete), `EXIT_BAD_INPUT` (2);
  `EXIT_CODES` says what each means for each kind of command.

Output goes through `console()`: styles on a terminal, plain text (no escape
codes, no box drawing, no wrapping) on a pipe or a file.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from supervisor.core.zeus import Zeus

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_CLOSED",
    "EXIT_CODES",
    "EXIT_INCOMPLETE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "Command",
    "console",
    "fitted",
    "import_beside",
    "importable",
    "print_fitted",
    "print_table",
    "stop_at_once",
    "table_lines",
]

EXIT_OK = 0
EXIT_INCOMPLETE = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shell tools end after Ctrl-C
EXIT_CLOSED = 141  # 128 + SIGPIPE: the reader of the output left (`zeus schema | head`)

EXIT_CODES = """exit codes:
  0    commands that run delegations (demo, dispatch, run, resume): every one
       completed (the demo: every scenario settled as designed); commands that
       read (tree, timeouts, validate, schema, blocked, sweep --dry-run), init and
       resolve: they did their job; ui: stopped with Ctrl-C
  1    some delegation did not complete; sweep: a process is left running
  2    bad input: a bad routing file, plan, journal, agent name or option; a
       store that is busy or bad, an id that is not blocked (resume, resolve)
  130  interrupted (Ctrl-C)
  141  the output was closed before the end (its reader left)"""


# Folders a command put at the end of `sys.path`, taken off again when it ends (`importable`).
_ADDED: list[str] = []


def import_beside(path: Path) -> None:
    """Let entrypoints import from the folder of `path` (a routing file) too, for the rest of
    the command: it goes last on `sys.path`, so it adds modules and never replaces one."""
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.append(folder)
        _ADDED.append(folder)


@contextmanager
def importable(folder: str) -> Iterator[None]:
    """While the block runs, `folder` (and what `import_beside` adds) at the end of `sys.path`.

    A console script's `sys.path` starts with its own bin directory, not the cwd.
    Unlike `python -m`, the folder goes last: it adds modules, it never replaces one.
    """
    if "" not in sys.path and folder not in sys.path:
        sys.path.append(folder)
        _ADDED.append(folder)
    try:
        yield
    finally:
        while _ADDED:
            added = _ADDED.pop()
            if added in sys.path:
                sys.path.remove(added)


class Command(Protocol):
    """What `supervisor.cli` needs of a command module."""

    def add_parser(self, subparsers: Any) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


class _Console(Console):
    """A rich console that lets a closed pipe surface as `BrokenPipeError`.

    rich's own answer to a closed pipe is `SystemExit(1)`, raised in whichever thread
    wrote; `zeus` ends with 141 instead and cancels what it started (`supervisor.cli`).
    """

    def on_broken_pipe(self) -> None:
        self.quiet = True  # nothing more is written, so the error is raised once
        raise BrokenPipeError("the output's reader left")


def console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr), plain when that stream is not a terminal.

    Made per call, so that it writes to whatever `sys.stdout` is at that moment.
    """
    stream = sys.stderr if stderr else sys.stdout
    terminal = stream.isatty()
    return _Console(
        file=stream,
        highlight=False,
        emoji=False,
        soft_wrap=not terminal,
        width=None if terminal else 10_000,
    )


def fitted(out: Console, line: str, *, indent: int = 2) -> list[str]:
    """`line` as the lines a terminal should show it in: wrapped at spaces to its width, the
    lines after the first indented by `indent` (whole off a terminal, and when it fits)."""
    if not out.is_terminal or len(line) <= out.size.width:
        return [line]
    lead = len(line) - len(line.lstrip())
    return textwrap.wrap(line.lstrip(), out.size.width, initial_indent=" " * lead,
                         subsequent_indent=" " * max(indent, lead), break_long_words=False,
                         break_on_hyphens=False)


def print_fitted(out: Console, line: str, *, indent: int = 2, style: str = "") -> None:
    """Print `line` as `fitted` lays it out (never folded mid-word by the terminal)."""
    for part in fitted(out, line, indent=indent):
        out.print(Text(part, style=style if out.is_terminal else ""), soft_wrap=True)


def print_table(
    out: Console,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    title: str | None = None,
) -> None:
    """Columns padded with spaces; on a terminal the header is bold and underlined by a rule.

    On a terminal the table fits its width (`table_lines`): no line is ever folded by the
    terminal in the middle of a word. Off a terminal rows stay whole, one line each, for
    grep and friends. Cells are text, never rich markup, so names with brackets print as is.
    """
    width = out.size.width if out.is_terminal else None
    if title:
        print_fitted(out, title, style="bold")
    head, rule, body = table_lines(headers, rows, width)
    for line in head:
        out.print(Text(line, style="bold" if out.is_terminal else ""), soft_wrap=True)
    if out.is_terminal and rule:
        out.print(Text(rule, style="dim"), soft_wrap=True)
    for line in body:
        out.print(Text(line), soft_wrap=True)


def table_lines(
    headers: Sequence[str], rows: Sequence[Sequence[str]], width: int | None = None
) -> tuple[list[str], str, list[str]]:
    """The header lines, the rule under them and the body lines of a table `width` wide.

    Without a width (or when it fits), each row is one line. Otherwise the widest column
    gives up a character at a time, its cells wrapped at spaces, until the table fits;
    no column gets narrower than its longest word. A table that cannot fit that way is
    written as one record per row instead: the first cell, then `header value; ...`,
    wrapped under it. Either way no line is wider than `width` unless one word is.
    """
    columns = list(zip(headers, *rows, strict=False))
    widths = [max(len(cell) for cell in column) for column in columns]
    if width is not None and _total(widths) > width:
        floors = [max(len(word) for cell in column for word in [*cell.split(), ""])
                  for column in columns]
        while _total(widths) > width:
            shrinkable = [i for i, w in enumerate(widths) if w > floors[i]]
            if not shrinkable:
                return [], "", _records(headers, rows, width)
            widest = max(shrinkable, key=lambda i: widths[i])
            widths[widest] -= 1

    def lines(cells: Sequence[str]) -> list[str]:
        wrapped = [textwrap.wrap(cell, w, break_long_words=False, break_on_hyphens=False)
                   or [""] for cell, w in zip(cells, widths, strict=False)]
        return [
            "  ".join(
                (part[n] if n < len(part) else "").ljust(w)
                for part, w in zip(wrapped, widths, strict=False)
            ).rstrip()
            for n in range(max(len(part) for part in wrapped))
        ]

    body = [line for row in rows for line in lines(row)]
    return lines(headers), "  ".join("─" * w for w in widths), body


def _total(widths: Sequence[int]) -> int:
    return sum(widths) + 2 * (len(widths) - 1)


def _records(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> list[str]:
    out: list[str] = []
    for row in rows:
        fields = "; ".join(f"{h} {cell}" for h, cell in zip(headers[1:], row[1:], strict=False))
        out += textwrap.wrap(f"{row[0]}: {fields}", width, subsequent_indent="    ",
                             break_long_words=False, break_on_hyphens=False)
    return out


def stop_at_once(zeus: Zeus) -> None:
    """After a second Ctrl-C, which broke into Zeus's stop: stop it again without waiting
    for cooperative stops (what is open is settled cancelled, its children stopped); the
    command then prints what had settled, as after the first Ctrl-C."""
    with suppress(KeyboardInterrupt):  # a third one: what had settled is still printed
        zeus.stop(timeout=0)
