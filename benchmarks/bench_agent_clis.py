"""Agent CLIs' JSON event streams read through Zeus (`speaks: claude`), against a bare
reader of the same stream and `subprocess.run` of the same program, side by side.

Run: `python -m benchmarks agent_clis [--quick] [--events N] [--rounds R] [--noop N]
[--profile]` (or `python -m benchmarks.bench_agent_clis ...`; writes
benchmarks/results/agent_clis.json).

The program is the fake Claude Code (tests/fixtures/agent_clis/fake_cli.py, put on
PATH as `claude` by `tests._agent_clis.install_fakes`) replaying a transcript from
`$ZEUS_FAKE_CLI_TRANSCRIPT`, one line printed and flushed at a time, as fast as it can.

- **A stream of N events** (50,000; `--quick`: 5,000): `system/init`, then assistant
  messages with usage (text, then a `tool_use`), each followed by its `tool_result`,
  then a last reply and the `result`, both carrying a `<subtask_summary>` block. Zeus
  (a fresh `Zeus.start(..., log=<journal>)` per round, its fork server readied before
  the clock starts) from `dispatch()` to the summary in the host's hands, and to the
  `delegation.settled` event's `ts` in the journal; against a bare reader,
  `subprocess.Popen` of the same argv and `for line in proc.stdout: json.loads(line)`,
  then `wait()`. The two alternate, R rounds each (5; `--quick`: 3), the Zeus side first
  in even rounds, the bare one in odd. Rates are events per second; the medians and
  the ranges are kept.
- **CPU per event**, per thread, from each thread's own CPU clock
  (`time.pthread_getcpuclockid`, read from the host's thread; cross-checked against
  /proc/self/task/<tid>/stat): Zeus's actor thread (`ZeusActor-*`, "Zeus's thread"),
  the process backend's hub thread (`zeus-process-hub`, which reads the pipes and runs
  the `StreamReader`), the spawner (`zeus-spawner`, the fork and exec), and the whole
  process; against the bare reader's own thread.
- **A no-op attempt**: the same fake replaying `system/init` and a `result`, Zeus's
  `dispatch()` to settled against `subprocess.run(argv, capture_output=True)` of the
  argv Zeus runs, one Zeus kept for all the attempts, alternating (each side first in
  turn), 20 each (`--quick`: 10) after three warm-ups each; medians.

`--profile`: one more Zeus round under cProfile (the actor and hub threads only, each
profiled for its whole life: Zeus is stopped to collect), printed by own time.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors import Brief
from benchmarks._table import Row, report
from supervisor import Routing, Zeus

ROOT = Path(__file__).resolve().parent.parent
FAKE_CLI = ROOT / "tests" / "fixtures" / "agent_clis" / "fake_cli.py"
SESSION = "3f8a2c1e-7b4d-4e9a-9c2f-5d6e8a1b0c47"
MODEL = "claude-sonnet-4-5-20250929"
SUMMARY = ("<subtask_summary>\nStatus: completed\nAgent: hermes\nScope: read the stream\n\n"
           "Changes:\n- none\n\nFindings:\n- every event was read\n\nValidation:\n"
           "- the benchmark's own count\n\nRisks / Follow-up: none\n</subtask_summary>")
ROUTING = {"version": 1, "agents": {"hermes": {
    "speaks": "claude", "timeout_s": 600, "heartbeat": {"stale_after_s": 60}}}}
BRIEF = Brief(agent="hermes", scope="read the stream")
ACTOR, HUB, SPAWNER = "ZeusActor-", "zeus-process-hub", "zeus-spawner"


# -- the transcripts -------------------------------------------------------------------
def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":")) + "\n"


def _usage(i: int, output_tokens: int) -> dict[str, Any]:
    return {"input_tokens": 2, "cache_creation_input_tokens": 600 + i % 97,
            "cache_read_input_tokens": 12000 + i, "cache_creation": {
                "ephemeral_5m_input_tokens": 600 + i % 97, "ephemeral_1h_input_tokens": 0},
            "output_tokens": output_tokens, "service_tier": "standard"}


def _assistant(i: int, msg: str, block: dict[str, Any], stop: str | None) -> dict[str, Any]:
    return {"type": "assistant", "message": {
        "model": MODEL, "id": msg, "type": "message", "role": "assistant",
        "content": [block], "stop_reason": stop, "stop_sequence": None,
        "usage": _usage(i, 9 if stop is None else 150), "context_management": None},
        "parent_tool_use_id": None, "session_id": SESSION, "uuid": f"u-{i:08d}"}


def _init() -> dict[str, Any]:
    return {"type": "system", "subtype": "init", "cwd": "/home/dev/app", "session_id": SESSION,
            "tools": ["Task", "Bash", "Glob", "Grep", "Read", "Edit", "Write"],
            "mcp_servers": [], "model": MODEL, "permissionMode": "acceptEdits",
            "apiKeySource": "none", "claude_code_version": "2.1.240",
            "output_style": "default", "uuid": "u-init"}


def _result(turns: int) -> dict[str, Any]:
    return {"type": "result", "subtype": "success", "is_error": False, "duration_ms": 48213,
            "duration_api_ms": 51877, "num_turns": turns, "result": "Done.\n\n" + SUMMARY,
            "stop_reason": "end_turn", "session_id": SESSION, "total_cost_usd": 0.1287415,
            "usage": {"input_tokens": 7, "cache_creation_input_tokens": 6464,
                      "cache_read_input_tokens": 80235, "output_tokens": 1097},
            "permission_denials": [], "terminal_reason": "completed", "uuid": "u-result"}


def stream_transcript(path: Path, events: int) -> int:
    """Write a Claude transcript of exactly `events` events: init, then turns of an
    assistant text, an assistant tool_use and the user's tool_result, then the last
    reply and the result (both with the summary block). Returns its size in bytes."""
    assert events >= 4
    lines = [_line(_init())]
    i = 0
    while len(lines) < events - 2:
        # A turn's text and tool_use share their message id (one content block a line, as
        # the CLI prints them), its output tokens growing: two charges, one call.
        msg, tool = f"msg_{i // 3:08d}", f"toolu_{i:08d}"
        kind = i % 3
        if kind == 0:
            lines.append(_line(_assistant(i, msg, {"type": "text",
                                                   "text": f"Checking module {i}."}, None)))
        elif kind == 1:
            lines.append(_line(_assistant(i, msg, {
                "type": "tool_use", "id": tool, "name": "Grep",
                "input": {"pattern": "parse\\(", "path": f"src/mod{i}"}}, "tool_use")))
        else:
            prev = f"toolu_{i - 1:08d}"
            lines.append(_line({"type": "user", "message": {"role": "user", "content": [{
                "tool_use_id": prev, "type": "tool_result",
                "content": f"src/mod{i}/core.py:12:    return parse(value)", "is_error": False}]},
                "parent_tool_use_id": None, "session_id": SESSION, "uuid": f"u-{i:08d}",
                "tool_use_result": {"stdout": f"src/mod{i}/core.py:12:    return parse(value)",
                                    "stderr": "", "interrupted": False, "isImage": False}}))
        i += 1
    lines.append(_line(_assistant(i, f"msg_{i:08d}", {"type": "text",
                                                      "text": "Done.\n\n" + SUMMARY},
                                  "end_turn")))
    lines.append(_line(_result(i // 3)))
    assert len(lines) == events
    text = "".join(lines)
    path.write_text(text, encoding="utf-8")
    return len(text.encode("utf-8"))


def noop_transcript(path: Path) -> None:
    path.write_text(_line(_init()) + _line(_result(1)), encoding="utf-8")


# -- the fakes on PATH -----------------------------------------------------------------
@contextlib.contextmanager
def fakes_on_path(transcript: Path) -> Iterator[Path]:
    """The fake CLIs first on PATH (as `tests._agent_clis.install_fakes` writes them) and
    `$ZEUS_FAKE_CLI_TRANSCRIPT` set, for the benchmark's process and its children."""
    sys.path.insert(0, str(ROOT))
    from tests._agent_clis import install_fakes

    saved = {k: os.environ.get(k) for k in ("PATH", "ZEUS_FAKE_CLI_TRANSCRIPT",
                                            "ZEUS_FAKE_CLI_LOG", "ZEUS_FAKE_CLI_SCENARIO")}
    with tempfile.TemporaryDirectory(prefix="zeus-bench-clis-") as tmp:
        directory = install_fakes(Path(tmp) / "bin")
        os.environ["PATH"] = f"{directory}{os.pathsep}{saved['PATH'] or ''}"
        os.environ["ZEUS_FAKE_CLI_TRANSCRIPT"] = str(transcript)
        os.environ.pop("ZEUS_FAKE_CLI_LOG", None)
        os.environ.pop("ZEUS_FAKE_CLI_SCENARIO", None)
        try:
            yield directory
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


