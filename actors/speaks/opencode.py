"""OpenCode's headless stream (`opencode run --format json PROMPT`, `-s ID` for a
follow-up), read into `Stream` calls.

The format, as OpenCode 1.18 prints it (anomalyco/opencode, formerly sst/opencode,
`packages/opencode/src/cli/cmd/run.ts`: its `emit`, which writes `{type, timestamp,
sessionID, ...data}`; the parts are the session's message parts,
`packages/opencode/src/session/message-v2.ts`):

- every line carries `sessionID`: the session, reported once.
- `step_start` (`part`, a `step-start`): a model call begins.
- `text` (`part.text`, sent once the part is complete, `part.time.end` set): the
  reply's text; the parts of one message (`part.messageID`) make its text.
- `reasoning` (only with `--thinking`) means nothing here.
- `tool_use` (`part.tool`, `part.state.status` `completed` | `error`): sent only once
  the tool is over, so no event marks a tool's start: a `tool_used`.
- `step_finish` (`part.reason`, `part.cost` in USD, `part.tokens{input, output,
  reasoning, cache{read, write}}`): the step's own spend, passed on as `cost`.
  OpenCode's `tokens.input` excludes both caches (it subtracts them where the
  provider counts them in), so the input passed on is `input + cache.read +
  cache.write`, cached `cache.read`; reasoning tokens count as output.
- `error` (`error{name, data{message}}`): the session failed; the process exits 1.
- `done` (`reason: "idle"`, `rejected`: permissions auto-rejected), the last line, once
  the session is idle.

The end, decided here: `done` ends the run (ok unless an `error` came first); an
`error` ends it not ok; and, for the versions before `done` existed (they printed no
terminal line at all, the process just exited after the last step), a `step_finish`
whose reason is `stop` (the model answered without calling a tool: the session's loop
is over) ends it ok with the text so far. A run that stops after a `tool-calls` step
has no end: the stream ended without its result.
"""

from __future__ import annotations

from typing import Any

from actors.speaks._fields import as_dict, as_float, as_int, as_str
from actors.speaks.decoding import Decoder, Stream, tool_detail

__all__ = ["READ_ONLY_TOOLS", "SIDE_EFFECT_TOOLS", "OpenCodeDecoder"]

#: OpenCode's built-in tools that change files or run commands.
SIDE_EFFECT_TOOLS = frozenset({"bash", "edit", "write", "patch", "apply_patch", "multiedit"})
#: Its built-in tools that only read (or keep the agent's own notes). Any other tool (an
#: MCP server's, `task`'s sub-agent, a new one) counts as having side effects.
READ_ONLY_TOOLS = frozenset({
    "read", "grep", "glob", "list", "webfetch", "websearch", "codesearch", "todoread",
    "todowrite", "lsp", "skill", "question",
})

_IGNORED = frozenset({"step_start", "reasoning"})


class OpenCodeDecoder(Decoder):
    """OpenCode's `run --format json` events (one instance per attempt)."""

    speaks = "opencode"

    def __init__(self) -> None:
        self._sessions: set[str] = set()
        self._message_id: str | None = None
        self._parts: dict[str, str] = {}  # the latest message's text parts, by part id
        self._text: str | None = None
        self._error: str | None = None
        self._ended = False

    def event(self, event: dict[str, Any], stream: Stream) -> bool:
        kind = event.get("type")
        if not isinstance(kind, str):
            return False
        session_id = as_str(event.get("sessionID"))
        if session_id is not None and session_id not in self._sessions:
            self._sessions.add(session_id)
            stream.session(session_id)
        part = as_dict(event.get("part"))
        if kind == "text":
            self._part_text(part, stream)
        elif kind == "tool_use":
            name = as_str(part.get("tool")) or "tool"
            stream.tool_used(name, side_effects=name not in READ_ONLY_TOOLS,
                             detail=tool_detail(as_dict(part.get("state")).get("input")))
        elif kind == "step_finish":
            self._step_finish(part, stream)
        elif kind == "error":
            error = as_dict(event.get("error"))
            message = (as_str(as_dict(error.get("data")).get("message"))
                       or as_str(error.get("name")) or "opencode reported an error")
            self._error = message if self._error is None else f"{self._error}\n{message}"
            self._end(stream)
        elif kind == "done":
            self._end(stream)
        elif kind not in _IGNORED:
            return False
        return True

    def _part_text(self, part: dict[str, Any], stream: Stream) -> None:
        text = part.get("text")
        if not isinstance(text, str):
            return
        message_id = as_str(part.get("messageID"))
        if message_id is None or message_id != self._message_id:
            self._message_id, self._parts = message_id, {}
        self._parts[as_str(part.get("id")) or str(len(self._parts))] = text
        self._text = "\n\n".join(value for value in self._parts.values() if value)
        stream.text(self._text)

    def _step_finish(self, part: dict[str, Any], stream: Stream) -> None:
        tokens = as_dict(part.get("tokens"))
        cache = as_dict(tokens.get("cache"))
        cached = as_int(cache.get("read"))
        input_tokens = as_int(tokens.get("input")) + cached + as_int(cache.get("write"))
        output_tokens = as_int(tokens.get("output")) + as_int(tokens.get("reasoning"))
        cost = as_float(part.get("cost"))
        if cost is not None or input_tokens or output_tokens:
            stream.cost(cost or 0.0, input_tokens=input_tokens, output_tokens=output_tokens,
                        cached_input_tokens=cached, calls=1)
        if part.get("reason") == "stop":
            self._end(stream)

    def _end(self, stream: Stream) -> None:
        if self._ended:
            return
        self._ended = True
        if self._error is None:
            stream.end(ok=True, text=self._text)
        else:
            stream.end(ok=False, text=self._text, error=self._error)
