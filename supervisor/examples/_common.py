"""What the example agents share: which paths a brief names (the current directory by
default), the project's own source tree (for the demo and the reviewer), which files to
walk, and a plausible price for the model calls they stand in for.

The examples do real work (scan, lint, write) without a model; they charge usage
as if a model had read what they read, so budgets behave as they would.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "SKIP_DIRS",
    "default_roots",
    "estimate_tokens",
    "price",
    "walk_files",
]

# Directories no agent wants to scan: caches, environments, version control.
SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "__pycache__",
        "node_modules",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".tox",
        "build",
        "dist",
    }
)

# Dollars per million tokens (input, output) by reasoning effort: cheap, mid, dear.
_RATES = {"low": (0.15, 0.60), "medium": (1.0, 4.0), "high": (3.0, 15.0)}


def default_roots() -> list[Path]:
    """The project's own packages (`supervisor` and `actors`), so a fresh install has work."""
    here = Path(__file__).resolve().parent.parent
    roots = [here]
    try:
        import actors

        roots.insert(0, Path(actors.__file__).resolve().parent)
    except ImportError:  # pragma: no cover - actors ships with supervisor
        pass
    return roots


def roots_from_inputs(raw: Any) -> tuple[list[Path], dict[str, Any]]:
    """The paths a brief's `inputs` names, and its options (when inputs is a mapping).

    `inputs` may be a path, a list of paths, a mapping with `paths` or `root` (and
    options), or None (or a mapping with neither) for the current directory. A path
    that does not exist is refused.
    """
    opts: dict[str, Any] = raw if isinstance(raw, dict) else {}
    if isinstance(raw, str | Path):
        roots = [Path(raw)]
    elif isinstance(raw, list | tuple):
        roots = [Path(p) for p in raw]
    elif "paths" in opts:
        roots = [Path(p) for p in opts["paths"]]
    elif "root" in opts:
        roots = [Path(opts["root"])]
    elif raw is None or isinstance(raw, dict):
        roots = [Path(".")]
    else:
        raise ValueError(
            f"inputs must be a path, a list of paths or a dict, not {type(raw).__name__}"
        )
    missing = [str(p) for p in roots if not p.exists()]
    if missing:
        raise ValueError(f"no such file or directory: {', '.join(missing)}; give an existing root")
    return roots, opts


def walk_files(
    root: Path, suffixes: tuple[str, ...] = (), *, recursive: bool = True
) -> Iterator[Path]:
    """Regular files under `root` in a stable (sorted) order, skipping caches and hidden dirs.

    `root` may be a file, which is then the only one. `suffixes` (e.g. `(".py",)`)
    keeps only those; empty keeps everything.
    """
    if root.is_file():
        if not suffixes or root.suffix in suffixes:
            yield root
        return
    if not recursive:
        for path in sorted(root.iterdir()):
            if path.is_file() and (not suffixes or path.suffix in suffixes):
                yield path
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            path = Path(dirpath, name)
            if not suffixes or path.suffix in suffixes:
                yield path


def estimate_tokens(text: str) -> int:
    """About four characters per token, as tokenizers average on code and English."""
    return max(1, len(text) // 4)


def price(input_tokens: int, output_tokens: int, effort: str = "low") -> float:
    """What a model call of this size would cost, in dollars, at the effort's rate."""
    rate_in, rate_out = _RATES.get(effort, _RATES["low"])
    return round((input_tokens * rate_in + output_tokens * rate_out) / 1_000_000, 6)