# -- the argv Zeus runs -----------------------------------------------------------------
def zeus_argv(zeus_factory: Callable[[], Zeus], work: Path) -> list[str]:
    """The argv Zeus runs for `BRIEF`, as the fake logged it, from one no-op attempt (the
    bare sides run the same program with the same flags and prompt)."""
    log = work / "fake-cli-calls.jsonl"
    os.environ["ZEUS_FAKE_CLI_LOG"] = str(log)
    try:
        summary = _one(zeus_factory)
    finally:
        os.environ.pop("ZEUS_FAKE_CLI_LOG", None)
    if summary.status.value != "completed":
        raise SystemExit(f"a no-op agent CLI attempt did not complete: {summary.error}")
    return _logged_argv(log)


def _one(zeus_factory: Callable[[], Zeus]) -> Any:
    zeus = zeus_factory()
    try:
        return zeus.dispatch(BRIEF).result(timeout=60)
    finally:
        zeus.stop()


def _logged_argv(log: Path) -> list[str]:
    calls = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert calls and calls[-1]["cli"] == "claude", calls
    return ["claude", *calls[-1]["argv"]]


# -- thread CPU ------------------------------------------------------------------------
_TICK = os.sysconf("SC_CLK_TCK")


def threads(prefixes: tuple[str, ...]) -> dict[str, threading.Thread]:
    found: dict[str, threading.Thread] = {}
    for thread in threading.enumerate():
        for prefix in prefixes:
            if thread.name.startswith(prefix) and prefix not in found:
                found[prefix] = thread
    return found


