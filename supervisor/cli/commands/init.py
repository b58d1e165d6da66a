"""`zeus init [DIR]`: a routing.yml, an agents module and a host script of your own.

Writes three files into DIR (default: the current directory; made if missing):
routing.yml with two agents (`counter`, a Python function in a process of its
own, and `finder`, a command) and every key commented with its default;
my_agents.py with their code; host.py, a host that starts Zeus on routing.yml and
delegates to both. `zeus validate` passes on them and `python host.py` runs at
once (from DIR). `--agent CLI` (claude, codex, gemini, opencode or cursor) writes
only a routing.yml instead, with one agent that is that agent CLI and its keys
commented with their defaults (docs/agent-clis.md). It never overwrites a file: if
any of them is there, it writes nothing and says which. Exit status: 0 when the
files were written, 2 when one was there already or DIR cannot be written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from actors.speaks import CLI_PROGRAMS
from supervisor.cli.commands import EXIT_BAD_INPUT, EXIT_OK

__all__ = ["AGENT_CLIS", "FILES", "add_parser", "agent_routing", "run"]

ROUTING = '''\
# routing.yml: your agents, and how Zeus supervises each of them (written by `zeus init`).
#
#   zeus validate             check it: every problem, with its line
#   zeus validate --explain   each agent's effective policy, every default made visible
#   python host.py            run your host: one delegation to each agent
#
# A key you leave out takes the default its comment names. Durations are plain numbers
# of seconds. `defaults:` is merged into every agent; an agent's own keys win.
version: 1

defaults:
  isolation: thread              # thread | process | ray (default: thread)
  timeout_s: 120                 # each attempt's deadline (default: 120)
  heartbeat:
    interval_s: 1.0              # a heartbeat, with a progress counter (default: 1.0)
    stale_after_s: 10            # no progress this long: stale, stopped (default: 10)
    # stale_in_tool_s: 30        # inside `with ctx.tool(...)`: 3 x stale_after_s by default
  shutdown:                      # after the deadline: a cooperative cancel, then grace_s,
    grace_s: 2.0                 # then SIGTERM (default: 2.0)
    term_s: 0.5                  # then SIGKILL to its process group (default: 0.5)
  retry:
    max_retries: 0               # retries on the same agent (default: 0)
    backoff: exponential         # none | fixed | exponential (default: exponential)
    initial_s: 1.0               # the first wait (default: 1.0)
    factor: 2.0                  # each wait is the last one times this (default: 2.0)
    max_s: 30.0                  # no wait is longer (default: 30.0)
    jitter: 0.2                  # each wait +/- 20% at random (default: 0.2)
    # the outcomes retried (default: [transient, timeout, stale, crash, lost])
    on: [transient, timeout, stale, crash, lost]
  fallback: null                 # who next when retries are spent (default: null, settle):
                                 # an agent, or zeus (the failure goes back to the owner)
  partial_ok: false              # a timeout after partial results settles partial (default: false)
  read_only: false               # true: a retry need not wait for the last writer (default: false)
  session_max: 0                 # warm children kept for follow-ups (default: 0)
  budget:                        # per delegation, across its retries and fallbacks
    max_calls: null              # model calls (default: null, no cap)
    max_cost: null               # dollars (default: null, no cap)
  result:
    max_chars: null              # a longer result is cut (default: null, any size)
    overflow: truncate           # truncate | artifact (a file) (default: truncate)

supervisor:
  max_depth: 2                   # levels of delegation below the host (default: 2)
  max_concurrent: 64             # delegations running at once; more wait (default: 64)
  intensity:                     # more restarts of one agent than this: no more for now
    max_restarts: 20             # (default: 20)
    within_s: 60                 # (default: 60)
  budget:
    max_cost: null               # the whole tree, in dollars (default: null, no cap)

agents:
  # A Python function, run in a process of its own: Zeus can kill it at its deadline.
  counter:
    role: word counter           # shown by zeus validate (default: null)
    entrypoint: "my_agents:count_words"   # module:function, imported from here (default: null)
    isolation: process           # (default: thread)
    timeout_s: 30                # (default: 120)
    retry:
      max_retries: 1             # one more try after a crash or a timeout (default: 0)
    partial_ok: true             # its counts so far, if it runs out of time (default: false)
    read_only: true              # it only reads (default: false)

  # A command: a program in its own process group, never through a shell; `{scope}` is
  # one argument. Each line it prints is progress; its standard output is the result.
  finder:
    role: line finder            # (default: null)
    command: ["python", "-m", "my_agents", "{scope}"]   # python: Zeus's own (default: null)
    timeout_s: 10                # (default: 120)
    read_only: true              # (default: false)
'''

AGENTS = '''\
"""Your agents: the work functions routing.yml names (written by `zeus init`).

