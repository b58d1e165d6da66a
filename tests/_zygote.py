"""Test processes forked from one that has already imported Zeus: `forked(...)`.

The crash tests start dozens of host processes (`tests._crash.Host`), and other tests
start `zeus` commands; each was a fresh interpreter that spent most of its first second
importing Zeus before it did anything. This module's server (`python -m tests._zygote
ADDRESS`, started once per test session, single-threaded) imports those modules once,
then forks a process per request and runs the asked module as `python -m` would
(`runpy`, as `__main__`): each is a process of its own, with its own pid, pipes,
environment, working directory and `__main__`, killed and started again like any
other; only the imports are shared, as they are on disk. `forked` gives a
`subprocess.Popen`-like handle (`pid`, `stdout`, `stderr`, `poll`, `wait`,
`send_signal`, `terminate`, `kill`, `communicate`, `returncode`) and `run` a
`subprocess.run` with its output captured. With ZEUS_TEST_FRESH_HOSTS=1 every one is a
fresh interpreter again.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import io
import json
import os
import runpy
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import IO, Any

__all__ = ["FRESH_ENV", "Forked", "forked", "run"]

ROOT = Path(__file__).resolve().parent.parent
FRESH_ENV = "ZEUS_TEST_FRESH_HOSTS"
# What the forked processes run, imported once here (`supervisor.cli`: the `zeus` command).
PRELOAD = ("tests._durable_host", "tests._reattach_host", "supervisor.cli.main")


# -- the server ---------------------------------------------------------------------------
def _serve(address: str) -> None:
    """Runs in the server's only thread: fork a host per request until stdin closes
    (the test session ended)."""
    for module in PRELOAD:
        importlib.import_module(module)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(address)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the select through wake_w
    hosts: dict[int, socket.socket] = {}  # pid -> the connection its exit status goes to
    print("ready", flush=True)
    while True:
        ready, _, _ = select.select([listener, wake_r, sys.stdin], [], [])
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1):
            return  # the session is over
        if wake_r in ready:
            os.read(wake_r, 4096)
        if listener in ready:
            conn, _ = listener.accept()
            data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 2)
            pid = os.fork()
            if pid == 0:
                _host(json.loads(data), fds, [listener, conn, *hosts.values()],
                      [wake_r, wake_w])
            for fd in fds:
                os.close(fd)
            hosts[pid] = conn
            conn.send(json.dumps({"pid": pid}).encode())
        _reap(hosts)  # after a fork too: a host that ended at once woke nobody


def _reap(hosts: dict[int, socket.socket]) -> None:
    """Each host that ended: its exit status to its connection (as Popen's returncode)."""
    while hosts:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = hosts.pop(pid, None)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.send(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())
            conn.close()


def _host(request: dict[str, Any], fds: list[int], sockets: list[socket.socket],
          pipes: list[int]) -> None:
    """Runs in the forked process: become it (its stdio, environment, directory, argv),
    run its module as `python -m` does, and exit as its interpreter would."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for s in sockets:
            s.close()
        for fd in pipes:
            os.close(fd)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for fd in fds:
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if os.environ.get("PYTHONUNBUFFERED"):
            sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False),
                                          write_through=True)
        sys.path[0] = request["cwd"]  # `python -m`'s first entry: its working directory
        try:
            if request.get("script"):  # `python SCRIPT`: its own directory first on the path
                sys.path[0] = os.path.dirname(os.path.abspath(request["script"]))
                sys.argv = [request["script"], *request["argv"]]
                runpy.run_path(request["script"], run_name="__main__")
            else:
                sys.argv = [request["module"], *request["argv"]]
                sys.modules.pop(request["module"], None)  # as `__main__` alone, as -m does
                runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, int | None):
                print(exc.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
        threading._shutdown()  # type: ignore[attr-defined]  # as the interpreter's exit does
        atexit._run_exitfuncs()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


# -- the test's side ----------------------------------------------------------------------
class Forked:
    """A host forked by the server: what the crash tests use of a `subprocess.Popen`."""

    def __init__(self, conn: socket.socket, pid: int, stdout: IO[str],
                 stderr: IO[str] | None, args: list[str]) -> None:
        self._conn = conn
        self.pid = pid
        self.stdout: IO[str] | None = stdout
        self.stderr: IO[str] | None = stderr
        self.args = args
        self.returncode: int | None = None

    def _status(self, timeout: float | None) -> int | None:
        if self.returncode is None and select.select([self._conn], [], [], timeout)[0]:
            data = self._conn.recv(4096)
            self.returncode = int(json.loads(data)["exit"]) if data else -signal.SIGKILL
            self._conn.close()
        return self.returncode

    def poll(self) -> int | None:
        return self._status(0)

    def __del__(self) -> None:  # as a Popen's, it leaves no socket behind unclosed
        with contextlib.suppress(Exception):
            self._conn.close()

    def wait(self, timeout: float | None = None) -> int:
        code = self._status(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """All the rest of stdout and stderr (until every holder closed them), then the
        exit status, as `Popen.communicate`."""
        out: dict[str, str] = {}

        def drain(name: str, pipe: IO[str] | None) -> None:
            if pipe is not None and not pipe.closed:
                out[name] = pipe.read()
                pipe.close()

        readers = [threading.Thread(target=drain, args=(n, p), daemon=True)
                   for n, p in (("out", self.stdout), ("err", self.stderr))]
        for r in readers:
            r.start()
        for r in readers:
            r.join(timeout)
            if r.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.wait(timeout)
        return out.get("out", ""), out.get("err", "")


_server: list[tuple[subprocess.Popen[str], str]] = []
_server_lock = threading.Lock()


def _address() -> str:
    with _server_lock:
        if not _server:
            address = os.path.join(tempfile.mkdtemp(prefix="zeus-zygote-"), "z.sock")
            server = subprocess.Popen(
                [sys.executable, "-m", "tests._zygote", address], cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            )
            assert server.stdout is not None
            if server.stdout.readline().strip() != "ready":
                raise RuntimeError(f"the host server did not start ({server.wait()})")
            _server.append((server, address))
            atexit.register(_stop)
        return _server[0][1]


def _stop() -> None:
    for server, address in _server:
        assert server.stdin is not None
        server.stdin.close()  # it returns
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(10)
        with contextlib.suppress(OSError):
            os.unlink(address)
            os.rmdir(os.path.dirname(address))


def forked(module: str, argv: list[str], *, cwd: Path | str | None = None,
           env: dict[str, str] | None = None, stderr: bool = True, script: bool = False,
           ) -> Forked | subprocess.Popen[str]:
    """`python -m module *argv` (with `script`, `python module *argv`: a script's path)
    forked by the server, its stdout a pipe (text) and its stderr one too (with
    `stderr=False`, this process's own), stdin /dev/null; or a fresh interpreter with
    ZEUS_TEST_FRESH_HOSTS=1. `env` None: this process's environment."""
    args = [sys.executable, *([] if script else ["-m"]), module, *argv]
    cwd = str(cwd or os.getcwd())
    env = dict(os.environ if env is None else env)
    if os.environ.get(FRESH_ENV) == "1":
        return subprocess.Popen(args, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE if stderr else None, text=True)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe() if stderr else (-1, os.dup(2))
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(_address())
        request = {"module": module, "argv": argv, "cwd": cwd, "env": env,
                   "script": os.path.join(cwd, module) if script else None}
        socket.send_fds(conn, [json.dumps(request).encode()], [out_w, err_w])
        pid = int(json.loads(conn.recv(4096))["pid"])
    except BaseException:
        conn.close()
        for fd in (out_r, err_r):
            if fd >= 0:
                os.close(fd)
        raise
    finally:
        os.close(out_w)
        os.close(err_w)
    return Forked(conn, pid, os.fdopen(out_r, "r"),
                  os.fdopen(err_r, "r") if err_r >= 0 else None, args)


def run(module: str, argv: list[str], *, cwd: Path | str | None = None,
        env: dict[str, str] | None = None, timeout: float | None = None,
        script: bool = False) -> subprocess.CompletedProcess[str]:
    """`subprocess.run([python, -m, module, *argv], capture_output=True, text=True)`
    (with `script`, `[python, module, *argv]`), the process forked by the server."""
    process = forked(module, argv, cwd=cwd, env=env, script=script)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    assert process.returncode is not None
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


if __name__ == "__main__":
    _serve(sys.argv[1])
