"""The Gemini CLI's headless stream (`gemini -p PROMPT --output-format stream-json`),
read into `Stream` calls.

The format, as google-gemini/gemini-cli 0.56 prints it (`packages/core/src/output/
types.ts`, the events; `packages/cli/src/nonInteractiveCli.ts`, when each is sent;
`packages/cli/src/utils/errors.ts`, the error results and exit codes;
`packages/cli/src/__snapshots__/nonInteractiveCli.test.ts.snap`, whole transcripts):

- `init` (`session_id`, `model`): the session.
- `message` (`role`, `content`, `delta`): the user's prompt echoed, then the model's
  reply as `delta: true` chunks, concatenated. A tool call between chunks starts a new
  message: the text is the latest message's.
- `tool_use` (`tool_name`, `tool_id`, `parameters`) starts a tool; `tool_result`
  (`tool_id`, `status`, `output`, `error`) ends it.
- `error` (`severity` `warning` | `error`, `message`): never the end by itself. A
  warning ("Loop detected, stopping execution") means nothing here; an error is a
  `failure`. "Maximum session turns exceeded" (severity `error`) is the core's turn
  limit: the `result` that follows still says `status: success`, and the run is ended
  not ok, kind `turn_limit`.
- `result` (`status` `success` | `error`, `error{type, message}`, `stats`): the end.
  The CLI's own turn limit is `status: error` with `error.type`
  `FatalTurnLimitedError` and exit 53 (kind `turn_limit`).

Tokens come only on `result.stats`: `input_tokens` (the prompt, cached input
included), `cached` (its cached part), `output_tokens` (the candidates) and
`total_tokens`, which also counts thinking tokens: the output charged is
`total_tokens - input_tokens` where that is more than `output_tokens`. No cost.

Exit codes (`FatalError` subclasses): 41 auth, 42 input, 44 sandbox, 52 config, 53 turn
limit, 54 tool execution, 55 untrusted workspace, 130 cancelled. A fatal one (all but
130) with no `result` is the CLI's own word that it could not run: an error that says
what the code means and its fix (55: `--skip-trust`), never a crash to retry. SIGINT,
SIGTERM and SIGHUP end it with no `result` at all.
"""

from __future__ import annotations

from typing import Any

from actors.speaks._fields import as_dict, as_int, as_str
from actors.speaks.decoding import Decoder, EndKind, Stream, tool_detail

__all__ = ["EXIT_CODES", "FATAL_EXITS", "READ_ONLY_TOOLS", "SIDE_EFFECT_TOOLS", "GeminiDecoder"]

#: The Gemini CLI's built-in tools that change files or run commands.
SIDE_EFFECT_TOOLS = frozenset({"write_file", "replace", "run_shell_command", "save_memory"})
#: Its built-in tools that only read (or keep the agent's own notes). Any other tool
#: (an MCP server's, a sub-agent, a new one) counts as having side effects.
READ_ONLY_TOOLS = frozenset({
    "read_file", "read_many_files", "glob", "grep_search", "search_file_content",
    "list_directory", "web_fetch", "google_web_search", "write_todos", "get_internal_docs",
    "activate_skill", "ask_user", "enter_plan_mode", "exit_plan_mode", "update_topic",
    "read_mcp_resource", "list_mcp_resources", "tracker_get_task", "tracker_list_tasks",
    "tracker_visualize",
})
#: What a non-zero exit means (`packages/core/src/utils/errors.ts`), and its fix where
#: it has one.
EXIT_CODES = {
    41: "authentication failed: check its API key (GEMINI_API_KEY) or the auth type in "
        "its settings.json",
    42: "bad input: the prompt or a flag in args: was refused",
    44: "sandbox error: its sandbox could not start",
    52: "configuration error: check its settings.json and the flags in args:",
    53: "turn limit reached",
    54: "tool execution failed",
    55: "the folder is not trusted; pass `--skip-trust` in args:, or set "
        "GEMINI_CLI_TRUST_WORKSPACE=true",
    130: "cancelled",
}
#: The exits that are its fatal errors (`FatalError`'s subclasses but the cancel): with
#: no `result`, an `error` that says what it is, never a crash to retry.
FATAL_EXITS = frozenset({41, 42, 44, 52, 53, 54, 55})
#: The fatal exits that say it cannot serve here (its key, its sandbox, its settings, an
#: untrusted folder), not that the task failed: `unavailable`, fallen back from.
CANNOT_SERVE = frozenset({41, 44, 52, 55})
_TURN_LIMIT_MESSAGE = "Maximum session turns exceeded"


