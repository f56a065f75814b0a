"""A kernel file's local imports, and the hash of its code with them (``source:<sha256>``).

Local imports are found with ``ast``: modules that resolve to files next to the kernel (or under
the workspace root), recursively, with the packages' ``__init__.py`` files they run. The standard
library and installed packages are not local. ``source_hash`` keys stored tier 1 and 3 verdicts
(tier 2 uses the lowered module's hash, which the worker computes with the same ``code_hash``).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterable

from .types import code_hash


def local_imports(path: Path, text: str | None = None, root: Path | None = None) -> list[Path]:
    """Files of the modules ``path`` imports that live next to it (or under ``root``), recursively.

    Only modules found as files are followed. A file that does not parse contributes no imports
    (its own text is still hashed)."""
    path = path.resolve()
    root = (root or path.parent).resolve()
    seen: dict[Path, None] = {}
    todo = [(path, text)]
    while todo:
        current, current_text = todo.pop()
        try:
            body = current_text if current_text is not None else current.read_text(encoding="utf-8")
            tree = ast.parse(body)
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for target in _import_targets(tree, current, root):
            if target not in seen and target != path:
                seen[target] = None
                todo.append((target, None))
    return sorted(seen)


def _import_targets(tree: ast.Module, current: Path, root: Path) -> Iterable[Path]:
    for node in ast.walk(tree):
        names: list[tuple[str, int]] = []
        if isinstance(node, ast.Import):
            names = [(alias.name, 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names = [(base, node.level)]
            names += [(f"{base}.{alias.name}" if base else alias.name, node.level) for alias in node.names]
        for dotted, level in names:
            bases = [current.parent] if level == 0 else [_up(current.parent, level - 1)]
            if level == 0 and root not in bases:
                bases.append(root)
            for base in bases:
                found = _module_file(base, dotted)
                if found is not None:
                    yield found
                    parts = dotted.split(".")  # importing a.b.c runs a/__init__.py and a/b/__init__.py
                    for n in range(1, len(parts)):
                        init = base.joinpath(*parts[:n], "__init__.py")
                        if init.is_file():
                            yield init.resolve()
                    break


def _up(folder: Path, levels: int) -> Path:
    for _ in range(levels):
        folder = folder.parent
    return folder


def _module_file(base: Path, dotted: str) -> Path | None:
    if not dotted:
        return None
    candidate = base.joinpath(*dotted.split("."))
    for option in (candidate.with_suffix(".py"), candidate / "__init__.py"):
        if option.is_file():
            return option.resolve()
    return None


def source_hash(path: str | Path, text: str | None = None, root: Path | None = None) -> str:
    """``source:<sha256>`` of a kernel file's text plus its local imports' names and texts."""
    path = Path(path)
    own = text if text is not None else path.read_text(encoding="utf-8")
    parts: list[str | bytes] = [own]
    for dep in local_imports(path, own, root):
        try:
            parts.append(b"\0" + dep.name.encode() + b"\0" + dep.read_bytes())
        except OSError:
            continue
    return code_hash("source", *parts)
