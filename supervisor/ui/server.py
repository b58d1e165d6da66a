"""Serving the app: uvicorn on a socket bound and listening here, so the URL is known
(and connections queue) before uvicorn starts.

`serve` runs in the calling thread until Ctrl-C or SIGTERM. With `any_port`,
a port that is taken gives way to a free one.
"""

from __future__ import annotations

import socket

import uvicorn
from starlette.applications import Starlette

__all__ = ["bind", "serve", "url_of"]


def bind(host: str, port: int, *, any_port: bool = False) -> socket.socket:
    """A listening socket on (host, port); `OSError` when it cannot be had."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        if not any_port or port == 0:
            sock.close()
            raise
        sock.bind((host, 0))
    sock.listen(128)
    return sock


def url_of(sock: socket.socket, token: str | None = None) -> str:
    """The page's address on `sock` (with `?token=` when there is one)."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


def serve(app: Starlette, sock: socket.socket) -> None:
    """Serve `app` on `sock` until Ctrl-C or SIGTERM."""
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])