class GeminiDecoder(Decoder):
    """The Gemini CLI's `stream-json` events (one instance per attempt)."""

    speaks = "gemini"
    usage_at_end = True

    def __init__(self) -> None:
        self._sessions: set[str] = set()
        self._text = ""
        self._in_message = False  # the last event was a chunk of the reply
        self._turn_limit: str | None = None
        self._charged = (0, 0, 0)  # input, cached, output: the stats already charged
        self._ended = False

    def event(self, event: dict[str, Any], stream: Stream) -> bool:
        kind = event.get("type")
        if not isinstance(kind, str):
            return False
        replying = False
        if kind == "init":
            session_id = as_str(event.get("session_id"))
            if session_id is not None and session_id not in self._sessions:
                self._sessions.add(session_id)
                stream.session(session_id)
        elif kind == "message":
            content = event.get("content")
            if event.get("role") == "assistant" and isinstance(content, str):
                replying = True
                if event.get("delta") is True and self._in_message:
                    self._text += content
                else:
                    self._text = content
                stream.text(self._text)
        elif kind == "tool_use":
            call_id = as_str(event.get("tool_id"))
            name = as_str(event.get("tool_name")) or "tool"
            if call_id is not None:
                stream.tool_started(call_id, name, side_effects=name not in READ_ONLY_TOOLS,
                                    detail=tool_detail(event.get("parameters")))
        elif kind == "tool_result":
            call_id = as_str(event.get("tool_id"))
            if call_id is not None:
                stream.tool_ended(call_id)
        elif kind == "error":
            message = as_str(event.get("message")) or "gemini reported an error"
            if event.get("severity") == "error":
                if message == _TURN_LIMIT_MESSAGE:
                    self._turn_limit = message
                stream.failure(message)
        elif kind == "result":
            self._result(event, stream)
        else:
            return False
        self._in_message = replying
        return True

    def _result(self, event: dict[str, Any], stream: Stream) -> None:
        stats = as_dict(event.get("stats"))
        if stats:
            input_tokens = as_int(stats.get("input_tokens"))
            output_tokens = max(as_int(stats.get("output_tokens")),
                                as_int(stats.get("total_tokens")) - input_tokens)
            cached = min(as_int(stats.get("cached")), input_tokens)
            # The stats are the session's totals: a second result charges only its increase.
            seen = self._charged
            new = (max(0, input_tokens - seen[0]), max(0, cached - seen[1]),
                   max(0, output_tokens - seen[2]))
            self._charged = (max(seen[0], input_tokens), max(seen[1], cached),
                             max(seen[2], output_tokens))
            if new[0] or new[2]:
                stream.tokens(new[0], new[2], cached_input_tokens=min(new[1], new[0]),
                              calls=0 if any(seen) else 1)
        if self._ended:
            return
        self._ended = True
        text = self._text or None
        if event.get("status") == "success":
            if self._turn_limit is not None:
                stream.end(ok=False, text=text, error=self._turn_limit, kind="turn_limit")
            else:
                stream.end(ok=True, text=text)
            return
        error = as_dict(event.get("error"))
        kind: EndKind = "turn_limit" if error.get("type") == "FatalTurnLimitedError" else None
        message = as_str(error.get("message")) or f"gemini ended with status {event.get('status')}"
        stream.end(ok=False, text=text, error=message, kind=kind)

    def exit_meaning(self, code: int) -> str | None:
        return EXIT_CODES.get(code)

    def exit_is_fatal(self, code: int) -> bool:
        return code in FATAL_EXITS

    def exit_cannot_serve(self, code: int) -> bool:
        return code in CANNOT_SERVE
