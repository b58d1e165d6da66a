"""themis, the reviewer: lints Python files and gives a verdict.

The linter is the best one at hand: `pyflakes` when it is installed, else `ruff`
when it is on the PATH, else a built-in checker (the standard library's
`compile()` plus an `ast` pass for unused imports, bare `except:` and
always-true asserts), so a fresh machine with only the runtime dependencies can
review. Problems are reported as `path:line:col: CODE message`; the verdict is
`reject` when there is any, `approve` otherwise. Inputs (all optional): a path
string or a list of them, or a dict with `paths` (or `root`) and `linter`
(`auto` | `pyflakes` | `ruff` | `builtin`). No inputs: the project's own packages.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors import Brief, Context, Report
from supervisor.examples._common import default_roots, estimate_tokens, price, walk_files

__all__ = ["Problem", "choose_linter", "lint_source", "review"]

_FILES_PER_CALL = 4  # a careful reviewer reads a few files per model call
_LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?:(?P<col>\d+):)?\s*(?P<msg>.*)$")


@dataclass(frozen=True, order=True)
class Problem:
    path: str
    line: int
    col: int
    code: str
    message: str

    def __str__(self) -> str:
        code = f"{self.code} " if self.code else ""
        return f"{self.path}:{self.line}:{self.col}: {code}{self.message}"


# -- the built-in checker ------------------------------------------------------------
def lint_source(text: str, path: str) -> list[Problem]:
    """Syntax errors (E999), unused imports (F401), bare `except:` (E722), assert on a
    tuple (F631), and the compiler's warnings (W605 invalid escape, F632 `is` with a
    literal). Lines marked `# noqa` are not reported."""
    # The compiler's warnings (invalid escapes, `is` with a literal) are findings too.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # 3.11 warns of bad escapes as DeprecationWarning
        try:
            tree = ast.parse(text, path)
            compile(tree, path, "exec")  # errors only the compiler finds (`return` outside def)
        except SyntaxError as exc:
            return [
                Problem(path, exc.lineno or 1, exc.offset or 1, "E999", f"SyntaxError: {exc.msg}")
            ]
    noqa = {n for n, line in enumerate(text.splitlines(), 1) if "# noqa" in line}
    problems: list[Problem] = [
        Problem(path, w.lineno, 1, _warning_code(str(w.message)), str(w.message))
        for w in caught
        if issubclass(w.category, SyntaxWarning | DeprecationWarning)
        and "assertion is always true" not in str(w.message)
    ]
    imported: dict[str, tuple[int, int, str]] = {}
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and node.type is None:
            problems.append(
                Problem(
                    path,
                    node.lineno,
                    node.col_offset + 1,
                    "E722",
                    "do not use bare `except:`; catch `Exception` or narrower",
                )
            )
        elif isinstance(node, ast.Assert) and isinstance(node.test, ast.Tuple) and node.test.elts:
            problems.append(
                Problem(
                    path,
                    node.lineno,
                    node.col_offset + 1,
                    "F631",
                    "assertion is always true; remove the parentheses",
                )
            )
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                imported[bound] = (node.lineno, node.col_offset + 1, alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                if alias.name != "*":
                    shown = f"{node.module or '.'}.{alias.name}"
                    imported[alias.asname or alias.name] = (node.lineno, node.col_offset + 1, shown)
        elif isinstance(node, ast.Name):
            used.add(node.id)
        used |= _names_in_strings(node)
    for bound, (line, col, shown) in imported.items():
        if bound not in used:
            problems.append(Problem(path, line, col, "F401", f"`{shown}` imported but unused"))
    return sorted(p for p in problems if p.line not in noqa)


def _names_in_strings(node: ast.AST) -> set[str]:
    """Names used in string annotations (`"Foo"`), `cast("Foo", x)` and `__all__`."""
    strings: list[ast.expr] = []
    if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
        strings.append(node.annotation)
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
        strings.append(node.returns)
    elif isinstance(node, ast.Call) and node.args and _called(node) == "cast":
        strings.append(node.args[0])  # cast("T", value)
    elif (
        isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        and isinstance(node.value, ast.List | ast.Tuple)
    ):
        strings.extend(node.value.elts)
    names: set[str] = set()
    for expr in strings:
        for sub in ast.walk(expr):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                try:
                    parsed = ast.parse(sub.value, mode="eval")
                except SyntaxError:
                    continue
                names |= {n.id for n in ast.walk(parsed) if isinstance(n, ast.Name)}
    return names


def _warning_code(message: str) -> str:
    if "escape sequence" in message:
        return "W605"
    return "F632" if '"is' in message else "W0"


def _called(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


# -- external linters ----------------------------------------------------------------
def choose_linter(wanted: str = "auto") -> str:
    """`pyflakes` if importable, else `ruff` if found, else `builtin` (for `auto`)."""
    if wanted not in ("auto", "pyflakes", "ruff", "builtin"):
        raise ValueError(f"unknown linter {wanted!r}; use auto, pyflakes, ruff or builtin")
    if wanted != "auto":
        if wanted == "pyflakes" and importlib.util.find_spec("pyflakes") is None:
            raise ValueError(
                "pyflakes is not installed; `pip install pyflakes` or use linter=builtin"
            )
        if wanted == "ruff" and _ruff() is None:
            raise ValueError("ruff is not on the PATH; `pip install ruff` or use linter=builtin")
        return wanted
    if importlib.util.find_spec("pyflakes") is not None:
        return "pyflakes"
    return "ruff" if _ruff() is not None else "builtin"


def _ruff() -> str | None:
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return shutil.which("ruff", path=search)


def _run_linter(linter: str, files: list[Path], ctx: Context) -> list[Problem]:
    """Run pyflakes or ruff over `files`; killed if the attempt is cancelled meanwhile.

    The linter stays in this process's group, so a kill of the attempt's group reaches it.
    """
    if linter == "pyflakes":
        cmd = [sys.executable, "-m", "pyflakes", *map(str, files)]
    else:
        cmd = [
            _ruff() or "ruff",
            "check",
            "--isolated",
            "--no-cache",
            "--quiet",
            "--output-format",
            "concise",
            "--select",
            "F,E9,E722",
            *map(str, files),
        ]
    ctx.tool_call(f"run:{linter}", read_only=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while True:
        try:
            out, err = proc.communicate(timeout=0.2)
            break
        except subprocess.TimeoutExpired:
            if ctx.cancelled:
                proc.kill()
                proc.communicate()
                ctx.check()
            ctx.heartbeat(f"{linter} running")
    if proc.returncode not in (0, 1):
        tail = "\n".join(err.strip().splitlines()[-5:])
        raise RuntimeError(f"{linter} exited with {proc.returncode}: {tail}")
    problems = []
    for line in out.splitlines():
        match = _LINE.match(line.strip())
        if match is None:
            continue
        msg = match["msg"].replace("[*] ", "")
        code, _, rest = msg.partition(" ")
        if not re.fullmatch(r"[A-Z]+\d+", code):
            code, rest = "", msg
        problems.append(
            Problem(match["path"], int(match["line"]), int(match["col"] or 1), code, rest)
        )
    return problems


# -- the work function ---------------------------------------------------------------
def _paths(inputs: Any) -> tuple[list[Path], str]:
    if inputs is None:
        return default_roots(), "auto"
    if isinstance(inputs, str | Path):
        return [Path(inputs)], "auto"
    if isinstance(inputs, list | tuple):
        return [Path(p) for p in inputs], "auto"
    if isinstance(inputs, dict):
        if "paths" in inputs:
            paths = [Path(p) for p in inputs["paths"]]
        elif "root" in inputs:
            paths = [Path(inputs["root"])]
        else:
            paths = default_roots()
        return paths, str(inputs.get("linter", "auto"))
    raise ValueError(
        f"inputs must be a path, a list of paths or a dict, not {type(inputs).__name__}"
    )


def review(brief: Brief, ctx: Context) -> Report:
    """Lint the Python files the brief names; `output["verdict"]` is approve or reject."""
    roots, wanted = _paths(brief.inputs)
    missing = [str(p) for p in roots if not p.exists()]
    if missing:
        raise ValueError(f"no such file or directory: {', '.join(missing)}")
    files = [f for root in roots for f in walk_files(root, (".py",))]
    if not files:
        raise ValueError(f"no Python files under {', '.join(map(str, roots))}; nothing to review")
    linter = choose_linter(wanted)
    ctx.heartbeat(f"reviewing {len(files)} file(s) with {linter}")
    problems: list[Problem] = []
    batch_tokens = 0
    batch_problems = 0
    for index, path in enumerate(files, 1):
        ctx.check()
        ctx.tool_call("read_file", read_only=True)
        text = path.read_text(encoding="utf-8", errors="replace")
        batch_tokens += estimate_tokens(text)
        if linter == "builtin":
            found = lint_source(text, str(path))
            problems.extend(found)
            batch_problems += len(found)
        ctx.heartbeat(f"{index}/{len(files)} {path.name}")
        if index % _FILES_PER_CALL == 0 or index == len(files):
            tokens_in = batch_tokens + 300
            tokens_out = 120 + 40 * batch_problems
            ctx.charge(
                calls=1,
                input_tokens=tokens_in,
                output_tokens=tokens_out,
                cost=price(tokens_in, tokens_out, "high"),
            )
            batch_tokens = batch_problems = 0
    if linter != "builtin":
        problems = _run_linter(linter, files, ctx)
    verdict = "reject" if problems else "approve"
    by_code = Counter(p.code or "other" for p in problems)
    return Report(
        output={
            "verdict": verdict,
            "linter": linter,
            "files": len(files),
            "problems": len(problems),
            "by_code": dict(sorted(by_code.items())),
        },
        findings=[str(p) for p in problems],
        validation=[f"{linter}: {len(problems)} problem(s) in {len(files)} file(s): {verdict}"],
        risks=[]
        if linter != "builtin"
        else [
            "built-in checker only (syntax, unused imports, bare except); "
            "install pyflakes or ruff for a full lint"
        ],
    )
