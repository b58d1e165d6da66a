"""Reading Zeus's journal: the append-only JSONL event log (DESIGN §7), after the fact.

- `read_events` / `load`: read a journal tolerantly. Blank lines are skipped; a
  torn or garbled line (a crash mid-write) is skipped with a note, never fatal.
- `Journal`: the supervision tree rebuilt from the events, one `Run` per
  `zeus.started` (a journal file may hold several runs): delegations nested by
  `parent_id`, each with its attempts, pids, outcomes, timings and final status.
  `Journal.apply(event)` takes one event at a time, so a live view can follow.
- `follow`: tail a growing journal, event by event, until `zeus.stopped` or Ctrl-C.
- `tracking_rows` / `Run.timeouts`: the timeout tracking table of the reference
  (agent, timeout, status, partial OK, elapsed) and the timeout log (every
  `attempt.timed_out` and `attempt.stale`, when, and what followed).
- `sweep`: after a supervisor crash, stop the child processes the journal says
  may still run, and only those: a pid is signalled only while it is alive and
  its start time is the one the journal recorded, so a reused pid is never hit.

Nothing here runs inside Zeus; the CLI (`zeus tree`, `zeus timeouts`, `zeus
sweep`) and tests call it from the main thread.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

__all__ = [
    "Attempt",
    "Delegation",
    "Event",
    "Journal",
    "Run",
    "SweepAction",
    "SweepResult",
    "SweepTarget",
    "TimeoutEntry",
    "TrackingRow",
    "follow",
    "load",
    "parse_line",
    "process_start_time",
    "read_events",
    "sweep",
    "sweep_targets",
    "tracking_rows",
]

Event = dict[str, Any]


# -- reading -----------------------------------------------------------------------------
def parse_line(line: str) -> Event:
    """One journal line as an event; `ValueError` says why it is not one."""
    try:
        event = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(event, dict):
        raise ValueError(f"a JSON {type(event).__name__}, not an event object")
    if not isinstance(event.get("event"), str):
        raise ValueError("an object without an `event` name")
    return event


def _parse_all(text: str) -> tuple[list[tuple[int, Event]], list[str]]:
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
    text = Path(path).read_bytes().decode("utf-8", errors="replace")
    numbered, notes = _parse_all(text)
    return [event for _, event in numbered], notes


def load(path: str | Path) -> Journal:
    """Read a journal file and rebuild its runs and trees."""
    text = Path(path).read_bytes().decode("utf-8", errors="replace")
    numbered, notes = _parse_all(text)
    journal = Journal(notes=notes)
    for number, event in numbered:
        journal.apply(event, line=number)
    return journal


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


# -- the rebuilt tree --------------------------------------------------------------------
def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass
class Attempt:
    """One attempt as the journal tells it."""

    id: str
    delegation_id: str
    agent: str | None = None
    number: int | None = None
    pid: int | None = None
    pid_start_time: float | None = None
    started_ts: float | None = None
    deadline_s: float | None = None
    ended_ts: float | None = None
    # completed | error | transient | timeout | stale | crash | budget_exceeded | cancelled;
    # None while the journal has not seen it end.
    outcome: str | None = None
    error: str | None = None
    duration_s: float | None = None
    timed_out_after_s: float | None = None
    stale_after_s: float | None = None
    budget_exceeded: bool = False
    killed: str | None = None  # cooperative | terminate | kill
    kill_latency_s: float | None = None
    fenced: str | None = None  # the reason, for a thread that could not be stopped
    progress: Any = None
    note: str | None = None
    last_ts: float | None = None
    then: str | None = None  # what Zeus did next: "retry in 1.20s", "fallback apollo -> athena"

    @property
    def ended(self) -> bool:
        """The journal saw this attempt end (an outcome, or fenced)."""
        return self.outcome is not None or self.fenced is not None

    @property
    def death_confirmed(self) -> bool:
        """The journal says its process is gone: killed by signal, or it crashed.

        A completed or failed attempt's process may still live (a warm session
        child, or one that was exiting when the supervisor died).
        """
        return self.killed in ("terminate", "kill") or self.outcome == "crash"


@dataclass
class Delegation:
    """One delegation: its attempts, the delegations it made, and how it settled."""

    id: str
    agent: str | None = None  # the agent it was dispatched to
    parent_id: str | None = None
    scope: str | None = None
    depth: int | None = None
    policy: dict[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None
    dispatched_ts: float | None = None
    attempts: list[Attempt] = field(default_factory=list)
    children: list[Delegation] = field(default_factory=list)
    status: str | None = None  # None until `delegation.settled`
    settled_ts: float | None = None
    duration_s: float | None = None
    error: str | None = None
    timeout_kind: str | None = None
    cancel_reason: str | None = None
    cancel_requested: bool = False
    last_ts: float | None = None

    @property
    def settled(self) -> bool:
        return self.status is not None

    @property
    def partial_ok(self) -> bool | None:
        value = self.policy.get("partial_ok")
        return value if isinstance(value, bool) else None

    @property
    def agents(self) -> list[str]:
        """The agents that ran it, in order (more than one after a fallback)."""
        seen = [self.agent] if self.agent else []
        seen += [a.agent for a in self.attempts if a.agent]
        return list(dict.fromkeys(seen))

    def elapsed(self, now: float | None) -> float | None:
        """Seconds from dispatch to settlement, or to `now` while it is open."""
        if self.duration_s is not None:
            return self.duration_s
        if self.dispatched_ts is None or now is None:
            return None
        return max(0.0, now - self.dispatched_ts)


@dataclass(frozen=True)
class TimeoutEntry:
    """One line of the timeout log: an attempt that ran out of time or went stale."""

    ts: float | None
    delegation_id: str
    attempt_id: str
    agent: str | None
    kind: str  # deadline | stale
    elapsed_s: float | None
    deadline_s: float | None
    then: str | None = None  # what followed: a retry, a fallback, or the settlement


@dataclass
class Run:
    """Everything between one `zeus.started` and the next (or the end of the file)."""

    index: int
    first_line: int | None = None
    zeus_pid: int | None = None
    started_ts: float | None = None
    stopped_ts: float | None = None
    routing: str | None = None
    delegations: dict[str, Delegation] = field(default_factory=dict)
    attempts: dict[str, Attempt] = field(default_factory=dict)
    roots: list[Delegation] = field(default_factory=list)
    timeouts: list[TimeoutEntry] = field(default_factory=list)
    intensity: list[Event] = field(default_factory=list)
    events: int = 0
    last_ts: float | None = None

    @property
    def stopped(self) -> bool:
        return self.stopped_ts is not None

    def incomplete(self) -> list[Delegation]:
        """The delegations that did not settle `completed` (open ones included)."""
        return [d for d in self.delegations.values() if d.status != "completed"]


class Journal:
    """A journal's runs, rebuilt one event at a time. The last run is `journal.run`."""

    def __init__(self, notes: Iterable[str] = ()) -> None:
        self.notes: list[str] = list(notes)
        self.runs: list[Run] = [Run(index=1)]

    @property
    def run(self) -> Run:
        return self.runs[-1]

    @property
    def events(self) -> int:
        return sum(r.events for r in self.runs)

    def apply(self, event: Event, *, line: int | None = None) -> None:
        """Fold one event into the tree. Unknown events are counted and otherwise ignored."""
        name = event.get("event")
        run = self.run
        if name == "zeus.started" and run.events:
            run = Run(index=len(self.runs) + 1)
            self.runs.append(run)
        run.events += 1
        if run.first_line is None:
            run.first_line = line
        ts = _num(event.get("ts"))
        if ts is not None:
            run.last_ts = ts if run.last_ts is None else max(run.last_ts, ts)
        if name == "zeus.started":
            run.zeus_pid = _int(event.get("pid"))
            run.started_ts = ts
            run.routing = _str(event.get("routing"))
            return
        if name == "zeus.stopped":
            run.stopped_ts = ts
            return
        if name == "supervisor.intensity_exceeded":
            run.intensity.append(event)
            return
        delegation_id = _str(event.get("delegation_id"))
        if delegation_id is None:
            return
        d = self._delegation(run, delegation_id, event)
        d.last_ts = ts if ts is not None else d.last_ts
        attempt_id = _str(event.get("attempt_id"))
        a = self._attempt(run, d, attempt_id, event) if attempt_id else None
        if a is not None and ts is not None:
            a.last_ts = ts
        handler = _HANDLERS.get(str(name))
        if handler is not None:
            handler(run, d, a, event, ts)

    def _delegation(self, run: Run, delegation_id: str, event: Event) -> Delegation:
        d = run.delegations.get(delegation_id)
        if d is not None:
            return d
        d = Delegation(
            id=delegation_id, agent=_str(event.get("agent")), parent_id=_str(event.get("parent_id"))
        )
        run.delegations[delegation_id] = d
        parent_id = d.parent_id or ""
        parent = run.delegations.get(parent_id)
        if parent is None and parent_id in run.attempts:  # a parent named by its attempt
            parent = run.delegations.get(run.attempts[parent_id].delegation_id)
        if parent is not None and parent is not d:
            parent.children.append(d)
        else:
            run.roots.append(d)
        return d

    def _attempt(self, run: Run, d: Delegation, attempt_id: str, event: Event) -> Attempt:
        a = run.attempts.get(attempt_id)
        if a is None:
            a = Attempt(id=attempt_id, delegation_id=d.id, agent=_str(event.get("agent")))
            run.attempts[attempt_id] = a
            d.attempts.append(a)
        return a


