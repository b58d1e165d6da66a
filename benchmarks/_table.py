"""Rows of figures, printed as a table and written as JSON."""

from __future__ import annotations

import json
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Row:
    figure: str
    zeus: float
    baseline: float | None
    unit: str
    baseline_name: str = ""
    # "ratio<=1.5" (zeus / baseline at most 1.5), "ratio>=1.0", "value<=20" (zeus at most 20).
    target: str = ""
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.baseline in (None, 0):
            return None
        return self.zeus / self.baseline

    @property
    def passed(self) -> bool | None:
        if not self.target:
            return None
        kind, _, rest = self.target.partition("<=") if "<=" in self.target else (
            self.target.partition(">=")
        )
        bound = float(rest)
        value = self.ratio if kind == "ratio" else self.zeus
        if value is None:
            return None
        return value <= bound if "<=" in self.target else value >= bound


def report(name: str, rows: list[Row]) -> None:
    """Print the table and write `results/<name>.json`."""
    header = f"{'figure':<48} {'zeus':>12} {'baseline':>12} {'ratio':>7} {'target':>12} result"
    print(header)
    print("-" * len(header))
    for row in rows:
        base = f"{row.baseline:.4g}" if row.baseline is not None else "-"
        ratio = f"{row.ratio:.2f}" if row.ratio is not None else "-"
        verdict = {True: "pass", False: "FAIL", None: "-"}[row.passed]
        print(
            f"{row.figure:<48} {row.zeus:>10.4g}{row.unit[:2]:>2} {base:>12} {ratio:>7} "
            f"{row.target or '-':>12} {verdict}"
        )
        if row.baseline_name or row.note:
            print(f"    baseline: {row.baseline_name}  {row.note}".rstrip())
    RESULTS.mkdir(exist_ok=True)
    payload = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "rows": [asdict(r) | {"ratio": r.ratio, "passed": r.passed} for r in rows],
    }
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=2) + "\n")
