"""Process groups, descendants, exit codes and start times: the OS facts the backends need.

A child (a worker process, a command) makes itself a *child subreaper*
(`become_subreaper`, Linux): a descendant whose parent dies, a double-forked
daemon, is then adopted by the child instead of by init, so it stays below the
child however it left the child's process group (`setsid`, `setpgid`). The
kill ladder signals the group and then every process below the child
(`ProcessTree`), walked from `/proc`, and remembers what it found by pid and
start time, so those it saw are reached even after the child itself has died.

Out of reach: a descendant that was reparented outside the child's tree before
a walk saw it (its subreaper died first, or it was started by a process that
itself made a new subreaper), and anything on a system without `/proc`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any, NoReturn

__all__ = [
    "ProcStat",
    "ProcessTree",
    "become_subreaper",
    "child_gone",
    "confirm_gone",
    "descendants",
    "describe_exit",
    "exit_as",
    "group_empty",
    "has_children",
    "kill_below",
    "kill_descendants",
    "prepare_program",
    "process_running",
    "process_start_time",
    "read_stat",
    "same_start",
    "signal_group",
]

_PR_SET_CHILD_SUBREAPER = 36
# libc's `prctl`, looked up once: a command's `preexec_fn` then runs no `dlopen` between
# fork and exec, where a loader lock held by another thread of the parent would hang it.
_prctl: Any = None


def become_subreaper() -> bool:
    """Make this process adopt its orphaned descendants (Linux); False where it cannot.

    Runs in the child (a worker's main, a command's `preexec_fn`); the setting
    survives `execve`, not `fork`.
    """
    global _prctl
    if not sys.platform.startswith("linux"):
        return False
    try:
        if _prctl is None:
            _prctl = ctypes.CDLL(None, use_errno=True).prctl
        return bool(_prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def prepare_program() -> None:
    """A command's `preexec_fn` (it runs in the forked child, before exec): SIGINT back
    to its default action, and the program made a child subreaper (it survives exec).

    An ignored signal survives exec, and a supervisor started as a background job
    ignores SIGINT; the command must still hear its cooperative cancel. As a
    subreaper, the program adopts what its children orphan (a double-forked
    daemon), so the kill ladder still finds it below the program.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    become_subreaper()


# The last pass over /proc: (monotonic time, ppid -> pids). Killing many children at
# once (a stop, a burst of deadlines) walks once per `_FRESH_S`, not once per child.
_FRESH_S = 0.05
_last_pass: tuple[float, dict[int, list[int]]] = (float("-inf"), {})


def _children_by_parent(max_age_s: float = 0.0) -> dict[int, list[int]]:
    """ppid -> pids of every process in `/proc` (empty where there is no `/proc`),
    from a pass at most `max_age_s` old."""
    global _last_pass
    taken, children = _last_pass
    now = time.monotonic()
    if now - taken <= max_age_s:
        return children
    children = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return children
    for name in names:
        if not name.isdigit():
            continue
        stat = read_stat(name)
        if stat is None:
            continue  # it ended meanwhile
        children.setdefault(stat.ppid, []).append(stat.pid)
    _last_pass = (now, children)
    return children


def descendants(*roots: int, max_age_s: float = 0.0) -> list[int]:
    """Every process below `roots` (the roots excluded), parents before their children.

    One pass over `/proc`, whose cost grows with every process on the machine (none
    without roots), or the last one if it is at most `max_age_s` old.
    """
    if not roots:
        return []
    children = _children_by_parent(max_age_s)
    found: list[int] = []
    seen = set(roots)
    stack = list(roots)
    while stack:
        for pid in children.get(stack.pop(), ()):
            if pid not in seen:
                seen.add(pid)
                found.append(pid)
                stack.append(pid)
    return found


def kill_descendants(sig: int = signal.SIGKILL) -> None:
    """Signal every process below this one (a worker leaving: what its attempts started)."""
    for pid in descendants(os.getpid()):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def kill_below() -> None:
    """SIGKILL to every process below this one, and each of them reaped that is (or, its
    parent reaped, becomes) this process's child: parents come before their children."""
    below = descendants(os.getpid())
    for pid in below:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    for pid in below:
        with contextlib.suppress(ChildProcessError):  # not this process's child
            os.waitpid(pid, 0)


