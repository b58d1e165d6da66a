"""`zeus`: the command line. Each command is a module in `supervisor.cli.commands`.

To add a command, write a module with `add_parser(subparsers)` and
`run(args) -> int` (see `supervisor.cli.commands`) and list it in `COMMANDS`.
Exit codes: `EXIT_CODES` (`zeus --help` prints it).

Entrypoints (`pkg.module:fn`) import from the installed packages first, then
from the current directory, then from the routing file's directory: the CLI
appends those to the END of `sys.path` while a command runs, so a stray `yaml.py`
or `json.py` in them can never shadow a module Zeus or an installed package imports.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from contextlib import suppress

from supervisor import __version__
from supervisor.cli.commands import (
    EXIT_BAD_INPUT,
    EXIT_CLOSED,
    EXIT_CODES,
    EXIT_INTERRUPTED,
    Command,
    blocked,
    demo,
    dispatch,
    importable,
    init,
    mcp,
    resolve,
    resume,
    run,
    schema,
    sweep,
    timeouts,
    tree,
    ui,
    validate,
)

__all__ = ["COMMANDS", "build_parser", "main"]

COMMANDS: tuple[Command, ...] = (
    init, demo, dispatch, run, validate, schema, tree, timeouts, sweep, blocked, resume,
    resolve, mcp, ui,
)


# Written as it prints (the formatter keeps the epilog's layout, so it wraps nothing).
DESCRIPTION = """\
Zeus: an Erlang/OTP-style supervision tree for AI-agent delegations.
New here? `zeus init` writes a routing.yml, agents and a host of your own;
`zeus demo` shows the pantheon at work."""


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Command]]:
    """The `zeus` parser, and which module runs each command name (aliases included)."""
    parser = argparse.ArgumentParser(
        prog="zeus",
        description=DESCRIPTION,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"zeus {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    by_name: dict[str, Command] = {}
    for module in COMMANDS:
        before = set(subparsers.choices)
        module.add_parser(subparsers)
        for name in set(subparsers.choices) - before:
            by_name[name] = module
    return parser, by_name


def main(argv: Sequence[str] | None = None) -> int:
    """Run `zeus` with `argv` (default: the process's arguments); return the exit code."""
    parser, by_name = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error (already printed)
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        return EXIT_BAD_INPUT
    try:
        with importable(os.getcwd()):
            return by_name[args.command].run(args)
    except KeyboardInterrupt:
        print("zeus: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader left (`zeus schema | head`): stop quietly
        with suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_CLOSED


if __name__ == "__main__":
    sys.exit(main())
