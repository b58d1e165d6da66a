"""apollo, the explorer: scans a tree of files for a pattern and reports each hit.

Read-only and partial-friendly: every hit goes out at once as a partial result
(`path:line: text`), so a timeout still leaves what was found. Cancellation is
honoured between files. Inputs (all optional):

- a path string (or a list of them): what to scan;
- or a dict: `root` (a path) or `paths` (a list), `pattern` (a regex; default:
  derived from the scope), `suffixes` (e.g. `[".py"]`), `recursive` (default
  true), `delay_s` (seconds to linger per file, to make a demo time out),
  `max_hits` (default 200).

With no inputs it scans the project's own packages, so it works on a fresh machine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from actors import Brief, Context, Report
from supervisor.examples._common import estimate_tokens, price, roots_from_inputs, walk_files

__all__ = ["explore", "pattern_for"]

# Words of a scope that say how to search, not what for.
_STOPWORD_TEXT = """
a an and any all are as at be by code codebase directory directories each every file files
find folder folders for from grep how in into is it list locate look module modules occurrence
occurrences of on or pattern patterns project reference references repo repository scan search
source sources that the these this those to tree usage usages use uses where which with
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_QUOTED = re.compile(r'"([^"]+)"|`([^`]+)`|“([^”]+)”|(?<!\w)\'([^\']+)\'(?!\w)')
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MAX_BYTES = 1_000_000  # larger files are skipped (generated or data, not source)
_FILES_PER_CALL = 10  # the files one (imagined) model call reads


def pattern_for(scope: str) -> str:
    """The regex a scope asks for: its quoted phrases, else its keywords.

    `'Find "TODO" and "FIXME"'` -> `TODO|FIXME`; `"Scan route files for auth
    patterns"` -> `route|auth`. Raises `ValueError` when the scope names nothing.
    """
    quoted = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(scope)]
    words = quoted or [
        w for w in _WORD.findall(scope) if len(w) >= 3 and w.lower() not in _STOPWORDS
    ]
    if not words:
        raise ValueError(
            f'scope {scope!r} names nothing to search for; quote it ("TODO") '
            "or give inputs={'pattern': REGEX}"
        )
    return "|".join(re.escape(w) for w in dict.fromkeys(words))


@dataclass(frozen=True)
class _Options:
    paths: tuple[Path, ...]
    pattern: re.Pattern[str]
    suffixes: tuple[str, ...] = ()
    recursive: bool = True
    delay_s: float = 0.0
    max_hits: int = 200


def _options(brief: Brief) -> _Options:
    paths, opts = roots_from_inputs(brief.inputs)
    source = opts.get("pattern") or pattern_for(brief.scope)
    try:
        pattern = re.compile(source, re.IGNORECASE)
    except re.error as exc:
        raise ValueError(f"inputs.pattern {source!r} is not a valid regex: {exc}") from None
    return _Options(
        paths=tuple(paths),
        pattern=pattern,
        suffixes=tuple(opts.get("suffixes") or ()),
        recursive=bool(opts.get("recursive", True)),
        delay_s=float(opts.get("delay_s", 0.0)),
        max_hits=int(opts.get("max_hits", 200)),
    )


def _display(path: Path) -> str:
    """`path` relative to the working directory when it lies under it, else absolute."""
    absolute = path.resolve()
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)


def _read_text(path: Path) -> str | None:
    """The file's text, or None for binary, huge or unreadable files."""
    try:
        if path.stat().st_size > _MAX_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def explore(brief: Brief, ctx: Context) -> Report:
    """Scan the files the brief names for its pattern; each hit is a partial result."""
    opts = _options(brief)
    files = [
        f for root in opts.paths for f in walk_files(root, opts.suffixes, recursive=opts.recursive)
    ]
    ctx.heartbeat(f"{len(files)} files to scan for /{opts.pattern.pattern}/")
    already = {str(item) for item in ctx.previous_partials}  # reported by an earlier attempt
    hits: list[str] = []
    skipped: list[str] = []
    files_with_hits = 0
    scanned = 0
    batch_tokens = 0
    capped = False
    for index, path in enumerate(files, 1):
        ctx.check()
        if opts.delay_s:
            ctx.sleep(opts.delay_s)
        ctx.tool_call("read_file", read_only=True)
        text = _read_text(path)
        scanned += 1
        shown = _display(path)
        if text is None:
            skipped.append(shown)
            continue
        batch_tokens += estimate_tokens(text)
        found = 0
        for lineno, line in enumerate(text.splitlines(), 1):
            if opts.pattern.search(line):
                hit = f"{shown}:{lineno}: {line.strip()[:160]}"
                hits.append(hit)
                found += 1
                if hit not in already:
                    ctx.partial(hit)
                if len(hits) >= opts.max_hits:
                    capped = True
                    break
        files_with_hits += found > 0
        ctx.heartbeat(f"{index}/{len(files)} {shown}: {found} hit(s)")
        if index % _FILES_PER_CALL == 0:
            ctx.charge(
                calls=1, input_tokens=batch_tokens, output_tokens=60, cost=price(batch_tokens, 60)
            )
            batch_tokens = 0
        if capped:
            break
    # The last (partial) batch plus the call that writes the summary.
    summary_in = batch_tokens + 200 + 30 * len(hits)
    summary_out = 80 + 15 * len(hits)
    ctx.charge(
        calls=1,
        input_tokens=summary_in,
        output_tokens=summary_out,
        cost=price(summary_in, summary_out),
    )
    risks = []
    if capped:
        risks.append(f"stopped at {opts.max_hits} hits; narrow the pattern or raise max_hits")
    if skipped:
        risks.append(f"{len(skipped)} binary, huge or unreadable file(s) skipped")
    return Report(
        output={
            "pattern": opts.pattern.pattern,
            "roots": [_display(p) for p in opts.paths],
            "files_scanned": scanned,
            "files_total": len(files),
            "files_with_hits": files_with_hits,
            "hits": len(hits),
        },
        findings=hits,
        validation=[f"scanned {scanned} of {len(files)} file(s) for /{opts.pattern.pattern}/"],
        risks=risks,
    )
