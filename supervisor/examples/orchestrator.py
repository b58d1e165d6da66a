"""athena, the orchestrator: splits a search into one explorer delegation per directory
and merges what comes back.

Inputs (all optional): a path string or a list of them, or a dict with `root` or
`paths`, `agent` (who explores; default `apollo`), `pattern` (default: from the
scope), `max_parts` (default 6; the directories beyond it share the last
part) and `explore` (extra inputs for each explorer, e.g. `{"delay_s": 0.2}`).
No paths: the current directory. Each part is `ctx.delegate()`d in turn;
a part that does not complete leaves its partial results in the findings and a
line in the risks, and the others go on.
"""

from __future__ import annotations

import re
from pathlib import Path

from actors import Brief, Context, DelegationRefused, Report, Status
from supervisor.examples._common import SKIP_DIRS, price, roots_from_inputs
from supervisor.examples.explorer import pattern_for

__all__ = ["orchestrate", "split"]


def split(roots: list[Path], max_parts: int = 6) -> list[list[Path]]:
    """One part per directory: each root's own files, then each subdirectory (whole).

    Parts beyond `max_parts` are merged into the last one, so nothing is dropped.
    """
    parts: list[list[Path]] = []
    for root in roots:
        if root.is_file():
            parts.append([root])
            continue
        entries = sorted(root.iterdir())
        files = [p for p in entries if p.is_file()]
        if files:
            parts.append(files)
        parts.extend(
            [p]
            for p in entries
            if p.is_dir() and p.name not in SKIP_DIRS and not p.name.startswith(".")
        )
    if len(parts) > max_parts >= 1:
        parts[max_parts - 1 :] = [[p for part in parts[max_parts - 1 :] for p in part]]
    return parts


def _label(part: list[Path]) -> str:
    if len(part) == 1:
        return str(part[0])
    parents = {p.parent for p in part}
    return f"{len(part)} files in {parents.pop()}" if len(parents) == 1 else f"{len(part)} paths"


def orchestrate(brief: Brief, ctx: Context) -> Report:
    """Delegate one explorer per directory and merge their findings."""
    roots, opts = roots_from_inputs(brief.inputs)
    pattern = opts.get("pattern") or pattern_for(brief.scope)
    re.compile(pattern)  # a bad regex fails here, once, not in every explorer
    agent = str(opts.get("agent", "apollo"))
    parts = split(roots, int(opts.get("max_parts", 6)))
    # Planning the split is one (small) model call.
    ctx.charge(
        calls=1,
        input_tokens=400 + 20 * len(parts),
        output_tokens=60 * len(parts),
        cost=price(400 + 20 * len(parts), 60 * len(parts), "medium"),
    )
    findings: list[str] = []
    risks: list[str] = []
    statuses: dict[str, str] = {}
    refused: DelegationRefused | None = None
    for index, part in enumerate(parts, 1):
        label = _label(part)
        ctx.heartbeat(f"part {index}/{len(parts)}: {label}")
        sub = Brief(
            agent=agent,
            scope=f"{brief.scope} (in {label})",
            inputs={
                **dict(opts.get("explore") or {}),
                "paths": [str(p) for p in part],
                "pattern": pattern,
            },
            partial_ok=True,
        )
        try:
            summary = ctx.delegate(sub)
        except DelegationRefused as exc:
            refused = exc
            risks.append(f"{label}: not delegated: {exc}")
            continue
        statuses[summary.id] = str(summary.status)
        if summary.status is Status.completed:
            findings.extend(summary.findings)
        else:
            got = [str(item) for item in summary.partial_results]
            findings.extend(got)
            why = f": {summary.error}" if summary.error else ""
            risks.append(
                f"{label}: {summary.id} {summary.status}{why} ({len(got)} partial hit(s) kept)"
            )
    if refused is not None and not statuses:
        raise refused
    merged_in = 200 + 30 * len(findings)
    ctx.charge(
        calls=1, input_tokens=merged_in, output_tokens=150, cost=price(merged_in, 150, "medium")
    )
    complete = sum(s == Status.completed for s in statuses.values())
    return Report(
        output={
            "pattern": pattern,
            "parts": len(parts),
            "completed": complete,
            "delegations": statuses,
        },
        findings=list(dict.fromkeys(findings)),
        validation=[f"{complete} of {len(parts)} part(s) completed"],
        risks=risks,
    )
