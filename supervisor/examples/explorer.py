"""apollo, the explorer: scans a tree of files for what the scope names and reports each hit.

Read-only and partial-friendly: every hit goes out at once as a partial result
(`path:line: text`), so a timeout still leaves what was found. Cancellation is
honoured between files. Inputs (all optional):

- a path string (or a list of them): what to scan;
- or a dict: `root` (a path) or `paths` (a list), `pattern` (a regex; default:
  read from the scope), `suffixes` (e.g. `[".py"]`), `recursive` (default
  true), `delay_s` (seconds to linger per file, to make a demo time out),
  `max_hits` (default 200).

With no paths it scans the current directory. The scope is read as its quoted
phrases ("def explore"), each searched for whole, or else as its keywords, any of
which is a hit ("find the word supervisor": supervisor); the report says how it
read it. Stopped at `max_hits`, its report is `incomplete` (the delegation
settles `partial`, saying where it stopped).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from actors import Brief, Context, Report
from supervisor.examples._common import estimate_tokens, price, roots_from_inputs, walk_files

__all__ = ["explore", "pattern_for", "read_scope"]

# Words of a scope that say how to search, not what for.
_STOPWORD_TEXT = """
a an and any all are as at be by called code codebase contain containing contains directory
directories each every file files find folder folders for from grep here how in into is it list
locate look mention mentions module modules named occurrence occurrences of on or pattern
patterns phrase phrases project reference references repo repository scan search source sources
string strings term terms text that the these this those to tree usage usages use uses where
which with word words
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
    return read_scope(scope)[0]


def read_scope(scope: str) -> tuple[str, str]:
    """The regex a scope asks for, and how it was read, in words (for the report).

    `ValueError` when the scope names nothing to search for.
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
    unique = list(dict.fromkeys(words))
    shown = ", ".join(f'"{w}"' for w in unique)
    if quoted:
        how = f"the phrase {shown}" if len(unique) == 1 else f"the phrases {shown} (any of them)"
    else:
        how = (f"the word {shown}" if len(unique) == 1 else f"the words {shown} (any of them)"
               ) + '; quote a phrase ("like this") to search for it whole'
    return "|".join(re.escape(w) for w in unique), how


@dataclass(frozen=True)
class _Options:
    paths: tuple[Path, ...]
    pattern: re.Pattern[str]
    read_as: str  # how the scope (or inputs.pattern) was read, in words
    suffixes: tuple[str, ...] = ()
    recursive: bool = True
    delay_s: float = 0.0
    max_hits: int = 200


def _options(brief: Brief) -> _Options:
    paths, opts = roots_from_inputs(brief.inputs)
    if opts.get("pattern"):
        source, read_as = str(opts["pattern"]), f"the pattern /{opts['pattern']}/ (inputs)"
    else:
        source, read_as = read_scope(brief.scope)
    try:
        pattern = re.compile(source, re.IGNORECASE)
    except re.error as exc:
        raise ValueError(f"inputs.pattern {source!r} is not a valid regex: {exc}") from None
    return _Options(
        paths=tuple(paths),
        pattern=pattern,
        read_as=read_as,
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
    here = opts.paths == (Path("."),)
    where = "the current directory" if here else ", ".join(_display(p) for p in opts.paths)
    ctx.heartbeat(f"{len(files)} files in {where} to search for {opts.read_as}")
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
    incomplete = None
    if capped:
        incomplete = (f"stopped at {opts.max_hits} hits, after {scanned} of {len(files)} files; "
                      "narrow the search or raise inputs.max_hits")
        risks.append(incomplete)
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
        validation=[f"searched {scanned} of {len(files)} file(s) in {where} for {opts.read_as}"],
        risks=risks,
        incomplete=incomplete,
    )
