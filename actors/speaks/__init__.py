"""What a command's standard output speaks (docs/agent-clis.md): plain lines,
Zeus's own JSON lines, or an agent CLI's event stream, read into progress, tool calls,
spend, a session and a final text.

`StreamReader` reads one attempt's output; `cli_argv` and `prompt_text` build an agent
CLI's invocation; each CLI's decoder lives in a module of its own, imported when an
attempt of it starts.
"""

from __future__ import annotations

import importlib

from actors.speaks.decoding import Decoder, Stream
from actors.speaks.invocation import CLI_PROGRAMS, SPEAKS, Invocation, cli_argv, prompt_text
from actors.speaks.reader import MAX_LINE, Pricing, StreamReader, StreamSink, Verdict
from actors.speaks.totals import SessionTotals

__all__ = [
    "CLI_PROGRAMS",
    "MAX_LINE",
    "SPEAKS",
    "Decoder",
    "Invocation",
    "Pricing",
    "SessionTotals",
    "Stream",
    "StreamReader",
    "StreamSink",
    "Verdict",
    "cli_argv",
    "decoder_for",
    "prompt_text",
]

# Each CLI's decoder: (module, class).
_DECODERS = {
    "claude": ("actors.speaks.claude", "ClaudeDecoder"),
    "codex": ("actors.speaks.codex", "CodexDecoder"),
    "gemini": ("actors.speaks.gemini", "GeminiDecoder"),
    "opencode": ("actors.speaks.opencode", "OpenCodeDecoder"),
    "cursor": ("actors.speaks.cursor", "CursorDecoder"),
}


# The CLIs whose reports run across a session's runs: their decoders take its totals.
_SESSION_TOTALS = frozenset({"claude", "codex"})


def decoder_for(speaks: str, *, prior: SessionTotals | None = None) -> Decoder:
    """A new decoder of the agent CLI `speaks` names (one per attempt). `prior`: what a
    resumed session's earlier runs were charged, for a CLI whose totals run across its
    session's runs (Codex's tokens, Claude's cost)."""
    try:
        module, name = _DECODERS[speaks]
    except KeyError:
        raise ValueError(f"speaks: {speaks!r} is not an agent CLI; known: "
                         f"{', '.join(_DECODERS)}") from None
    cls = getattr(importlib.import_module(module), name)
    decoder: Decoder = cls(prior=prior) if speaks in _SESSION_TOTALS else cls()
    return decoder
