"""`zeus resume STORE ID [--routing F] [--note N]`: run a blocked delegation again.

Once a person has checked what a blocked delegation left (`zeus blocked STORE` lists
them), this runs it again as a new attempt: the same id and key, its attempts and spend
kept, journalled as `delegation.resumed` with who and the note. The note is the answer
its agent gets with its blocker (`ctx.note`; an agent CLI resumes the session it was
blocked in, its prompt quoting both). It opens the store as
its owner, as a host does (recovering what its last Zeus left open), so it is refused
while a live Zeus owns the store: resume from that host (`zeus.resume(id)`) instead. The
routing is `--routing F`, else routing.yml in the current directory, else none (only
for a store that holds no open delegation). It waits for the summary and prints it.
Exit status: 0 when it completed, 1 when it settled otherwise, 2 for bad input (a busy
or bad store, an id that is not blocked, a bad routing).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from supervisor import Routing, Zeus
from supervisor.cli.commands import EXIT_BAD_INPUT, EXIT_INCOMPLETE, EXIT_OK, console
from supervisor.errors import RoutingError, SupervisorError
from supervisor.store import open_count

__all__ = ["add_parser", "as_owner", "run", "store_routing"]

_T = TypeVar("_T")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "resume",
        help="run a blocked delegation of a store again, once its changes are checked",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("store", metavar="STORE", type=Path, help="the store file")
    parser.add_argument("id", metavar="ID", help="the blocked delegation's id")
    parser.add_argument("--routing", metavar="F", type=Path,
                        help="the routing its host runs (default: ./routing.yml)")
    parser.add_argument("--note", metavar="N",
                        help="the answer to its blocker: told to its agent, and journalled")
    parser.set_defaults(run=run)


def store_routing(path: Path | None, store: Path, command: str) -> Routing:
    """The routing to open `store` with: `path`, else ./routing.yml, else an empty one
    when the store holds no open delegation (recovery would fail those of agents it
    does not know). `SupervisorError` saying what to give."""
    if path is None and Path("routing.yml").is_file():
        path = Path("routing.yml")
    if path is not None:
        return Routing.load(path)
    if open_count(store):
        raise RoutingError(f"{store} holds delegations its last Zeus left open, which "
                           f"opening it recovers: give --routing F, the routing its host "
                           f"runs (there is no routing.yml here)")
    return Routing.from_dict({"version": 1, "agents": {}})


def as_owner(args: argparse.Namespace, command: str,
             verb: Callable[[Zeus], _T]) -> tuple[_T | None, int]:
    """`verb(zeus)` on a Zeus that owns the store (StoreBusy while a live one does), or
    None and EXIT_BAD_INPUT after saying why not."""
    try:
        routing = store_routing(args.routing, args.store, command)
        with Zeus.start(routing, store=args.store) as zeus:
            return verb(zeus), EXIT_OK
    except (SupervisorError, ValueError) as exc:
        print(f"zeus {command}: {exc}", file=sys.stderr)
        return None, EXIT_BAD_INPUT


def run(args: argparse.Namespace) -> int:
    summary, code = as_owner(args, "resume",
                             lambda zeus: zeus.resume(args.id, note=args.note).result())
    if summary is None:
        return code
    out = console()
    out.print(f"{summary.id} resumed: {summary.status.value}", soft_wrap=True)
    out.print(summary.render(), soft_wrap=True, markup=False, highlight=False)
    return EXIT_OK if summary.ok else EXIT_INCOMPLETE
