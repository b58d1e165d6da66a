"""Instructions per no-op delegation, counted by valgrind's callgrind, for one or more
source trees side by side (a restructuring measured against the code before it).

    python -m benchmarks.instructions TREE [TREE ...]

Each tree (a checkout of this repository) runs N sequential no-op thread delegations
for N = 100 and N = 400, under callgrind; the figure is the difference over 300
delegations, so start-up and imports cancel out. Instruction counts repeat for the
same code and inputs whatever else the machine does, where CPU time here moves by
20-30% from run to run. The count is the whole process: Zeus's thread, the child's
and the host's.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

_WORK = """
from supervisor import Brief, Zeus

def noop(brief, ctx):
    return "ok"

with Zeus.start(agents={"noop": noop}) as zeus:
    brief = Brief(agent="noop", scope="x")
    for _ in range(20 + int(__import__("sys").argv[1])):
        zeus.dispatch(brief).result()
"""


def instructions(tree: Path, n: int, out: Path) -> int:
    """The instructions callgrind collected for `n` delegations in `tree`."""
    script = out / "noop.py"
    script.write_text(_WORK)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out / 'cg.out'}",
         sys.executable, str(script), str(n)],
        cwd=tree, env=env, capture_output=True, text=True, check=True,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"callgrind printed no total for {tree}:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for tree in args.trees:
            # Once first, so that every tree runs with its bytecode already compiled.
            instructions(tree, 1, out)
            small, large = instructions(tree, 100, out), instructions(tree, 400, out)
            print(f"{tree}: {(large - small) / 300:,.0f} instructions per no-op delegation")


if __name__ == "__main__":
    main()
