"""Events and delegations in words: the one place that turns Zeus's records into text.

Used by the live view (`supervisor.cli.live`) and by the journal commands (`zeus
tree`, `zeus timeouts`), so that a status, a mark or an event reads the same
everywhere. Pure functions of their arguments; nothing here prints. A whole
run laid out as rows is `supervisor.cli.rows`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import Any

from rich.text import Text

from actors.textblocks.attempts import stop_words
from supervisor.journal.runs import Event, ReplayedAttempt, ReplayedDelegation, Run, num
from supervisor.store import resolved_by_hand

__all__ = [
    "attempt_label",
    "delegation_label",
    "delegation_status",
    "describe",
    "first_line",
    "intensity_text",
    "legend",
    "money",
    "num",
    "plain_event",
    "run_label",
    "seconds",
    "status_mark",
]

# status -> (mark, rich style, the word the legend uses)
_STATUS = {
    "completed": ("✔", "green", "completed"),
    "partial": ("◐", "yellow", "partial"),
    "timed_out": ("⏱", "red", "timed out"),
    "failed": ("✘", "red", "failed"),
    "cancelled": ("⊘", "magenta", "cancelled"),
    "budget_exceeded": ("¤", "red", "over budget"),
    "blocked": ("■", "red", "blocked"),
    "in progress": ("…", "cyan", "running"),
    "unsettled": ("?", "yellow", "never settled"),
}
_QUIET = {"message.dropped"}  # bookkeeping, not news: kept in the journal, not printed
_COMMON = {"ts", "event", "delegation_id", "attempt_id", "parent_id", "agent", "policy"}


# -- small words --------------------------------------------------------------------------
def seconds(value: Any) -> str:
    """`1.23s` (`<0.01s` for less that is not nothing), or `-` when there is no number."""
    number = num(value)
    if number is None:
        return "-"
    return "<0.01s" if 0 < number < 0.005 else f"{number:.2f}s"


def money(value: Any) -> str:
    """`$0.0304`: a cost to a hundredth of a cent (`<$0.0001` for less that is not nothing)."""
    number = num(value) or 0.0
    return "<$0.0001" if 0 < number < 0.00005 else f"${number:.4f}"


def first_line(text: Any, limit: int = 80) -> str:
    """The first line of `text`, cut to `limit` characters with an ellipsis."""
    line = str(text).strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def status_mark(status: str) -> tuple[str, str]:
    """The mark and rich style of a delegation status."""
    mark, style, _ = _STATUS.get(status, ("•", "white", status))
    return mark, style


def legend(statuses: Iterable[str]) -> Text:
    """One line naming the marks of `statuses`, in the order of the status table."""
    present = set(statuses)
    text = Text(style="dim")
    for status, (mark, style, word) in _STATUS.items():
        if status in present:
            if text:
                text.append("  ")
            text.append(mark, style=style)
            text.append(f" {word}")
    return text


# -- causes, each said once ---------------------------------------------------------------
def _cause_key(part: str) -> str:
    """What a cause is about, so that two wordings of one cause count once."""
    low = part.lower()
    for key, starts in (
        ("deadline", ("deadline of", "deadline hit", "deadline passed")),
        ("stale", ("stale", "no progress")),
        ("budget", ("over budget",)),
        ("cancel", ("cancelled", "cancel requested")),
    ):
        if low.startswith(starts):
            return key
    return low


def _parts(text: str) -> list[str]:
    """`text` split at each `; ` outside brackets: "no progress for 10 s (stale;
    heartbeat.stale_after_s)" is one cause, not two halves of a sentence."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(char, 0)
        if depth <= 0 and text.startswith("; ", i):
            parts.append(text[start:i])
            start, depth = i + 2, 0
    return [*parts, text[start:]]


def causes(known: Iterable[str], said: str | None, *, own_id: str | None = None) -> list[str]:
    """The `; `-separated parts of `said` that `known` does not already say.

    A child's own acknowledgement of the stop (`the child then reported
    Cancelled: <its id>`) says nothing new and is dropped too.
    """
    seen = {_cause_key(k) for k in known}
    kept: list[str] = []
    for part in (p.strip() for p in _parts(first_line(said or "", 10_000))):
        if not part or (own_id and part == f"the child then reported Cancelled: {own_id}"):
            continue
        key = _cause_key(part)
        if key not in seen:
            seen.add(key)
            kept.append(part)
    return kept


