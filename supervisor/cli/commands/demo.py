"""`zeus demo [--routing F] [--log F] [--ui]`: the pantheon at work, supervised, in a few seconds.

A built-in plan runs on the pantheon Zeus ships with (or F) and the example
agents, which do real work without a model, all at once under one Zeus, with
the live tree (one line per event when the output is not a terminal). It shows,
for real: a retry after a transient failure, a fallback along routing.yml's
chain (talos -> hermes), a hung child in its own process killed at its
deadline, partial results kept from an explorer that ran out of time, a budget
stop, an owner's cancel winning a race against a budget stop, and an
orchestrator delegating to explorers (a tree two levels deep). It ends with
every summary, a table of what each scenario was meant to show and the final
tree, fitted to the screen. Ctrl-C prints what had settled, the tree and the
journal's path.
The pantheon is the package's own routing.yml (a checkout's is the same file);
unlike the other commands, the demo does not read ./routing.yml, since its plan
needs apollo, athena, talos and hermes (`--routing F`: a file that has them).
The journal goes to `--log F` (default: zeus-demo.jsonl here), for `zeus tree`
and `zeus timeouts`. Exit status: 0 when every scenario settled as designed, 1
when one did not, 2 for bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from rich.console import Console
from rich.text import Text

from actors import AttemptOutcome, Brief, Status, Summary
from supervisor.cli.commands import (
    EXIT_BAD_INPUT,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    console,
    fitted,
    print_table,
    stop_at_once,
    ui,
)
from supervisor.cli.commands.dispatch import load_routing
from supervisor.cli.commands.run import (
    print_final_tree,
    print_interrupted,
    print_summaries,
    screen_lines,
)
from supervisor.cli.live import LiveTree, open_journal
from supervisor.cli.reader import watch_reader
from supervisor.core.handle import Handle
from supervisor.core.zeus import Zeus
from supervisor.errors import SupervisorError
from supervisor.examples._common import default_roots
from supervisor.routing import DEFAULT_ROUTING, AgentPolicy, Routing
from supervisor.routing.table import deep_merge

__all__ = ["Scenario", "add_parser", "demo_routing", "run", "scenarios"]

DEFAULT_LOG = Path("zeus-demo.jsonl")
# Agents of routing.yml the plan runs as they are (talos gets a slower command line).
NEEDED = ("apollo", "athena", "talos", "hermes")
# Agents the demo adds, each on routing.yml's defaults plus these keys: the faulty examples.
DEMO_AGENTS: dict[str, dict[str, Any]] = {
    "flaky": {
        "role": "demo: fails transiently once, then succeeds",
        "entrypoint": "supervisor.examples.faulty:flaky",
        "timeout_s": 10,
        "retry": {"max_retries": 2, "initial_s": 0.5},
    },
    "hang": {
        "role": "demo: a tool call that never answers, deaf to cancellation",
        "entrypoint": "supervisor.examples.faulty:hang",
        "isolation": "process",
        "timeout_s": 2,
        "retry": {"max_retries": 0},
        "shutdown": {"grace_s": 0.5, "term_s": 0.5},
    },
    "spendthrift": {
        "role": "demo: charges model calls until a budget stops it",
        "entrypoint": "supervisor.examples.faulty:spendthrift",
        "timeout_s": 10,
        "retry": {"max_retries": 0},
        "budget": {"max_calls": 12},
    },
}
TALOS_DELAY_S = 0.3  # per file: slower than talos's 1.5 s deadline allows
# What the explorers search: Zeus's own source, wherever it is installed (not the cwd).
SOURCE = [str(path) for path in default_roots()]
RACE_REASON = "the owner cancelled it as its budget ran out"

Check = Callable[[Summary, LiveTree], str | None]


@dataclass(frozen=True)
class Scenario:
    """One delegation of the plan: what it shows and how it must settle to show it."""

    name: str
    shows: str
    brief: Brief
    expect: Status
    check: Check  # None when the summary shows what it should, else what is missing
    cancel_on: str | None = None  # the event on which the owner cancels it (a race)


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="the pantheon at work: retry, fallback, kill, partial results, budget, cancel",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("--routing", metavar="F", type=Path, default=DEFAULT_ROUTING,
                        help="the routing file, which must define apollo, athena, talos and "
                        "hermes (default: the pantheon Zeus ships with; ./routing.yml is not read)")
    parser.add_argument(
        "--log", metavar="F", type=Path, default=DEFAULT_LOG, help="the journal (appended)"
    )
    parser.add_argument("--ui", action="store_true", help="follow it in a browser (zeus ui)")
    parser.set_defaults(run=run)


# -- the plan ------------------------------------------------------------------------------
def demo_routing(base: Routing) -> Routing:
    """`base` plus the demo's faulty agents, and talos slowed down so that it times out.

    `SupervisorError` names the agents the plan needs that `base` lacks.
    """
    missing = [name for name in NEEDED if name not in base.agents]
    if missing:
        raise SupervisorError(
            f"the demo runs {', '.join(NEEDED)}; {base.source or 'the routing'} lacks "
            f"{', '.join(missing)} (without --routing the demo runs the pantheon Zeus ships "
            "with, which has them)"
        )
    routing = base
    for name, keys in DEMO_AGENTS.items():
        policy = AgentPolicy.model_validate(deep_merge(base.defaults, keys))
        routing = routing.with_agent(name, policy)
    talos = base.agent("talos")
    slow = ("python", "-m", "supervisor.examples.hotfix", "--delay", str(TALOS_DELAY_S), "{scope}")
    return routing.with_agent(
        "talos", talos.model_copy(update={"command": slow, "entrypoint": None})
    )


def _outcomes(s: Summary) -> list[str]:
    return [a.outcome.value for a in s.attempts]


def _retried(s: Summary, live: LiveTree) -> str | None:
    if _outcomes(s) != ["transient", "completed"]:
        return f"wanted a transient failure then a completed retry; attempts: {_outcomes(s)}"
    return None


def _fell_back(s: Summary, live: LiveTree) -> str | None:
    agents = [a.agent for a in s.attempts]
    if not agents or agents[0] != "talos" or s.agent == "talos":
        return f"wanted talos's attempts, then its fallback; agents: {agents}"
    if AttemptOutcome.timeout not in [a.outcome for a in s.attempts if a.agent == "talos"]:
        return f"wanted talos to time out first; attempts: {_outcomes(s)}"
    return None


def _killed(s: Summary, live: LiveTree) -> str | None:
    last = s.attempts[-1] if s.attempts else None
    if last is None or last.pid is None:
        return "wanted an attempt in a child process (with a pid)"
    if last.killed not in ("terminate", "kill") or s.timeout_kind != "deadline":
        return f"wanted a kill at the deadline; killed: {last.killed}, timeout: {s.timeout_kind}"
    return None


def _kept_partials(s: Summary, live: LiveTree) -> str | None:
    if not s.partial_results:
        return "wanted the partial results found before the deadline"
    return None


def _budget(s: Summary, live: LiveTree) -> str | None:
    return None


def _cancel_won(s: Summary, live: LiveTree) -> str | None:
    losing = [cause for a in s.attempts for cause in a.losing_causes]
    if "budget_exceeded" not in losing:
        return f"wanted the budget stop kept as the losing cause; losing causes: {losing}"
    return None


def _delegated(s: Summary, live: LiveTree) -> str | None:
    children = [d for d in live.delegations().values() if d.parent_id == s.id]
    if not children:
        return "wanted explorer delegations under the orchestrator"
    unfinished = [d.id for d in children if d.status != "completed"]
    if unfinished:
        return f"wanted every explorer it delegated to complete; not: {', '.join(unfinished)}"
    return None


def scenarios(workdir: Path) -> list[Scenario]:
    """The plan, in the order it is dispatched; `workdir` is where the implementer writes."""
    return [
        Scenario(
            "retry",
            "a transient failure, retried after a backoff",
            Brief(agent="flaky", scope="Fetch the release notes", inputs={"fail_times": 1}),
            Status.completed,
            _retried,
        ),
        Scenario(
            "fallback",
            "talos (a command) times out twice; routing.yml falls back to hermes",
            Brief(
                agent="talos",
                scope="Strip trailing whitespace",
                inputs={"workdir": str(workdir)},
                timeout_s=1.5,
                partial_ok=False,  # talos's policy keeps partial results; here it falls back
            ),
            Status.completed,
            _fell_back,
        ),
        Scenario(
            "kill",
            "a hung child in its own process, killed at its deadline",
            Brief(agent="hang", scope="Call the tool that never answers"),
            Status.timed_out,
            _killed,
        ),
        Scenario(
            "partial",
            "an explorer out of time: what it found is kept",
            Brief(
                agent="apollo",
                scope='Find every "__all__" in the project',
                inputs={"paths": SOURCE, "delay_s": 0.25, "suffixes": [".py"]},
                timeout_s=3,
                partial_ok=True,
            ),
            Status.partial,
            _kept_partials,
        ),
        Scenario(
            "budget",
            "a budget of 12 calls, then a stop",
            Brief(agent="spendthrift", scope="Summarise every issue", inputs={"interval_s": 0.1}),
            Status.budget_exceeded,
            _budget,
        ),
        Scenario(
            "cancel race",
            "the owner cancels as the budget runs out: cancel wins by rule",
            Brief(agent="spendthrift", scope="Translate the docs", inputs={"interval_s": 0.1}),
            Status.cancelled,
            _cancel_won,
            cancel_on="attempt.budget_exceeded",
        ),
        Scenario(
            "tree",
            "an orchestrator delegating one explorer per directory",
            Brief(
                agent="athena",
                scope='Map where "TransientError" is raised or caught',
                inputs={"paths": SOURCE, "explore": {"delay_s": 0.02}},
            ),
            Status.completed,
            _delegated,
        ),
    ]


class _Owner:
    """The demo's host as a log target: it feeds the live view, and cancels on cue.

    Runs in Zeus's thread. A cancel sent while Zeus emits the cue event reaches
    Zeus's mailbox before anything the child can say next, so the race it makes
    is the same every run: the stop for the cue and the cancel are both in flight.
    """

    def __init__(self, live: LiveTree, plan: list[Scenario]) -> None:
        self._live = live
        self._cues = {s.brief.scope: s.cancel_on for s in plan if s.cancel_on}
        self._watch: dict[str, str] = {}  # delegation id -> cue event
        self.zeus: Zeus | None = None

    def __call__(self, event: dict[str, Any]) -> None:
        self._live(event)
        name, delegation_id = event.get("event"), event.get("delegation_id")
        if name == "delegation.dispatched" and event.get("scope") in self._cues:
            self._watch[str(delegation_id)] = self._cues[event["scope"]]
        elif delegation_id in self._watch and name == self._watch[str(delegation_id)]:
            del self._watch[str(delegation_id)]
            if self.zeus is not None:
                self.zeus.cancel(str(delegation_id), RACE_REASON)


# -- the command ---------------------------------------------------------------------------
def run(args: argparse.Namespace) -> int:
    base = load_routing(args.routing, "demo")
    if base is None:
        return EXIT_BAD_INPUT
    try:
        routing = demo_routing(base)
        journal = open_journal(args.log)
        page = ui.Beside(args.log, "demo") if args.ui else contextlib.nullcontext()
    except SupervisorError as exc:
        print(f"zeus demo: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        with page, tempfile.TemporaryDirectory(prefix="zeus-demo-") as workdir:
            return _demo(routing, journal, Path(args.log), Path(workdir))
    finally:
        journal.close()


def _demo(
    routing: Routing, journal: IO[str], log: Path, workdir: Path, out: Console | None = None
) -> int:
    """Run the plan on `out` (default: standard output) and report; the exit status."""
    out = out or console()
    plan = scenarios(workdir)
    print_table(
        out,
        ("scenario", "agent", "what it shows"),
        [(s.name, s.brief.agent, s.shows) for s in plan],
        title=f"zeus demo: {len(plan)} delegations at once on {routing.source}",
    )
    out.print()
    started = time.monotonic()
    live = LiveTree(out, journal=journal, transient=True)
    owner = _Owner(live, plan)
    handles: list[Handle] = []
    interrupted: list[Summary] | None = None
    zeus = owner.zeus = Zeus.start(routing, log=owner)
    try:
        with zeus, live.show(zeus), watch_reader(live.output_gone):
            try:
                for s in plan:
                    handle = zeus.dispatch(s.brief)
                    handle.add_done_callback(live.add_summary)
                    handles.append(handle)
                summaries = live.results(handles)
            except KeyboardInterrupt:  # what settled before Zeus stops (and cancels) the rest
                interrupted = live.summaries()
    except KeyboardInterrupt:  # a second one, while Zeus stopped: it stops at once
        stop_at_once(zeus)
        interrupted = live.summaries() if interrupted is None else interrupted
    if interrupted is not None:
        print_interrupted(out, live, interrupted, log, "demo")
        return EXIT_INTERRUPTED
    took = time.monotonic() - started
    print_summaries(out, summaries)
    rows, failures = [], 0
    for s, summary in zip(plan, summaries, strict=True):
        problem = (
            f"wanted {s.expect.value}" if summary.status is not s.expect else s.check(summary, live)
        )
        failures += problem is not None
        rows.append(
            [
                s.name,
                summary.id,
                summary.status.value,
                "yes" if problem is None else "NO",
                problem or s.shows,
            ]
        )
    out.print()
    print_table(
        out, ("scenario", "delegation", "settled", "ok", "what it shows"), rows,
        title="What the demo showed",
    )
    verdict = (
        "every scenario settled as designed"
        if not failures
        else f"{failures} scenario(s) did not settle as designed"
    )
    footer = [
        "",
        *fitted(out, f"journal: {log.resolve()}"),
        *fitted(out, f"  read it again: zeus tree {log}; zeus timeouts {log}", indent=4),
        *([f"  {live.write_error}"] if live.write_error else []),
        f"zeus demo took {took:.1f}s: {verdict}",
    ]
    print_final_tree(out, live, below=screen_lines(out, footer))
    for line in footer[:-1]:
        out.print(Text(line), soft_wrap=True)
    out.print(Text(footer[-1], style="bold"), soft_wrap=True)
    return EXIT_OK if not failures else EXIT_INCOMPLETE

