"""hermes (and aphrodite, demeter, prometheus), the implementer: writes a small change.

The change goes into a scratch directory, never into the project: `inputs` is
that directory (a path string), or a dict with `workdir`, `file` (default
`CHANGES.md`, relative to the workdir), `content` (the whole new text of the
file; default: the file plus a line `- <scope>`) and `delay_s` (seconds to
"think" before writing, cancellable). No workdir: the session's, else a fresh
temporary directory. The write is atomic and idempotent (a retry does not add
the line twice), and it is recorded as a tool call with side effects.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from actors import Brief, Context, Report
from supervisor.examples._common import estimate_tokens, price

__all__ = ["implement"]


def _options(brief: Brief, ctx: Context) -> tuple[Path, Path, str | None, float]:
    raw: Any = brief.inputs
    opts: dict[str, Any] = raw if isinstance(raw, dict) else {}
    if isinstance(raw, str | Path):
        workdir = Path(raw)
    elif opts.get("workdir"):
        workdir = Path(opts["workdir"])
    elif "workdir" in ctx.session:
        workdir = Path(ctx.session["workdir"])
    elif raw is None or isinstance(raw, dict):
        workdir = Path(tempfile.mkdtemp(prefix=f"zeus-{ctx.agent}-"))
    else:
        raise ValueError(f"inputs must be a directory or a dict, not {type(raw).__name__}")
    target = Path(str(opts.get("file", "CHANGES.md")))
    if target.is_absolute() or ".." in target.parts:
        raise ValueError(f"inputs.file {str(target)!r} must be a relative path inside the workdir")
    content = opts.get("content")
    return (
        workdir,
        workdir / target,
        None if content is None else str(content),
        float(opts.get("delay_s", 0.0)),
    )


def implement(brief: Brief, ctx: Context) -> Report:
    """Write the brief's change into the scratch file; return what changed."""
    workdir, target, content, delay_s = _options(brief, ctx)
    ctx.session["workdir"] = str(workdir)
    before = target.read_text(encoding="utf-8") if target.exists() else ""
    ctx.heartbeat(f"planning a change to {target.name}")
    if delay_s:
        ctx.sleep(delay_s)
    # The model call that drafts the change: the brief and the file in, the edit out.
    tokens_in = 900 + estimate_tokens(before) + estimate_tokens(brief.scope)
    tokens_out = 150 + (estimate_tokens(content) if content else 20)
    ctx.charge(
        calls=1,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        cost=price(tokens_in, tokens_out, "medium"),
    )
    line = f"- {brief.scope}"
    if content is not None:
        after = content
    elif line in before.splitlines():
        after = before  # an earlier attempt already made this change
    else:
        after = before + ("" if not before or before.endswith("\n") else "\n") + line + "\n"
    ctx.check()  # last chance to stop before the side effect
    changes: list[str] = []
    if after != before:
        ctx.tool_call("write_file", read_only=False)
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        scratch.write_text(after, encoding="utf-8")
        os.replace(scratch, target)
        added = len(after.splitlines()) - len(before.splitlines())
        changes.append(f"{target} — {'created' if not before else 'updated'} ({added:+d} line(s))")
    ctx.session.setdefault("files", [])
    if str(target) not in ctx.session["files"]:
        ctx.session["files"].append(str(target))
    ok = target.read_text(encoding="utf-8") == after
    return Report(
        output={"workdir": str(workdir), "file": str(target), "changed": bool(changes)},
        changes=changes,
        findings=[] if changes else [f"{target} already had the change; nothing written"],
        validation=[f"re-read {target.name}: {'matches' if ok else 'DIFFERS from'} the change"],
        risks=[] if ok else [f"{target} does not hold the change after writing"],
    )
