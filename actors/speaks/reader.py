"""`StreamReader`: a command's standard output read as what it speaks, and its end judged.

One reader per attempt, fed by the thread that reads the program's pipes (the
backend's hub, or a worker's main thread: `actors.backends.command.child` and
`actors.backends.command.work`). It cuts the output into lines, reads each as
its `speaks:` says, and tells its `StreamSink` what the lines mean: progress,
tool calls, spend, the session, partial results. When the program has ended,
`verdict` says how, from the stream and the exit code together (docs/agent-clis.md,
"How a run ends").

- `lines`: each line is progress; the whole output is the result. Lines become
  partial results only of an attempt stopped before it ended, the last 50.
- `jsonl`: Zeus's own protocol (`actors.speaks.jsonl`); other lines are progress.
- an agent CLI: each line one JSON event for its decoder. A line that is not
  JSON, an event of a type the decoder does not know, and a line over
  `MAX_LINE` bytes are counted (`bad_lines`) and are progress all the same.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from actors.models import AttemptOutcome, Report, Usage
from actors.speaks.causes import Verdict, vendor_verdict
from actors.speaks.decoding import Decoder, EndKind
from actors.speaks.jsonl import JsonlDecoder
from actors.speaks.stderr import what_failed
from actors.speaks.totals import SessionTotals

__all__ = ["MAX_LINE", "STDERR_TAIL", "STOPPED_LINES", "Pricing", "StreamReader", "StreamSink",
           "Verdict"]

# orjson parses a stream's lines about four times as fast as the standard library (the
# profile of a 50,000-event stream: `json.loads` was a quarter of the reading thread's
# time); a line it refuses goes to `json.loads`, so both read the same JSON.
_fast_loads = orjson.loads

MAX_LINE = 1 << 20  # bytes: a longer line of an event stream is a bad line, dropped
STOPPED_LINES = 50  # the last lines a stopped `lines` attempt keeps as partial results
STDERR_TAIL = 1000  # the most characters of standard error an error message quotes
_STDERR_KEPT = 16 * 1024  # bytes: the end of standard error searched for what failed


class StreamSink(Protocol):
    """Where a reader's findings go: the command path that runs the program, which sends
    them to Zeus (the reader's thread calls these)."""

    def progress(self, lines: int) -> None:
        """`lines` more lines were read: progress."""

    def partial(self, item: Any) -> None:
        """A partial result."""

    def charge(self, usage: Usage, *, cached_input_tokens: int = 0) -> None:
        """Spend, priced where it could be (`cached_input_tokens` of its input cached)."""

    def tool(self, name: str, *, read_only: bool, running: bool | None,
             call_id: str | None = None, detail: str | None = None) -> None:
        """A tool call: `running` True as it starts, False as it ends, None for one seen
        only once it was over; `call_id` the CLI's own id of it, where it has one;
        `detail` what it was called with, in brief."""

    def session(self, session_id: str) -> None:
        """The program's own session id."""

    def note(self, text: str | None) -> None:
        """A heartbeat with a note (progress already counted)."""

    def ended(self) -> None:
        """The stream's terminal event came: the program should exit now."""


@dataclass(frozen=True, slots=True)
class Pricing:
    """What a token costs, per million (the agent's `pricing:`); cached input at its own
    price where one is given."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0
    cached_input_per_mtok: float | None = None

    def cost(self, input_tokens: int, output_tokens: int, cached_input_tokens: int) -> float:
        cached = min(cached_input_tokens, input_tokens)
        cached_rate = (self.cached_input_per_mtok if self.cached_input_per_mtok is not None
                       else self.input_per_mtok)
        return ((input_tokens - cached) * self.input_per_mtok + cached * cached_rate
                + output_tokens * self.output_per_mtok) / 1_000_000


@dataclass(frozen=True, slots=True)
class _End:
    ok: bool
    text: str | None
    error: str | None
    kind: EndKind
    blocker: str | None = None  # ok, but the CLI was kept from going on (`Stream.end`)


class StreamReader:
    """One attempt's standard output read as `speaks` says (the pipes' reading thread)."""

    def __init__(self, speaks: str, sink: StreamSink, *, pricing: Pricing | None = None,
                 prior: SessionTotals | None = None) -> None:
        self.speaks = speaks
        self.bad_lines = 0
        self._sink = sink
        self._pricing = pricing
        self._decoder = _decoder(speaks, self, prior)
        self._json = speaks != "lines"
        self._out: list[bytes] = []  # `lines`: the whole output, the result
        self._tail: deque[bytes] = deque(maxlen=STOPPED_LINES)  # `lines`: the last lines
        self._line = b""  # the line not ended yet
        self._skipping = False  # inside a line over MAX_LINE: dropped up to its end
        self._err = bytearray()
        self._end: _End | None = None
        self._result: Any = None  # a script's `result` value
        self._text: str | None = None  # the latest reply text
        self._failure: str | None = None
        self._sessions: set[str] = set()
        self._tools: dict[str, tuple[str, bool]] = {}  # in flight: id -> (name, side effects)
        # started in this chunk, not yet said: id -> (name, side effects, detail)
        self._fresh: dict[str, tuple[str, bool, str | None]] = {}
        self._run_cost = 0.0  # spend charged in this run, for a CLI's own total
        self._pending: list[float] = [0, 0, 0, 0.0, 0]  # calls, tokens in, out, cost, cached

    # -- the pipes ---------------------------------------------------------------------
    def stdout(self, chunk: bytes) -> None:
        """Take a chunk of standard output (b"" at its end)."""
        if not self._json:
            self._out.append(chunk)
        lines = (self._line + chunk).split(b"\n")
        self._line = lines.pop()
        if not chunk and self._line:  # the last line had no newline
            lines.append(self._line)
            self._line = b""
        if self._skipping and lines:  # the end of the line too long to keep
            self._skipping = False
            lines.pop(0)
        if self._json and len(self._line) > MAX_LINE:
            self._line, self._skipping = b"", True
            self.bad_lines += 1
            self._sink.progress(1)
        if not lines:
            return
        self._sink.progress(len(lines))
        if self._json:
            for line in lines:
                self._event(line)
            if self._fresh:
                self._flush_tools()
            self._flush_charge()  # one charge a chunk: the first over a cap still stops it
        else:
            self._tail.extend(lines[-STOPPED_LINES:])  # bytes until they are needed

    def stderr(self, chunk: bytes) -> int:
        """Take a chunk of standard error: how many lines it ends (each counts as progress)."""
        self._err += chunk
        del self._err[: max(0, len(self._err) - _STDERR_KEPT)]
        return chunk.count(b"\n")

    def _event(self, line: bytes) -> None:
        if not line or line.isspace():
            return  # a blank line says nothing (and is no bad line)
        if len(line) > MAX_LINE:
            self.bad_lines += 1
            return
        try:
            event = _fast_loads(line)
        except ValueError:  # not JSON to the fast parser: the standard one has the last word
            try:
                event = json.loads(line)
            except ValueError:  # not JSON (a CLI's warning, a torn line)
                if line.strip() and self.speaks != "jsonl":
                    self.bad_lines += 1
                return
            except RecursionError:
                self.bad_lines += 1
                return
        if not isinstance(event, dict):
            if self.speaks != "jsonl":
                self.bad_lines += 1
            return
        try:
            known = self._decoder.event(event, self)
        except Exception:  # noqa: BLE001 - a decoder's slip on odd input is a bad line
            known = False
        if not known:
            self.bad_lines += 1

    # -- what the decoders say (`actors.speaks.decoding.Stream`) -------------------------
    def session(self, session_id: str) -> None:
        if session_id and session_id not in self._sessions:
            self._sessions.add(session_id)
            self._sink.session(session_id)

    def tool_started(self, call_id: str, name: str, *, side_effects: bool,
                     detail: str | None = None) -> None:
        # Said at the chunk's end (`_flush_tools`): one that ends within the chunk it
        # started in is one instantaneous call, not a start and an end.
        self._fresh[call_id] = (name, side_effects, detail)

    def tool_ended(self, call_id: str) -> None:
        fresh = self._fresh.pop(call_id, None)
        if fresh is not None:
            self._sink.tool(fresh[0], read_only=not fresh[1], running=None, call_id=call_id,
                            detail=fresh[2])
            return
        found = self._tools.pop(call_id, None)
        if found is not None:
            self._sink.tool(found[0], read_only=not found[1], running=False, call_id=call_id)

    def _flush_tools(self) -> None:
        """The calls still in flight at the chunk's end: each one started."""
        for call_id, (name, side_effects, detail) in self._fresh.items():
            self._tools[call_id] = (name, side_effects)
            self._sink.tool(name, read_only=not side_effects, running=True, call_id=call_id,
                            detail=detail)
        self._fresh.clear()

    def tool_used(self, name: str, *, side_effects: bool, detail: str | None = None) -> None:
        self._sink.tool(name, read_only=not side_effects, running=None, detail=detail)

    def tokens(self, input_tokens: int = 0, output_tokens: int = 0, *,
               cached_input_tokens: int = 0, calls: int = 0) -> None:
        if not (input_tokens or output_tokens or calls):
            return
        cost = (self._pricing.cost(input_tokens, output_tokens, cached_input_tokens)
                if self._pricing is not None else 0.0)
        self._charge(calls, input_tokens, output_tokens, cost, cached_input_tokens)

    def cost(self, usd: float, *, input_tokens: int = 0, output_tokens: int = 0,
             cached_input_tokens: int = 0, calls: int = 0) -> None:
        if not (usd > 0 or input_tokens or output_tokens or calls):
            return
        if usd <= 0 and self._pricing is not None:  # tokens the CLI did not price (OpenCode
            # on a model it knows no price of says 0): `pricing:` prices them
            usd = self._pricing.cost(input_tokens, output_tokens, cached_input_tokens)
        self._charge(calls, input_tokens, output_tokens, max(0.0, usd), cached_input_tokens)

    def total_cost(self, usd: float) -> None:
        more = usd - self._run_cost
        if more > 1e-12:
            self._charge(0, 0, 0, more)

    def _charge(self, calls: int, input_tokens: int, output_tokens: int, cost: float,
                cached_input_tokens: int = 0) -> None:
        """Spend, summed over the chunk being read (`_flush_charge` sends it)."""
        self._run_cost += cost
        pending = self._pending
        pending[0] += calls
        pending[1] += input_tokens
        pending[2] += output_tokens
        pending[3] += cost
        pending[4] += min(cached_input_tokens, input_tokens)

    def _flush_charge(self) -> None:
        pending = self._pending
        if any(pending):
            calls, input_tokens, output_tokens, cost, cached = pending
            self._pending = [0, 0, 0, 0.0, 0]
            self._sink.charge(Usage(calls=int(calls), input_tokens=int(input_tokens),
                                    output_tokens=int(output_tokens), cost=cost),
                              cached_input_tokens=int(cached))

    def text(self, text: str) -> None:
        self._text = text

    @property
    def usage_unknown(self) -> str | None:
        """Why this run's spend is not all known: its CLI reports usage at a turn's end only."""
        if self._end is not None or not self._decoder.usage_at_end:
            return None
        return (f"{self.speaks} reports a turn's tokens only at its end, and this run ended "
                "before it: what the turn spent is not counted here"
                + ("; the session's next report charges it" if self.speaks == "codex" else ""))

    def failure(self, message: str) -> None:
        self._failure = message

    def end(self, *, ok: bool, text: str | None = None, error: str | None = None,
            kind: EndKind = None, blocker: str | None = None) -> None:
        first = self._end is None
        self._end = _End(ok, text, error, kind, blocker)
        if first:
            self._sink.ended()

    # -- a script's own words (`actors.speaks.jsonl.ScriptSink`) --------------------------
    def partial(self, item: Any) -> None:
        self._sink.partial(item)

    def note(self, text: str | None) -> None:
        self._sink.note(text)

    def result(self, value: Any) -> None:
        self._result = value
        self.end(ok=True, text=value if isinstance(value, str) else None)

    # -- the end -------------------------------------------------------------------------
    @property
    def ended(self) -> bool:
        """Whether the stream's terminal event came."""
        return self._end is not None

    @property
    def stderr_tail(self) -> str:
        """What its standard error says of what failed (`actors.speaks.stderr.what_failed`):
        the lines that name an error, else its last lines, its banners left out."""
        return what_failed(self._err.decode("utf-8", errors="replace"), STDERR_TAIL)

    def stopped_partials(self) -> list[Any]:
        """What an attempt stopped before it ended keeps as partial results: the last lines
        of `lines`, or an agent's latest reply text."""
        if not self._json:
            return [line.rstrip(b"\r").decode("utf-8", errors="replace") for line in self._tail]
        if self.speaks != "jsonl" and self._end is None and self._text:
            return [self._text]
        return []

    def final_value(self) -> Any:
        """The run's result as far as the stream gave one (None before its end)."""
        if not self._json:
            return b"".join(self._out).decode("utf-8", errors="replace")
        end = self._end
        if end is None or not end.ok:
            return None
        if self.speaks == "jsonl":
            return self._result
        text = end.text if end.text is not None else self._text
        return text if end.blocker is None else Report(output=text, blocked=end.blocker)

    def verdict(self, returncode: int | None, program: str, *, describe: str) -> Verdict | None:
        """How a program that exited with `returncode` by itself (or was stopped by its exit
        grace after its terminal event) ended, or None to judge it by its exit alone (a
        `lines` program, or a script with no terminal event that exited non-zero).
        `program` names it in messages ("claude (run by bash)"); `describe` is the exit in
        words ("claude exited 1").

        An agent CLI that exited non-zero with no terminal event crashed (retried as a crash
        is), unless the code is one its decoder documents as its own fatal error (Gemini's
        55, an untrusted folder): then it is an `error` that says what the code means."""
        if not self._json:
            return None
        end = self._end
        meaning = (self._decoder.exit_meaning(returncode)
                   if returncode is not None and returncode > 0 else None)
        what = f"{describe} ({meaning})" if meaning else describe
        if end is None:
            if returncode != 0 and self.speaks == "jsonl":
                return None
            if returncode != 0:
                tail = self.stderr_tail
                if meaning and returncode is not None and self._decoder.exit_is_fatal(returncode):
                    serve = self._decoder.exit_cannot_serve(returncode)
                    return Verdict(
                        AttemptOutcome.unavailable if serve else AttemptOutcome.error,
                        error=f"{describe}: {meaning}" + (f" (stderr: {tail})" if tail else ""),
                        error_type="Unavailable" if serve else "CommandFailed")
                error = f"{what} before its stream's result" + (f": {tail}" if tail else "")
                said = vendor_verdict(f"{self._failure or ''}\n{tail}", error)
                return said or Verdict(AttemptOutcome.crash, error=error,  # retried as a crash
                                       error_type="StreamEnded")
            told = f"; its last error: {self._failure}" if self._failure else ""
            return Verdict(AttemptOutcome.crash, error=(
                f"{program} exited 0 but its stream ended without its result "
                f"(no terminal event){told}"), error_type="StreamEnded")
        if not end.ok:
            error = end.error or self._failure or "its result says it failed"
            if end.kind == "budget":
                return Verdict(AttemptOutcome.budget_exceeded,
                               error=f"{program} stopped at its own budget: {error}")
            if end.kind == "turn_limit":
                error = f"it reached its turn limit: {error}"
            error = f"{program} reported an error: {error}" + (f" ({what})" if returncode else "")
            said = None if end.kind or self.speaks == "jsonl" else vendor_verdict(
                f"{end.error or self._failure or ''}\n{self.stderr_tail}", error)
            return said or Verdict(AttemptOutcome.error, error=error, error_type="AgentError")
        if returncode not in (0, None) and not (returncode < 0):
            tail = self.stderr_tail
            return Verdict(AttemptOutcome.error, error=(
                f"{what} after a result that said it succeeded"
                + (f": {tail}" if tail else "")), error_type="CommandFailed")
        return Verdict(AttemptOutcome.completed, self.final_value())


def _decoder(speaks: str, reader: StreamReader, prior: SessionTotals | None) -> Decoder:
    if speaks in ("lines", "jsonl"):
        return JsonlDecoder(reader)  # (`lines` reads no event)
    from actors.speaks import decoder_for

    return decoder_for(speaks, prior=prior)
