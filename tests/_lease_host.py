"""A host process for the lease tests: `python -m tests._lease_host PLAN.json`.

The plan names `lease_s`, the attempt's `grace_s` and `term_s`, its `work` (one of
`WORKS` below, which travel by value as this is `__main__`) and, optionally, a `store`
(its children directory is where the worker waits, for `orphan_grace_s`, should this
host die). The host holds a lease it renews every `lease_s / 3` (`extend_lease`), starts
the one attempt, and prints JSON lines: `{"lease": path}`, `{"pid": worker}`, each
partial result as `{"partial": item}`; then it renews until it is SIGKILLed (or stopped).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from actors import Brief, Context
from actors.backends import ChildSpec, ProcessBackend
from actors.backends.process.reattach import place_for_store
from actors.clock import SystemClock
from actors.protocol import Partial, Spawned
from tests._reattach_host import keep_stdout, say


def family(brief: Brief, ctx: Context) -> None:
    """Start a grandchild in its group and one in a session of its own, report their pids
    and its own, then run on, deaf to the cancel."""
    import os
    import subprocess
    import time

    kept = subprocess.Popen(["sleep", "1000"])
    escaped = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    ctx.partial([os.getpid(), kept.pid, escaped.pid])
    while True:
        time.sleep(0.05)


def patient(brief: Brief, ctx: Context) -> str:
    """Report, then wait until cancelled."""
    ctx.partial("running")
    ctx.sleep(1e9)
    return "never"


WORKS = {"family": family, "patient": patient}


def spec(plan: dict[str, Any]) -> ChildSpec:
    clock = SystemClock()
    return ChildSpec(
        agent="apollo", delegation_id="apollo-1", attempt=1, attempt_id="apollo-1-a1",
        brief=Brief(agent="apollo", scope="-"), deadline=clock.now() + 120.0, clock=clock,
        work=WORKS[plan["work"]], grace_s=plan["grace_s"], term_s=plan["term_s"],
        heartbeat_interval_s=60.0,
    )  # fmt: skip


def send(message: object) -> None:
    if isinstance(message, Spawned):
        say({"pid": message.pid})
    elif isinstance(message, Partial):
        say({"partial": message.item})


def main() -> None:
    keep_stdout()
    with open(sys.argv[1], encoding="utf-8") as f:
        plan = json.load(f)
    store = plan.get("store")
    place = place_for_store(store, plan["orphan_grace_s"]) if store else None
    backend = ProcessBackend(reattach=place)
    lease_s = plan["lease_s"]
    backend.extend_lease(time.monotonic() + lease_s)

    def renew() -> None:  # the host's renewals: every lease_s / 3
        while True:
            time.sleep(lease_s / 3)
            backend.extend_lease(time.monotonic() + lease_s)

    threading.Thread(target=renew, daemon=True).start()
    say({"lease": backend.lease_path})
    backend.start(spec(plan), send)
    while True:  # until SIGKILLed
        time.sleep(60)


if __name__ == "__main__":
    main()