_Handler = Callable[[Run, Delegation, Attempt | None, Event, float | None], None]


def _dispatched(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    d.agent = _str(e.get("agent")) or d.agent
    d.scope = _str(e.get("scope"))
    d.depth = _int(e.get("depth"))
    d.policy = e["policy"] if isinstance(e.get("policy"), dict) else {}
    d.timeout_s = _num(e.get("timeout_s")) or _num(d.policy.get("timeout_s"))
    d.dispatched_ts = ts


def _started(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    if a is None:
        return
    a.number = _int(e.get("attempt"))
    a.pid = _int(e.get("pid"))
    a.pid_start_time = _num(e.get("pid_start_time"))
    a.deadline_s = _num(e.get("deadline_s"))
    a.started_ts = ts


def _heartbeat(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    if a is not None:
        a.progress = e.get("progress")
        a.note = _str(e.get("note")) or a.note


def _timed_out(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    if a is None:
        return
    elapsed = _num(e.get("elapsed_s"))
    stale = e.get("event") == "attempt.stale"
    if stale:
        a.stale_after_s = elapsed
    else:
        a.timed_out_after_s = elapsed
    run.timeouts.append(
        TimeoutEntry(
            ts, d.id, a.id, a.agent, "stale" if stale else "deadline", elapsed, a.deadline_s
        )
    )


def _budget(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    if a is not None:
        a.budget_exceeded = True


def _killed(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    if a is not None:
        a.killed = _str(e.get("how"))
        a.kill_latency_s = _num(e.get("latency_s"))
        a.pid = a.pid if a.pid is not None else _int(e.get("pid"))


def _fenced(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    if a is not None:
        reason = _str(e.get("reason")) or "fenced"
        a.fenced = reason if a.fenced is None else f"{a.fenced}; {reason}"


def _ended(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    if a is None:
        return
    a.ended_ts = ts
    a.duration_s = _num(e.get("duration_s"))
    if e.get("event") == "attempt.completed":
        a.outcome = "completed"
    else:
        a.outcome = _str(e.get("outcome")) or "error"
        a.error = _str(e.get("error"))


def _then(run: Run, d: Delegation, what: str) -> None:
    """Say in the timeout log what followed the delegation's unresolved timeouts."""
    for i, entry in enumerate(run.timeouts):
        if entry.delegation_id == d.id and entry.then is None:
            run.timeouts[i] = dataclasses.replace(entry, then=what)


def _retry(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    backoff = _num(e.get("backoff_s"))
    step = f"retry in {backoff:.2f}s" if backoff is not None else "retry"
    nxt = _str(e.get("next_attempt_id"))
    if a is not None:
        a.then = f"{step} as {nxt}" if nxt else step
    _then(run, d, step)


def _fallback(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    step = f"fallback {e.get('from')} -> {e.get('to')}"
    if a is not None:
        a.then = step
    _then(run, d, step)


def _cancel(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    d.cancel_requested = True
    d.cancel_reason = _str(e.get("reason"))


def _settled(run: Run, d: Delegation, a: Attempt | None, e: Event, ts: float | None) -> None:
    d.status = _str(e.get("status")) or "unknown"
    d.settled_ts = ts
    d.duration_s = _num(e.get("duration_s"))
    d.error = _str(e.get("error"))
    d.timeout_kind = _str(e.get("timeout_kind"))
    _then(run, d, f"settled {d.status}")


_HANDLERS: dict[str, _Handler] = {
    "delegation.dispatched": _dispatched,
    "attempt.started": _started,
    "attempt.heartbeat": _heartbeat,
    "attempt.timed_out": _timed_out,
    "attempt.stale": _timed_out,
    "attempt.budget_exceeded": _budget,
    "attempt.killed": _killed,
    "attempt.fenced": _fenced,
    "attempt.completed": _ended,
    "attempt.failed": _ended,
    "retry.scheduled": _retry,
    "fallback.dispatched": _fallback,
    "delegation.cancel_requested": _cancel,
    "delegation.settled": _settled,
}


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
    """A row per delegation, in dispatch order; `now` (default: the run's last event)
    measures the ones still open."""
    now = now if now is not None else run.last_ts
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


# -- sweeping the children a crashed supervisor left ------------------------------------
_boot_time: float | None = None


def _linux_boot_time() -> float:
    global _boot_time
    if _boot_time is None:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                _boot_time = float(line.split()[1])
                break
        else:  # pragma: no cover - every Linux /proc/stat has btime
            raise NotImplementedError("/proc/stat has no btime")
    return _boot_time


def process_start_time(pid: int) -> float | None:
    """When process `pid` started (epoch seconds), or None if it is not running.

    A zombie (dead, not yet reaped) counts as not running. Linux reads
    `/proc/<pid>/stat` (field 22, the start in clock ticks after boot); elsewhere
    psutil, when installed. Raises `NotImplementedError` when neither is there.
    """
    stat_path = Path(f"/proc/{pid}/stat")
    if Path("/proc/self/stat").exists():
        try:
            stat = stat_path.read_bytes().decode("utf-8", errors="replace")
        except (FileNotFoundError, ProcessLookupError):
            return None
        # Field 2 (the command name) is in parentheses and may hold spaces or ")".
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] in ("Z", "X"):
            return None
        return _linux_boot_time() + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    try:
        import psutil
    except ImportError:
        raise NotImplementedError(
            "cannot read process start times here (no /proc); `pip install psutil`"
        ) from None
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return float(process.create_time())
    except psutil.NoSuchProcess:
        return None


class SweepAction(StrEnum):
    """What `sweep` did with (or found about) one recorded child process."""

    stopped = "stopped"  # it ended after SIGTERM
    killed = "killed"  # it needed SIGKILL
    would_stop = "would stop"  # a dry run: alive, and the journal's process
    not_running = "not running"
    reused = "pid reused"  # alive, but another process: left alone
    unverifiable = "unverifiable"  # no start time to check against: left alone
    dead = "dead"  # the journal records its death (killed, crashed)
    protected = "protected"  # the supervisor, this process or its parent: never signalled
    supervisor_running = "supervisor running"  # its supervisor still runs: left to it
    failed = "failed"  # alive after SIGKILL, or not ours to signal


@dataclass(frozen=True)
class SweepTarget:
    """A child process the journal recorded: (pid, start time) names it uniquely."""

    pid: int
    pid_start_time: float | None
    attempt_ids: tuple[str, ...]
    delegation_id: str
    agent: str | None
    run: int
    death_confirmed: bool


@dataclass(frozen=True)
class SweepResult:
    target: SweepTarget
    action: SweepAction
    detail: str


def sweep_targets(journal: Journal) -> list[SweepTarget]:
    """Every child process any run started, one per (pid, start time), in journal order."""
    found: dict[tuple[int, float | None, int], list[Attempt]] = {}
    for run in journal.runs:
        for a in run.attempts.values():
            if a.pid is not None:
                found.setdefault((a.pid, a.pid_start_time, run.index), []).append(a)
    return [
        SweepTarget(
            pid=pid,
            pid_start_time=start,
            attempt_ids=tuple(a.id for a in attempts),
            delegation_id=attempts[-1].delegation_id,
            agent=attempts[-1].agent,
            run=run_index,
            # The last attempt in that process decides: a warm session child lives on.
            death_confirmed=attempts[-1].death_confirmed,
        )
        for (pid, start, run_index), attempts in found.items()
    ]


def _same(actual: float | None, recorded: float, tolerance_s: float) -> bool:
    return actual is not None and abs(actual - recorded) <= tolerance_s


def _supervisor_alive(run: Run, probe: Callable[[int], float | None], tolerance_s: float) -> bool:
    """The run's supervisor still runs: its pid is alive and started before the run began."""
    if run.stopped or run.zeus_pid is None or run.started_ts is None:
        return False
    try:
        started = probe(run.zeus_pid)
    except NotImplementedError:
        return False
    return started is not None and started <= run.started_ts + tolerance_s


def sweep(
    journal: Journal,
    *,
    dry_run: bool = False,
    grace_s: float = 1.0,
    tolerance_s: float = 1.0,
    probe: Callable[[int], float | None] = process_start_time,
    sleep: Callable[[float], None] = time.sleep,
) -> list[SweepResult]:
    """Stop the recorded child processes that still run: SIGTERM to each one's process
    group, up to `grace_s` to end, then SIGKILL.

    A process is signalled only if it is alive and started within `tolerance_s`
    of the start time the journal recorded (so a reused pid is left alone), and
    never while the supervisor that wrote its run is still running. Every
    recorded process gets a result saying what was done and why.
    """
    own = {0, 1, os.getpid(), os.getppid()}
    results = []
    live_runs = {r.index for r in journal.runs if _supervisor_alive(r, probe, tolerance_s)}
    zeus_pids = {r.zeus_pid for r in journal.runs}
    for target in sweep_targets(journal):

        def result(action: SweepAction, detail: str, t: SweepTarget = target) -> None:
            results.append(SweepResult(t, action, detail))

        recorded = target.pid_start_time
        if target.death_confirmed:
            result(SweepAction.dead, "the journal records that it was killed or crashed")
        elif target.pid in own or target.pid in zeus_pids:
            result(SweepAction.protected, "a supervisor or this process; never signalled")
        elif target.run in live_runs:
            result(
                SweepAction.supervisor_running,
                "the supervisor of this run still runs; stop it instead (zeus.stop)",
            )
        elif recorded is None:
            result(
                SweepAction.unverifiable,
                "no start time recorded, so a reused pid cannot be ruled out; left alone",
            )
        else:
            try:
                actual = probe(target.pid)
            except NotImplementedError as exc:
                result(SweepAction.unverifiable, f"{exc}; left alone")
                continue
            if actual is None:
                result(SweepAction.not_running, "already gone")
            elif not _same(actual, recorded, tolerance_s):
                result(
                    SweepAction.reused,
                    f"pid {target.pid} now belongs to a process started at {actual:.2f}, "
                    f"not {recorded:.2f}; left alone",
                )
            elif dry_run:
                result(SweepAction.would_stop, "alive, and the journal's process")
            else:
                action, detail = _stop(target.pid, recorded, grace_s, tolerance_s, probe, sleep)
                result(action, detail)
    return results


def _signal(pid: int, sig: int, group: bool) -> None:
    if group:
        os.killpg(pid, sig)
    else:
        os.kill(pid, sig)


def _stop(
    pid: int,
    recorded: float,
    grace_s: float,
    tolerance_s: float,
    probe: Callable[[int], float | None],
    sleep: Callable[[float], None],
) -> tuple[SweepAction, str]:
    """SIGTERM, wait up to `grace_s`, SIGKILL; to the group when `pid` leads its own."""
    try:
        group = os.getpgid(pid) == pid and pid != os.getpgrp()
    except ProcessLookupError:
        return SweepAction.not_running, "gone before it was signalled"
    where = "process group" if group else "process"

    def gone(within: float) -> bool:
        deadline = time.monotonic() + within
        while True:
            if not _same(probe(pid), recorded, tolerance_s):
                return True
            if time.monotonic() >= deadline:
                return False
            sleep(0.02)

    try:
        _signal(pid, signal.SIGTERM, group)
        if gone(grace_s):
            action, detail = SweepAction.stopped, f"SIGTERM to its {where}"
        else:
            _signal(pid, signal.SIGKILL, group)
            if not gone(2.0):
                return SweepAction.failed, f"still alive 2s after SIGKILL to its {where}"
            action, detail = SweepAction.killed, f"SIGKILL to its {where} (SIGTERM ignored)"
    except ProcessLookupError:
        return SweepAction.not_running, "gone before it was signalled"
    except PermissionError:
        return SweepAction.failed, "not permitted to signal it (another user's process?)"
    if group:
        # Descendants the leader left behind still hold its group id: end them too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    return action, detail
