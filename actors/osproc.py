"""Process groups, exit codes and start times: the small OS facts the process backend needs."""

from __future__ import annotations

import contextlib
import os
import signal

__all__ = ["describe_exit", "process_start_time", "signal_group"]


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


def process_start_time(pid: int) -> float | None:
    """When `pid` started, in seconds since the epoch (as psutil's `create_time()`), or None.

    A journal names a child by (pid, start time), so that a sweeper after a
    supervisor crash never signals a process that merely reused the pid.
    Linux only (`/proc`); None elsewhere or when the process is gone.
    """
    global _boot_time
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        if _boot_time is None:
            with open("/proc/stat", "rb") as f:
                for line in f:
                    if line.startswith(b"btime"):
                        _boot_time = float(line.split()[1])
                        break
    except OSError:
        return None
    if _boot_time is None:
        return None
    # Field 22 (starttime, in clock ticks since boot); the name in field 2 may hold spaces.
    fields = stat.rsplit(b")", 1)[1].split()
    return _boot_time + int(fields[19]) / os.sysconf("SC_CLK_TCK")
