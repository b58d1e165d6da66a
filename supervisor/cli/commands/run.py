"""`zeus run PLAN.yml [--routing F] [--log F] [--json] [--ui] [--store F]`: a plan of briefs.

A plan is a YAML list; each entry is a brief (a mapping of Brief fields:
agent, scope, inputs, expected_output, constraints, partial_ok, timeout_s,
session, mode) or a group `{group: [briefs], strategy: one_for_one}`. It may
also be a mapping `{routing: PATH, briefs: [...]}`, PATH relative to the plan.
Everything is dispatched at once; the live tree shows it running (one line per
event when the output is not a terminal), then each summary in plan order and
the final tree last, where it stays in view (with `--json`: a JSON list of the
summaries, groups flattened, and the live tree on standard error when it is a
terminal). Ctrl-C stops Zeus, which cancels what is open, then prints what had
settled, the final tree and the journal's path; exit status 130.
With `--store F` the run is durable: each brief is dispatched under its `key:` (or
PLAN:N, the plan file's name and the entry's number), so running the same command
again after a crash runs only what had not settled and gives back what had.
The routing is `--routing F`, else the plan's, else routing.yml in the current
directory, else the pantheon Zeus ships with. Exit status: 0 when every
delegation completed, 1 when some did not, 2 for a bad plan (the message names
the entry and the field) or bad routing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import get_close_matches
from pathlib import Path
from typing import IO, Any

import yaml
from pydantic import ValidationError
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from actors import Brief, Summary
from supervisor.cli.commands import (
    EXIT_BAD_INPUT,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    console,
    stop_at_once,
    ui,
)
from supervisor.cli.commands.dispatch import agent_problem, brief_problem, load_routing
from supervisor.cli.live import LiveTree, open_journal
from supervisor.cli.reader import watch_reader
from supervisor.core.handle import Handle
from supervisor.core.zeus import Zeus
from supervisor.errors import SupervisorError
from supervisor.routing import Routing
from supervisor.routing.bounded import BoundExceeded, load_bounded, read_bounded
from supervisor.routing.lines import KeyPath, Lines, Loader
from supervisor.routing.problems import Problems, unknown_key
from supervisor.rules.groups import STRATEGIES, Strategy

__all__ = ["Entry", "Plan", "PlanError", "add_parser", "check_agents", "load_plan",
           "print_final_tree", "print_interrupted", "print_report", "print_summaries",
           "read_plan", "run", "screen_lines"]

_TOP_KEYS = ("routing", "briefs")
_GROUP_KEYS = ("group", "strategy")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run a plan of briefs with the live tree, then print the summaries",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("plan", metavar="PLAN.yml", type=Path, help="the plan file")
    parser.add_argument("--routing", metavar="F", type=Path, help="the routing file")
    parser.add_argument("--log", metavar="F", type=Path, help="append the event journal to F")
    parser.add_argument("--json", action="store_true", help="print the summaries as JSON")
    parser.add_argument("--ui", action="store_true",
                        help="follow the journal in a browser (needs --log F: the page "
                             "reads that journal)")
    parser.add_argument("--store", metavar="F", type=Path,
                        help="a durable store: run again after a crash, only what had not "
                             "settled runs (each brief's key: its key:, else PLAN:N)")
    parser.set_defaults(run=run)


class PlanError(ValueError):
    """A plan that cannot run; the message lists every problem, each with file:line."""


@dataclass(frozen=True)
class Entry:
    """One entry of a plan: a brief, or a group of briefs under a strategy."""

    briefs: tuple[Brief, ...]
    strategy: Strategy | None = None  # None: a single brief, not a group
    # Where each brief is: its key path in the plan file, and `entry 2 (a group), brief 1`.
    places: tuple[tuple[KeyPath, str], ...] = ()
    key: str | None = None  # a single brief's `key:` (its dispatch key with --store)


@dataclass(frozen=True)
class Plan:
    entries: tuple[Entry, ...]
    routing: Path | None = None  # the plan's own `routing:`, resolved against its directory


def load_plan(path: Path) -> Plan:
    """Read and check a plan file; `PlanError` lists every problem, each with file:line."""
    plan, problems = read_plan(path)
    problems.raise_if_any()
    return plan


def read_plan(path: Path) -> tuple[Plan, Problems]:
    """The plan's entries that are valid, and the problems of the others (all of them).

    `PlanError` at once for a file that is no plan at all (unreadable, not YAML, not a
    list of briefs): there is nothing to check further.
    """
    try:
        data, root = load_bounded(read_bounded(path), Loader)
    except OSError as exc:
        raise PlanError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise PlanError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except BoundExceeded as exc:
        where = f"{path}:{exc.line}" if exc.line is not None else str(path)
        raise PlanError(f"{where}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or exc
        raise PlanError(f"{path}{where}: not valid YAML: {problem}") from None
    problems = Problems(str(path), Lines(root), error=PlanError, rerun=f"zeus run {path}")
    routing: Path | None = None
    base: KeyPath = ()
    if isinstance(data, dict) and "briefs" not in data and {"agent", "scope", "group"} & set(data):
        raise PlanError(
            f"{path}: a plan is a list of briefs, found a single mapping; "
            "start each brief with `- `"
        )
    if isinstance(data, dict):
        unknown = sorted(str(k) for k in data if k not in _TOP_KEYS)
        if unknown:
            _add(problems, (unknown[0],), f"unknown key(s) {', '.join(unknown)}; a plan "
                 "mapping has `routing:` (optional) and `briefs:` (a list)")
            problems.raise_if_any()
        if "routing" in data:
            if not isinstance(data["routing"], str) or not data["routing"]:
                _add(problems, ("routing",), "routing: give the routing file's path as a string")
                problems.raise_if_any()
            routing = path.parent / data["routing"]
        data, base = data.get("briefs"), ("briefs",)
    if not isinstance(data, list):
        found = "nothing" if data is None else f"a {type(data).__name__}"
        raise PlanError(
            f"{path}: a plan is a list of briefs (or {{routing: ..., briefs: [...]}}), "
            f"found {found}"
        )
    if not data:
        raise PlanError(f"{path}: the plan has no briefs")
    entries = [_entry(problems, (*base, n - 1), n, raw) for n, raw in enumerate(data, 1)]
    return Plan(tuple(e for e in entries if e is not None), routing), problems


def _add(problems: Problems, keys: KeyPath, text: str) -> None:
    """A problem of the plan, on the line of `keys` (the text says which entry)."""
    problems.add((), text, line=problems.lines.line(keys) if problems.lines else None)


def _entry(problems: Problems, at: KeyPath, n: int, raw: Any) -> Entry | None:
    """The entry's valid briefs (for the checks that need routing), its problems added.

    A plan with any problem never runs, so an entry kept here may be incomplete.
    """
    where = f"entry {n}"
    if not isinstance(raw, dict):
        _add(problems, at, f"{where}: a brief is a mapping (agent: ..., scope: ...), "
                     f"found {_kind(raw)}")
        return None
    if "group" not in raw:
        key = raw.get("key")
        if key is not None and not (isinstance(key, str) and key):
            _add(problems, (*at, "key"), f"{where}: key: give a non-empty string, found "
                         f"{_kind(key)}")
        brief = _brief(problems, at, where, {k: v for k, v in raw.items() if k != "key"},
                       also=("key",))
        return None if brief is None else Entry((brief,), None, ((at, where),),
                                                key if isinstance(key, str) else None)
    where += " (a group)"
    unknown = sorted(str(k) for k in raw if k not in _GROUP_KEYS)
    if unknown:
        _add(problems, (*at, unknown[0]), f"{where}: unknown key(s) {', '.join(unknown)}; a "
                     "group has `group:` (a list of briefs) and `strategy:`")
    strategy = next((s for s in STRATEGIES if s == raw.get("strategy", "one_for_one")), None)
    if strategy is None:
        _add(problems, (*at, "strategy"), f"{where}: strategy: {raw.get('strategy')!r} is not "
                     f"one of {', '.join(STRATEGIES)}")
    members = raw["group"]
    if not isinstance(members, list) or not members:
        _add(problems, (*at, "group"), f"{where}: group: give a non-empty list of briefs")
        return None
    briefs, places = [], []
    for m, member in enumerate(members, 1):
        inner, keys = f"{where}, brief {m}", (*at, "group", m - 1)
        if not isinstance(member, dict):
            _add(problems, keys, f"{inner}: a brief is a mapping, found {_kind(member)}")
            continue
        brief = _brief(problems, keys, inner, member)
        if brief is not None:
            briefs.append(brief)
            places.append((keys, inner))
    return Entry(tuple(briefs), strategy or "one_for_one", tuple(places)) if briefs else None


def _brief(
    problems: Problems, at: KeyPath, where: str, raw: dict[str, Any], *,
    also: tuple[str, ...] = (),
) -> Brief | None:
    """The brief, or None after adding each of its problems at its field's line.

    A key that is no field is named with the field it is closest to, as routing.yml's
    are (`unknown key 'scop' (did you mean 'scope'?); allowed: ...`); the field it meant
    is then not also said to be missing. `also`: the entry's other keys (`key:`).
    """
    allowed = [*Brief.model_fields, *also]
    unknown = [key for key in raw if key not in allowed]
    meant = set()
    for key in unknown:
        _add(problems, (*at, key), f"{where}: {key}: {unknown_key(str(key), allowed)}")
        meant.update(get_close_matches(str(key), allowed, n=1))
    try:
        brief = Brief.model_validate({k: v for k, v in raw.items() if k not in unknown})
    except ValidationError as exc:
        for err in exc.errors():
            fields = [str(part) for part in err["loc"]][:1]
            if err["type"] == "missing" and fields and fields[0] in meant:
                continue
            _add(problems, (*at, *fields), f"{where}: {brief_problem(err)}")
        return None
    return None if unknown else brief


def _kind(value: Any) -> str:
    return "nothing" if value is None else f"a {type(value).__name__} ({value!r:.40})"


def check_agents(plan: Plan, routing: Routing, problems: Problems) -> None:
    """Add a problem for every brief whose agent the routing does not define or cannot run."""
    for entry in plan.entries:
        for brief, (keys, where) in zip(entry.briefs, entry.places, strict=True):
            problem = agent_problem(brief.agent, routing)
            if problem is not None:
                _add(problems, (*keys, "agent"), f"{where}: agent: {problem}")


# -- the command ---------------------------------------------------------------------------
def run(args: argparse.Namespace) -> int:
    try:
        plan, problems = read_plan(args.plan)
    except PlanError as exc:
        print(f"zeus run: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    routing = load_routing(args.routing if args.routing is not None else plan.routing, "run")
    if routing is not None:
        check_agents(plan, routing, problems)
    try:
        problems.raise_if_any()
    except PlanError as exc:
        print(f"zeus run: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if routing is None:
        return EXIT_BAD_INPUT
    if args.store is not None and any(e.strategy is not None for e in plan.entries):
        print(f"zeus run: {args.plan}: a group cannot be resumed from a store yet; run the "
              "plan without --store, or give its briefs as single entries", file=sys.stderr)
        return EXIT_BAD_INPUT
    journal: IO[str] | None = None
    try:
        if args.log is not None:
            journal = open_journal(args.log)
        with ui.Beside(args.log, "run") if args.ui else contextlib.nullcontext():
            return _run(plan, routing, journal, args.log, as_json=args.json, store=args.store,
                        name=args.plan.stem)
    except SupervisorError as exc:
        print(f"zeus run: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        if journal is not None:
            journal.close()


def _run(
    plan: Plan, routing: Routing, journal: IO[str] | None, log: Path | None, *, as_json: bool,
    store: Path | None = None, name: str = "plan",
) -> int:
    out = console()
    if as_json:
        err = console(stderr=True)
        live = LiveTree(err if err.is_terminal else None, journal=journal, transient=True)
    else:
        live = LiveTree(out, journal=journal, transient=True)
    handles: list[Handle] = []
    interrupted: list[Summary] | None = None
    zeus = Zeus.start(routing, log=live, store=store)
    try:
        with zeus, live.show(zeus), watch_reader(live.output_gone):
            try:
                for n, entry in enumerate(plan.entries, 1):
                    if entry.strategy is None:
                        key = (entry.key or f"{name}:{n}") if store is not None else None
                        added = [zeus.dispatch(entry.briefs[0], key=key)]
                    else:
                        added = list(zeus.dispatch_group(entry.briefs, entry.strategy).handles)
                    for handle in added:
                        handle.add_done_callback(live.add_summary)
                    handles += added
                summaries = live.results(handles)
            except KeyboardInterrupt:  # what settled before Zeus stops (and cancels) the rest
                interrupted = live.summaries()
    except KeyboardInterrupt:  # a second one, while Zeus stopped: it stops at once
        stop_at_once(zeus)
        interrupted = live.summaries() if interrupted is None else interrupted
    if live.write_error:
        print(f"zeus run: {live.write_error}", file=sys.stderr)
    if interrupted is not None:
        if as_json:
            print(json.dumps([s.model_dump(mode="json") for s in interrupted], indent=2))
            print("zeus run: interrupted", file=sys.stderr)
        else:
            print_interrupted(out, live, interrupted, log, "run")
        return EXIT_INTERRUPTED
    if as_json:
        print(json.dumps([s.model_dump(mode="json") for s in summaries], indent=2))
    else:
        print_report(out, live, summaries)
    return EXIT_OK if all(s.ok for s in summaries) else EXIT_INCOMPLETE


# -- the report, shared with `zeus demo` ----------------------------------------------------
def print_summaries(out: Console, summaries: Sequence[Summary]) -> None:
    """Each summary block, under a rule on a terminal."""
    for summary in summaries:
        out.print()
        if out.is_terminal:
            out.rule(Text(f"{summary.id}: {summary.status.value}"), align="left")
        out.print(Text(summary.render()), soft_wrap=True)


def print_final_tree(out: Console, live: LiveTree, *, below: int) -> None:
    """The final tree, after the summaries so that it is what stays in view.

    On a terminal it keeps to the screen's height less the `below` lines still to
    come, folding settled detail as it must; off a terminal every row is written.
    """
    out.print()
    live.print_tree(max(4, out.size.height - below - 1) if out.is_terminal else None)


def screen_lines(out: Console, lines: Sequence[str]) -> int:
    """How many rows `lines` take on `out`'s screen once the terminal folds the long ones."""
    width = max(1, out.size.width)
    return sum(max(1, -(-cell_len(line) // width)) for line in lines)


def print_report(out: Console, live: LiveTree, summaries: Sequence[Summary]) -> None:
    """Each summary block, then the final tree, then one line of totals."""
    print_summaries(out, summaries)
    print_final_tree(out, live, below=2)
    done = sum(s.ok for s in summaries)
    out.print()
    out.print(Text(f"{done} of {len(summaries)} delegation(s) completed"), soft_wrap=True)


def print_interrupted(
    out: Console, live: LiveTree, settled: Sequence[Summary], log: Path | None, command: str
) -> None:
    """After Ctrl-C: what had settled, their summaries, the final tree, where the journal is."""
    said = ", ".join(f"{s.id} {s.status.value}" for s in settled) or "none"
    out.print()
    out.print(
        Text(f"zeus {command}: interrupted; {len(settled)} delegation(s) had settled: {said}"),
        soft_wrap=True,
    )
    print_summaries(out, settled)
    print_final_tree(out, live, below=2)
    out.print()
    where = f"journal: {log.resolve()}" if log is not None else "no journal: --log F keeps one"
    out.print(Text(where), soft_wrap=True)
