"""The four APIs' wire formats for model_server.py: which requests are the conversation's,
and each reply, whole or as the vendor's server-sent events."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.real_clis.model_server import ModelServer, Turn

SHELL_ARGS: dict[str, Any] = {  # each CLI's shell tool, in order of preference
    "Bash": lambda cmd: {"command": cmd, "description": "Run a shell command"},
    "exec_command": lambda cmd: {"cmd": cmd},
    "shell_command": lambda cmd: {"command": cmd},
    "shell": lambda cmd: {"command": ["bash", "-lc", cmd]},
    "run_shell_command": lambda cmd: {"command": cmd, "description": "Run a shell command"},
    "bash": lambda cmd: {"command": cmd, "description": "Run a shell command"},
}
SIDE_JSON = {  # a side request that asks for JSON gets the keys its known askers want
    "complexity_reasoning": "A short scripted task.",
    "complexity_score": 1,
    "reasoning": "The model has finished its turn.",
    "next_speaker": "user",
    "isNewTopic": False,
    "title": "Scripted task",
}
ANTHROPIC_ERRORS = {400: "invalid_request_error", 401: "authentication_error",
                    403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                    429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}
GOOGLE_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
                 503: "UNAVAILABLE", 529: "UNAVAILABLE"}


def api_of(path: str) -> str:
    if path.startswith("/v1/messages"):
        return "anthropic"
    if path.startswith("/v1/responses"):
        return "responses"
    if path.startswith("/v1/chat/completions"):
        return "chat"
    if path.startswith("/v1beta/models/") or path.startswith("/v1/models/"):
        return "gemini"
    return "other"


def tool_names(api: str, body: Any) -> list[str]:
    """The names of the tools a request offers."""
    tools = body.get("tools") or [] if isinstance(body, dict) else []
    if api == "gemini":
        return [d.get("name", "") for t in tools for d in t.get("functionDeclarations") or []]
    if api == "chat":
        return [(t.get("function") or {}).get("name", "") for t in tools]
    return [t.get("name") or t.get("type", "") for t in tools]


def is_main(api: str, path: str, body: Any) -> bool:
    """A conversation's request offers tools; titles, classifiers and counts do not."""
    if path.endswith("/count_tokens") or path.endswith(":countTokens"):
        return False
    return api != "other" and bool(tool_names(api, body))


def wants_stream(api: str, path: str, query: dict[str, list[str]], body: Any) -> bool:
    if api == "gemini":
        return ":streamGenerateContent" in path
    return isinstance(body, dict) and bool(body.get("stream"))


def wants_json(api: str, body: Any) -> bool:
    """Whether a side request asks for a JSON answer."""
    if not isinstance(body, dict):
        return False
    if api == "gemini":
        config = body.get("generationConfig") or {}
        return "json" in str(config.get("responseMimeType", "")) or "responseJsonSchema" in config
    if api == "chat" and body.get("response_format"):
        return "json" in json.dumps(body["response_format"])
    if api == "responses":
        return "json" in json.dumps((body.get("text") or {}).get("format") or "")
    return "JSON" in json.dumps(body.get("system", "")) + json.dumps(body.get("messages", ""))


def side_text(api: str, body: Any) -> str:
    return json.dumps(SIDE_JSON) if wants_json(api, body) else "Scripted task"


def count_reply(api: str) -> dict[str, Any]:
    return {"totalTokens": 0} if api == "gemini" else {"input_tokens": 0}


def error_body(api: str, turn: Turn) -> tuple[int, dict[str, Any]]:
    """The vendor's error body for an error turn."""
    status, message = turn.status, turn.text or f"scripted error {turn.status}"
    if api == "anthropic":
        message = turn.text or ("Overloaded" if status == 529 else message)
        kind = turn.error_type or ANTHROPIC_ERRORS.get(status, "api_error")
        return status, {"type": "error", "error": {"type": kind, "message": message}}
    if api == "gemini":
        kind = turn.error_type or GOOGLE_STATUS.get(status, "UNKNOWN")
        return status, {"error": {"code": status, "message": message, "status": kind}}
    kind = turn.error_type or ("server_error" if status >= 500 else "invalid_request_error")
    return status, {"error": {"message": message, "type": kind, "param": None, "code": kind}}


def shell_call(api: str, body: Any, command: str) -> tuple[str, dict[str, Any]]:
    """The shell tool this request offers, and its arguments for `command`."""
    offered = tool_names(api, body)
    for name, args in SHELL_ARGS.items():
        if name in offered:
            return name, args(command)
    raise LookupError(f"no shell tool among {offered}")


def _halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [part for part in (text[:middle], text[middle:]) if part]


def sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


# Anthropic Messages.
def _anthropic_usage(turn: Turn, output: int) -> dict[str, Any]:
    return {"input_tokens": turn.usage.input, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": turn.usage.cached, "output_tokens": output,
            "service_tier": "standard"}


