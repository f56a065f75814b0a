"""What a request carries of the user's code: the file's text and the local modules it imports.

``sources_for(path, text)`` reads the file's imports (``ast``, no execution), finds the ones that
resolve to files in the user's folder (the file's own folder, or the root of the package it sits
in), and follows their imports in turn, within limits (``MAX_MODULES`` files, ``MAX_BYTES`` in
all). The worker imports these from the sent text under their original paths, so a worker on
another host needs nothing of the user's folder, and tracebacks still name the user's files.
Installed packages are not sent (the worker's environment provides them).

Client side: stdlib only, never imports the user's code.
"""

from __future__ import annotations

import ast
import os

from pallasite.runner.messages import SourceFile, Sources

MAX_MODULES = 64
MAX_BYTES = 4 * 2**20


def package_of(path: str) -> tuple[str | None, str]:
    """(the file's dotted package or None, the folder its imports resolve from)."""
    folder = os.path.dirname(os.path.abspath(path))
    parts: list[str] = []
    root = folder
    while os.path.isfile(os.path.join(root, "__init__.py")) and root != os.path.dirname(root):
        parts.append(os.path.basename(root))
        root = os.path.dirname(root)
    if not parts or not all(p.isidentifier() for p in parts):
        return None, folder
    return ".".join(reversed(parts)), root


def sources_for(path: str, text: str | None = None) -> Sources:
    """The request's ``Sources`` for ``path`` (its ``text`` when given, else read from disk)."""
    path = os.path.abspath(path)
    if text is None:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    package, root = package_of(path)
    folder = os.path.dirname(path)
    roots = [folder] + ([root] if root != folder else [])
    found: dict[str, SourceFile] = {}
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
                found[name] = SourceFile(path=candidate, text=module_text, module=name)
                is_pkg = os.path.basename(candidate) == "__init__.py"
                queue.append((module_text, name if is_pkg else name.rpartition(".")[0] or None, candidate))
                break
    return Sources(file=SourceFile(path=path, text=text), modules=tuple(found.values()), root=root, package=package)


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