# -- labels of the rebuilt tree ------------------------------------------------------------
def run_label(run: Run, total: int) -> str:
    who = f"zeus pid {run.zeus_pid}" if run.zeus_pid is not None else "zeus"
    parts = [who]
    if run.routing:
        parts.append(run.routing)
    parts.append(f"{len(run.delegations)} delegation(s)")
    parts.append("stopped" if run.stopped else "no zeus.stopped yet (running, or it crashed)")
    if total > 1:
        parts.append(f"run {run.index} of {total}")
    return ", ".join(parts)


def delegation_status(d: ReplayedDelegation, run: Run) -> str:
    return d.status or ("unsettled" if run.stopped else "in progress")


def delegation_label(
    d: ReplayedDelegation, run: Run, extras: Sequence[str] = ()
) -> tuple[str, str]:
    """The plain label of a delegation and the status it shows; each cause said once.

    `extras` (partial results, usage) go before the scope, which comes last
    because it is the first thing a narrow screen can do without.
    """
    status = delegation_status(d, run)
    agents = " -> ".join(d.agents) or "?"
    elapsed = d.elapsed(run.open_until(time.time()))
    when = "" if elapsed is None else f" {elapsed:.2f}s" + ("" if d.settled else " so far")
    text = f"{d.id} {agents}: {status}{when}, {len(d.attempts)} attempt(s)"
    if d.earlier:
        text += ", settled before this run (from the store)"
    said = [status]
    if d.resolved_by is not None:
        note = d.resolved_note or ""
        text += f", settled by hand by {d.resolved_by}" + (
            f": {first_line(note, 60)}" if note else "")
        said.append(resolved_by_hand(status, d.resolved_by, note))  # its error says so too
    if d.timeout_kind:
        text += f", timeout: {d.timeout_kind}"
        said.append(f"{d.timeout_kind} passed")
    if d.cancel_requested:
        reason = d.cancel_reason or "no reason given"
        text += f", cancel requested ({reason})"
        said += ["cancel requested", reason]
    if d.error and status != "completed":
        last = d.attempts[-1] if d.attempts else None
        own = None if last is None else last.id
        if last is not None:  # the last attempt's row says its own causes
            said += causes([], last.error, own_id=own)
        rest = causes(said, d.error, own_id=own)
        if rest:
            text += " - " + "; ".join(rest)
    if extras:
        text += "  " + ", ".join(extras)
    if d.scope:
        text += f'  "{first_line(d.scope, 60)}"'
    return text, status


def attempt_head(a: ReplayedAttempt) -> str:
    """An attempt's id, agent, and where it runs: its pid, and its node on a cluster."""
    return " ".join(x for x in (a.id, a.agent, f"pid {a.pid}" if a.pid else None,
                                f"on {a.node}" if a.node else None) if x)


def attempt_label(a: ReplayedAttempt, now: float | None = None) -> str:
    """The plain label of an attempt: how it ended, what stopped it, what followed; while
    it runs, the tool it is in and for how long as of `now` (the run's time)."""
    head = attempt_head(a)
    if a.outcome is not None:
        state = a.outcome + ("" if a.duration_s is None else f" after {a.duration_s:.2f}s")
    elif a.fenced is not None:
        state = "fenced"
    else:
        state = "running" + (f", progress {a.progress}" if a.progress is not None else "")
        state += f", {in_tool}" if (in_tool := tool_in_flight(a, now)) else ""
        state += f" ({first_line(a.note, 40)})" if a.note else ""
    extras = []
    if a.timed_out_after_s is not None:
        extras.append(f"deadline hit at {a.timed_out_after_s:.2f}s")
    if a.stale_after_s is not None:
        extras.append(f"stale at {a.stale_after_s:.2f}s")
    if a.budget_exceeded:
        extras.append("over budget")
    if a.killed:
        extras.append(_how_stopped(a))
    if a.fenced:
        extras.append(f"fenced: {a.fenced}")
    story = evidence(a.outcome, a.tool_calls, a.last_tool)
    if story:
        extras.append(story)
    if a.error and a.outcome != "completed":
        extras += [first_line(c) for c in causes([*extras, a.outcome or ""], a.error, own_id=a.id)]
    if a.then:
        extras.append(f"then {a.then}")
    return f"{head}: {state}" + "".join(f"; {x}" for x in extras)