def _anthropic_blocks(body: Any, turn: Turn, server: ModelServer) -> list[dict[str, Any]]:
    if turn.kind == "tool":
        name, args = shell_call("anthropic", body, turn.command)
        return [{"type": "tool_use", "id": server.new_id("toolu_"), "name": name, "input": args}]
    return [{"type": "text", "text": turn.text}]


def anthropic_message(body: Any, turn: Turn, server: ModelServer) -> dict[str, Any]:
    content = _anthropic_blocks(body, turn, server)
    return {"id": server.new_id("msg_"), "type": "message", "role": "assistant",
            "model": body.get("model", server.model), "content": content,
            "stop_reason": "tool_use" if turn.kind == "tool" else "end_turn",
            "stop_sequence": None, "usage": _anthropic_usage(turn, turn.usage.output)}


def anthropic_events(body: Any, turn: Turn, server: ModelServer) -> Iterator[bytes]:
    message = anthropic_message(body, turn, server)
    start = dict(message, content=[], stop_reason=None, usage=_anthropic_usage(turn, 1))
    yield sse({"type": "message_start", "message": start}, "message_start")
    yield sse({"type": "ping"}, "ping")
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opening, deltas = {"type": "text", "text": ""}, [
                {"type": "text_delta", "text": part} for part in _halves(block["text"])]
        else:
            opening = dict(block, input={})
            arguments = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": part}
                      for part in ["", *_halves(arguments)]]
        yield sse({"type": "content_block_start", "index": index, "content_block": opening},
                  "content_block_start")
        for delta in deltas:
            yield sse({"type": "content_block_delta", "index": index, "delta": delta},
                      "content_block_delta")
        yield sse({"type": "content_block_stop", "index": index}, "content_block_stop")
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    yield sse({"type": "message_delta", "delta": delta, "usage": message["usage"]},
              "message_delta")
    yield sse({"type": "message_stop"}, "message_stop")


# OpenAI Responses.
def _responses_usage(turn: Turn) -> dict[str, Any]:
    u = turn.usage
    return {"input_tokens": u.input + u.cached, "input_tokens_details": {"cached_tokens": u.cached},
            "output_tokens": u.output, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": u.input + u.cached + u.output}


def responses_events(body: Any, turn: Turn, server: ModelServer) -> Iterator[bytes]:
    seq = iter(range(10_000))
    response = {"id": server.new_id("resp_"), "object": "response", "created_at": int(time.time()),
                "status": "in_progress", "model": body.get("model", server.model),
                "output": [], "usage": None, "error": None, "incomplete_details": None}

    def event(kind: str, **fields: Any) -> bytes:
        return sse({"type": kind, "sequence_number": next(seq), **fields}, kind)

    yield event("response.created", response=response)
    yield event("response.in_progress", response=response)
    if turn.kind == "tool":
        name, args = shell_call("responses", body, turn.command)
        arguments = json.dumps(args)
        item = {"id": server.new_id("fc_"), "type": "function_call", "status": "in_progress",
                "call_id": server.new_id("call_"), "name": name, "arguments": ""}
        yield event("response.output_item.added", output_index=0, item=item)
        for part in _halves(arguments):
            yield event("response.function_call_arguments.delta", item_id=item["id"],
                        output_index=0, delta=part)
        yield event("response.function_call_arguments.done", item_id=item["id"],
                    output_index=0, arguments=arguments)
        item = dict(item, status="completed", arguments=arguments)
    else:
        item = {"id": server.new_id("msg_"), "type": "message", "status": "in_progress",
                "role": "assistant", "content": []}
        ids = {"item_id": item["id"], "output_index": 0, "content_index": 0}
        part = {"type": "output_text", "text": "", "annotations": []}
        yield event("response.output_item.added", output_index=0, item=item)
        yield event("response.content_part.added", **ids, part=part)
        for piece in _halves(turn.text):
            yield event("response.output_text.delta", **ids, delta=piece, logprobs=[])
        yield event("response.output_text.done", **ids, text=turn.text, logprobs=[])
        part = dict(part, text=turn.text)
        yield event("response.content_part.done", **ids, part=part)
        item = dict(item, status="completed", content=[part])
    yield event("response.output_item.done", output_index=0, item=item)
    done = dict(response, status="completed", output=[item], usage=_responses_usage(turn))
    yield event("response.completed", response=done)


# Chat Completions.
def _chat_usage(turn: Turn) -> dict[str, Any]:
    u = turn.usage
    return {"prompt_tokens": u.input + u.cached, "completion_tokens": u.output,
            "total_tokens": u.input + u.cached + u.output,
            "prompt_tokens_details": {"cached_tokens": u.cached},
            "completion_tokens_details": {"reasoning_tokens": 0}}


def _chat_message(body: Any, turn: Turn, server: ModelServer) -> dict[str, Any]:
    if turn.kind == "tool":
        name, args = shell_call("chat", body, turn.command)
        call = {"id": server.new_id("call_"), "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"role": "assistant", "content": turn.text}


def chat_completion(body: Any, turn: Turn, server: ModelServer) -> dict[str, Any]:
    message = _chat_message(body, turn, server)
    return {"id": server.new_id("chatcmpl-"), "object": "chat.completion",
            "created": int(time.time()), "model": body.get("model", server.model),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if turn.kind == "tool" else "stop"}],
            "usage": _chat_usage(turn)}


