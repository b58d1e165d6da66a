"""Claude Code's headless stream (`claude -p PROMPT --output-format stream-json
--verbose`), read into `Stream` calls.

The format, as Claude Code 2.1 prints it and the Agent SDK parses it
(anthropics/claude-agent-sdk-python, `src/claude_agent_sdk/_internal/message_parser.py`
and `types.py`; the SDK bundles CLI 2.1.240):

- `system`, subtype `init`: `session_id` (every other line repeats it), `model`,
  `tools`. Other `system` subtypes (`task_started`, `task_progress`, `hook_started`,
  `compact_boundary`, ...) mean nothing here.
- `assistant`: one content block of one API message per line, `message.id` the
  message's id. A message with three blocks is three lines with the same id, each
  carrying the message's `usage` again: usage is counted once per id, and only what a
  later line adds over what that id already reported is charged (`calls=1` the first
  time an id is seen). A `tool_use` block (`id`, `name`) starts a tool; `text` blocks
  of the main conversation (`parent_tool_use_id` null) are the reply's text.
- `user`: a `tool_result` block (`tool_use_id`) ends that tool.
- `result`: the end. `permission_denials` (`tool_name`, `tool_use_id`, `tool_input`: the
  calls it was refused, headless) become the blocker, "needs permission for
  Bash(rm -rf build)", of a run whose final text has no `<subtask_summary>` block.
  `subtype` `success`, `error_max_turns` (kind `turn_limit`),
  `error_max_budget_usd` (kind `budget`), `error_during_execution`, ...; `is_error`
  (an API failure comes as `subtype: success` with `is_error: true`, its message in
  `result`); `errors` (the prose of the error subtypes); `total_cost_usd` and `modelUsage`
  (per model: `inputTokens`, `outputTokens`, `cacheReadInputTokens`,
  `cacheCreationInputTokens`, `costUSD`), read as "Cost" below says. `result.usage` is
  the run's own main-loop usage, which the assistant lines already reported: it is not
  more spend and is not charged again.
- `stream_event` (with `--include-partial-messages`, which Zeus passes): the API's own
  stream events. An `assistant` line carries its reply's `message_start` usage
  (`output_tokens: 1`), so the output is counted from these: `message_start` (the
  message's id and its input usage) and `message_delta` (its `usage.output_tokens` so
  far), charged as they grow, the same per-id counting as the `assistant` lines'.
- `rate_limit_event`, `conversation_reset`, `tool_progress`, `auth_status`, `tool_use_summary`,
  `prompt_suggestion` and the `control_*` lines are known and ignored.

Cost: the run's own is passed on as `total_cost`. As measured (docs/agent-clis.md,
"Usage and cost"), 2.1.197 reports the run's own `total_cost_usd` and `modelUsage`;
2.1.328 reports a resumed session's totals in both (its transcript keeps them; a
session saved by an older version starts from the run's own) and the run's own in
`model_usage_since_last_result`, summed here. A result without that field, on a session
charged before this run (`prior`): a `total_cost_usd` below those charges is the run's
own; one whose `modelUsage` counts, beyond what this run streamed, at least half the
session's earlier tokens is the session's, and the run's own is what it adds over the
session's charges; otherwise it is the run's own. So history is charged once, and a run
whose cost is below the estimate already charged for it is charged nothing more. A run
killed before its result is charged what it streamed; later session totals leave it out.

Tokens: `input_tokens` passed on is the message's `input_tokens +
cache_creation_input_tokens + cache_read_input_tokens` (Claude's `input_tokens`
excludes both caches); `cached_input_tokens` is `cache_read_input_tokens`.
"""

from __future__ import annotations

from typing import Any

from actors.speaks._fields import as_dict, as_float, as_int, as_list, as_str
from actors.speaks.decoding import Decoder, EndKind, Stream, tool_detail
from actors.speaks.totals import SessionTotals
from actors.textblocks.agent_report import read_agent_report

__all__ = ["READ_ONLY_TOOLS", "SIDE_EFFECT_TOOLS", "ClaudeDecoder"]

