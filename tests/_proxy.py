"""A TCP proxy on loopback in front of a Unix socket, which a test cuts: a partition
between one host and its PostgreSQL (tests/test_hosts.py).

Cut, it relays nothing either way and answers no new connection, but closes nothing:
to its clients the database has gone silent, as behind a dropped link. Healed, it ends
every connection it held (as a link that comes back after the server gave up on its
sessions) and relays new ones again.
"""

from __future__ import annotations

import contextlib
import socket
import threading

__all__ = ["Partition"]


class Partition:
    """Listens on 127.0.0.1 (`port`) and relays each connection to `unix_path`."""

    def __init__(self, unix_path: str) -> None:
        self._unix_path = unix_path
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._open = threading.Event()
        self._open.set()
        self._lock = threading.Lock()
        self._held: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def url(self, database: str, user: str = "zeus") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def cut(self) -> None:
        """Relay nothing from now on, and close nothing."""
        self._open.clear()

    def heal(self) -> None:
        """End every connection held, and relay again."""
        with self._lock:
            held, self._held = self._held, []
        for s in held:
            with contextlib.suppress(OSError):
                s.close()
        self._open.set()

    def close(self) -> None:
        self._closed = True
        self.heal()
        with contextlib.suppress(OSError):
            self._listener.close()

    def _accept(self) -> None:  # the proxy-accept thread
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._held.append(client)
            if not self._open.is_set():
                continue  # held unanswered: the database is silent
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                server.connect(self._unix_path)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._held.append(server)
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._relay, args=(src, dst), daemon=True,
                                 name="proxy-relay").start()

    def _relay(self, src: socket.socket, dst: socket.socket) -> None:  # a relay thread
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                break
            if not data:
                break
            if not self._open.is_set():
                return  # cut: what came is dropped, and the ends stay open
            try:
                dst.sendall(data)
            except OSError:
                break
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