def thread_cpu(thread: threading.Thread) -> float:
    """Seconds of CPU `thread` has used (its own clock; 0.0 once it has ended)."""
    try:
        assert thread.ident is not None
        return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    except (OSError, AssertionError):
        return 0.0


def proc_cpu(thread: threading.Thread) -> float:
    """The same from /proc/self/task/<tid>/stat (utime + stime, in clock ticks)."""
    try:
        text = Path(f"/proc/self/task/{thread.native_id}/stat").read_text()
    except OSError:
        return 0.0
    fields = text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def wait_forkserver() -> None:
    """Let the fork server Zeus readies at start finish first (a new interpreter
    importing `actors`: it would share the two cores with the measurement)."""
    for thread in threading.enumerate():
        if thread.name.startswith("zeus-ready-"):
            thread.join(60)


# -- the stream ------------------------------------------------------------------------
@dataclasses.dataclass
class ZeusRound:
    wall_s: float  # dispatch -> summary in the host's hands
    journal_s: float  # dispatch -> delegation.settled's ts in the journal
    cpu: dict[str, float]  # thread -> seconds
    cpu_proc: dict[str, float]
    process_cpu_s: float
    journal_events: int
    status: str


def zeus_round(events: int, journal: Path) -> ZeusRound:
    zeus = Zeus.start(Routing.from_dict(ROUTING), log=str(journal))
    try:
        wait_forkserver()
        time.sleep(0.05)
        early = threads((ACTOR, HUB, SPAWNER))  # the hub may run already (the fork server)
        actor = early[ACTOR]
        before = {t.name: (thread_cpu(t), proc_cpu(t)) for t in early.values()}
        process0 = time.process_time()
        wall0 = time.time()
        t0 = time.perf_counter()
        summary = zeus.dispatch(BRIEF).result(timeout=600)
        wall = time.perf_counter() - t0
        process = time.process_time() - process0
        found = threads((HUB, SPAWNER))  # they live until `stop()`
        cpu, cpu_proc = {}, {}
        for key, prefix in (("actor", ACTOR), ("hub", HUB), ("spawner", SPAWNER)):
            thread = found.get(prefix) or early.get(prefix)
            if prefix == ACTOR:
                thread = actor
            if thread is None:
                cpu[key] = cpu_proc[key] = float("nan")
                continue
            # A thread started by this dispatch: all its CPU is this attempt's.
            cpu0, proc0 = before.get(thread.name, (0.0, 0.0))
            cpu[key] = thread_cpu(thread) - cpu0
            cpu_proc[key] = proc_cpu(thread) - proc0
    finally:
        zeus.stop()
    settled_ts = None
    count = 0
    with open(journal, encoding="utf-8") as handle_:
        for raw in handle_:
            event = json.loads(raw)
            if event.get("delegation_id") == summary.id:
                count += 1
                if event.get("event") == "delegation.settled":
                    settled_ts = event["ts"]
    assert settled_ts is not None, "no delegation.settled in the journal"
    return ZeusRound(wall, settled_ts - wall0, cpu, cpu_proc, process, count,
                     summary.status.value)


