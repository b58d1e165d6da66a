"""The live tree: what a running Zeus is doing, redrawn a few times a second.

`LiveTree` is a log target (`Zeus.start(log=live)`). Each event goes into a
tree rebuilt from the events (`supervisor.journal.Journal`), into the journal
file when it has one (one JSON line per event, flushed, the pinned fields kept,
so `zeus tree` and `zeus timeouts` read it), and, when the output is not a
terminal, out as one plain line. On a terminal, `with live.show(zeus):` redraws the
tree with rich from those events and `zeus.tree()` (the open delegations' elapsed
time against the deadline, progress, when it last moved, the tool in flight). Settled
ones keep their attempts, what followed each and their final status, in colour. The
event callback runs in whichever thread emits (mostly Zeus's actor thread), the redraw
in rich's refresh thread; both take the same lock.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.text import Text

from actors import Summary
from supervisor import journal as jr
from supervisor.cli.render import (
    attempt_head,
    delegation_status,
    first_line,
    legend,
    money,
    num,
    plain_event,
)
from supervisor.cli.rows import (
    Row,
    fit,
    plain_attempt,
    plain_lines,
    rows,
    settled_label,
    tree_of,
)
from supervisor.errors import SupervisorError
from supervisor.journal.events import JournalFile
from supervisor.journal.private_files import append_private

if TYPE_CHECKING:
    from supervisor.core.handle import Handle
    from supervisor.core.zeus import Zeus

__all__ = ["LiveTree", "bar", "open_journal"]

_BAR_WIDTH = 16


def open_journal(path: str | Path) -> IO[str]:
    """`path` opened for appending events; `SupervisorError` says why it cannot be."""
    try:
        return append_private(path)
    except OSError as exc:
        raise SupervisorError(
            f"cannot write the journal {str(path)!r}: {exc.strerror}; give a writable path"
        ) from None


def bar(elapsed: float, limit: float, *, width: int = _BAR_WIDTH, plain: bool = False) -> Text:
    """`elapsed` against `limit` as a bar: green, yellow past 60 %, red past 90 %."""
    ratio = 0.0 if limit <= 0 else max(0.0, min(1.0, elapsed / limit))
    filled = round(ratio * width)
    full, empty = ("#", "-") if plain else ("█", "░")
    style = "green" if ratio < 0.6 else "yellow" if ratio < 0.9 else "red"
    text = Text()
    text.append(full * filled, style=style)
    text.append(empty * (width - filled), style="dim")
    text.append(f" {elapsed:.1f}/{limit:g}s")
    return text


class LiveTree:
    """The view of one Zeus run: a log target, an optional journal file, a live or plain output.

    `console`: where to draw (None: nowhere, events are still recorded and
    journalled). On a terminal the tree is redrawn inside `show(zeus)`;
    elsewhere each event is printed as a line at once.
    """

    def __init__(
        self,
        console: Console | None,
        *,
        journal: IO[str] | None = None,
        refresh_per_second: float = 4.0,
        transient: bool = False,
    ) -> None:
        self._console = console
        self._file = None if journal is None else JournalFile(journal, owned=False)
        self._refresh = refresh_per_second
        self._transient = transient
        self._lock = threading.RLock()
        self._journal = jr.Journal()
        self._t0: float | None = None
        self._zeus: Zeus | None = None
        self._live_nodes: dict[str, dict[str, Any]] = {}  # the last snapshot, by delegation id
        self._seen: dict[str, dict[str, Any]] = {}  # the last snapshot of every delegation seen
        self._counts: dict[str, Any] = {}
        self._summaries: dict[str, Summary] = {}
        self.write_error: str | None = None
        self._wake = threading.Event()  # a delegation settled or the reader left: look again
        self._gone = False  # the output's reader left (a closed pipe): never cleared

    @property
    def live(self) -> bool:
        """True when the output is a terminal, redrawn in place."""
        return self._console is not None and self._console.is_terminal

    # -- input --------------------------------------------------------------------------

    def __call__(self, event: dict[str, Any]) -> None:
        """The log target: record the event, journal it, print it when the output is plain."""
        with self._lock:
            self._journal.apply(event)
            ts = num(event.get("ts"))
            if self._t0 is None and ts is not None:
                self._t0 = ts
            self._write(event)
            if self._console is not None and not self._console.is_terminal:
                self._print_line(event)

    def summaries(self) -> list[Summary]:
        """The summaries kept so far (`add_summary`), in the order they settled."""
        with self._lock:
            return list(self._summaries.values())

    def add_summary(self, summary: Summary) -> None:
        """Keep a settled delegation's summary (its partial results and usage show in the
        tree); one this run has no event of settled before it (a store's), and shows so."""
        with self._lock:
            self._summaries[summary.id] = summary
            self._journal.settled_before(summary)
        self._wake.set()

    def output_gone(self) -> None:
        """The output's reader left (any thread): `results` raises `BrokenPipeError` at once."""
        self._gone = True
        self._wake.set()

    def results(self, handles: Sequence[Handle]) -> list[Summary]:
        """Each handle's summary once all settled (each `add_summary`d); `BrokenPipeError` as
        soon as the reader leaves, so the caller's `with Zeus.start()` cancels what is open."""
        while not self._gone and not all(handle.done() for handle in handles):
            self._wake.wait()
            self._wake.clear()  # looked at again before the next wait
        if self._gone:
            raise BrokenPipeError("the output's reader left")
        return [handle.result() for handle in handles]

    def _write(self, event: dict[str, Any]) -> None:
        if self._file is None or self.write_error is not None:
            return
        try:
            self._file.write_event(event)
        except (OSError, ValueError) as exc:  # a full disk, a closed file: stop journalling
            self.write_error = f"the journal stopped being written: {exc}"

    def _print_line(self, event: dict[str, Any]) -> None:
        assert self._console is not None
        line = plain_event(event, self._t0)
        if line is None:
            return
        try:  # a closed output ends the command; a full disk stops the view, not the run
            self._console.print(Text(line), soft_wrap=True)
        except (BrokenPipeError, ValueError):
            self.output_gone()
        except OSError:
            pass

    # -- live display -------------------------------------------------------------------

    @contextlib.contextmanager
    def show(self, zeus: Zeus) -> Iterator[None]:
        """Redraw the tree from `zeus` a few times a second while the block runs (terminal only)."""
        self._zeus = zeus
        if not self.live:
            yield
            return
        assert self._console is not None
        with Live(
            console=self._console,
            get_renderable=self._frame,
            refresh_per_second=self._refresh,
            transient=self._transient,
            redirect_stdout=False,
            redirect_stderr=False,
        ):
            yield
        self._poll()

    def _frame(self) -> RenderableType:
        """Runs in rich's refresh thread: a fresh snapshot, then the tree. Never raises."""
        try:
            self._poll()
            height = None if self._console is None else self._console.size.height - 1
            return self.render(height)
        except Exception as exc:  # noqa: BLE001 - a failed frame must not end the display
            return Text(f"(the live view could not draw: {exc})", style="red")

    def _poll(self) -> None:
        zeus = self._zeus
        if zeus is None:
            return
        try:
            snapshot = zeus.tree()
        except Exception:  # noqa: BLE001 - Zeus stopping under us: keep the last snapshot
            return
        if snapshot.get("stopped"):
            return  # nothing is open any more; keep the last numbers
        nodes: dict[str, dict[str, Any]] = {}

        def index(items: list[dict[str, Any]]) -> None:
            for node in items:
                nodes[str(node.get("id"))] = node
                index(node.get("children") or [])

        index(snapshot.get("delegations") or [])
        with self._lock:
            self._live_nodes = nodes
            self._seen.update(nodes)
            self._counts = snapshot

    # -- rendering ----------------------------------------------------------------------

    def _extras(self, d: jr.ReplayedDelegation) -> list[str]:
        """Partial results and usage: from the summary once settled, else the last snapshot."""
        summary = self._summaries.get(d.id)
        if summary is not None:
            partials, calls = len(summary.partial_results), summary.usage.calls
            cost = summary.usage.cost
        else:
            node = self._seen.get(d.id)
            if node is None:
                return []
            usage = node.get("usage") or {}
            partials, calls = node.get("partials", 0), usage.get("calls", 0)
            cost = usage.get("cost", 0.0)
        extras = []
        if partials:
            extras.append(f"{partials} partial result(s)")
        if calls:
            extras.append(f"{calls} call(s), {money(cost)}")
        return extras

    def _open_label(self, d: jr.ReplayedDelegation, plain: bool) -> Text:
        node = self._live_nodes.get(d.id)
        state = str(node.get("state")) if node else "running"
        if node and node.get("cancel_requested"):
            state += ", cancel requested"
        agents = " -> ".join(d.agents) or "?"
        label = Text(f"… {d.id} {agents}: {state}", style="cyan bold")
        live = _live_attempt(node)
        if live is not None:
            elapsed, limit = num(live.get("elapsed_s")) or 0.0, num(live.get("timeout_s"))
            if limit:
                label.append("  ")
                label.append_text(bar(elapsed, limit, plain=plain))
        extras = self._extras(d)
        if extras:
            label.append("  " + ", ".join(extras), style="cyan")
        if d.scope:
            label.append(f'  "{first_line(d.scope, 60)}"', style="dim")
        return label

    def _attempt_label(self, a: jr.ReplayedAttempt, d: jr.ReplayedDelegation) -> Text:
        live = None if a.ended else _live_attempt(self._live_nodes.get(d.id))
        if live is None or live.get("id") != a.id:
            return plain_attempt(a, d)
        head = attempt_head(a)
        text = Text(f"{head}: {live.get('state', 'running')}", style="cyan")
        progress = live.get("progress")
        ago = num(live.get("last_progress_s_ago"))
        if isinstance(progress, int) and progress < 0:
            text.append(", starting")
        else:
            moved = "" if ago is None else f", last moved {ago:.1f}s ago"
            text.append(f", progress {progress}{moved}")
        calls = live.get("tool_calls")
        if isinstance(calls, int) and calls:
            last = live.get("in_tool") or live.get("last_tool")
            where = "in" if live.get("in_tool") else "last:"
            since = num(live.get("in_tool_s")) if live.get("in_tool") else None
            text.append(f", {calls} tool call{'' if calls == 1 else 's'}"
                        + (f", {where} {first_line(last, 40)}" if last else "")
                        + (f" {since:.1f}s" if since is not None else ""))
        if a.note:
            text.append(f"  {first_line(a.note, 50)}", style="dim")
        return text

    def _head(self, run: jr.Run) -> Text:
        counts = self._counts
        settled = sum(1 for d in run.delegations.values() if d.settled)
        open_ = len(run.delegations) - settled
        text = f"zeus: {open_} open, {settled} settled"
        usage: dict[str, Any] = counts["usage"] if isinstance(counts.get("usage"), dict) else {}
        roots = [self._summaries.get(d.id) for d in run.roots]
        if all(roots) and roots:  # every root settled: their usage rolls up the whole tree
            usage = {
                "calls": sum(s.usage.calls for s in roots if s),
                "cost": sum(s.usage.cost for s in roots if s),
            }
        if usage.get("calls"):
            text += f", {usage['calls']} call(s), {money(usage.get('cost'))}"
        if counts.get("abandoned_threads"):
            text += f", {counts['abandoned_threads']} abandoned thread(s)"
        if run.stopped:
            text += ", stopped"
        return Text(text, style="bold")

    def _label(self, d: jr.ReplayedDelegation, run: jr.Run, plain: bool) -> Text:
        if not d.settled:
            return self._open_label(d, plain)
        return settled_label(d, run, self._extras(d))

    def _rows(self, run: jr.Run, height: int | None, plain: bool) -> list[Row]:
        """The rows of `run` at the richest detail that fits `height` rows (None: all)."""

        def count(detail: int) -> int:
            return len(rows(run, detail, label=lambda d: Text(), attempt=lambda a, d: Text()))

        detail = fit(count, height)
        return rows(
            run,
            detail,
            label=lambda d: self._label(d, run, plain),
            attempt=self._attempt_label,
        )

    def render(self, height: int | None = None) -> RenderableType:
        """The whole tree as rich renderables, in at most `height` lines when it is given.

        Rows never wrap (what does not fit the width ends in an ellipsis); when the
        tree is taller than `height`, settled delegations drop their attempts, then
        settled subtrees fold into one row each, so that what is open stays in view.
        """
        with self._lock:
            run = self._journal.run
            budget = None if height is None else max(1, height - 2)  # the head and the legend
            root = tree_of(self._head(run), self._rows(run, budget, plain=False))
            if not run.delegations:
                root.add(Text("(no delegations yet)", style="dim"))
                return Group(root)
            statuses = {delegation_status(d, run) for d in run.delegations.values()}
            return Group(root, legend(statuses))

    def render_plain(self) -> str:
        """The whole tree as indented plain text: no colours, no box drawing."""
        with self._lock:
            run = self._journal.run
            lines = plain_lines(self._head(run), self._rows(run, None, plain=True))
            statuses = {delegation_status(d, run) for d in run.delegations.values()}
            return "\n".join([*lines, legend(statuses).plain] if statuses else lines)

    def print_tree(self, height: int | None = None) -> None:
        """Print the tree once, as it stands (rich on a terminal, plain elsewhere).

        `height`: at most this many lines on a terminal (None: every row).
        """
        if self._console is None:
            return
        self._poll()
        if self._console.is_terminal:
            self._console.print(self.render(height))
        else:
            self._console.print(Text(self.render_plain()), soft_wrap=True)

    def delegations(self) -> dict[str, jr.ReplayedDelegation]:
        """Every delegation seen so far (nested ones included), by id."""
        with self._lock:
            return dict(self._journal.run.delegations)

    def elapsed(self) -> float:
        """Seconds since the first event (wall clock)."""
        return 0.0 if self._t0 is None else max(0.0, time.time() - self._t0)


def _live_attempt(node: dict[str, Any] | None) -> dict[str, Any] | None:
    """The running attempt of a snapshot node (the one with a deadline), if any."""
    if not node:
        return None
    for attempt in reversed(node.get("attempts") or []):
        if isinstance(attempt, dict) and "deadline_in_s" in attempt:
            return attempt
    return None
