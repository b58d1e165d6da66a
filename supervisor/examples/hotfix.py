"""talos, the hotfix agent: a command agent (a subprocess), not a Python callable.

    python -m supervisor.examples.hotfix "Strip trailing whitespace in supervisor/routing/table.py"

It finds the files the scope names (words that are existing paths; none: the
project's own packages), finds trailing whitespace and a missing final newline,
and prints one progress line per file, then the diff and a `result:` line, on
standard output. It writes the fixes only with `--apply`. Bad input (an empty
scope, a path that does not exist) is a message on standard error and exit
status 2.
"""

from __future__ import annotations

import argparse
import difflib
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from supervisor.examples._common import default_roots, walk_files

__all__ = ["fix_text", "main"]

_SUFFIXES = (".py", ".md", ".txt", ".yml", ".yaml", ".toml", ".cfg", ".ini", ".json")


def fix_text(text: str) -> str:
    """`text` without trailing whitespace on any line and with exactly one final newline."""
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n" if lines else ""


def _targets(scope: str) -> list[Path]:
    """The scope's words that name paths; words that look like paths must exist."""
    targets: list[Path] = []
    for word in scope.split():
        word = word.strip("\"'`,;:()")
        if not word:
            continue
        path = Path(word)
        if path.exists():
            targets.append(path)
        elif "/" in word or path.suffix in _SUFFIXES:
            raise FileNotFoundError(f"{word}: no such file or directory")
    return targets


def _check(files: list[Path], fixed: list[tuple[Path, str, str]], delay: float) -> None:
    """A progress line per file; the files that need a fix go to `fixed` as they are found."""
    for path in files:
        if delay:
            time.sleep(delay)
        try:
            before = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            print(f"hotfix: {path}: skipped ({exc})", flush=True)
            continue
        after = fix_text(before)
        state = "needs a fix" if after != before else "clean"
        print(f"hotfix: {path}: {state}", flush=True)
        if after != before:
            fixed.append((path, before, after))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m supervisor.examples.hotfix",
        description="Fix trailing whitespace and final newlines in the files a scope names.",
    )
    parser.add_argument("scope", help="what to fix, naming files or directories")
    parser.add_argument("--apply", action="store_true", help="write the fixes (default: dry run)")
    parser.add_argument(
        "--delay",
        type=float,
        default=0.0,
        metavar="S",
        help="linger S seconds per file (for demos of a slow hotfix)",
    )
    args = parser.parse_args(argv)
    # SIGINT is the cooperative cancel: hear it even if it came in ignored (a background job).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    scope = args.scope.strip()
    if not scope:
        print(
            "hotfix: empty scope; say what to fix, e.g. 'Strip trailing whitespace in app/main.py'",
            file=sys.stderr,
        )
        return 2
    try:
        roots = _targets(scope) or default_roots()
    except FileNotFoundError as exc:
        print(f"hotfix: {exc}; name files that exist (relative to {Path.cwd()})", file=sys.stderr)
        return 2
    files = [f for root in roots for f in walk_files(root, _SUFFIXES)]
    fixed: list[tuple[Path, str, str]] = []
    try:
        print(f"hotfix: {scope}", flush=True)
        print(f"hotfix: checking {len(files)} file(s)", flush=True)
        _check(files, fixed, args.delay)
    except KeyboardInterrupt:  # Zeus's cooperative cancel of a command is SIGINT
        print(
            f"hotfix: interrupted; {len(fixed)} file(s) needing a fix found so far, "
            "nothing written",
            file=sys.stderr,
        )
        return 130
    for path, before, after in fixed:
        sys.stdout.writelines(
            difflib.unified_diff(
                before.splitlines(keepends=True),
                after.splitlines(keepends=True),
                fromfile=f"a/{path}",
                tofile=f"b/{path}",
            )
        )
        if args.apply:
            path.write_text(after, encoding="utf-8")
    if not fixed:
        print(f"result: clean: {len(files)} file(s) checked, nothing to fix", flush=True)
    elif args.apply:
        print(f"result: fixed {len(fixed)} of {len(files)} file(s)", flush=True)
    else:
        print(
            f"result: {len(fixed)} of {len(files)} file(s) need a fix "
            "(dry run; pass --apply to write)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
