"""Agents for the crash tests (`tests/test_durable.py`), run in threads or processes of a
host the test kills. Each counts its runs in files under `brief.inputs["dir"]`:

- `<name>.runs`: one line per run, `pid overlap` (overlap 1 when a process of an
  earlier run of the same name was still alive as this one started);
- `<name>.started`: written once the run has charged, so the test knows it is under way;
- it then holds (checking for cancellation) until `release` exists in the folder.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from actors import Brief, Context, Report
from actors.osproc import process_running, process_start_time


def _mark_run(folder: Path, name: str) -> None:
    runs = folder / f"{name}.runs"
    earlier = runs.read_text().split("\n") if runs.exists() else []
    overlap = any(
        process_running(int(pid), float(start)) for pid, start, *_ in
        (line.split() for line in earlier if line.strip()) if int(pid) != os.getpid()
    )
    with runs.open("a") as f:
        f.write(f"{os.getpid()} {process_start_time(os.getpid())} {int(overlap)}\n")


def held(brief: Brief, ctx: Context) -> Any:
    """Charges `calls` (default 1), reports a partial result, then holds until released."""
    inputs = brief.inputs or {}
    folder, name = Path(inputs["dir"]), inputs["name"]
    _mark_run(folder, name)
    for _ in range(int(inputs.get("calls", 1))):
        ctx.charge(calls=1, cost=0.01)
    ctx.partial(f"{name} under way")
    (folder / f"{name}.started").write_text("")
    while not (folder / "release").exists():
        ctx.sleep(0.02)
    return f"{name} done"


def orchestrate(brief: Brief, ctx: Context) -> Any:
    """Delegates `first` (which completes) then `second` (which holds), in that order."""
    inputs = brief.inputs or {}
    folder = inputs["dir"]
    _mark_run(Path(folder), inputs["name"])
    first = ctx.delegate(Brief(agent="quick", scope="first", inputs={"dir": folder,
                                                                     "name": "first"}))
    second = ctx.delegate(Brief(agent="slow", scope="second",
                                inputs={"dir": folder, "name": "second"}))
    return [first.status.value, second.status.value, first.output, second.output]


def quick(brief: Brief, ctx: Context) -> Any:
    inputs = brief.inputs or {}
    _mark_run(Path(inputs["dir"]), inputs["name"])
    ctx.charge(calls=1, cost=0.01)
    return f"{inputs['name']} done"


def flaky(brief: Brief, ctx: Context) -> Any:
    """Charges and reports a partial result; its first run fails as transient."""
    from actors import TransientError

    inputs = brief.inputs or {}
    folder, name = Path(inputs["dir"]), inputs["name"]
    _mark_run(folder, name)
    ctx.charge(calls=1, cost=0.01)
    ctx.partial(f"{name} under way")
    if ctx.attempt == 1:
        raise TransientError("the first attempt fails, so that a retry is scheduled")
    return f"{name} done"


def writer(brief: Brief, ctx: Context) -> Any:
    """A long writer for the reattach tests: charges, reports a partial result, then works
    (its progress moving) until released; writes `<name>.finished` as it returns its pid."""
    inputs = brief.inputs or {}
    folder, name = Path(inputs["dir"]), inputs["name"]
    _mark_run(folder, name)
    ctx.charge(calls=1, cost=0.01)
    ctx.partial(f"{name} under way")
    (folder / f"{name}.started").write_text("")
    beats = 0
    while not (folder / "release").exists():
        ctx.sleep(0.02)
        beats += 1
        if beats % 25 == 0:
            ctx.heartbeat()  # its progress moves on, also while no Zeus runs
    ctx.partial(f"{name} released")
    (folder / f"{name}.finished").write_text("")
    return {"pid": os.getpid(), "name": name}


def spawner(brief: Brief, ctx: Context) -> Any:
    """Starts two grandchildren (one in its group, one that left it with setsid), writes
    their pids to `<name>.grandchildren`, then holds like `writer`."""
    import subprocess
    import sys

    inputs = brief.inputs or {}
    folder, name = Path(inputs["dir"]), inputs["name"]
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    kids = [subprocess.Popen(sleeper), subprocess.Popen(sleeper, start_new_session=True)]
    (folder / f"{name}.grandchildren").write_text(
        "\n".join(f"{k.pid} {process_start_time(k.pid)}" for k in kids))
    return writer(brief, ctx)


def counter(brief: Brief, ctx: Context) -> Any:
    """A stateful performer: counts its calls in `ctx.session` and returns the count."""
    inputs = brief.inputs or {}
    _mark_run(Path(inputs["dir"]), inputs["name"])
    ctx.session["n"] = ctx.session.get("n", 0) + 1
    return {"n": ctx.session["n"], "pid": os.getpid()}


def boss(brief: Brief, ctx: Context) -> Any:
    """Delegates `first` (quick), then waits for `go` in its folder, then delegates
    `second` (a writer, held until released), and returns both outputs."""
    inputs = brief.inputs or {}
    folder = inputs["dir"]
    _mark_run(Path(folder), inputs["name"])
    first = ctx.delegate(Brief(agent="quick", scope="first", inputs={"dir": folder,
                                                                     "name": "first"}))
    (Path(folder) / "boss.waiting").write_text("")
    while not (Path(folder) / "go").exists():
        ctx.sleep(0.02)
    second = ctx.delegate(Brief(agent="slow", scope="second",
                                inputs={"dir": folder, "name": "second"}))
    return [first.status.value, second.status.value, first.output, second.output]


def stopped(brief: Brief, ctx: Context) -> Any:
    """Charges `calls` (default 0), then waits for its Zeus's cancel; once cancelled it
    writes `<name>.cancelled` and stops only after `proceed` exists in its folder."""
    inputs = brief.inputs or {}
    folder, name = Path(inputs["dir"]), inputs["name"]
    _mark_run(folder, name)
    if inputs.get("calls"):
        ctx.charge(calls=int(inputs["calls"]))
    while not ctx.cancelled:
        time.sleep(0.01)
    (folder / f"{name}.cancelled").write_text("")
    while not (folder / "proceed").exists():
        time.sleep(0.01)
    ctx.check()  # raises Cancelled
    return "never"


def charger(brief: Brief, ctx: Context) -> Any:
    """Charges a call and a cent every 20 ms (`pause_s`) until released, counting each
    charge in `<name>.charged` after it was made (the spend it really made, for the test to
    compare), also while no Zeus runs; writes `<name>.started` after its first charge."""
    inputs = brief.inputs or {}
    folder, name = Path(inputs["dir"]), inputs["name"]
    pause_s = float(inputs.get("pause_s", 0.02))
    made = 0
    while not (folder / "release").exists():
        ctx.charge(calls=1, cost=0.01)
        made += 1
        (folder / f"{name}.charged").write_text(str(made))
        if made == 1:
            (folder / f"{name}.started").write_text("")
        ctx.sleep(pause_s)
    return made


def blocks_once(brief: Brief, ctx: Context) -> Any:
    """Charges one call; the first run of a name says it is blocked (a person must look),
    every later one completes."""
    inputs = brief.inputs or {}
    folder, name = Path(inputs["dir"]), inputs["name"]
    _mark_run(folder, name)
    ctx.charge(calls=1, cost=0.01)
    mark = folder / f"{name}.blocked-once"
    if not mark.exists():
        mark.write_text("")
        return Report(blocked=f"{name} needs a person to look at it")
    return f"{name} done"


def answered(brief: Brief, ctx: Context) -> Any:
    """Blocked until a person answers (`zeus resume ... --note`); each run told an answer
    appends what it was told to `<name>.told` (a JSON line: the blocker, the note), then
    waits for `release`."""
    inputs = brief.inputs or {}
    folder, name = Path(inputs["dir"]), inputs["name"]
    if ctx.note is None:
        return Report(blocked="the migration needs a DBA's approval")
    with open(folder / f"{name}.told", "a", encoding="utf-8") as told:
        told.write(json.dumps([ctx.previous_blocker, ctx.note]) + "\n")
    while not (folder / "release").exists():
        ctx.sleep(0.02)
    return Report(output=f"migrated: {ctx.note}")


def stepper(brief: Brief, ctx: Context) -> Any:
    """The hosts' workload (tests/test_hosts_workload.py): `steps` (default 8) steps of
    `step_s` (default 0.3 s), each charged a call and a cent; with `steps` 0, a step
    after another until `release` exists in the folder. Each charge is first noted by a
    line in `<name>.charges` (the spend the child made, whichever host owns it, for the
    test to compare with what was counted); marks its run as `held` does."""
    inputs = brief.inputs or {}
    folder, name = Path(inputs["dir"]), inputs["name"]
    steps, step_s = int(inputs.get("steps", 8)), float(inputs.get("step_s", 0.3))
    _mark_run(folder, name)
    made = 0
    while made < steps if steps else not (folder / "release").exists():
        with open(folder / f"{name}.charges", "a") as noted:
            noted.write(f"{os.getpid()}\n")
        ctx.charge(calls=1, cost=0.01)
        made += 1
        ctx.sleep(step_s)
    return f"{name} done"
