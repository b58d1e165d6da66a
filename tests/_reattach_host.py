"""A host process for the reattach tests: `python -m tests._reattach_host PLAN.json`.

The plan names the store, the grace, and either `start` (a list of attempts:
`{"attempt_id", "work", "gates", "session_key"?}`, `work` one of `WORKS` below, which
travel by value as this is `__main__`) or `reattach` (attempt ids of workers waiting
for the store, picked up with a spec rebuilt here). The host prints one JSON line per
message a child sends (`{"attempt_id", "kind", ...}`), `{"ready": true}` once it has
started or picked up everything, and waits to be SIGKILLed.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import IO, Any

from actors import Brief, Context
from actors.backends import ChildSpec, ProcessBackend
from actors.backends.process.reattach import find_waiting, place_for_store
from actors.clock import SystemClock
from actors.protocol import DelegateRequest, Finished, Heartbeat, Partial, Spawned


def steps(brief: Brief, ctx: Context) -> str:
    """Report partial i once the test made the gate file `go-i`, then `made-i`; return."""
    import os
    import time

    for i in range(4):
        while not os.path.exists(f"{brief.scope}/go-{i}"):
            time.sleep(0.002)
        ctx.partial(i)
        ctx.charge(calls=1)
        open(f"{brief.scope}/made-{i}", "w").close()
    return "done"


def family(brief: Brief, ctx: Context) -> None:
    """Start a grandchild, one in a session of its own (it called setsid), and one that
    ignores SIGTERM; then hang."""
    import subprocess

    kept = subprocess.Popen(["sleep", "1000"])
    escaped = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    stubborn = subprocess.Popen(["sh", "-c", "trap '' TERM; exec sleep 1000"])
    ctx.partial([kept.pid, escaped.pid, stubborn.pid])
    ctx.sleep(1000)


def remember(brief: Brief, ctx: Context) -> int:
    """Keep the scope in the session; the worker's pid."""
    import os

    ctx.session["seen"] = [*ctx.session.get("seen", []), brief.scope]
    return os.getpid()


def orchestrate(brief: Brief, ctx: Context) -> list[str]:
    """Two delegations, one after the other; their outputs."""
    from actors import Brief

    first = ctx.delegate(Brief(agent="hermes", scope="first"))
    second = ctx.delegate(Brief(agent="hermes", scope="second"))
    return [first.output, second.output]


def mailbox(brief: Brief, ctx: Context) -> object:
    """The first message its owner sends."""
    ctx.partial("listening")
    return ctx.receive(timeout=None)


WORKS = {"steps": steps, "family": family, "remember": remember, "orchestrate": orchestrate,
         "mailbox": mailbox}  # fmt: skip


def spec(attempt_id: str, work: Any = None, scope: str = "", **fields: Any) -> ChildSpec:
    clock = SystemClock()
    return ChildSpec(
        agent="apollo", delegation_id=attempt_id.rsplit("-", 1)[0], attempt=1,
        attempt_id=attempt_id, brief=Brief(agent="apollo", scope=scope or "-"),
        deadline=clock.now() + 120.0, clock=clock, work=work, term_s=0.5, **fields,
    )  # fmt: skip


_print_lock = threading.Lock()
_out: list[IO[str]] = []


def say(line: dict[str, Any]) -> None:
    with _print_lock:
        print(json.dumps(line), file=_out[0], flush=True)


def keep_stdout() -> None:
    """This process's output goes on to the test; its children (the fork server, the
    workers) get /dev/null, so that the test's read ends when this process does."""
    _out.append(os.fdopen(os.dup(1), "w"))  # not inherited
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def printer(attempt_id: str) -> Any:
    def send(message: object) -> None:
        line: dict[str, Any] = {"attempt_id": attempt_id, "kind": type(message).__name__}
        if isinstance(message, Spawned):
            line["pid"], line["pid_start_time"] = message.pid, message.pid_start_time
        elif isinstance(message, Partial):
            line["item"] = message.item
        elif isinstance(message, Heartbeat):
            line["liveness"] = message.liveness
        elif isinstance(message, DelegateRequest):
            line["ordinal"] = message.ordinal  # never answered here
        elif isinstance(message, Finished):
            line["outcome"], line["value"] = message.outcome.value, message.value
        say(line)

    return send


def main() -> None:
    keep_stdout()
    with open(sys.argv[1], encoding="utf-8") as f:
        plan = json.load(f)
    place = place_for_store(plan["store"], plan["grace_s"])
    backend = ProcessBackend(reattach=place, session_max=8)  # idle ones evict no other
    for attempt in plan.get("start", []):
        backend.start(spec(attempt["attempt_id"], WORKS[attempt["work"]], attempt["gates"],
                           session_key=attempt.get("session_key"),
                           heartbeat_interval_s=attempt.get("heartbeat_interval_s", 60.0)),
                      printer(attempt["attempt_id"]))  # fmt: skip
    for attempt_id in plan.get("reattach", []):
        waiting = next(w for w in find_waiting(place) if w.attempt_id == attempt_id)
        child = backend.reattach(waiting, spec(attempt_id), printer(attempt_id))
        say({"attempt_id": attempt_id, "kind": "reattached", "pid": child and child.pid})
    say({"ready": True})
    while True:  # until SIGKILLed
        time.sleep(60)


if __name__ == "__main__":
    main()