#: Claude Code's tools that change files or run commands.
SIDE_EFFECT_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit", "Bash", "KillShell"})
#: Claude Code's tools that only read (or keep the agent's own notes). Any tool in
#: neither set (an `mcp__server__tool`, `Task`, a new one) counts as having side effects.
READ_ONLY_TOOLS = frozenset({
    "Read", "Grep", "Glob", "LS", "WebFetch", "WebSearch", "TodoWrite", "TodoRead",
    "BashOutput", "NotebookRead", "ExitPlanMode", "ListMcpResourcesTool",
    "ReadMcpResourceTool",
})

_IGNORED = frozenset({
    "rate_limit_event", "conversation_reset", "tool_progress",
    "auth_status", "tool_use_summary", "prompt_suggestion", "control_request",
    "control_response", "control_cancel_request", "keep_alive",
})
# The token counts of a `modelUsage` entry (input, both caches, output).
_MODEL_TOKENS = ("inputTokens", "cacheReadInputTokens", "cacheCreationInputTokens",
                 "outputTokens")
_KINDS: dict[str, EndKind] = {
    "error_max_turns": "turn_limit",
    "error_max_budget_usd": "budget",
}


def _denied(event: dict[str, Any], text: str | None) -> str | None:
    """The blocker a result's `permission_denials` make (the tools Claude was refused,
    headless), unless its final text has a `<subtask_summary>` block to say otherwise."""
    denied = [as_dict(item) for item in as_list(event.get("permission_denials"))]
    calls = [f"{as_str(d.get('tool_name')) or 'a tool'}({tool_detail(d.get('tool_input')) or ''})"
             for d in denied]
    if not calls or (text is not None and read_agent_report(text) is not None):
        return None
    return "needs permission for " + ", ".join(dict.fromkeys(calls))


def side_effects(name: str) -> bool:
    """Whether a call of Claude Code's tool `name` may change something."""
    return name not in READ_ONLY_TOOLS


