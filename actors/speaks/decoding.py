"""What a decoder of one agent CLI's stream calls: `Stream`, the one vocabulary every
decoder speaks in (docs/agent-clis.md has each CLI's table of it).

A decoder (`actors.speaks.claude`, `codex`, ...) reads one parsed JSON event at a
time and says what it means by calling `Stream`'s methods; it keeps whatever
state its CLI's traps need (Claude's repeated message ids, Codex's running
totals) and nothing else. It never sends anything itself and never raises on
an event of a known type with odd fields: a field that is missing or of the
wrong type is skipped. Decoders run in the thread that reads the program's
standard output (the backend's hub, or a worker's main thread).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any, Literal, Protocol

__all__ = ["Decoder", "EndKind", "Stream", "tool_detail"]

# What a terminal event says beyond ok / not ok, where the CLI says it.
EndKind = Literal["budget", "turn_limit"] | None


class Stream(Protocol):
    """What an event means to Zeus. Implemented by `actors.speaks.reader.StreamReader`."""

    def session(self, session_id: str) -> None:
        """The CLI's own session (thread, chat) id: a follow-up resumes it."""

    def tool_started(self, call_id: str, name: str, *, side_effects: bool,
                     detail: str | None = None) -> None:
        """A tool call began and has not ended yet: the attempt is inside a tool (its
        stale clock uses `stale_in_tool_s`) until `tool_ended(call_id)`. `detail`: what
        it was called with, in brief (`tool_detail`)."""

    def tool_ended(self, call_id: str) -> None:
        """The tool call `call_id` ended (an id never started is ignored)."""

    def tool_used(self, name: str, *, side_effects: bool, detail: str | None = None) -> None:
        """A tool call reported only once it was over (no start was seen)."""

    def tokens(self, input_tokens: int = 0, output_tokens: int = 0, *,
               cached_input_tokens: int = 0, calls: int = 0) -> None:
        """New spend in tokens, not yet counted (a decoder passes only what is new:
        de-duplicated, a difference of running totals). `input_tokens` counts cached
        input too; `cached_input_tokens` is the part of it that was cached. Priced by
        the agent's `pricing:` where it has one."""

    def cost(self, usd: float, *, input_tokens: int = 0, output_tokens: int = 0,
             cached_input_tokens: int = 0, calls: int = 0) -> None:
        """New spend the CLI priced itself (OpenCode's per step): its cost, with the
        tokens it covers (counted, never priced again)."""

    def total_cost(self, usd: float) -> None:
        """The CLI's own total cost of this run so far (Claude's `total_cost_usd`): what
        exceeds the spend already counted for this run is charged; an estimate that was
        higher is left as it was (spend is never taken back)."""

    def text(self, text: str) -> None:
        """Text of the agent's reply as it streams (the latest message's text); the final
        text, when the terminal event carries none of its own."""

    def failure(self, message: str) -> None:
        """An error the CLI reported that did not end the stream by itself (Codex's
        `error`, which it may retry): kept as the error if no terminal event follows."""

    def end(self, *, ok: bool, text: str | None = None, error: str | None = None,
            kind: EndKind = None, blocker: str | None = None) -> None:
        """The terminal event: the run is over, `ok` or not, with its final text and,
        if not ok, its error. `kind` says why it stopped short, where the CLI says so.
        `blocker`: an ok run the CLI kept from going on (Claude's denied permissions),
        where its text has no `<subtask_summary>` block to say otherwise: the attempt's
        result is then a `Report` blocked with it."""


class Decoder(ABC):
    """One CLI's events read into `Stream` calls. One instance per attempt."""

    #: The CLI this decoder reads, as `speaks:` names it.
    speaks: str = ""
    #: Whether the CLI reports a turn's usage only at its end (Codex, Gemini, Cursor): a
    #: run that ends before its terminal event then spent what no line said.
    usage_at_end: bool = False

    @abstractmethod
    def event(self, event: dict[str, Any], stream: Stream) -> bool:
        """Read one event (a JSON object from one line). False when its `type` is not one
        this decoder knows (the line is counted among the attempt's `bad_lines`)."""

    def exit_meaning(self, code: int) -> str | None:
        """What a non-zero exit code of this CLI means, in a few words and with its fix
        where there is one, where it documents one (Gemini's 53: the turn limit); None
        otherwise."""
        del code
        return None

    def exit_cannot_serve(self, code: int) -> bool:
        """Whether a fatal exit `code` says the CLI cannot serve here at all (Gemini's 41,
        its authentication; 55, an untrusted folder): `unavailable`, not the task's."""
        del code
        return False

    def exit_is_fatal(self, code: int) -> bool:
        """Whether exiting `code` with no terminal event is the CLI's own word that it could
        not run (Gemini's fatal errors: 41 its authentication, 55 an untrusted folder, ...):
        an `error` (or `unavailable`, `exit_cannot_serve`) that says what the code means,
        not a crash to retry."""
        del code
        return False


# The inputs that say best what a tool call did, in this order (a shell's command, a file's
# path, a search's pattern).
_TELLING = ("command", "cmd", "file_path", "filePath", "path", "pattern", "query", "url")


def tool_detail(value: Any) -> str | None:
    """What a tool was called with, in brief: its command, path or pattern where it has
    one, else its inputs as compact JSON; on one line, cut to 200 characters."""
    if isinstance(value, dict):
        telling = next((value[k] for k in _TELLING if isinstance(value.get(k), str)), None)
        if telling is None:
            telling = value and json.dumps(value, ensure_ascii=False, default=str,
                                           separators=(",", ":"))
        value = telling
    if isinstance(value, list):
        value = " ".join(str(part) for part in value)  # an argv
    if not isinstance(value, str) or not value.strip():
        return None
    text = " ".join(value.split())
    return text if len(text) <= 200 else text[:199] + "…"