`count_words` (agent `counter`) is a Python function; routing.yml runs it in a
process of its own. `main` (agent `finder`) is this module run as a command,
`python -m my_agents TEXT`: it prints each line here that holds TEXT. A work
function takes the brief and a context and returns a Report (or any value).
"""

from __future__ import annotations

import sys
from pathlib import Path

from actors import Brief, Context, Report

TEXT_FILES = {".py", ".md", ".txt", ".rst", ".yml", ".yaml", ".toml", ".json", ".cfg", ".ini"}


def text_files(inputs: object = None) -> list[Path]:
    """The files a brief's inputs name (a path, or a list of them), else the text files here."""
    if isinstance(inputs, str):
        return [Path(inputs)]
    if isinstance(inputs, list):
        return [Path(p) for p in inputs]
    return sorted(p for p in Path.cwd().iterdir() if p.is_file() and p.suffix in TEXT_FILES)


def count_words(brief: Brief, ctx: Context) -> Report:
    """Count the words of each file; each count is a partial result as soon as it is known."""
    files = text_files(brief.inputs)
    total = 0
    for path in files:
        ctx.check()  # raises actors.Cancelled once Zeus asks this attempt to stop
        words = len(path.read_text(encoding="utf-8", errors="replace").split())
        total += words
        ctx.partial(f"{path.name}: {words} words")  # progress Zeus sees, kept past a timeout
        # What a model reading the file would cost: routing.yml's budgets cap these.
        ctx.charge(calls=1, input_tokens=words, output_tokens=20, cost=words / 10_000_000)
    return Report(
        output=total,
        findings=[f"{total} words in {len(files)} file(s)"],
        validation=[f"read {len(files)} file(s) in {Path.cwd()}"],
    )