@dataclasses.dataclass
class BareRound:
    wall_s: float
    cpu_s: float  # the reading thread's
    events: int


def bare_round(argv: list[str]) -> BareRound:
    """`for line in proc.stdout: json.loads(line)`, from Popen to the program reaped."""
    t0 = time.perf_counter()
    cpu0 = time.thread_time()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    count = 0
    for line in proc.stdout:
        json.loads(line)
        count += 1
    proc.wait()
    cpu = time.thread_time() - cpu0
    return BareRound(time.perf_counter() - t0, cpu, count)


def spread(xs: list[float], scale: float = 1.0, fmt: str = "{:.4g}") -> str:
    return f"{fmt.format(min(xs) * scale)}-{fmt.format(max(xs) * scale)}"


def measure_stream(events: int, rounds: int, work: Path, argv: list[str]) -> list[Row]:
    transcript = work / f"stream-{events}.jsonl"
    size = stream_transcript(transcript, events)
    rows: list[Row] = []
    zr: list[ZeusRound] = []
    br: list[BareRound] = []
    with fakes_on_path(transcript):
        bare_round(argv)  # warm the page cache and the fake's imports
        for r in range(rounds):
            order = ("zeus", "bare") if r % 2 == 0 else ("bare", "zeus")
            for side in order:
                if side == "zeus":
                    got = zeus_round(events, work / f"journal-{events}-{r}.jsonl")
                    assert got.status == "completed", got
                    zr.append(got)
                    print(f"  round {r}: zeus {got.wall_s:.3f} s (journal {got.journal_s:.3f} s)"
                          f", actor {got.cpu['actor']:.3f} s, hub {got.cpu['hub']:.3f} s",
                          flush=True)
                else:
                    got_b = bare_round(argv)
                    assert got_b.events == events, got_b
                    br.append(got_b)
                    print(f"  round {r}: bare {got_b.wall_s:.3f} s, cpu {got_b.cpu_s:.3f} s",
                          flush=True)
    med = statistics.median
    zeus_rate = [events / z.journal_s for z in zr]
    host_rate = [events / z.wall_s for z in zr]
    bare_rate = [events / b.wall_s for b in br]
    pairs = [zj / bb for zj, bb in zip(zeus_rate, bare_rate, strict=True)]
    bare_cpu = [b.cpu_s / events * 1e6 for b in br]
    base = f"bare `for line in proc.stdout: json.loads(line)` ({spread(bare_rate, fmt='{:.0f}')}/s)"
    rows.append(Row(f"{events:,} events: to delegation.settled in the journal", med(zeus_rate),
                    med(bare_rate), "/s", base, "ratio>=0.8",
                    f"zeus {spread(zeus_rate, fmt='{:.0f}')}/s; per-round ratios "
                    f"{spread(pairs, fmt='{:.2f}')}; {size / 1e6:.1f} MB stream",
                    {"zeus_rates": zeus_rate, "bare_rates": bare_rate, "round_ratios": pairs,
                     "journal_events": [z.journal_events for z in zr]}))
    rows.append(Row(f"{events:,} events: to the summary in the host's hands", med(host_rate),
                    med(bare_rate), "/s", "the same bare reader",
                    note=f"zeus {spread(host_rate, fmt='{:.0f}')}/s"))
    for key, label, target in (("actor", "Zeus's thread (ZeusActor) CPU per event", "value<=20"),
                               ("hub", "the hub thread (the pipes' reader) CPU per event", ""),
                               ("spawner", "the spawner thread CPU per event", "")):
        per = [z.cpu[key] / events * 1e6 for z in zr]
        per_proc = [z.cpu_proc[key] / events * 1e6 for z in zr]
        rows.append(Row(label, med(per), med(bare_cpu) if key == "hub" else None, "us",
                        "the bare reader's thread CPU per event" if key == "hub" else "",
                        target, f"{spread(per, fmt='{:.2f}')} us; /proc: "
                        f"{spread(per_proc, fmt='{:.1f}')} us",
                        {"per_round_us": per, "proc_per_round_us": per_proc}))
    per_process = [z.process_cpu_s / events * 1e6 for z in zr]
    rows.append(Row("Zeus's whole process CPU per event", med(per_process), med(bare_cpu),
                    "us", "the bare reader's thread CPU per event",
                    note=f"{spread(per_process, fmt='{:.2f}')} us (the fake CLI's own CPU "
                    "is in neither)", extra={"per_round_us": per_process}))
    rows.append(Row("journal events per delegation (this stream)",
                    med([z.journal_events for z in zr]), None, "ev"))
    return rows


