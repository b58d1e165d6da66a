"""The layers: `actors` runs, `supervisor` decides; inside each, imports run one way (down).

cli, integrations, ui -> supervisor (the host's names), testing -> core -> store ->
rules -> routing, journal -> errors -> actors.backends -> actors. `actors` never imports
`supervisor`, and the library never imports the CLI. A module of one concept may be
long; the modules one delegation runs through are named (`DELEGATION_PATH`).
"""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
import threading
import types
from pathlib import Path

import pytest

import actors
import actors.backends
import supervisor
import supervisor.testing
from actors import Brief, Context
from supervisor import Zeus

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


# The modules one warm thread delegation runs through, from `dispatch` to its handle's
# result: where a reader follows it (STYLE.md's "Fewer, fuller rooms" wants this short).
# A module that joins the path is named here; one merged away is taken off.
DELEGATION_PATH = frozenset({
    "actors/backends/jobs.py", "actors/backends/thread.py", "actors/clock.py",
    "actors/context.py", "actors/mail.py", "actors/run.py",
    "actors/textblocks/agent_report.py", "actors/textblocks/values.py",
    "supervisor/core/actor.py", "supervisor/core/durable.py", "supervisor/core/handle.py",
    "supervisor/core/registry.py", "supervisor/core/reports.py",
    "supervisor/core/settlement.py", "supervisor/core/state.py",
    "supervisor/core/supervisor.py", "supervisor/core/zeus.py",
    "supervisor/journal/events.py", "supervisor/routing/policies.py",
    "supervisor/routing/table.py", "supervisor/rules/budget.py",
    "supervisor/rules/delegation.py", "supervisor/rules/settle.py",
    "supervisor/rules/stale.py",
})


def _beating(brief: Brief, ctx: Context) -> str:
    ctx.heartbeat("under way")
    return "done"


def test_the_modules_one_delegation_runs_through_are_the_ones_named() -> None:
    """Every thread's calls into the library (a profile hook on each, set before Zeus
    starts its threads), during the second of two delegations (the first warms up)."""
    library = (str(ROOT / "actors") + os.sep, str(ROOT / "supervisor") + os.sep)
    seen: set[str] = set()
    on = threading.Event()

    def calls(frame: types.FrameType, event: str, _arg: object) -> None:
        if event == "call" and on.is_set() and frame.f_code.co_filename.startswith(library):
            seen.add(Path(frame.f_code.co_filename).relative_to(ROOT).as_posix())

    threading.setprofile(calls)  # type: ignore[arg-type]
    sys.setprofile(calls)  # type: ignore[arg-type]
    try:
        with Zeus.start(agents={"apollo": _beating}) as zeus:
            zeus.dispatch(Brief(agent="apollo", scope="warm up")).result(timeout=30)
            on.set()
            assert zeus.dispatch(Brief(agent="apollo", scope="x")).result(timeout=30).output
            on.clear()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    assert seen == DELEGATION_PATH, (
        f"joined the path (name them in DELEGATION_PATH): {sorted(seen - DELEGATION_PATH)}; "
        f"left it (take them off): {sorted(DELEGATION_PATH - seen)}")


def test_design_md_walks_the_delegation_path_module_by_module() -> None:
    """docs/design.md opens with the path: every module on it, and nothing else."""
    import re

    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    section = text.split("## One delegation's path", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`((?:supervisor|actors)/[\w/]+\.py)`", section))
    assert named == DELEGATION_PATH, (
        f"on the path, not in the doc: {sorted(DELEGATION_PATH - named)}; "
        f"in the doc, not on the path: {sorted(named - DELEGATION_PATH)}")


def test_the_test_hooks_are_not_on_the_public_zeus() -> None:
    """Holding the mailbox and waiting for it are `supervisor.testing.held/sync`."""
    zeus = supervisor.Zeus
    assert not hasattr(zeus, "held") and not hasattr(zeus, "sync")
    assert callable(supervisor.testing.held) and callable(supervisor.testing.sync)