def main(argv: list[str] | None = None) -> int:
    """The `finder` command: print each line of the text files here that holds the text."""
    text = " ".join(sys.argv[1:] if argv is None else argv).strip()
    if not text:
        print("say what to find: python -m my_agents TEXT", file=sys.stderr)
        return 2  # a non-zero exit fails the attempt, with the end of this standard error
    hits = 0
    for path in text_files():
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        for number, line in enumerate(lines, 1):
            if text in line:
                hits += 1
                print(f"{path.name}:{number}: {line.strip()}", flush=True)  # each line: progress
    print(f"{hits} line(s) hold {text!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

HOST = '''\
"""Your host (written by `zeus init`): Zeus supervises one delegation to each of your agents.

    python host.py            run it from this directory
    zeus tree events.jsonl    the supervision tree, rebuilt from the journal it writes
"""

from __future__ import annotations

import sys
from pathlib import Path

from supervisor import Brief, Routing, Zeus

HERE = Path(__file__).resolve().parent


def main() -> int:
    routing = Routing.load(HERE / "routing.yml")  # a RoutingError names the file, line and key
    with Zeus.start(routing, log=HERE / "events.jsonl") as zeus:
        counted = zeus.dispatch(Brief(agent="counter", scope="Count the words of the files here"))
        found = zeus.dispatch(Brief(agent="finder", scope="def main"))
        summaries = [counted.result(), found.result()]  # each waits until it settles
    for summary in summaries:
        print(summary.render())  # the <subtask_summary> block an orchestrating agent reads
    return 0 if all(summary.ok for summary in summaries) else 1


if __name__ == "__main__":
    sys.exit(main())
'''

FILES = {"routing.yml": ROUTING, "my_agents.py": AGENTS, "host.py": HOST}

AGENT_ROUTING = """\
# routing.yml: {title} as an agent under Zeus (written by `zeus init --agent {cli}`).
#
#   zeus validate               check it, and that `{program}` is on PATH
#   zeus validate --explain     the argv Zeus runs, every default made visible
#   zeus dispatch {cli} "Say hello, then end with your summary block"
#
# What Zeus reads from its stream and what each event means: docs/agent-clis.md.
# A key you leave out takes the default its comment names; durations are seconds.
version: 1

supervisor:
  budget:
    max_cost: null               # the whole tree, in dollars (default: null, no cap)

agents:
  {cli}:
    role: coder                  # shown by zeus validate (default: null)
    # What its output speaks: claude | codex | gemini | opencode | cursor | jsonl | lines
    speaks: {cli}{pad}# (default: lines, a command's plain output)
    # The program: `{program}` on PATH. `command:` replaces the program only (a path, or
    # a wrapper such as [npx, -y, PACKAGE]); Zeus adds the arguments it speaks with.
    {command}# (default: null)
{args}    timeout_s: 900               # each attempt's deadline (default: 120)
    heartbeat:                   # every line it prints is a heartbeat; a model thinks in
                                 # silence, and a test run is one long tool call
      stale_after_s: 120         # no line this long: stale, stopped (default: 120, for a CLI)
      stale_in_tool_s: 1800      # inside a tool call (default: 1800, for a CLI)
    shutdown:                    # stopping it: SIGINT to its process group, grace_s,
      grace_s: 5.0               # then SIGTERM (default: 2.0)
      term_s: 0.5                # then SIGKILL (default: 0.5)
    exit_grace_s: 10             # alive this long after its result: stopped (default: 10)
    # true: a final reply without a <subtask_summary> block is an error
    require_summary: false       # (default: false)
{budget}    retry:
      max_retries: 1             # once more after a crash, a timeout, stale (default: 0),
                                 # never after a tool call with side effects
    session_max: 0               # warm sessions kept (default: 0); a follow-up brief in
                                 # the same session resumes the CLI's own session
    # When retries are spent: another agent (another CLI, say), or zeus (the owner).
    fallback: null               # (default: null, settle)
"""

_PRICED = """\
    budget:                      # per delegation, across its retries and fallbacks
      max_cost: 2.0              # dollars (default: null, no cap)
    # {how}
    pricing:                     # example prices: put your model's (default: null)
      input_per_mtok: {input:<10} # dollars per million input tokens (default: 0.0)
      cached_input_per_mtok: {cached:<3} # cached input (default: null, as input_per_mtok)
      output_per_mtok: {output:<9} # dollars per million output tokens (default: 0.0)
"""

# What each CLI needs to run headless: its flags, each with why.
_ARGS = {
    "claude": """\
    # Your own flags, after Zeus's. Headless, Claude asks no one: a tool it may not use is
    # denied (its result's permission_denials become the blocker). Let it work with
    # --permission-mode acceptEdits (edits; other tools still need allowing), or name
    # its tools: --allowedTools "Bash(npm test:*)" Edit; or bypassPermissions, in a
    # sandbox. E.g. [--model, sonnet, --permission-mode, acceptEdits]
    args: []                     # (default: [])
""",
    "codex": """\
    # Your own flags, after Zeus's. `codex exec` never asks for approval: its sandbox
    # decides what a command may do, read-only unless its config.toml says otherwise; let
    # it edit the folder and run its tests with --sandbox workspace-write (or
    # danger-full-access, in a sandbox of your own). E.g. [--model, gpt-5-codex,
    # --sandbox, workspace-write]
    args: []                     # (default: [])
""",
    "gemini": """\
    # Your own flags, after Zeus's. Headless, Gemini needs both: --skip-trust (in a folder
    # it does not trust it exits 55 at once), and --approval-mode yolo (without it, it
    # offers the model no shell tool at all, and asks no one for the others).
    args: [--skip-trust, --approval-mode, yolo]   # (default: [])
""",
    "opencode": """\
    # Your own flags, after Zeus's. Headless, a permission its config sets to "ask" is
    # refused (no one to ask); --auto approves what its config does not deny.
    # E.g. [--model, anthropic/claude-sonnet-4]
    args: []                     # (default: [])
""",
    "cursor": """\
    # Your own flags, after Zeus's. Headless, --force lets it run commands and write
    # files without asking. E.g. [--model, sonnet-4, --force]
    args: []                     # (default: [])
""",
}

# Each CLI's title and budget: what it reports decides what a cap needs.
AGENT_CLIS: dict[str, tuple[str, str]] = {
    "claude": ("Claude Code", _PRICED.format(
        how="Tokens are priced as they stream (live cost), its own total_cost_usd at the "
            "end;\n    # --max-budget-usd is set to what is left, Claude's own backstop.",
        input="3.0", cached="0.3", output="15.0")),
    "codex": ("The Codex CLI", _PRICED.format(
        how="Codex reports tokens at the end of its turn and never a cost: max_cost needs\n"
            "    # pricing: (without it, a RoutingError).",
        input="1.25", cached="0.125", output="10.0")),
    "gemini": ("The Gemini CLI", _PRICED.format(
        how="Gemini reports tokens only at its result and never a cost: max_cost needs\n"
            "    # pricing: (without it, a RoutingError).",
        input="1.25", cached="0.31", output="10.0")),
    "opencode": ("OpenCode", _PRICED.format(
        how="OpenCode reports each step's own cost, but 0 for a model it has no price of\n"
            "    # (a local one): pricing: prices those steps' tokens, so a cost cap holds.",
        input="3.0", cached="0.3", output="15.0")),
    "cursor": ("Cursor's agent", _PRICED.format(
        how="Cursor reports its tokens only on its result and never a cost: max_cost needs\n"
            "    # pricing:, and a cap holds at its end (it cannot stop the run that crosses "
            "it).", input="3.0", cached="0.3", output="15.0")),
}


def agent_routing(cli: str) -> str:
    """The routing.yml `zeus init --agent CLI` writes: one agent, `cli`, speaking it."""
    title, budget = AGENT_CLIS[cli]
    program = CLI_PROGRAMS[cli]
    return AGENT_ROUTING.format(title=title, cli=cli, program=program, args=_ARGS[cli],
                                pad=" " * (21 - len(cli)), budget=budget,
                                command=f"# command: [{program}]".ljust(29))


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "init",
        help="write a routing.yml, an agents module and a host of your own, ready to run",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument(
        "directory",
        metavar="DIR",
        nargs="?",
        type=Path,
        default=Path("."),
        help="where to write them (default: here; made if missing)",
    )
    parser.add_argument(
        "--agent",
        metavar="CLI",
        choices=sorted(AGENT_CLIS),
        default=None,
        help="write only a routing.yml whose agent is this agent CLI (claude, codex, gemini, "
        "opencode or cursor), its keys commented with their defaults",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    where: Path = args.directory
    cli: str | None = getattr(args, "agent", None)
    files = FILES if cli is None else {"routing.yml": agent_routing(cli)}
    there = [name for name in files if (where / name).exists()]
    if there:
        print(f"zeus init: {', '.join(str(where / name) for name in there)} "
              f"{'is' if len(there) == 1 else 'are'} there already; nothing written "
              "(zeus init never overwrites: give another DIR, or move them away)",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        where.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            with (where / name).open("x", encoding="utf-8") as file:  # "x": never overwrite
                file.write(text)
    except OSError as exc:
        print(f"zeus init: cannot write in {where}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    go = "" if where.resolve() == Path.cwd().resolve() else f"cd {where}\n  "
    if cli is not None:
        print(
            f"zeus init: wrote routing.yml in {where}, with agent {cli!r} (speaks {cli})\n"
            "Next:\n"
            f"  {go}zeus validate                  check it, and that "
            f"{CLI_PROGRAMS[cli]} is on PATH\n"
            "  zeus validate --explain        the argv Zeus runs, every default made visible\n"
            f'  zeus dispatch {cli} "Say hello"  one delegation (docs/agent-clis.md)'
        )
        return EXIT_OK
    print(
        f"zeus init: wrote routing.yml, my_agents.py and host.py in {where}\n"
        "Next:\n"
        f"  {go}zeus validate                  check routing.yml\n"
        "  zeus validate --explain        every default of each agent, made visible\n"
        "  python host.py                 your host: one delegation to each agent\n"
        '  zeus dispatch counter "Count the words here"'
    )
    return EXIT_OK