def has_children() -> bool:
    """Whether any process is left below this one; reaps those of its children that died.
    (A descendant whose parent died was adopted here, by a subreaper: it is a child.)"""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def exit_as(returncode: int | None) -> NoReturn:
    """End this process as a child that ended with `returncode` did: dead of the same signal
    (without a core dump), or with the same exit code; no atexit hooks, no thread joined."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    if returncode is not None and returncode < 0:
        sig = -returncode
        with contextlib.suppress(ImportError, ValueError, OSError):
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
            os.kill(os.getpid(), sig)
        returncode = 128 + sig  # a signal whose default action is not to end a process
    os._exit(returncode if returncode is not None and 0 <= returncode < 256 else 1)


class ProcessTree:
    """The processes below one child process, remembered by pid and start time.

    `signal()` walks `/proc` from the child (while it lives) and from every
    descendant seen before that still runs, remembers what it finds, and
    signals all of them; a pid whose start time changed is someone else's and
    is forgotten, never signalled. Used by one thread at a time (the caller's lock).
    """

    __slots__ = ("known", "root")

    def __init__(self, root: int) -> None:
        self.root = root
        self.known: dict[int, float | None] = {}

    def walk(self, *, root_alive: bool = True, max_age_s: float = _FRESH_S) -> None:
        """Remember what runs below the child now (and below what was seen before), from a
        pass over /proc at most `max_age_s` old."""
        roots = [self.root] if root_alive else []
        roots += [pid for pid, started in self.known.items() if self._same(pid, started)]
        for pid in descendants(*roots, max_age_s=max_age_s):
            self.known.setdefault(pid, process_start_time(pid))

    def signal(self, sig: int, *, root_alive: bool = True, max_age_s: float = _FRESH_S) -> int:
        """Send `sig` to every process below the child that can be found; how many got it."""
        self.walk(root_alive=root_alive, max_age_s=max_age_s)
        sent = 0
        for pid, started in list(self.known.items()):
            if not self._same(pid, started):
                del self.known[pid]
                continue
            try:
                os.kill(pid, sig)
                sent += 1
            except ProcessLookupError:
                del self.known[pid]
            except PermissionError:
                pass
        return sent

    @staticmethod
    def _same(pid: int, started: float | None) -> bool:
        now = process_start_time(pid)
        return started is not None and now is not None and same_start(now, started)


def signal_group(pid: int, sig: int, *, or_process: bool = True) -> None:
    """Send `sig` to the process group that `pid` leads, so its descendants get it too.

    A child makes its own group as the first thing it does; until then there is
    no group called `pid`, and with `or_process` the signal goes to the process
    alone. Call it only for a process not yet known to be reaped (after that the
    pid may belong to someone else); `or_process=False` is for sweeping what is
    left of a group whose leader is gone (the group id stays reserved while any
    member lives).
    """
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        if or_process:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
    except PermissionError:
        # The group id now belongs to someone else's processes: not ours to signal.
        pass


def describe_exit(code: int | None, what: str = "child process") -> str:
    """How a process ended, for an error: "child process died of SIGSEGV (exit code -11)"."""
    if code is None:
        return f"{what} ended with an unknown exit code"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"{what} died of {name} (exit code {code})"
    return f"{what} exited with exit code {code}"


_boot_time: float | None = None


@dataclass(frozen=True, slots=True)
class ProcStat:
    """One reading of `/proc/<pid>/stat` (Linux): the fields the backends use."""

    pid: int
    state: str  # field 3: "R" running, "S" asleep, ..., "Z" a zombie, "X" dead
    ppid: int  # field 4
    pgrp: int  # field 5: its process group
    start_ticks: int  # field 22: when it started, in clock ticks since boot

    @property
    def dead(self) -> bool:
        """Whether it has exited: a zombie (its exit status not yet collected) or dead."""
        return self.state in ("Z", "X")

    @property
    def start_time(self) -> float | None:
        """When it started, in seconds since the epoch (as psutil's `create_time()`); None
        when the boot time cannot be read."""
        boot = _boot()
        return None if boot is None else boot + self.start_ticks / os.sysconf("SC_CLK_TCK")


def read_stat(pid: int | str) -> ProcStat | None:
    """`/proc/<pid>/stat`, read once; None when the process is gone (or there is no
    `/proc`). The only reader of that file: every fact about a pid comes from here."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        try:
            data = os.read(fd, 1024)
        finally:
            os.close(fd)
        # The name in field 2 may hold spaces or ")": the fields after its last ")".
        fields = data[data.rindex(b")") + 2 :].split()
        return ProcStat(int(pid), fields[0].decode("ascii", "replace"), int(fields[1]),
                        int(fields[2]), int(fields[19]))
    except (OSError, ValueError, IndexError):
        return None


def _boot() -> float | None:
    """The boot time (epoch seconds), read once from `/proc/stat`."""
    global _boot_time
    if _boot_time is None:
        try:
            with open("/proc/stat", "rb") as f:
                for line in f:
                    if line.startswith(b"btime"):
                        _boot_time = float(line.split()[1])
                        break
        except OSError:
            return None
    return _boot_time


def process_start_time(pid: int) -> float | None:
    """When `pid` started, in seconds since the epoch (as psutil's `create_time()`), or None.

    A journal names a child by (pid, start time), so that a sweeper after a
    supervisor crash never signals a process that merely reused the pid.
    Linux only (`/proc`); None elsewhere or when the process is gone.
    """
    stat = read_stat(pid)
    return None if stat is None else stat.start_time


def same_start(a: float, b: float) -> bool:
    """Whether two readings of a start time (`process_start_time`) name one start.

    The start itself is exact (clock ticks since boot), but its epoch reading adds the
    boot time `/proc/stat` gives in whole seconds, computed from the wall clock: as the
    clock is slewed, the boot time of a long-lived machine crosses a second now and then,
    and a process that read it after that reads every start one second later than one
    that read it before. So one start reads the same, or one second apart, to the tick;
    another process that took over the pid would have to have started to the tick one
    second away from the first, after the pid space wrapped around in between.
    """
    half_tick = 0.5 / os.sysconf("SC_CLK_TCK")
    apart = abs(a - b)
    return apart < half_tick or abs(apart - 1.0) < half_tick


def process_running(pid: int, started: float | None) -> bool | None:
    """Whether the process (pid, start time) still runs: False when the pid is gone, a
    zombie, or reused by another process (its start time differs); None when that cannot
    be told (no start time was recorded, or there is no `/proc`)."""
    stat = read_stat(pid)
    if stat is None:
        if os.path.exists("/proc/self/stat"):
            return False
        return None
    now = stat.start_time
    if now is None:
        return None
    if started is None:
        return None
    if not same_start(now, started):
        return False
    return not stat.dead


def group_empty(pgid: int) -> bool | None:
    """Whether no process is left in process group `pgid`: None when that cannot be told
    (the group id now holds processes this user may not signal: someone else's)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return None
    return False


def child_gone(pid: int | None, started: float | None, pgid: int | None) -> bool:
    """Confirmed: the child process (pid, start time) and its process group are gone.

    False whenever it cannot be confirmed (the child or a member of its group still
    runs, or a fact cannot be read). A child without a pid (a thread child) ran in its
    supervisor's process: the caller knows whether that process is gone.
    """
    if pid is not None and process_running(pid, started) is not False:
        return False
    return pgid is None or group_empty(pgid) is True


# How long a confirmation waits for a child it stopped (or that is dying) to be gone.
CONFIRM_WAIT_S = 5.0


def confirm_gone(pid: int, started: float | None, pgid: int | None, *, kill: bool,
                 wait_s: float = CONFIRM_WAIT_S) -> bool:
    """Whether the process (pid, start time) and the group it leads are confirmed gone
    within `wait_s` of real time. `kill`: a survivor is sent SIGKILL first (the process
    if it is still the one named, then the group it leads, never the caller's own).
    Blocks its caller while it waits (recovery: nothing else runs yet)."""
    if child_gone(pid, started, pgid):
        return True
    if kill:
        if process_running(pid, started):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)  # gone meanwhile, or not ours: confirmation says
        if pgid is not None and pgid == pid and pgid != os.getpgrp():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
    give_up = time.monotonic() + wait_s
    while time.monotonic() < give_up:
        if child_gone(pid, started, pgid):
            return True
        time.sleep(0.01)
    return False
