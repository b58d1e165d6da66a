"""Cursor's agent CLI's headless stream (`cursor-agent -p --output-format stream-json
PROMPT`, `--resume ID` for a follow-up), read into `Stream` calls.

Cursor's CLI is closed source. The format is the one its output-format reference
documents and BloopAI/vibe-kanban reads (`crates/executors/src/executors/cursor.rs`,
its `CursorJson` and `CursorToolCall`, with transcripts in its tests):

- `system`, subtype `init` (`session_id`, `model`, `cwd`, `apiKeySource`,
  `permissionMode`): the session; every later line repeats `session_id`.
- `user`: the prompt echoed.
- `assistant` (`message{role, content[{type: text, text}]}`): the reply, in segments;
  consecutive `assistant` lines are one message (concatenated), and any other line in
  between starts a new one.
- `thinking` (`subtype` `delta` | `completed`, `text`) means nothing here.
- `tool_call` (`subtype` `started` | `completed`, `call_id`, `tool_call{<kind>:
  {args, result}}`, the kind one of `shellToolCall`, `editToolCall`, ...): started and
  ended by `call_id`.
- `result` (`subtype`, `is_error`, `result`: the whole reply's text, `duration_ms`):
  the end. The stream may end with none. Newer builds add the run's tokens to it:
  `usage{inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens}`, its input
  without either cache (a result of `inputTokens: 0`, `cacheReadTokens: 2000` is
  seen in real runs), so the input passed on is
  `inputTokens + cacheReadTokens + cacheWriteTokens`, cached `cacheReadTokens`.
- `retry` (`subtype` `starting` | `resuming`) and `connection` (`reconnecting` |
  `reconnected`): Cursor retrying its API itself, progress; `interaction_query`
  (`request` | `response`), a question its headless mode answers itself; `system`
  subtypes other than `init` (`task_notification`, `background_shell_timeout`):
  all known, all nothing more than a heartbeat.

Cursor reports no cost, and its tokens only at the end.
"""

from __future__ import annotations

from typing import Any

from actors.speaks._fields import as_dict, as_int, as_list, as_str
from actors.speaks.decoding import Decoder, Stream, tool_detail

__all__ = ["READ_ONLY_TOOLS", "SIDE_EFFECT_TOOLS", "CursorDecoder"]

#: Cursor's tool kinds that change files or run commands.
SIDE_EFFECT_TOOLS = frozenset({
    "shellToolCall", "editToolCall", "writeToolCall", "deleteToolCall",
})
#: Its tool kinds that only read (or keep the agent's own notes). Any other kind
#: (`mcpToolCall`, a new one) counts as having side effects.
READ_ONLY_TOOLS = frozenset({
    "readToolCall", "grepToolCall", "globToolCall", "lsToolCall", "semSearchToolCall",
    "updateTodosToolCall", "readTodosToolCall", "webSearchToolCall", "fetchToolCall",
})

_IGNORED = frozenset({"user", "thinking", "system", "retry", "connection",
                      "interaction_query"})


class CursorDecoder(Decoder):
    """Cursor agent's `stream-json` events (one instance per attempt)."""

    speaks = "cursor"
    usage_at_end = True

    def __init__(self) -> None:
        self._sessions: set[str] = set()
        self._open: set[str] = set()
        self._text = ""
        self._in_message = False
        self._ended = False

    def event(self, event: dict[str, Any], stream: Stream) -> bool:
        kind = event.get("type")
        if not isinstance(kind, str):
            return False
        session_id = as_str(event.get("session_id"))
        if session_id is not None and session_id not in self._sessions:
            self._sessions.add(session_id)
            stream.session(session_id)
        replying = False
        if kind == "assistant":
            replying = True
            chunk = "".join(
                item.get("text", "") for item in map(as_dict, as_list(
                    as_dict(event.get("message")).get("content")))
                if item.get("type") == "text" and isinstance(item.get("text"), str))
            self._text = self._text + chunk if self._in_message else chunk
            if self._text:
                stream.text(self._text)
        elif kind == "tool_call":
            self._tool_call(event, stream)
        elif kind == "result":
            self._result(event, stream)
        elif kind not in _IGNORED:
            return False
        self._in_message = replying
        return True

    def _tool_call(self, event: dict[str, Any], stream: Stream) -> None:
        call = as_dict(event.get("tool_call"))
        name = next((key for key in call if isinstance(key, str)), "tool")
        effects = name not in READ_ONLY_TOOLS
        call_id = as_str(event.get("call_id"))
        subtype = event.get("subtype")
        if subtype == "started":
            if call_id is not None and call_id not in self._open:
                self._open.add(call_id)
                stream.tool_started(call_id, name, side_effects=effects,
                                    detail=tool_detail(as_dict(call.get(name)).get("args")))
        elif subtype == "completed":
            if call_id is not None and call_id in self._open:
                self._open.discard(call_id)
                stream.tool_ended(call_id)
            else:
                stream.tool_used(name, side_effects=effects,
                                 detail=tool_detail(as_dict(call.get(name)).get("args")))

    def _result(self, event: dict[str, Any], stream: Stream) -> None:
        if self._ended:
            return
        self._ended = True
        usage = as_dict(event.get("usage"))
        cached = as_int(usage.get("cacheReadTokens"))
        input_tokens = (as_int(usage.get("inputTokens")) + cached
                        + as_int(usage.get("cacheWriteTokens")))
        output_tokens = as_int(usage.get("outputTokens"))
        if input_tokens or output_tokens:
            stream.tokens(input_tokens, output_tokens, cached_input_tokens=cached, calls=1)
        subtype = as_str(event.get("subtype")) or "unknown"
        result = event.get("result") if isinstance(event.get("result"), str) else None
        text = result if result is not None else (self._text or None)
        if subtype == "success" and event.get("is_error") is not True:
            stream.end(ok=True, text=text)
        else:
            stream.end(ok=False, text=text, error=result or f"cursor-agent ended with {subtype}")