def tool_in_flight(a: ReplayedAttempt, now: float | None) -> str | None:
    """"in Bash 12.0s": the tool call a running attempt is in, and for how long as of `now`
    (None: it is in none)."""
    tool = a.in_tool
    if tool is None:
        return None
    since = "" if now is None or tool.started_ts is None else (
        f" {max(0.0, now - tool.started_ts):.1f}s")
    return f"in {first_line(tool.tool, 40)}{since}"


def _how_stopped(a: ReplayedAttempt) -> str:
    """"ignored the cancel; stopped by SIGTERM after 0.51s": the time since Zeus asked it to
    stop when the journal says when that was, else how long the signal took."""
    words = stop_words(a.killed) or f"stopped ({a.killed})"
    asked = a.timed_out_after_s if a.timed_out_after_s is not None else a.stale_after_s
    if asked is not None and a.duration_s is not None and a.killed != "cooperative":
        return f"{words} after {seconds(max(0.0, a.duration_s - asked))}"
    if a.kill_latency_s is not None:
        return f"{words}, in {a.kill_latency_s:.3f}s"
    return words


_ENDED_AS = {"timeout": "timed out", "stale": "timed out", "budget_exceeded": "over budget",
             "crash": "crashed", "error": "failed", "transient": "failed",
             "unavailable": "could not serve"}


def evidence(outcome: str | None, tool_calls: int | None, last_tool: str | None) -> str | None:
    """What a stopped attempt left behind, in words: "timed out after 14 tool calls, last:
    pytest" (None for a completed one, or one that made no tool call)."""
    if not tool_calls or outcome in (None, "completed"):
        return None
    ended = _ENDED_AS.get(outcome, outcome)
    calls = f"{tool_calls} tool call" + ("" if tool_calls == 1 else "s")
    return f"{ended} after {calls}" + (f", last: {last_tool}" if last_tool else "")


def intensity_text(event: Event) -> str:
    return (
        f"{event.get('restarts')} restarts within {event.get('within_s')}s "
        f"under {event.get('delegation_id') or 'the root'}"
    )


# -- events in words ---------------------------------------------------------------------------
# What each event says; `{x_s}` fields read as seconds, a missing one as "?". The events a
# store adds (zeus.recovered, attempt.lost, attempt.reattached, delegation.replayed) too.
_SAYS = {
    "zeus.stopped": "zeus stopped",
    "attempt.spawned": "its process started (pid {pid})",
    "attempt.session": "its agent's session is {session_id}",
    "attempt.stale": "no progress: stale after {elapsed_s}",
    "attempt.timed_out": "deadline passed after {elapsed_s}; stopping it",
    "attempt.budget_exceeded": "over budget ({limit}); stopping it",
    "attempt.fenced": "fenced: {reason}",
    "attempt.completed": "completed after {duration_s}",
    "attempt.progress": "progress {progress}",
    "attempt.lost": "lost: {reason}",
    "attempt.reattached": "picked up again after the supervisor's restart (pid {pid})",
    "delegation.resumed": "resumed by {who}: {why}",
    "delegation.resolved": "resolved by hand as {status} by {who}: {why}",
    "retry.scheduled": "retry in {backoff_s} as {next_attempt_id}",
    "fallback.dispatched": "fallback {from} -> {to}",
    "group.restarted": "restarted with its group: {reason}",
    "delegation.cancel_requested": "cancel requested: {reason}",
    "supervisor.intensity_exceeded": (
        "restart intensity exceeded: {restarts} restarts within {within_s}; no more restarts"
    ),
    "supervisor.mailbox_lag": (
        "Zeus's mailbox runs {lag_s} late (warns past {threshold_s}); {queued} message(s) wait"
    ),
    "zeus.internal_error": "internal error ({message}): {error}",
    "zeus.unknown_message": "a message Zeus does not know reached it: {type}",
}