class ClaudeDecoder(Decoder):
    """Claude Code's `stream-json` events (one instance per attempt). `prior`: what the
    resumed session was charged before this run, if known."""

    speaks = "claude"

    def __init__(self, *, prior: SessionTotals | None = None) -> None:
        self._prior = prior
        self._sessions: set[str] = set()
        # message id -> (input incl. caches, cached, output) it has reported so far
        self._usage: dict[str, tuple[int, int, int]] = {}
        self._message_id: str | None = None  # the main conversation's latest message
        self._blocks: list[str] = []  # its text blocks
        self._text: str | None = None
        self._ended = False
        # The message each conversation (None: the main one, else the tool call that runs
        # a subagent) is streaming: (its id, its `message_start` usage).
        self._streaming: dict[str | None, tuple[str, dict[str, Any]]] = {}

    def event(self, event: dict[str, Any], stream: Stream) -> bool:
        kind = event.get("type")
        if not isinstance(kind, str):
            return False
        if kind == "system":
            if event.get("subtype") == "init":
                self._session(event, stream)
            return True
        if kind == "assistant":
            self._session(event, stream)
            self._assistant(event, stream)
            return True
        if kind == "user":
            for block in as_list(as_dict(event.get("message")).get("content")):
                block = as_dict(block)
                call_id = as_str(block.get("tool_use_id"))
                if block.get("type") == "tool_result" and call_id is not None:
                    stream.tool_ended(call_id)
            return True
        if kind == "result":
            self._session(event, stream)
            self._result(event, stream)
            return True
        if kind == "stream_event":
            self._session(event, stream)
            self._partial(event, stream)
            return True
        return kind in _IGNORED

    def _partial(self, event: dict[str, Any], stream: Stream) -> None:
        """One raw API event of a reply as it streams: its usage, counted as it grows."""
        inner = as_dict(event.get("event"))
        parent = as_str(event.get("parent_tool_use_id"))
        kind = inner.get("type")
        if kind == "message_start":
            message = as_dict(inner.get("message"))
            message_id = as_str(message.get("id"))
            if message_id is None:
                return
            usage = as_dict(message.get("usage"))
            self._streaming[parent] = (message_id, usage)
            self._charge(message_id, usage, stream)
        elif kind == "message_delta" and parent in self._streaming:
            message_id, start = self._streaming[parent]
            # The delta's usage is the reply's so far; input counts it may leave out are
            # the start's.
            self._charge(message_id, {**start, **as_dict(inner.get("usage"))}, stream)

    def _session(self, event: dict[str, Any], stream: Stream) -> None:
        session_id = as_str(event.get("session_id"))
        if session_id is not None and session_id not in self._sessions:
            self._sessions.add(session_id)
            stream.session(session_id)

    def _assistant(self, event: dict[str, Any], stream: Stream) -> None:
        message = as_dict(event.get("message"))
        message_id = as_str(message.get("id"))
        self._charge(message_id, as_dict(message.get("usage")), stream)
        main = event.get("parent_tool_use_id") is None
        for block in as_list(message.get("content")):
            block = as_dict(block)
            kind = block.get("type")
            if kind == "tool_use":
                call_id, name = as_str(block.get("id")), as_str(block.get("name"))
                if call_id is not None:
                    name = name or "tool"
                    stream.tool_started(call_id, name, side_effects=side_effects(name),
                                        detail=tool_detail(block.get("input")))
            elif kind == "text" and main:
                text = block.get("text")
                if not isinstance(text, str):
                    continue
                if message_id is None or message_id != self._message_id:
                    self._message_id, self._blocks = message_id, []
                self._blocks.append(text)
                self._text = "\n\n".join(part for part in self._blocks if part)
                stream.text(self._text)

    def _charge(self, message_id: str | None, usage: dict[str, Any], stream: Stream) -> None:
        if not usage:
            return
        cached = as_int(usage.get("cache_read_input_tokens"))
        total_in = (as_int(usage.get("input_tokens"))
                    + as_int(usage.get("cache_creation_input_tokens")) + cached)
        out = as_int(usage.get("output_tokens"))
        seen = self._usage.get(message_id) if message_id is not None else None
        if seen is not None and seen[0] >= total_in and seen[1] >= cached and seen[2] >= out:
            return  # the same message again, with nothing new (the usual repeat)
        if seen is None:
            # A message of no tokens at all (the CLI's `<synthetic>` error message) is no call.
            calls = 1 if total_in or out else 0
            new_in, new_cached, new_out = total_in, cached, out
        else:
            new_in = max(0, total_in - seen[0])
            new_cached = max(0, cached - seen[1])
            new_out = max(0, out - seen[2])
            calls = 0
        if message_id is not None:
            prior = seen or (0, 0, 0)
            self._usage[message_id] = (max(prior[0], total_in), max(prior[1], cached),
                                       max(prior[2], out))
        if new_in or new_out or new_cached or calls:
            stream.tokens(new_in, new_out, cached_input_tokens=min(new_cached, new_in),
                          calls=calls)

    def _result(self, event: dict[str, Any], stream: Stream) -> None:
        cost = self._run_cost(event)
        if cost is not None:
            stream.total_cost(cost)
        if self._ended:
            return
        self._ended = True
        subtype = as_str(event.get("subtype")) or "unknown"
        is_error = event.get("is_error") is True
        result = event.get("result") if isinstance(event.get("result"), str) else None
        ok = subtype == "success" and not is_error
        if ok:
            text = result if result is not None else self._text
            stream.end(ok=True, text=text, blocker=_denied(event, text))
            return
        errors = [item for item in as_list(event.get("errors")) if isinstance(item, str) and item]
        if errors:
            error = "; ".join(errors)
        elif result:
            error = result
        else:
            error = f"claude ended with {subtype}"
        stream.end(ok=False, text=result if result is not None else self._text, error=error,
                   kind=_KINDS.get(subtype))

    def _run_cost(self, event: dict[str, Any]) -> float | None:
        """This run's own cost, from its result (the module's docstring, "Cost")."""
        since = event.get("model_usage_since_last_result")
        if isinstance(since, dict):
            costs = [as_float(as_dict(model).get("costUSD")) for model in since.values()]
            if any(cost is not None for cost in costs):
                return sum(cost for cost in costs if cost is not None)
        total = as_float(event.get("total_cost_usd"))
        prior = self._prior
        if total is None or prior is None or prior.cost <= 0 or total < prior.cost:
            return total
        streamed = sum(seen[0] + seen[2] for seen in self._usage.values())
        counted = sum(as_int(as_dict(model).get(name)) for model in
                      as_dict(event.get("modelUsage")).values() for name in _MODEL_TOKENS)
        earlier = prior.input_tokens + prior.output_tokens
        if earlier and counted - streamed >= earlier / 2:  # the session's history is in it
            return max(0.0, total - prior.cost)
        return total
