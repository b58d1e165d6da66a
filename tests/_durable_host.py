"""A host process for the crash tests: `python -m tests._durable_host STORE PLAN.json`.

The plan names the routing (agents as `tests._durable_agents` entrypoints) and the
briefs, each with its key. The host dispatches them on the store, prints one JSON line
`{"recovered": ...}` once Zeus has started, then waits for every summary and prints
one JSON line per summary (with `one_by_one`, each brief is dispatched once the one
before settled); with `hold`, it then stays up; with `stall_at_partial`, Zeus's thread
stops for good at that partial result (with `stall_at_event`, at the first event of that
name). A test SIGKILLs it, or lets
it finish. With `wait_for`, it dispatches once that file exists (hosts started together).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from supervisor import Brief, Routing, Zeus


def main() -> None:
    store, plan_path = sys.argv[1], sys.argv[2]
    with open(plan_path, encoding="utf-8") as f:
        plan = json.load(f)
    routing = Routing.from_dict({"version": 1, "agents": plan["agents"],
                                 "defaults": plan.get("defaults", {}),
                                 "supervisor": plan.get("supervisor", {})})
    log: list[object] = [plan["log"]] if plan.get("log") else []
    if plan.get("stall_at_partial"):  # Zeus's thread stops there: nothing after it is read
        log.append(stall_at(plan["stall_at_partial"]))
    if plan.get("stall_at_event"):  # Zeus's thread stops at the first such event
        log.append(stall_at_event(plan["stall_at_event"]))
    with Zeus.start(routing, store=store, log=log or None) as zeus:
        print(json.dumps({"recovered": zeus.recovered.model_dump(mode="json")}), flush=True)
        if plan.get("wait_for"):  # several hosts dispatch together (a benchmark's start)
            while not os.path.exists(plan["wait_for"]):
                time.sleep(0.005)
        if plan.get("one_by_one"):  # each after the last settled (a session's briefs)
            handles = (zeus.dispatch(Brief.model_validate(b["brief"]), key=b["key"])
                       for b in plan["briefs"])
        else:
            handles = iter([zeus.dispatch(Brief.model_validate(b["brief"]), key=b["key"])
                            for b in plan["briefs"]])
        for handle in handles:
            summary = handle.result()
            print(json.dumps({"summary": summary.model_dump(mode="json")}), flush=True)
        if plan.get("hold"):  # stays up, its idle workers with it, until the test kills it
            print(json.dumps({"holding": True}), flush=True)
            threading.Event().wait()


def stall_at(item: str) -> Callable[[dict[str, Any]], None]:
    """A journal sink (it runs in Zeus's thread) that holds that thread for good once a
    partial result `item` is reported: what the children send next is never handled."""

    def sink(event: dict[str, Any]) -> None:
        if event.get("event") == "attempt.partial" and event.get("item") == item:
            print(json.dumps({"stalled": item}), flush=True)
            threading.Event().wait()

    return sink


def stall_at_event(name: str) -> Callable[[dict[str, Any]], None]:
    """A journal sink that holds Zeus's thread for good at the first event `name` (at
    `attempt.spawned`: before the worker's pid is recorded, while its job runs)."""

    def sink(event: dict[str, Any]) -> None:
        if event.get("event") == name:
            print(json.dumps({"stalled": name}), flush=True)
            threading.Event().wait()

    return sink


if __name__ == "__main__":
    main()
