"""A scripted model server for the real agent CLIs: the Anthropic Messages, OpenAI Responses
and Chat Completions, and Gemini APIs, streamed as the vendors stream them.

    with ModelServer([tool_call("echo hi"), final("done")]) as server:
        ...  # point a CLI at server.url (see clis.py)
        server.main_requests()[1].body   # what the CLI sent back after the tool ran

The main requests (those of the conversation) consume the script's turns in order; side
requests (titles, classifiers, token counts, quota probes) get a short answer, zero usage
and no turn. `Usage.input` is the uncached input: each API reports it its own way (Anthropic
apart from the cache reads, the others with them included).
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.real_clis import wire

__all__ = [
    "ModelServer",
    "Request",
    "Turn",
    "Usage",
    "api_error",
    "final",
    "hang",
    "tool_call",
]

@dataclass(frozen=True)
class Usage:
    """The tokens one reply reports: uncached input, cache reads, output."""

    input: int
    cached: int
    output: int

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input + other.input, self.cached + other.cached,
                     self.output + other.output)


ZERO = Usage(0, 0, 0)
_distinct = itertools.count()


def _next_usage() -> Usage:
    n = next(_distinct) % 50
    return Usage(input=1200 + 37 * n, cached=300 + 11 * n, output=40 + 3 * n)


@dataclass
class Turn:
    """One scripted reply: `kind` is tool, text, hang or error."""

    kind: str
    text: str = ""
    command: str = ""
    usage: Usage = field(default_factory=_next_usage)
    delay: float = 0.0  # seconds before the reply starts (a slow model)
    midstream: bool = False  # a hang after the stream has begun
    status: int = 200
    error_type: str = ""
    times: int | None = 1  # main requests it answers; None: every one from then on


def tool_call(command: str, *, usage: Usage | None = None, delay: float = 0.0) -> Turn:
    """A call of the request's shell tool running `command`."""
    return Turn("tool", command=command, usage=usage or _next_usage(), delay=delay)


def final(text: str, *, usage: Usage | None = None, delay: float = 0.0) -> Turn:
    """A final text reply."""
    return Turn("text", text=text, usage=usage or _next_usage(), delay=delay)


def hang(*, midstream: bool = False) -> Turn:
    """Accept the request and send nothing (or stall after the stream's start) until close."""
    return Turn("hang", text="Working on it.", midstream=midstream, usage=_next_usage(),
                times=None)


def api_error(status: int = 529, error_type: str = "", *, times: int | None = None,
              message: str = "") -> Turn:
    """An HTTP error with the vendor's error body; by default for every request from then on."""
    return Turn("error", status=status, error_type=error_type, text=message, usage=ZERO,
                times=times)


@dataclass
class Request:
    """One request the server received, and how it was answered."""

    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    api: str
    main: bool
    turn: int | None = None  # index in the script of the turn that answered it
    headers: dict[str, str] = field(default_factory=dict)
    at: float = field(default_factory=time.monotonic)  # when it came


class ModelServer:
    """The server, on 127.0.0.1 and a free port, serving in a thread while in `with`."""

    def __init__(self, script: list[Turn], *, model: str = "scripted") -> None:
        self.script = list(script)
        self.model = model
        self.requests: list[Request] = []
        self._lock = threading.Condition()
        self._next = 0  # index of the next turn
        self._used = 0  # main requests the current turn has answered
        self.closed = threading.Event()
        self._ids = itertools.count(1)
        self._httpd = _Quiet(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> ModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release every hanging reply, stop serving, free the port."""
        self.closed.set()
        with self._lock:
            self._lock.notify_all()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(10)

    # What tests look at.
    def main_requests(self) -> list[Request]:
        return [r for r in self.requests if r.main]

    def side_requests(self) -> list[Request]:
        return [r for r in self.requests if not r.main]

    def answered(self) -> list[Turn]:
        """The turn that answered each main request, in order."""
        return [self.script[r.turn] for r in self.main_requests() if r.turn is not None]

    def usage_sent(self) -> Usage:
        """The usage of every reply sent whole (tool calls and texts)."""
        total = ZERO
        for turn in self.answered():
            if turn.kind in ("tool", "text"):
                total += turn.usage
        return total

    def wait_for(self, predicate: Any, timeout: float = 30.0) -> bool:
        """Wait until `predicate(self.requests)` holds; False if the timeout passed first."""
        with self._lock:
            return self._lock.wait_for(lambda: predicate(self.requests), timeout)

    # Internals.
    def new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):024d}"

    def record(self, request: Request) -> Turn | None:
        """Record `request`; a main one takes the script's next turn (None when spent)."""
        with self._lock:
            turn = None
            if request.main and self._next < len(self.script):
                request.turn = self._next
                turn = self.script[self._next]
                self._used += 1
                if turn.times is not None and self._used >= turn.times:
                    self._next, self._used = self._next + 1, 0
            self.requests.append(request)
            self._lock.notify_all()
            return turn


class _Quiet(ThreadingHTTPServer):
    """The server, silent about a client that hung up (a CLI Zeus stopped mid-request)."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            server.requests.append(Request("GET", self.path, {}, None, "other", False))
            self._json(404, {"error": {"message": "not found", "type": "not_found_error"}})

        def do_POST(self) -> None:
            split = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
            api = wire.api_of(split.path)
            request = Request("POST", split.path, parse_qs(split.query), body, api,
                              main=wire.is_main(api, split.path, body),
                              headers={k.lower(): v for k, v in self.headers.items()})
            turn = server.record(request)
            if api == "other":
                self._json(404, {"error": {"message": f"no route {split.path}"}})
                return
            if split.path.endswith(("/count_tokens", ":countTokens")):
                self._json(200, wire.count_reply(api))
                return
            if not request.main:
                turn = Turn("text", text=wire.side_text(api, body), usage=ZERO)
            elif turn is None:
                turn = api_error(500, message="the test's script has no turn left")
            if turn.delay and server.closed.wait(turn.delay):
                return
            if turn.kind == "hang" and not turn.midstream:
                server.closed.wait()
                return
            try:
                if turn.kind == "tool":
                    wire.shell_call(api, body, turn.command)
            except LookupError as e:
                turn = api_error(500, message=str(e))
            if turn.kind == "error":
                self._json(*wire.error_body(api, turn))
                return
            if not wire.wants_stream(api, split.path, request.query, body):
                self._json(200, wire.whole_reply(api, body, turn, server))
                return
            self._stream(wire.events(api, body, turn, server), turn)

        def _json(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status >= 400:
                self.send_header("x-should-retry", "true" if status >= 500 else "false")
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, chunks: Iterator[bytes], turn: Turn) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                for chunk in chunks:
                    self.wfile.write(chunk)
                    self.wfile.flush()
                    if turn.kind == "hang":  # stall after the stream's first event
                        server.closed.wait()
                        return
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler
