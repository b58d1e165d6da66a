"""`zeus schema`: the JSON Schema of routing.yml (native dialect), for editors.

Save it and point your editor's YAML support at it, e.g. with a first line
`# yaml-language-server: $schema=routing.schema.json` in routing.yml.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from supervisor.cli.commands import EXIT_OK
from supervisor.routing import Routing

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "schema",
        help="print the JSON Schema of routing.yml, for editors",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    print(json.dumps(Routing.file_schema(), indent=2, ensure_ascii=False))
    return EXIT_OK
