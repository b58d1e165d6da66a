"""The help and the README say the same: every command and flag, every exit code, which
routing the demo runs; and the README's first screen points a newcomer at the guide."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from supervisor.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
CLI = README.split("## The CLI\n", 1)[1].split("\n## ", 1)[0]
CODES = (0, 1, 2, 130, 141)


def commands() -> dict[str, argparse.ArgumentParser]:
    parser, _ = build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("name", sorted(commands()))
def test_the_readme_shows_every_command_with_every_flag_its_help_has(name: str) -> None:
    parser = commands()[name]
    flags = [o for a in parser._actions for o in a.option_strings  # what --help shows
             if o.startswith("--") and o != "--help" and a.help != argparse.SUPPRESS]
    head = re.compile(rf"(?:^|, )`zeus {name}\b")  # an entry starts with the command(s) it shows
    entry = next((item for item in CLI.split("\n- ") if head.search(item)), None)
    assert entry is not None, f"README's CLI section has no `zeus {name}` entry"
    usage = entry[head.search(entry).start():]  # type: ignore[union-attr]
    for flag in flags:
        assert re.search(rf"{flag}\b", usage), f"README does not show zeus {name} {flag}"


def test_zeus_help_lists_every_exit_code_and_the_readme_the_same(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--help"]) == 0
    help_text = capsys.readouterr().out
    listed = [int(code) for code in re.findall(r"^  (\d+) ", help_text, re.M)]
    said = README.split("Exit status:", 1)[1].split("\n\n", 1)[0]

    assert tuple(listed) == CODES
    for code in CODES:
        assert re.search(rf"\b{code}\b", said), f"README's exit status does not say {code}"
    assert "sweep --dry-run" in help_text and "sweep --dry-run" in said


def test_the_demo_says_which_routing_it_runs_in_its_help_and_the_readme(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())

    assert "repository's routing.yml" not in help_text  # a wheel install has no repository
    assert "the pantheon Zeus ships with" in help_text
    assert "does not read ./routing.yml" in help_text
    assert "the demo does not read `./routing.yml`" in " ".join(README.split())


def test_the_readme_first_screen_points_at_the_guide_and_zeus_init() -> None:
    first_screen = "\n".join(README.splitlines()[:24])
    assert "[`docs/guide.md`](docs/guide.md)" in first_screen
    assert "zeus init" in first_screen
    assert (ROOT / "docs" / "guide.md").is_file()


@pytest.mark.process
def test_no_line_of_zeus_help_is_wider_than_100_characters() -> None:
    done = subprocess.run([sys.executable, "-m", "supervisor.cli", "--help"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "200"})  # a wide terminal wraps nothing
    assert done.returncode == 0, done.stderr
    wide = [line for line in done.stdout.splitlines() if len(line) > 100]
    assert not wide, wide