def chat_events(body: Any, turn: Turn, server: ModelServer) -> Iterator[bytes]:
    whole = chat_completion(body, turn, server)
    head = {k: whole[k] for k in ("id", "model", "created")} | {"object": "chat.completion.chunk"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return sse(dict(head, choices=[choice]))

    message = whole["choices"][0]["message"]
    yield chunk({"role": "assistant", "content": ""})
    for index, call in enumerate(message.get("tool_calls") or []):
        opening = {"index": index, "id": call["id"], "type": "function",
                   "function": {"name": call["function"]["name"], "arguments": ""}}
        yield chunk({"tool_calls": [opening]})
        for part in _halves(call["function"]["arguments"]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
    for part in _halves(message.get("content") or ""):
        yield chunk({"content": part})
    yield chunk({}, whole["choices"][0]["finish_reason"])
    if (body.get("stream_options") or {}).get("include_usage"):
        yield sse(dict(head, choices=[], usage=whole["usage"]))
    yield b"data: [DONE]\n\n"


# Gemini.
def _gemini_usage(turn: Turn) -> dict[str, Any]:
    u = turn.usage
    usage = {"promptTokenCount": u.input + u.cached, "candidatesTokenCount": u.output,
             "totalTokenCount": u.input + u.cached + u.output}
    if u.cached:
        usage["cachedContentTokenCount"] = u.cached
    return usage


def _gemini_parts(body: Any, turn: Turn) -> list[dict[str, Any]]:
    if turn.kind == "tool":
        name, args = shell_call("gemini", body, turn.command)
        return [{"functionCall": {"name": name, "args": args}}]
    return [{"text": turn.text}]


def gemini_response(body: Any, turn: Turn, server: ModelServer,
                    parts: list[dict[str, Any]] | None = None, last: bool = True) -> dict:
    candidate: dict[str, Any] = {"content": {"role": "model",
                                             "parts": parts or _gemini_parts(body, turn)},
                                 "index": 0}
    usage = _gemini_usage(turn)
    if last:
        candidate["finishReason"] = "STOP"
    else:
        usage = {k: v for k, v in usage.items() if k != "candidatesTokenCount"}
        usage["totalTokenCount"] = usage["promptTokenCount"]
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": server.model,
            "responseId": server.new_id("resp")}


def gemini_events(body: Any, turn: Turn, server: ModelServer) -> Iterator[bytes]:
    if turn.kind == "tool":
        yield _gemini_sse(gemini_response(body, turn, server))
        return
    pieces = _halves(turn.text) or [""]
    for n, piece in enumerate(pieces):
        last = n == len(pieces) - 1
        yield _gemini_sse(gemini_response(body, turn, server, [{"text": piece}], last))


def _gemini_sse(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\r\n\r\n".encode()


def whole_reply(api: str, body: Any, turn: Turn, server: ModelServer) -> dict[str, Any]:
    if api == "anthropic":
        return anthropic_message(body, turn, server)
    if api == "chat":
        return chat_completion(body, turn, server)
    if api == "gemini":
        return gemini_response(body, turn, server)
    chunks = list(responses_events(body, turn, server))
    return json.loads(chunks[-1].decode().split("data: ", 1)[1])["response"]


def events(api: str, body: Any, turn: Turn, server: ModelServer) -> Iterator[bytes]:
    streams = {"anthropic": anthropic_events, "responses": responses_events,
               "chat": chat_events, "gemini": gemini_events}
    return streams[api](body, turn, server)


def tool_outputs(api: str, body: Any) -> list[str]:
    """The tool results a request sends back to the model, as text."""
    if not isinstance(body, dict):
        return []
    if api == "anthropic":
        return [json.dumps(block.get("content")) for m in body.get("messages") or []
                if isinstance(m.get("content"), list)
                for block in m["content"] if block.get("type") == "tool_result"]
    if api == "responses":
        return [json.dumps(item.get("output")) for item in body.get("input") or []
                if item.get("type") in ("function_call_output", "custom_tool_call_output")]
    if api == "chat":
        return [json.dumps(m.get("content")) for m in body.get("messages") or []
                if m.get("role") == "tool"]
    return [json.dumps(part["functionResponse"]) for c in body.get("contents") or []
            for part in c.get("parts") or [] if "functionResponse" in part]
