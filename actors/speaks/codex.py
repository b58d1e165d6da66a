"""The Codex CLI's headless stream (`codex exec --json --skip-git-repo-check PROMPT`,
`... resume ID PROMPT` for a follow-up), read into `Stream` calls.

The format, as openai/codex prints it (`codex-rs/exec/src/exec_events.rs`, the events;
`codex-rs/exec/src/event_processor_with_jsonl_output.rs`, how they are made;
`sdk/typescript/src/events.ts` and `items.ts` have the same shapes):

- `thread.started` (`thread_id`): the first line; the session a follow-up resumes.
- `turn.started`; `item.started`, `item.updated`, `item.completed` with `item{id,
  type, ...}`. `command_execution`, `file_change`, `mcp_tool_call`,
  `collab_tool_call` and `web_search` items are tool calls: started and ended by item
  id, or, completed with no start seen (a `file_change` may come only completed),
  used. `agent_message` (`text`) is the reply; `reasoning`, `todo_list`, `plan` and
  `error` items (a non-fatal notice) mean nothing here. An early version named the
  item's type field `item_type` and the reply `assistant_message`: both are read.
- `turn.completed` (`usage{input_tokens, cached_input_tokens, output_tokens}`): the
  end, ok, with the last `agent_message` as the text. `turn.failed`
  (`error{message}`): the end, not ok. `error` (`message`): an error Codex reports and
  may retry itself (its "Reconnecting... 2/5" lines): a `failure`, kept if no
  terminal event follows.
- `item.plan.delta` and `request_user_input` are known and ignored.

Usage, as the source says: `turn.completed.usage` is the thread's running total, not
the turn's (the processor keeps the last `ThreadTokenUsage` it was sent and prints its
`total`). `codex exec` runs one turn per run and then shuts down, so one run prints one
`turn.completed`; the decoder still charges each total's increase over the last total
it saw. On a resumed thread the total keeps counting from the thread's saved rollout
(Codex seeds its token info from the rollout's last token count on resume), so the
first total of a follow-up includes every earlier run of that thread: pass what
that thread was charged so far as `CodexDecoder(prior=SessionTotals(...))` to charge
only the new part (its cached tokens as cached: a resumed turn that added 200 cached
tokens of 1,000 is charged 200 cached); `last_total` is what this run left. A run stopped
before its `turn.completed` charges nothing, and the thread's next total covers it.
Codex reports no cost; its `input_tokens` include `cached_input_tokens`.
"""

from __future__ import annotations

from typing import Any

from actors.speaks._fields import as_dict, as_int, as_list, as_str
from actors.speaks.decoding import Decoder, Stream, tool_detail
from actors.speaks.totals import SessionTotals

__all__ = ["READ_ONLY_TOOLS", "SIDE_EFFECT_TOOLS", "TOOL_ITEMS", "CodexDecoder", "Usage"]

#: A running total of the thread's tokens: (input incl. cached, cached input, output).
Usage = tuple[int, int, int]

#: The item types that are tool calls.
TOOL_ITEMS = frozenset({
    "command_execution", "file_change", "mcp_tool_call", "collab_tool_call", "web_search",
})
#: Tool items that change files or run something (an MCP tool or a sub-agent may too).
SIDE_EFFECT_TOOLS = frozenset({
    "command_execution", "file_change", "mcp_tool_call", "collab_tool_call",
})
#: Tool items that only read.
READ_ONLY_TOOLS = frozenset({"web_search"})

_IGNORED = frozenset({"turn.started", "item.plan.delta", "request_user_input"})
_REPLY = frozenset({"agent_message", "assistant_message"})


class CodexDecoder(Decoder):
    """Codex's `exec --json` events (one instance per attempt). `prior`: what the thread
    was charged when this run began (a follow-up's), if known."""

    speaks = "codex"
    usage_at_end = True

    def __init__(self, *, prior: SessionTotals | None = None) -> None:
        self._sessions: set[str] = set()
        self._open: set[str] = set()
        self.last_total: Usage = ((prior.input_tokens, prior.cached_input_tokens,
                                   prior.output_tokens) if prior is not None else (0, 0, 0))
        self._text: str | None = None
        self._ended = False

    def event(self, event: dict[str, Any], stream: Stream) -> bool:
        kind = event.get("type")
        if not isinstance(kind, str):
            return False
        if kind in ("thread.started", "session.created"):
            session_id = as_str(event.get("thread_id")) or as_str(event.get("session_id"))
            if session_id is not None and session_id not in self._sessions:
                self._sessions.add(session_id)
                stream.session(session_id)
            return True
        if kind in ("item.started", "item.updated", "item.completed"):
            self._item(kind, as_dict(event.get("item")), stream)
            return True
        if kind == "turn.completed":
            self._usage(as_dict(event.get("usage")), stream)
            self._end(stream, ok=True)
            return True
        if kind == "turn.failed":
            message = as_str(as_dict(event.get("error")).get("message")) or "turn failed"
            self._end(stream, ok=False, error=message)
            return True
        if kind == "error":
            stream.failure(as_str(event.get("message")) or "codex reported an error")
            return True
        return kind in _IGNORED

    def _item(self, phase: str, item: dict[str, Any], stream: Stream) -> None:
        item_type = as_str(item.get("type")) or as_str(item.get("item_type"))
        item_id = as_str(item.get("id"))
        if item_type is None:
            return
        if item_type in _REPLY:
            text = item.get("text")
            if phase == "item.completed" and isinstance(text, str):
                self._text = text
                stream.text(text)
            return
        if item_type not in TOOL_ITEMS:
            return
        effects = item_type not in READ_ONLY_TOOLS
        if phase == "item.started":
            if item_id is not None and item_id not in self._open:
                self._open.add(item_id)
                stream.tool_started(item_id, item_type, side_effects=effects,
                                    detail=_detail(item))
        elif phase == "item.completed":
            if item_id is not None and item_id in self._open:
                self._open.discard(item_id)
                stream.tool_ended(item_id)
            else:
                stream.tool_used(item_type, side_effects=effects, detail=_detail(item))

    def _usage(self, usage: dict[str, Any], stream: Stream) -> None:
        if not usage:
            return
        total = (as_int(usage.get("input_tokens")), as_int(usage.get("cached_input_tokens")),
                 as_int(usage.get("output_tokens")))
        last = self.last_total
        if total[0] < last[0] or total[2] < last[2]:
            last = (0, 0, 0)  # a total below the last one: a fresh count, charged in full
        new = tuple(max(0, now - before) for now, before in zip(total, last, strict=True))
        self.last_total = total
        if any(new):
            stream.tokens(new[0], new[2], cached_input_tokens=min(new[1], new[0]), calls=1)

    def _end(self, stream: Stream, *, ok: bool, error: str | None = None) -> None:
        if self._ended:
            return
        self._ended = True
        if ok:
            stream.end(ok=True, text=self._text)
        else:
            stream.end(ok=False, text=self._text, error=error)


def _detail(item: dict[str, Any]) -> str | None:
    """What a tool item did, in brief: its command, the files it changed, its arguments."""
    changes = [as_str(as_dict(c).get("path")) for c in as_list(item.get("changes"))]
    if any(changes):
        return tool_detail(" ".join(c for c in changes if c))
    return tool_detail(item.get("command") or item.get("arguments"))