# -- the reader alone, in one thread (where the hub's time goes) ---------------------------
class _CountingSink:
    """A `StreamSink` that only counts what the hub would send Zeus's thread."""

    def __init__(self) -> None:
        self.messages = 0

    def progress(self, lines: int) -> None:
        pass

    def _one(self, *args: Any, **kwargs: Any) -> None:
        self.messages += 1

    partial = charge = tool = session = note = _one

    def ended(self) -> None:
        pass


def measure_reader(events: int, rounds: int, work: Path) -> list[Row]:
    """`StreamReader("claude")` fed the stream in 64 KiB chunks with a sink that sends
    nothing, against `json.loads` of each line of the same chunks, alternating, in this
    thread: the decoder's own cost per event, without pipes, hub or mailbox."""
    from actors.speaks import StreamReader

    data = (work / f"stream-{events}.jsonl").read_bytes()
    chunks = [data[i:i + 65536] for i in range(0, len(data), 65536)]
    reader_t: list[float] = []
    loads_t: list[float] = []
    messages = 0
    for _ in range(rounds):
        sink = _CountingSink()
        t0 = time.thread_time()
        reader = StreamReader("claude", sink)
        for chunk in chunks:
            reader.stdout(chunk)
        reader.stdout(b"")
        reader_t.append(time.thread_time() - t0)
        assert reader.ended and reader.bad_lines == 0, reader.bad_lines
        messages = sink.messages
        t0 = time.thread_time()
        rest = b""
        for chunk in chunks:
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                json.loads(line)
        loads_t.append(time.thread_time() - t0)
    med = statistics.median
    per_r = [t / events * 1e6 for t in reader_t]
    per_l = [t / events * 1e6 for t in loads_t]
    return [
        Row("StreamReader alone (a sink that sends nothing), CPU per event", med(per_r),
            med(per_l), "us", "json.loads of the same lines, split alike",
            note=f"{spread(per_r, fmt='{:.2f}')} us against {spread(per_l, fmt='{:.2f}')} us",
            extra={"reader_us": per_r, "loads_us": per_l}),
        Row("messages the reader sends Zeus's thread per event", messages / events, None, "",
            note=f"{messages:,} for {events:,} events (charges, tool calls, the session)"),
    ]


