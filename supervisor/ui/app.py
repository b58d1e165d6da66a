"""The web app of `zeus ui`: the page and the four endpoints over a `View`, read only.

`GET /` (the page, its CSS and JavaScript inlined: nothing else is fetched),
`GET /api/tree`, `GET /api/delegations/{id}` and `GET /api/events` (Server-Sent
Events: each new journal event, as it is read, and `hosts` when a shared store's
hosts changed). A poll task on the server's event loop reads the source every
`poll_s` and hands new events to each listening stream; everything runs on that
one loop, so the view needs no lock.
Only GET and HEAD exist: nothing here writes the source or signals a process.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Sequence
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from supervisor.journal import Event
from supervisor.ui import payloads
from supervisor.ui.source import Source
from supervisor.ui.view import View

__all__ = ["LOCAL_HOSTS", "create_app"]

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
_QUEUE = 10_000  # events a slow stream may fall behind before it is told to start over


class _Hub:
    """The listening streams, one queue each; the poll task publishes to all."""

    def __init__(self) -> None:
        self._queues: set[asyncio.Queue[tuple[str, int, Event | None]]] = set()

    def subscribe(self) -> asyncio.Queue[tuple[str, int, Event | None]]:
        queue: asyncio.Queue[tuple[str, int, Event | None]] = asyncio.Queue(_QUEUE)
        self._queues.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[tuple[str, int, Event | None]]) -> None:
        self._queues.discard(queue)

    def publish(self, kind: str, seq: int, event: Event | None) -> None:
        for queue in list(self._queues):
            try:
                queue.put_nowait((kind, seq, event))
            except asyncio.QueueFull:  # it fell behind: it gets one `reset` and is dropped
                self._queues.discard(queue)
                queue.get_nowait()
                queue.put_nowait(("reset", seq, None))


def _page() -> tuple[bytes, str]:
    """The page with its style and script inlined, and the CSP that allows just those."""
    assets = resources.files("supervisor.ui") / "assets"
    html = (assets / "index.html").read_text(encoding="utf-8")
    style = (assets / "style.css").read_text(encoding="utf-8")
    script = (assets / "app.js").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    page = html.replace("/*STYLE*/", style).replace("/*SCRIPT*/", script)
    csp = (
        "default-src 'none'; "
        f"script-src 'sha256-{digest}'; style-src 'unsafe-inline'; "
        "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    )
    return page.encode(), csp


class _Guard:
    """Every HTTP request carries the token (`Authorization: Bearer T` or `?token=T`)
    when there is one; every response says: no sniffing, no framing, no referrer."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self._app = app
        self._token = token.encode() if token else None

    def _allowed(self, scope: Scope) -> bool:
        if self._token is None:
            return True
        header = dict(scope.get("headers", [])).get(b"authorization", b"")
        if header[:7].lower() == b"bearer " and hmac.compare_digest(header[7:], self._token):
            return True
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        return any(hmac.compare_digest(t.encode(), self._token) for t in query.get("token", []))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def send_safe(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *message.get("headers", []),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"cache-control", b"no-store"),
                ]
            await send(message)

        if self._allowed(scope):
            await self._app(scope, receive, send_safe)
            return
        refused = JSONResponse(
            {"error": "this zeus ui needs its token: send `Authorization: Bearer TOKEN`, "
             "or open the page as /?token=TOKEN"},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )
        await refused(scope, receive, send_safe)


def create_app(
    source: Source,
    *,
    token: str | None = None,
    hosts: Sequence[str] | None = LOCAL_HOSTS,
    poll_s: float = 0.05,
) -> Starlette:
    """The app over `source`, read once now and then every `poll_s` while it serves.

    `hosts`: the Host headers answered (a page on another site that resolves its
    name to 127.0.0.1 is refused); None answers any, for a server behind a token.
    """
    view = View(source)
    view.refresh()
    hub = _Hub()
    page, csp = _page()
    trees = payloads.TreeCache()
    # the last body, while nothing is new; made before serving, so the first ask is quick
    cache = {(view.resets, view.seq, view.journal.run.index): trees.body(view, view.journal.run)}

    async def poll() -> None:
        hosts_version = view.hosts_version
        while True:
            events, reset = view.refresh()
            if reset:
                cache.clear()
                hub.publish("reset", view.seq, None)
            for n, event in enumerate(events, view.seq - len(events) + 1):
                hub.publish("journal", n, event)
            if view.hosts_version != hosts_version and not reset:
                hub.publish("hosts", view.seq, None)
            hosts_version = view.hosts_version
            await asyncio.sleep(poll_s)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        task = asyncio.create_task(poll())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            source.close()

    async def index(request: Request) -> Response:
        return HTMLResponse(page, headers={"content-security-policy": csp})

    async def api_tree(request: Request) -> Response:
        raw = request.query_params.get("run")
        run = view.run(int(raw) if raw and raw.isdigit() else None)
        if run is None:
            return _error(404, f"no run {raw} in {source.label} ({len(view.journal.runs)} run(s))")
        key = (view.resets, view.seq, run.index)
        body = cache.get(key)
        if body is None:
            cache.clear()
            body = cache[key] = trees.body(view, run)
        now = json.dumps({"now": time.time(), "hosts": payloads.hosts(view)}).encode()
        return Response(now[:-1] + b", " + body[1:], media_type="application/json")

    async def api_delegation(request: Request) -> Response:
        delegation_id = request.path_params["id"]
        body = payloads.delegation(view, delegation_id)
        if body is None:
            return _error(404, f"no delegation {delegation_id!r} in {source.label}")
        return JSONResponse(body | {"now": time.time(), "hosts": payloads.hosts(view)})

    async def api_events(request: Request) -> Response:
        queue = hub.subscribe()

        async def stream() -> AsyncIterator[dict[str, Any]]:
            try:
                yield {"event": "ready", "id": str(view.seq), "data": json.dumps({"seq": view.seq})}
                while True:
                    kind, seq, event = await queue.get()
                    data = json.dumps(event) if event is not None else json.dumps({"seq": seq})
                    named = {} if kind == "journal" else {"event": kind}  # journal: `message`
                    yield {"id": str(seq), "data": data, **named}
                    if kind == "reset":
                        return
            finally:
                hub.unsubscribe(queue)

        return EventSourceResponse(stream(), ping=15)

    routes = [
        Route("/", index, methods=["GET", "HEAD"]),
        Route("/api/tree", api_tree, methods=["GET", "HEAD"]),
        Route("/api/delegations/{id:path}", api_delegation, methods=["GET", "HEAD"]),
        Route("/api/events", api_events, methods=["GET"]),
    ]
    middleware = [Middleware(_Guard, token=token)]
    if hosts is not None:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=list(hosts)))
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)
