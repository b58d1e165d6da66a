"""The two halves: `actors` runs, `supervisor` decides; `actors` never imports `supervisor`."""

from __future__ import annotations

import ast
from pathlib import Path

import actors
import supervisor

ROOT = Path(__file__).resolve().parent.parent


def imports_of(path: Path) -> list[str]:
    """Every module `path` imports (`import x`, `from x import y`), wherever it does."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def test_actors_never_imports_supervisor() -> None:
    for path in (ROOT / "actors").rglob("*.py"):
        for name in imports_of(path):
            assert not name.startswith("supervisor"), f"{path} imports {name}"


def test_public_modules_export_exactly_their_all() -> None:
    for module in (actors, supervisor):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.__all__ names missing {name}"
        public = {n for n in vars(module) if not n.startswith("_")}
        submodules = {n for n in public if type(getattr(module, n)).__name__ == "module"}
        assert public - submodules <= set(module.__all__) | {"annotations"}


def test_the_library_never_imports_the_command_line() -> None:
    cli = {ROOT / "supervisor" / "cli.py", *(ROOT / "supervisor" / "commands").rglob("*.py")}
    for path in (ROOT / "supervisor").rglob("*.py"):
        if path in cli:
            continue
        for name in imports_of(path):
            assert not name.startswith(("supervisor.commands", "supervisor.cli")), (
                f"{path} imports {name}"
            )
