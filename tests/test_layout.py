"""The layers: `actors` runs, `supervisor` decides; inside each, imports run one way (down).

cli, integrations, ui -> supervisor (the host's names), testing -> core -> store ->
rules -> routing, journal -> errors -> actors.backends -> actors. `actors` never imports
`supervisor`, and the library never imports the CLI. One concept per module: none
is over 400 lines unless splitting it would scatter one concept (listed, with why).
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import actors
import actors.backends
import supervisor
import supervisor.testing

ROOT = Path(__file__).resolve().parent.parent

# A module may import its own layer and any layer of a lower rank.
RANKS = {
    "actors": 0,
    "actors.backends": 1,
    "supervisor.errors": 2,
    "supervisor.routing": 3,
    "supervisor.journal": 3,
    "supervisor.rules": 4,
    "supervisor.store": 5,
    "supervisor.core": 6,
    "supervisor": 7,
    "supervisor.testing": 7,
    "supervisor.examples": 7,
    "supervisor.integrations": 8,
    "supervisor.cli": 8,
    "supervisor.ui": 8,
}


def layer_of(module: str) -> str | None:
    """The layer a dotted module name belongs to (the longest prefix in RANKS)."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in RANKS:
            return prefix
    return None


def imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return names


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def library_files() -> list[Path]:
    return sorted((ROOT / "actors").rglob("*.py")) + sorted((ROOT / "supervisor").rglob("*.py"))


def test_every_import_runs_down_the_layers() -> None:
    wrong = []
    for path in library_files():
        here = layer_of(module_name(path))
        assert here is not None, f"{path} is in no layer: add its package to RANKS"
        for name in imports(path):
            there = layer_of(name)
            if there is None or there == here:
                continue
            if RANKS[there] > RANKS[here]:
                wrong.append(f"{module_name(path)} ({here}) imports {name} ({there})")
    assert not wrong, "imports that run up the layers:\n" + "\n".join(wrong)


def test_actors_never_imports_supervisor() -> None:
    for path in (ROOT / "actors").rglob("*.py"):
        for name in imports(path):
            assert not name.startswith("supervisor"), f"{path} imports {name}"


def test_the_library_never_imports_the_cli() -> None:
    for path in library_files():
        if module_name(path).startswith("supervisor.cli"):
            continue
        for name in imports(path):
            assert not name.startswith("supervisor.cli"), f"{path} imports {name}"


# The ui extra's web stack: imported by supervisor/ui/ alone, so nothing else needs it.
WEB_STACK = ("starlette", "uvicorn", "sse_starlette")


def test_only_the_ui_package_imports_the_web_stack() -> None:
    wrong = [
        f"{module_name(path)} imports {name}"
        for path in library_files()
        if not module_name(path).startswith("supervisor.ui")
        for name in imports(path)
        if name.split(".")[0] in WEB_STACK
    ]
    assert not wrong, "the web stack outside supervisor.ui:\n" + "\n".join(wrong)


def test_the_ui_readers_and_the_cli_load_without_the_web_stack() -> None:
    code = (
        "import sys, supervisor, supervisor.ui, supervisor.cli.main\n"
        f"loaded = [m for m in {WEB_STACK!r} if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "module", [actors, actors.backends, supervisor, supervisor.testing], ids=lambda m: m.__name__
)
def test_public_modules_export_exactly_their_all(module: object) -> None:
    for name in module.__all__:  # type: ignore[attr-defined]
        assert hasattr(module, name), f"{module.__name__}.__all__ names missing {name}"  # type: ignore[attr-defined]
    ours = {
        n
        for n, value in vars(module).items()
        if not n.startswith("_")
        and type(value).__name__ != "module"
        and str(getattr(value, "__module__", "")).startswith(("actors", "supervisor"))
    }
    assert ours <= set(module.__all__)  # type: ignore[attr-defined]


def test_agent_code_needs_only_a_few_names_from_actors() -> None:
    assert len(actors.__all__) <= 13  # Fence: what `ctx.fence` gives, to compare and parse
    for name in ("Context", "Report", "Brief", "Cancelled", "TransientError"):
        assert name in actors.__all__


def test_the_shipped_pantheon_is_the_repositorys_routing_yml() -> None:
    shipped = importlib.import_module("supervisor.routing").DEFAULT_ROUTING
    assert shipped.is_relative_to(ROOT / "supervisor")
    assert shipped.read_bytes() == (ROOT / "routing.yml").read_bytes(), (
        "routing.yml and supervisor/routing/routing.yml differ: copy the one you edited "
        "over the other (the package ships its copy; the repository's is the one users read)"
    )


# One concept per module. A module over about 400 lines is usually doing several
# jobs (split it by job); one may pass it when splitting would scatter a single
# concept across files. Each such module is listed here with that concept, as
# "path": "the one concept it holds, and why splitting would scatter it".
MAX_LINES = 400
ONE_CONCEPT_OVER_THE_LIMIT: dict[str, str] = {
    "actors/backends/process/backend.py": (
        "the process backend's one face to Zeus: every Backend member (start, close, "
        "prestart, find_waiting, reattach, stop_left, confirm_gone, extend_lease), each a "
        "hand-off to the part that owns the job (hub, spawner, worker table, search, lease)"
    ),
    "supervisor/core/supervisor.py": (
        "the supervisor's verbs (dispatch, start, stop, end, next step, settle, cancel, fill "
        "slots) call one another; split, they would call back across modules again"
    ),
    "supervisor/core/zeus.py": (
        "the host's facade: every public call of Zeus, each a short hand-off to the actor; "
        "split, one public class would be spread over modules"
    ),
    "supervisor/store/postgres.py": (
        "the Store interface on PostgreSQL: the buffered writes, the fenced commit, the "
        "takeover and the readers of one class, as the SQLite store keeps them in one"
    ),
    "actors/backends/command/work.py": (
        "one run of a program inside a worker: its start, its stops (cancel, the ladder, the "
        "exit grace) and its reading are one loop in the worker's main thread"
    ),
}


def test_each_module_holds_one_concept_within_400_lines_or_says_why_not() -> None:
    over = []
    for path in library_files():
        name = path.relative_to(ROOT).as_posix()
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES and name not in ONE_CONCEPT_OVER_THE_LIMIT:
            over.append(f"{name} ({lines})")
    assert not over, (
        f"modules over {MAX_LINES} lines: move a job of their own into a module, or, if "
        "splitting would scatter one concept, list the module in ONE_CONCEPT_OVER_THE_LIMIT "
        "(tests/test_layout.py) with that concept as its reason: " + ", ".join(over)
    )
    stale = []
    for name, reason in ONE_CONCEPT_OVER_THE_LIMIT.items():
        path = ROOT / name
        lines = len(path.read_text(encoding="utf-8").splitlines()) if path.is_file() else 0
        if lines <= MAX_LINES or len(reason.split()) < 5:
            stale.append(f"{name} ({lines} lines, reason {reason!r})")
    assert not stale, (
        "listed in ONE_CONCEPT_OVER_THE_LIMIT but gone, within the limit, or without a reason "
        "that names its one concept (take it off, or say why): " + ", ".join(stale)
    )


def test_the_test_hooks_are_not_on_the_public_zeus() -> None:
    """Holding the mailbox and waiting for it are `supervisor.testing.held/sync`."""
    zeus = supervisor.Zeus
    assert not hasattr(zeus, "held") and not hasattr(zeus, "sync")
    assert callable(supervisor.testing.held) and callable(supervisor.testing.sync)
