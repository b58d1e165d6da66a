"""The network namespace the real CLIs run in: only loopback, so nothing they send can
leave the machine. `in_namespace()` says whether this process was started in one (by
`command()`), and `check_isolated()` proves it from /proc/net/dev, which is per namespace."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

MARKER = "ZEUS_OFFLINE_NETNS"  # set in the environment of a process started by command()
REQUIRE = "ZEUS_REQUIRE_REAL_CLIS"  # CI: what would be skipped fails instead


class NotIsolated(RuntimeError):
    """This process can reach a network device other than loopback."""


def devices() -> list[str]:
    """The network devices this process's namespace holds."""
    lines = Path("/proc/net/dev").read_text(encoding="ascii").splitlines()[2:]
    return [line.split(":", 1)[0].strip() for line in lines if ":" in line]


def check_isolated() -> None:
    """Raise NotIsolated unless loopback is the only device here."""
    others = [name for name in devices() if name != "lo"]
    if others or os.environ.get(MARKER) != "1":
        raise NotIsolated(f"refusing to run the real CLIs: network devices {others} are "
                          f"here (or {MARKER} is unset); run them under unshare -n")


def in_namespace() -> bool:
    return os.environ.get(MARKER) == "1"


def unavailable() -> str | None:
    """Why no namespace can be made here, or None."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "`unshare` and `ip` (util-linux, iproute2) are not installed"
    if os.geteuid() != 0:
        return "making a network namespace needs root"
    return None


def command(argv: list[str]) -> list[str]:
    """`argv` run in a new network namespace with only loopback, brought up."""
    script = 'ip link set lo up && exec "$@"'
    return ["unshare", "--net", "--", "sh", "-c", script, "sh", *argv]


def environment() -> dict[str, str]:
    """The environment for command(): this one, marked."""
    return os.environ | {MARKER: "1"}
