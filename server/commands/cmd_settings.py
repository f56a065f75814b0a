"""`pallasite settings [--schema [--flat]] [PATH]`: the effective settings, or their JSON Schema.

Without ``--schema`` it prints the settings read from ``[tool.pallasite]`` of the pyproject.toml
nearest to PATH (default: the current folder) as JSON, as the editor uses them; problems go to
stderr, naming the key, the bad value and the default the editor uses instead, and exit 2 (every
other command stops at them). ``--schema`` prints the JSON Schema (draft 2020-12) of the
``pallasite`` section that editor clients embed; ``--flat`` gives dotted keys for VS Code.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..settings import find_pyproject, flat_schema, json_schema, read_project, settings_to_json


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("path", nargs="?", default=".", help="file or folder whose pyproject.toml to read (default: .)")
    parser.add_argument("--schema", action="store_true", help="print the JSON Schema of the settings instead")
    parser.add_argument("--flat", action="store_true", help="with --schema: dotted keys (pallasite.check.debounceMs), as VS Code wants")


def run(args: argparse.Namespace) -> int:
    if args.schema:
        print(json.dumps(flat_schema() if args.flat else json_schema(), indent=2))
        return 0
    start = Path(args.path)
    if not start.exists():
        print(f"error: {start} does not exist; give a file or folder of your project.", file=sys.stderr)
        return 2
    read = read_project(start)
    for note in read.notes:
        print(f"warning: {note}", file=sys.stderr)
    for problem in read.problems:
        print(f"error: {problem}", file=sys.stderr)
    source = find_pyproject(start)
    print(json.dumps({"source": str(source) if source else None, "settings": settings_to_json(read.settings)},
                     indent=2))
    return 2 if read.problems else 0
