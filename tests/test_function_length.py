"""The style rule "no function over 80 lines" (the project's standards), read from the code with ast.

A function's length runs from its ``def`` line to its last line (``end_lineno - lineno + 1``), nested
functions and methods counted on their own as well as inside the function that holds them.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("runner", "engine", "agents", "server", "analysis", "knowledge", "wire")
MAX_LINES = 80


def long_functions(text: str, name: str = "<text>", limit: int = MAX_LINES) -> list[str]:
    """``path:line name (N lines)`` for each function in ``text`` longer than ``limit`` lines."""
    out = []
    for node in ast.walk(ast.parse(text, name)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            if lines > limit:
                out.append(f"{name}:{node.lineno} {node.name} ({lines} lines)")
    return out


def test_no_function_in_the_package_is_over_80_lines():
    files = [p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))]
    assert len(files) > 50  # the folders were found
    found = [hit for p in files for hit in long_functions(p.read_text(), str(p.relative_to(ROOT)))]
    assert not found, "functions over 80 lines (split them into named steps):\n" + "\n".join(found)


def test_the_scan_finds_a_long_function_and_a_long_method_and_counts_from_def_to_last_line():
    body = "\n".join(f"    x{i} = {i}" for i in range(79))  # def + 79 lines: 80, at the limit
    short = f"def fits():\n{body}\n"
    long = f"async def too_long():\n{body}\n    return x0\n"  # 81
    method = "class A:\n    def m(self):\n" + "\n".join(f"        y{i} = {i}" for i in range(80)) + "\n"  # 81
    assert long_functions(short, "f.py") == []
    assert long_functions(long, "f.py") == ["f.py:1 too_long (81 lines)"]
    assert long_functions(method, "f.py") == ["f.py:2 m (81 lines)"]