class _Fields(dict[str, Any]):
    """An event's fields for `str.format_map`: seconds as `1.23s`, anything missing as `?`."""

    def __getitem__(self, key: str) -> Any:
        value = self.get(key)
        if key.endswith("_s"):
            return "?" if num(value) is None else seconds(value)
        return "?" if value is None else value


def describe(event: dict[str, Any]) -> str | None:
    """What an event says, in words, for one line of plain output (None: not worth a line).

    An event this version has no words for says its name and its own fields (not the
    time, the ids and the agent, which the line already shows).
    """
    name = str(event.get("event"))
    e = _Fields(event)
    if name in _QUIET:
        return None
    if name in _SAYS:
        return _SAYS[name].format_map(e)
    if name == "attempt.killed":
        latency = f" (in {e['latency_s']})" if num(event.get("latency_s")) is not None else ""
        how = stop_words(str(event.get("how"))) or f"stopped ({e['how']})"
        return how + latency
    if name == "attempt.partial":
        return f"partial result: {first_line(e['item'], 70)}"
    if name == "delegation.replayed":
        return ("replayed: the stored delegation, still open, is awaited" if event.get("open")
                else f"replayed: its stored summary ({e['status']}), not run again")
    if name == "zeus.recovered":
        counts = [f"{len(v)} {k}" if isinstance(v, list) else f"{v} {k}"
                  for k in ("settled", "rerun", "blocked", "ended", "reattached", "adopted")
                  if (v := event.get(k))]
        return "recovered the store" + (f": {', '.join(counts)}" if counts else ": nothing open")
    if name == "zeus.started":
        return f"zeus started (pid {e['pid']}, routing {event.get('routing') or 'none'})"
    if name == "delegation.dispatched":
        policy: dict[str, Any] = e["policy"] if isinstance(e.get("policy"), dict) else {}
        extras = [f"timeout {num(e.get('timeout_s')) or 0:g}s"]
        if policy.get("isolation") == "process" or policy.get("command"):
            extras.append("process")
        if e.get("parent_id"):
            extras.append(f"delegated by {e['parent_id']}")
        return f'to {e["agent"]}: "{first_line(e.get("scope"), 70)}" ({", ".join(extras)})'
    if name == "attempt.started":
        pid = f", pid {e['pid']}" if e.get("pid") else ""
        pid += f", on {e['node']}" if e.get("node") else ""
        return f"attempt {e['attempt']} on {e['agent']} started{pid}, deadline in {e['deadline_s']}"
    if name == "attempt.heartbeat":
        note = f": {first_line(e['note'], 70)}" if e.get("note") else ""
        return f"alive, progress {e['progress']}{note}"
    if name == "attempt.tool":
        tool = first_line(e["tool"], 40)
        writes = ", with side effects" if event.get("side_effects") else ""
        if event.get("phase") == "start":
            return f"tool {tool} started{writes}"
        took = f" after {e['duration_s']}" if num(event.get("duration_s")) is not None else ""
        return f"tool {tool} ended{took}{writes}"
    if name == "attempt.failed":
        error = f": {first_line(e['error'], 100)}" if e.get("error") else ""
        return f"ended {e['outcome']} after {e['duration_s']}{error}"
    if name == "delegation.settled":
        kind = f" ({e['timeout_kind']})" if e.get("timeout_kind") else ""
        return (
            f"settled {str(e['status']).upper()}{kind} after {e['duration_s']}, "
            f"{e['attempts']} attempt(s)"
        )
    rest = " ".join(
        f"{k}={json.dumps(v, default=str)}" for k, v in event.items() if k not in _COMMON
    )
    return f"{name}: {rest}" if rest else name


def plain_event(event: Event, t0: float | None) -> str | None:
    """One event as the one line plain output prints for it (None: not worth a line):
    seconds since `t0`, the attempt or delegation it is about, what it says in words."""
    text = describe(event)
    if text is None:
        return None
    ts = num(event.get("ts"))
    when = 0.0 if ts is None or t0 is None else ts - t0
    who = event.get("attempt_id") or event.get("delegation_id") or "zeus"
    return f"{when:7.2f}s  {who:<18} {text}"

