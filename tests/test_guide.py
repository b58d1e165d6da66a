"""docs/guide.md runs as written, in order, and its table of keys says the true defaults.

Each fenced block is one step: a block after `<!-- file: NAME -->` is written to NAME;
a ```python block runs; a ```yaml block must be a valid routing file; a ```bash block
runs its `zeus` commands (each must exit 0), its `cd`s and its `python host.py`; a
```text block is output, checked where the guide says what produced it. The first
section runs in a directory of its own (it makes `myagents/`); the rest starts from
an empty one, as the guide says.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from actors import Summary
from supervisor import Routing
from supervisor.cli.main import main
from supervisor.routing import AgentPolicy, SupervisorPolicy
from tests._zygote import run as run_forked

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "guide.md"
TEXT = GUIDE.read_text(encoding="utf-8")
BLOCK = re.compile(r"(?:^<!-- file: (\S+) -->\n)?^```(\w+)\n(.*?)^```\n", re.M | re.S)
MODULES = ("my_agents", "notes")  # what the guide's hosts import from their directory


def blocks() -> list[tuple[str | None, str, str]]:
    """(file name or None, language, code) of each fenced block, in order."""
    return [(m.group(1), m.group(2), m.group(3)) for m in BLOCK.finditer(TEXT)]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in MODULES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield tmp_path
    for name in MODULES:
        sys.modules.pop(name, None)


def run_bash(code: str, capsys: pytest.CaptureFixture[str]) -> None:
    for line in code.splitlines():
        for step in (s.strip() for s in line.split("&&")):
            argv = shlex.split(step)
            if not argv or argv[0] == "pip":
                continue
            if argv[0] == "cd":
                os.chdir(argv[1])
                sys.path.insert(0, os.getcwd())
            elif argv[0] == "zeus":
                code_ = main(argv[1:])
                assert code_ == 0, f"{step}: exit {code_}\n{capsys.readouterr()}"
            elif argv[:2] == ["python", "host.py"]:
                env = {**os.environ, "PYTHONPATH": str(ROOT)}
                done = run_forked("host.py", [], env=env, timeout=60, script=True)
                assert done.returncode == 0, done.stderr
            else:
                raise AssertionError(f"the guide runs {step!r}, which this test cannot")


@pytest.mark.process
def test_every_block_of_the_guide_runs_in_order(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps = blocks()
    assert [lang for _, lang, _ in steps].count("python") >= 3
    for n, (name, lang, code) in enumerate(steps):
        if n == 1:  # after the first section: an empty directory, as the guide says
            (workdir / "fresh").mkdir()
            os.chdir(workdir / "fresh")
            sys.path.insert(0, os.getcwd())
        where = f"{GUIDE.name}, block {n + 1} ({lang})"
        if name is not None:
            Path(name).write_text(code, encoding="utf-8")
        elif lang == "python":
            exec(compile(code, where, "exec"), {"__name__": "guide"})
        elif lang == "yaml":
            Routing.from_dict(yaml.safe_load(code), source=where)
        elif lang == "bash":
            run_bash(code, capsys)
        else:
            assert lang == "text", where


def test_the_errors_the_guide_shows_are_the_ones_zeus_validate_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = next(code for _, lang, code in blocks() if lang == "text" and "problems" in code)
    good = next(code for name, _, code in blocks() if name == "routing.yml")
    (tmp_path / "notes.py").write_text("def summarise(brief, ctx):\n    return 1\n")
    bad = good.replace("timeout_s: 20 ", "timeout_s: 20s").replace("process ", "proces  ")
    (tmp_path / "routing.yml").write_text(bad, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "notes", raising=False)

    assert main(["validate", "routing.yml"]) == 2

    assert capsys.readouterr().err == shown


def test_the_summary_the_guide_shows_is_one_zeus_reads() -> None:
    shown = next(code for _, lang, code in blocks() if lang == "text" and "<subtask" in code)
    summary = Summary.parse(shown)
    assert [a.outcome.value for a in summary.attempts] == ["transient", "completed"]


# -- the table of keys ---------------------------------------------------------------------
def model_keys(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    """Every key a routing file may give for `model`, dotted, with its default (as JSON)."""
    keys: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        key = prefix + (info.alias or name)
        inner = _model_of(info.annotation)
        if inner is not None:
            if info.default is None:  # an optional section: its own row, then its keys
                keys[key] = None
            keys.update(model_keys(inner, key + "."))
        else:
            default = info.get_default(call_default_factory=True)
            keys[key] = default.model_dump(mode="json") if isinstance(default, BaseModel) else (
                list(default) if isinstance(default, tuple) else default)
    return keys


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return next((a for a in typing.get_args(annotation)
                     if isinstance(a, type) and issubclass(a, BaseModel)), None)
    return None


def table(heading: str) -> dict[str, tuple[Any, str]]:
    """The guide's table under `heading`: key -> (its default, what it does)."""
    section = TEXT.split(f"### {heading}", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]*)` \| (.*) \|$", section, re.M)
    return {key: (yaml.safe_load(default), what) for key, default, what in rows}


COMING = "coming with the durable store"


@pytest.mark.parametrize(
    ("heading", "model"),
    [("Agent keys", AgentPolicy), ("Supervisor keys", SupervisorPolicy)],
)
def test_the_guide_names_every_key_with_its_true_default(
    heading: str, model: type[BaseModel]
) -> None:
    rows = table(heading)
    keys = model_keys(model)
    coming = {key for key, (_, what) in rows.items() if what.startswith(COMING)}

    assert set(keys) - set(rows) == set(), "keys the guide does not name"
    assert set(rows) - set(keys) == coming, (
        "rows of keys routing.yml does not have (once it has them, drop the "
        f"'{COMING}' mark and check the default)"
    )
    for key, value in keys.items():
        assert rows[key][0] == value, f"{key}: the guide says {rows[key][0]!r}, Zeus {value!r}"
