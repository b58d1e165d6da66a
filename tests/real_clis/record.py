"""Record each real agent CLI's stream against the scripted model server as a fixture,
tests/fixtures/agent_clis/<cli>/real-<version>-<case>.jsonl.

    python tests/real_clis/record.py                      # every CLI, every case
    python tests/real_clis/record.py claude --case resumed --root /tmp/claude197

It runs itself again inside a loopback-only network namespace (netns.py); --root is a
folder with another version installed (`npm install --prefix DIR PACKAGE@VERSION`).
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.real_clis import clis, netns
from tests.real_clis.model_server import ModelServer, Usage, api_error, final, tool_call

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agent_clis"
NAMES = {"claude": "Claude Code", "codex": "Codex CLI", "gemini": "Gemini CLI",
         "opencode": "OpenCode"}
CASES = ("tool-then-blocked", "resumed", "api-error", "permission-denied")
DENIED = "I could not remove build/: running the command was not allowed."
FIRST = "First part done: the route is in routes/a.py."
SAME = Usage(1000, 200, 30)  # both runs of `resumed` alike, so a cumulative total shows


def script(case: str) -> list:
    if case == "tool-then-blocked":
        return [tool_call("echo hi"), final(clis.BLOCKED_TEXT)]
    if case == "resumed":
        return [final(FIRST, usage=SAME), final(clis.BLOCKED_TEXT, usage=SAME)]
    if case == "permission-denied":  # its shell tool not allowed: the call is denied
        return [tool_call("rm -rf build"), final(DENIED)]
    return [api_error(529)]


def record(name: str, case: str, *, root: Path = clis.HERE, partial: bool = False,
           out: Path = FIXTURES) -> Path:
    """Run one case and write its fixture; the path written."""
    netns.check_isolated()
    with ModelServer(script(case)) as server, tempfile.TemporaryDirectory() as tmp:
        setup = clis.cli_setup(name, Path(tmp) / "home", server.url, root=root)
        if case == "permission-denied":
            setup = dataclasses.replace(setup, args=clis.without_shell(setup))
        work = Path(tmp) / "work"
        work.mkdir()
        started = time.monotonic()
        if case == "resumed":
            first = clis.run(setup, "Find the route.", work, timeout=300, partial=partial)
            resume = clis.session_id(name, first.lines)
            assert resume, f"{name} named no session: {first.stdout[-2000:]}"
            result = clis.run(setup, "Now deploy it.", work, timeout=300, resume=resume,
                              partial=partial)
            last = server.main_requests()[-1].body
            assert FIRST in str(last), f"{name} did not send the resumed history"
        else:
            result = clis.run(setup, "Run echo hi, then report.", work, timeout=600,
                              partial=partial)
        took = time.monotonic() - started
    ended = f"killed at {took:.0f} s" if result.timed_out else f"exit {result.returncode}"
    suffix = "-partial" if partial else ""
    path = out / name / f"real-{setup.version}-{case}{suffix}.jsonl"
    flags = " --include-partial-messages" if partial else ""
    head = (f"# {NAMES[name]} {setup.version}{flags}, recorded by tests/real_clis/record.py "
            f"against tests/real_clis/model_server.py: case {case}, {ended}, "
            f"{len(server.main_requests())} main and {len(server.side_requests())} side "
            f"requests, {took:.1f} s\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(head + result.stdout, encoding="utf-8")
    return path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("clis", nargs="*", default=list(clis.CLIS))
    parser.add_argument("--case", action="append", choices=CASES)
    parser.add_argument("--root", type=Path, default=clis.HERE)
    parser.add_argument("--partial", action="store_true", help="claude's partial messages")
    args = parser.parse_args(argv)
    if not netns.in_namespace():
        if reason := netns.unavailable():
            sys.exit(f"record.py: {reason}")
        argv = [sys.executable, str(Path(__file__).resolve()), *argv]
        return subprocess.run(netns.command(argv), env=netns.environment()).returncode
    for name in args.clis:
        for case in args.case or CASES:
            print(record(name, case, root=args.root.resolve(), partial=args.partial),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
