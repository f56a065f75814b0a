"""A kernel file's local imports — the one finder behind both what a worker request carries
(engine/sources.py) and the hash that keys stored verdicts (``source:<sha256>``), so a cached
verdict is invalidated by a change to exactly the modules the worker would have imported.

Imports are read with ``ast`` (nothing is executed) and resolved as Python would for a file in
its folder: absolute names against the file's folder and the root of the package it sits in
(plus any ``extra_roots``, e.g. the workspace), relative names against the file's package.
Every module found is followed in turn, and importing ``a.b`` also runs ``a/__init__.py``.
The standard library and installed packages are never local. Limits: ``MAX_MODULES`` files and
``MAX_BYTES`` of text in all.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from .types import code_hash

MAX_MODULES = 64
MAX_BYTES = 4 * 2**20


@dataclass(frozen=True)
class LocalModule:
    name: str  # dotted module name, as the importing code spells it
    path: str  # absolute path of its file
    text: str


def package_of(path: str | Path) -> tuple[str | None, str]:
    """(the file's dotted package or None, the folder its absolute imports resolve from)."""
    folder = os.path.dirname(os.path.abspath(path))
    parts: list[str] = []
    root = folder
    while os.path.isfile(os.path.join(root, "__init__.py")) and root != os.path.dirname(root):
        parts.append(os.path.basename(root))
        root = os.path.dirname(root)
    if not parts or not all(p.isidentifier() for p in parts):
        return None, folder
    return ".".join(reversed(parts)), root


def find_local_modules(path: str | Path, text: str, extra_roots: Sequence[str | Path] = ()) -> list[LocalModule]:
    """The local modules ``path`` (whose text is ``text``) imports, directly or through each other,
    in the order they were found."""
    path = os.path.abspath(path)
    package, root = package_of(path)
    roots: list[str] = []
    for candidate in [os.path.dirname(path), root, *map(os.path.abspath, extra_roots)]:
        if candidate not in roots:
            roots.append(candidate)
    found: dict[str, LocalModule] = {}
    total = len(text.encode("utf-8", "replace"))
    queue: list[tuple[str, str | None, str]] = [(text, package, path)]
    while queue and len(found) < MAX_MODULES:
        body, pkg, file = queue.pop(0)
        for name in _imported_names(body, pkg, file):
            if name in found:
                continue
            for candidate in _candidates(name, roots):
                if candidate == path or not os.path.isfile(candidate):
                    continue
                try:
                    with open(candidate, encoding="utf-8") as f:
                        module_text = f.read()
                except (OSError, UnicodeDecodeError):
                    break
                total += len(module_text.encode("utf-8"))
                if total > MAX_BYTES or len(found) >= MAX_MODULES:
                    break
                found[name] = LocalModule(name, candidate, module_text)
                is_pkg = os.path.basename(candidate) == "__init__.py"
                queue.append((module_text, name if is_pkg else name.rpartition(".")[0] or None, candidate))
                break
    return list(found.values())


def local_imports(path: Path, text: str | None = None, root: Path | None = None) -> list[Path]:
    """Files of the local modules ``path`` imports (``root``: one more folder absolute imports
    resolve from), sorted."""
    own = text if text is not None else Path(path).read_text(encoding="utf-8")
    modules = find_local_modules(path, own, [root] if root is not None else ())
    return sorted({Path(m.path).resolve() for m in modules})


def source_hash(path: str | Path, text: str | None = None, root: Path | None = None) -> str:
    """``source:<sha256>`` of a kernel file's text plus its local imports' names and texts."""
    own = text if text is not None else Path(path).read_text(encoding="utf-8")
    modules = find_local_modules(path, own, [root] if root is not None else ())
    parts: list[str | bytes] = [own]
    for module in sorted(modules, key=lambda m: m.path):
        parts.append(b"\0" + os.path.basename(module.path).encode() + b"\0" + module.text.encode("utf-8"))
    return code_hash("source", *parts)


def _candidates(name: str, roots: list[str]) -> list[str]:
    rel = name.replace(".", os.sep)
    out = []
    for root in roots:
        out += [os.path.join(root, rel + ".py"), os.path.join(root, rel, "__init__.py")]
    return out


def _imported_names(text: str, package: str | None, file: str) -> list[str]:
    """Dotted names this source imports (absolute, relative ones resolved against ``package``),
    with every parent package too (``import a.b`` runs ``a/__init__.py`` first)."""
    try:
        tree = ast.parse(text, filename=file)
    except (SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                if not package:
                    continue
                parts = package.split(".")
                if node.level - 1 > len(parts) - 1:
                    continue
                head = ".".join(parts[: len(parts) - (node.level - 1)])
                base = f"{head}.{base}" if base else head
            if not base:
                continue
            names.append(base)
            names += [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]  # submodules
    out: list[str] = []
    for name in names:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix not in out:
                out.append(prefix)
    return out
