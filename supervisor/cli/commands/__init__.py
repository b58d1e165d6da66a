"""The `zeus` commands: one module each, listed in `supervisor.cli.COMMANDS`.

A command module exposes two functions:

- `add_parser(subparsers)`: add `zeus <name>` with its arguments (and help) to
  the argparse sub-parsers it is given;
- `run(args) -> int`: do the work and return the exit code: `EXIT_OK` (0),
  `EXIT_INCOMPLETE` (1, some delegation did not complete), `EXIT_BAD_INPUT` (2).

Output goes through `console()`: styles on a terminal, plain text (no escape
codes, no box drawing, no wrapping) on a pipe or a file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, Protocol

from rich.console import Console
from rich.text import Text

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INCOMPLETE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "Command",
    "console",
    "print_table",
]

EXIT_OK = 0
EXIT_INCOMPLETE = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shell tools end after Ctrl-C


class Command(Protocol):
    """What `supervisor.cli` needs of a command module."""

    def add_parser(self, subparsers: Any) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr), plain when that stream is not a terminal.

    Made per call, so that it writes to whatever `sys.stdout` is at that moment.
    """
    stream = sys.stderr if stderr else sys.stdout
    terminal = stream.isatty()
    return Console(
        file=stream,
        highlight=False,
        emoji=False,
        soft_wrap=not terminal,
        width=None if terminal else 10_000,
    )


def print_table(
    out: Console,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    title: str | None = None,
) -> None:
    """Columns padded with spaces; on a terminal the header is bold and underlined by a rule.

    Rows are never wrapped or squeezed by the console (a narrow terminal folds whole
    lines), and cells are text, never rich markup, so names with brackets print as is.
    """
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=False)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=False))

    if title:
        out.print(Text(title, style="bold" if out.is_terminal else ""), soft_wrap=True)
    if out.is_terminal:
        out.print(Text(line(headers).rstrip(), style="bold"), soft_wrap=True)
        out.print(Text("  ".join("─" * width for width in widths), style="dim"), soft_wrap=True)
    else:
        out.print(Text(line(headers).rstrip()), soft_wrap=True)
    for row in rows:
        out.print(Text(line(row).rstrip()), soft_wrap=True)
