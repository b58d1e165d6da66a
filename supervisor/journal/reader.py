"""Reading Zeus's journal, after the fact: the append-only JSONL event log
(docs/design.md, "Events").

- `read_events` / `load`: read a journal tolerantly. Blank lines are skipped; a
  torn or garbled line (a crash mid-write) is skipped with a note, never fatal.
- `Journal`: the supervision tree rebuilt from the events, one `Run` per
  `zeus.started` (a journal file may hold several runs): delegations nested by
  `parent_id`, each with its attempts, pids, outcomes, timings and final status.
  `Journal.apply(event)` takes one event at a time, so a live view can follow
  (in `replay`).
- `follow`: tail a growing journal, event by event, until `zeus.stopped` or Ctrl-C.
- `tracking_rows` / `Run.timeouts`: the timeout tracking table of the reference
  (agent, timeout, status, partial OK, elapsed) and the timeout log (every
  `attempt.timed_out` and `attempt.stale`, when, and what followed).
- `sweep`: after a supervisor crash, stop the child processes the journal says
  may still run, and only those: a pid is signalled only while it is alive and
  its start time is the one the journal recorded, so a reused pid is never hit
  (in `sweep`).

Nothing here runs inside Zeus; the CLI (`zeus tree`, `zeus timeouts`, `zeus
sweep`) and tests call it from the main thread.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from supervisor.journal.replay import Journal
from supervisor.journal.runs import Event, Run

__all__ = [
    "TrackingRow",
    "follow",
    "load",
    "no_events",
    "parse_line",
    "read_events",
    "tracking_rows",
]


# -- reading -----------------------------------------------------------------------------
def parse_line(line: str) -> Event:
    """One journal line as an event; `ValueError` says why it is not one."""
    try:
        event = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply to be an event") from None
    if not isinstance(event, dict):
        raise ValueError(f"a JSON {type(event).__name__}, not an event object")
    if not isinstance(event.get("event"), str):
        raise ValueError("an object without an `event` name")
    return event


def _read_numbered(path: str | Path) -> tuple[list[tuple[int, Event]], list[str]]:
    """Each event of a journal file with its line number, and notes about the lines skipped."""
    text = Path(path).read_bytes().decode("utf-8", errors="replace")
    events: list[tuple[int, Event]] = []
    notes: list[str] = []
    lines = text.split("\n")
    torn = lines[-1] != ""  # the writer ends every event with a newline
    for number, line in enumerate(lines, 1):
        line = line.strip().lstrip("\ufeff")
        if not line:
            continue
        try:
            events.append((number, parse_line(line)))
        except ValueError as exc:
            last = " (the last line: a torn write?)" if torn and number == len(lines) else ""
            notes.append(f"line {number}: skipped: {exc}{last}")
    return events, notes


def read_events(path: str | Path) -> tuple[list[Event], list[str]]:
    """The events of a journal file and notes about the lines skipped.

    Raises `OSError` (e.g. `FileNotFoundError`) when the file cannot be read.
    """
    numbered, notes = _read_numbered(path)
    return [event for _, event in numbered], notes


def load(path: str | Path) -> Journal:
    """Read a journal file and rebuild its runs and trees."""
    numbered, notes = _read_numbered(path)
    journal = Journal(notes=notes)
    for number, event in numbered:
        journal.apply(event, line=number)
    return journal


def no_events(path: str | Path, journal: Journal) -> str | None:
    """Why `journal` (read from `path`, which is no SQLite file) is no journal: it holds
    no Zeus event; else None. The readers take a store too, so it says it is neither, as
    the store's own refusal words it (`zeus blocked` says "is not a Zeus store")."""
    if journal.events:
        return None
    what = f"{len(journal.notes)} line(s) skipped" if journal.notes else "it is empty"
    return (f"{path}: is not a Zeus store (not an SQLite file) nor a journal (no Zeus events: "
            f"{what}); give the file a Zeus wrote, its store= or its log=")


def follow(
    path: str | Path,
    *,
    poll_s: float = 0.2,
    sleep: Callable[[float], None] = time.sleep,
    until: Callable[[], bool] | None = None,
    on_note: Callable[[str], None] | None = None,
    on_idle: Callable[[], None] | None = None,
) -> Iterator[Event]:
    """Yield the events of a journal from its start, then as they are appended.

    It stops after `zeus.stopped`, when `until()` turns true while it waits, or on
    Ctrl-C while it waits. A line is read only once its newline is written (a
    torn line waits for the rest); a garbled line goes to `on_note`. `on_idle`
    runs each time it has caught up, before it sleeps `poll_s`.
    """
    number = 0
    buffer = b""
    with Path(path).open("rb") as stream:
        while True:
            chunk = stream.read()
            if chunk:
                buffer += chunk
                *complete, buffer = buffer.split(b"\n")
                for raw in complete:
                    number += 1
                    line = raw.decode("utf-8", errors="replace").strip()
                    if not line:
                        continue
                    try:
                        event = parse_line(line)
                    except ValueError as exc:
                        if on_note is not None:
                            on_note(f"line {number}: skipped: {exc}")
                        continue
                    yield event
                    if event["event"] == "zeus.stopped":
                        return
                continue
            if os.fstat(stream.fileno()).st_size < stream.tell():
                if on_note is not None:
                    on_note("the journal was truncated; reading it again from the start")
                stream.seek(0)
                number, buffer = 0, b""
                continue
            if on_idle is not None:
                on_idle()
            if until is not None and until():
                if buffer.strip() and on_note is not None:
                    on_note(f"line {number + 1}: skipped: the last line is torn (no newline)")
                return
            try:
                sleep(poll_s)
            except KeyboardInterrupt:
                return



# -- the timeout tracking table ----------------------------------------------------------
@dataclass(frozen=True)
class TrackingRow:
    """One row of the reference's timeout tracking table (plus elapsed and attempts)."""

    delegation_id: str
    agent: str  # "apollo", or "apollo -> athena" after a fallback
    timeout_s: float | None
    status: str  # a settled status, "in progress", or "unsettled" (the run stopped without it)
    partial_ok: bool | None
    elapsed_s: float | None
    attempts: int


def tracking_rows(run: Run, now: float | None = None) -> list[TrackingRow]:
    """A row per delegation, in dispatch order; `now` (default: where the run's time
    stands, `Run.open_until`) measures the ones still open."""
    now = now if now is not None else run.open_until(time.time())
    open_status = "unsettled" if run.stopped else "in progress"
    rows = []
    for d in run.delegations.values():
        status = d.status if d.status is not None else open_status
        rows.append(
            TrackingRow(
                delegation_id=d.id,
                agent=" -> ".join(d.agents) or "?",
                timeout_s=d.timeout_s,
                status=status,
                partial_ok=d.partial_ok,
                elapsed_s=d.elapsed(now),
                attempts=len(d.attempts),
            )
        )
    return rows

