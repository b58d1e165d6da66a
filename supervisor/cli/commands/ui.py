"""`zeus ui SOURCE [--host 127.0.0.1] [--port 8765] [--token T]`: the tree in a browser.

Serves a page over a journal (the file log= writes) or a store, followed live as it
grows: the supervision tree with status marks, deadline bars, progress and
spend against budgets; a page per delegation with each attempt's evidence; a
timeline of every attempt; the timeout tracking table. It binds 127.0.0.1: any
other address needs --token, and every request must then carry it
(`Authorization: Bearer T`, or `?token=T` when a browser opens the page). It
only reads. `zeus demo --ui` and `zeus run ... --ui` start it beside a run.
Needs the `ui` extra. Exit status: 0 when stopped with Ctrl-C, 2 for bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import os
import select
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

from supervisor.cli.commands import EXIT_BAD_INPUT, EXIT_OK
from supervisor.errors import SupervisorError
from supervisor.store.journal import path_or_url

__all__ = ["Beside", "add_parser", "is_local", "run"]

DEFAULT_PORT = 8765
_EXTRA = "pip install 'zeus-supervisor[ui]'"
_START_S = 30.0  # how long `--ui` waits for the page's address


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "ui",
        help="the supervision tree in a browser, live, over a journal",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("source", metavar="SOURCE", type=path_or_url,
                        help="the journal file (log=), or a store (a file or a postgresql:// URL)")
    parser.add_argument("--host", default="127.0.0.1", help="the address to bind (127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"the port ({DEFAULT_PORT}; 0: any free)"
    )
    parser.add_argument("--token", help="the token every request must carry (needed off 127.0.0.1)")
    parser.add_argument("--any-port", action="store_true", help=argparse.SUPPRESS)
    parser.set_defaults(run=run)


def is_local(host: str) -> bool:
    """The address is this machine's loopback: nothing beyond it can connect."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def run(args: argparse.Namespace) -> int:
    token = args.token or None
    if not is_local(args.host) and token is None:
        print(
            f"zeus ui: --host {args.host} would serve the journal beyond this machine to anyone "
            "who can reach it; give --token T (every request must then carry it) or keep "
            "the default 127.0.0.1",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    try:
        from supervisor.ui import open_source
        from supervisor.ui.app import LOCAL_HOSTS, create_app
        from supervisor.ui.server import bind, serve, url_of
    except ImportError as exc:
        print(f"zeus ui: needs the ui extra ({exc.name} is missing): {_EXTRA}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        source = open_source(args.source)
        hosts = (*LOCAL_HOSTS, args.host) if token is None else None
        app = create_app(source, token=token, hosts=hosts)
    except SupervisorError as exc:
        print(f"zeus ui: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(f"zeus ui: cannot read {args.source}: {exc.strerror}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        sock = bind(args.host, args.port, any_port=args.any_port)
    except OSError as exc:
        print(
            f"zeus ui: cannot listen on {args.host}:{args.port}: {exc.strerror}; "
            "give another --port (0: any free one)",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    print(f"zeus ui: {url_of(sock, token)} serves {args.source} (Ctrl-C stops)", flush=True)
    try:
        serve(app, sock)
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    return EXIT_OK


class Beside:
    """`zeus ui` in a child process beside a run (`--ui`): started at once, it follows
    the journal; after the run it keeps serving until Ctrl-C. The run's own
    process only writes the journal, as it does without a page."""

    def __init__(self, log: Path | None, command: str) -> None:
        """Start the page over `log`; `SupervisorError` says why it cannot be."""
        if log is None:
            raise SupervisorError("--ui shows the journal: give --log F too")
        self._command = command
        self._child = subprocess.Popen(
            [sys.executable, "-m", "supervisor.cli", "ui", str(log),
             "--port", str(DEFAULT_PORT), "--any-port"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
            env=os.environ | {"PYTHONUNBUFFERED": "1"},
        )
        assert self._child.stdout is not None
        ready, _, _ = select.select([self._child.stdout], [], [], _START_S)
        line = self._child.stdout.readline() if ready else ""
        if not line.startswith("zeus ui: http"):
            self._stop()
            raise SupervisorError(f"--ui: the page did not start ({line.strip() or 'no address'})")
        self.url = line.split()[2]
        print(f"zeus {command}: the tree in a browser: {self.url}", file=sys.stderr)

    def __enter__(self) -> Beside:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None and self._child.poll() is None:
            print(f"zeus {self._command}: the page stays at {self.url}; Ctrl-C stops it",
                  file=sys.stderr)
            with contextlib.suppress(KeyboardInterrupt):
                self._child.wait()
        self._stop()

    def _stop(self) -> None:
        if self._child.poll() is None:
            self._child.terminate()
            try:
                self._child.wait(5)
            except subprocess.TimeoutExpired:
                self._child.kill()
                self._child.wait()
        if self._child.stdout is not None:
            self._child.stdout.close()