# -- the no-op attempt -----------------------------------------------------------------
def measure_noop(n: int, work: Path, argv: list[str]) -> list[Row]:
    transcript = work / "noop.jsonl"
    noop_transcript(transcript)
    zeus_t: list[float] = []
    run_t: list[float] = []
    with fakes_on_path(transcript):
        zeus = Zeus.start(Routing.from_dict(ROUTING))
        try:
            wait_forkserver()

            def one_zeus() -> float:
                t0 = time.perf_counter()
                summary = zeus.dispatch(BRIEF).result(timeout=60)
                took = time.perf_counter() - t0
                assert summary.status.value == "completed", summary.error
                return took

            def one_run() -> float:
                t0 = time.perf_counter()
                done = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL,
                                      check=True)
                took = time.perf_counter() - t0
                assert done.stdout.count(b"\n") == 2
                return took

            for _ in range(3):
                one_zeus()
                one_run()
            for i in range(n):
                pair = (one_zeus, one_run) if i % 2 == 0 else (one_run, one_zeus)
                for fn in pair:
                    (zeus_t if fn is one_zeus else run_t).append(fn())
        finally:
            zeus.stop()
    med = statistics.median
    pairs = [z / r for z, r in zip(zeus_t, run_t, strict=True)]
    return [Row("no-op CLI attempt: dispatch to settled (p50)", med(zeus_t) * 1e3,
                med(run_t) * 1e3, "ms",
                f"subprocess.run of the same argv, capture_output ({spread(run_t, 1e3)} ms)",
                "ratio<=1.2",
                f"zeus {spread(zeus_t, 1e3)} ms; {n} each, alternating; pair ratios p50 "
                f"{med(pairs):.2f}", {"zeus_ms": [t * 1e3 for t in zeus_t],
                                       "run_ms": [t * 1e3 for t in run_t]})]


# -- the profile -----------------------------------------------------------------------
def profile_round(events: int, work: Path, top: int = 25) -> str:
    """One Zeus round with the actor and hub threads under cProfile for their whole life."""
    transcript = work / f"stream-{events}.jsonl"
    if not transcript.exists():
        stream_transcript(transcript, events)
    profiles: dict[str, cProfile.Profile] = {}
    original = threading.Thread.run

    def run(self: threading.Thread) -> None:
        name = next((k for k in (ACTOR, HUB) if self.name.startswith(k)), None)
        if name is None:
            return original(self)
        profile = profiles[name] = cProfile.Profile()
        profile.enable()
        try:
            return original(self)
        finally:
            profile.disable()

    threading.Thread.run = run  # type: ignore[method-assign]
    try:
        with fakes_on_path(transcript):
            got = zeus_round(events, work / "journal-profile.jsonl")
    finally:
        threading.Thread.run = original  # type: ignore[method-assign]
    out = io.StringIO()
    out.write(f"profiled round: {got.wall_s:.3f} s, actor {got.cpu['actor']:.3f} s CPU, "
              f"hub {got.cpu['hub']:.3f} s CPU (profiling inflates both)\n")
    for name, profile in profiles.items():
        out.write(f"\n== {name} by own time ==\n")
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(top)
        out.write(f"\n== {name} by cumulative time ==\n")
        pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="5,000 events, 3 rounds, 10 no-op attempts a side")
    parser.add_argument("--events", type=int, default=None, help="events in the stream")
    parser.add_argument("--rounds", type=int, default=None, help="stream rounds a side")
    parser.add_argument("--noop", type=int, default=None, help="no-op attempts a side")
    parser.add_argument("--profile", action="store_true",
                        help="also one profiled Zeus round (printed, not in the table)")
    args = parser.parse_args(argv)
    events = args.events or (5_000 if args.quick else 50_000)
    rounds = args.rounds or (3 if args.quick else 5)
    noops = args.noop or (10 if args.quick else 20)
    with tempfile.TemporaryDirectory(prefix="zeus-bench-clis-") as tmp:
        work = Path(tmp)
        noop_path = work / "noop.jsonl"
        noop_transcript(noop_path)
        with fakes_on_path(noop_path):
            argv = zeus_argv(lambda: Zeus.start(Routing.from_dict(ROUTING)), work)
        rows = measure_stream(events, rounds, work, argv)
        rows += measure_reader(events, rounds, work)
        rows += measure_noop(noops, work, argv)
        report("agent_clis", rows)
        if args.profile:
            print(profile_round(events, work))


if __name__ == "__main__":
    main()
