"""`speaks: jsonl`, Zeus's own line protocol for scripts (docs/agent-clis.md, "jsonl").

A line that is a JSON object with one of these keys means that; any other line
(not JSON, or JSON without them) is progress and nothing more:

    {"partial": ITEM}                                   a partial result
    {"charge": {"calls", "input_tokens", "output_tokens", "cost"}}   spend (any subset)
    {"heartbeat": NOTE}                                 still working (NOTE may be null)
    {"tool": {"name", "phase": "start"|"end", "side_effects": bool, "id"}}
                                                        a tool call (no phase: instantaneous)
    {"session": ID}                                     the script's own session id
    {"result": VALUE}                                   the result; a string is the final text
    {"error": MESSAGE}                                  the run failed (the terminal event)
"""

from __future__ import annotations

from typing import Any, Protocol

from actors.speaks.decoding import Decoder, Stream

__all__ = ["JsonlDecoder", "ScriptSink"]


class ScriptSink(Protocol):
    """What only a script says (`actors.speaks.reader.StreamReader` takes it)."""

    def partial(self, item: Any) -> None:
        """A partial result."""

    def note(self, text: str | None) -> None:
        """A heartbeat, with its note."""

    def result(self, value: Any) -> None:
        """The result (the terminal event): a string is the final text."""


class JsonlDecoder(Decoder):
    speaks = "jsonl"

    def __init__(self, partials: ScriptSink) -> None:
        self._partials = partials

    def event(self, event: dict[str, Any], stream: Stream) -> bool:
        if "result" in event:
            self._partials.result(event["result"])
        elif "error" in event:
            stream.end(ok=False, error=str(event["error"]))
        elif "partial" in event:
            self._partials.partial(event["partial"])
        elif "charge" in event:
            self._charge(event["charge"], stream)
        elif "tool" in event:
            self._tool(event["tool"], stream)
        elif "session" in event:
            if isinstance(event["session"], str | int) and str(event["session"]):
                stream.session(str(event["session"]))
        elif "heartbeat" in event:
            note = event["heartbeat"]
            self._partials.note(None if note is None else str(note))
        return True  # any other object is progress, not a bad line

    @staticmethod
    def _charge(charge: Any, stream: Stream) -> None:
        if not isinstance(charge, dict):
            return
        calls = _count(charge.get("calls"))
        tokens_in = _count(charge.get("input_tokens"))
        tokens_out = _count(charge.get("output_tokens"))
        cost = charge.get("cost")
        if isinstance(cost, int | float) and not isinstance(cost, bool) and cost > 0:
            stream.cost(float(cost), input_tokens=tokens_in, output_tokens=tokens_out,
                        calls=calls)
        else:
            stream.tokens(tokens_in, tokens_out, calls=calls)

    @staticmethod
    def _tool(tool: Any, stream: Stream) -> None:
        if not isinstance(tool, dict):
            return
        name = str(tool.get("name") or "tool")
        side_effects = tool.get("side_effects", True) is not False
        call_id = str(tool.get("id") or name)
        phase = tool.get("phase")
        if phase == "start":
            stream.tool_started(call_id, name, side_effects=side_effects)
        elif phase == "end":
            stream.tool_ended(call_id)
        else:
            stream.tool_used(name, side_effects=side_effects)


def _count(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return 0
