"""Passages read from the INSTALLED jax's Pallas sources with ``ast`` (jax is never imported).

- ``api/<alias>.<name>``: the signature and docstring of each public name of the Pallas modules
  (``pl.BlockSpec``, ``pltpu.CompilerParams``), following the public modules' re-exports into
  ``jax._src`` (and simple ``name = other`` aliases), with documented base classes' docstrings
  and a class's members and methods appended.
- ``kernel/<path>:<name>``: top-level functions/classes of jax's hand-written kernels
  (``pallas/ops``), source included; only indexed on request.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Iterator

from .docs_sources import PUBLIC_MODULES, Passage, api_source_files, kernel_source_files, split_long


# --------------------------------------------------------------------------- API passages


class _ModuleReader:
    """Parses jax module files on demand and finds where a re-exported name is defined."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._trees: dict[Path, ast.Module | None] = {}

    def file_for(self, module: str) -> Path | None:
        parts = module.split(".")
        if parts[0] != "jax":
            return None
        base = self.root.joinpath(*parts[1:])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
        return None

    def tree(self, path: Path) -> ast.Module | None:
        if path not in self._trees:
            try:
                self._trees[path] = ast.parse(path.read_text(encoding="utf-8"), str(path))
            except (OSError, SyntaxError, UnicodeDecodeError):
                self._trees[path] = None
        return self._trees[path]

    def definition(self, path: Path, name: str, depth: int = 0) -> tuple[Path, ast.AST] | None:
        """The class/function node named ``name`` in ``path``, following imports a few levels."""
        tree = self.tree(path)
        if tree is None or depth > 4:
            return None
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                return path, node
        for node in tree.body:  # `ds = indexing.ds` / `ds = dslice`: follow simple aliases
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name:
                if isinstance(node.value, ast.Name) and node.value.id != name:
                    return self.definition(path, node.value.id, depth + 1)
                if isinstance(node.value, ast.Attribute) and isinstance(node.value.value, ast.Name):
                    module = self._imported_module(tree, node.value.value.id)
                    target = self.file_for(module) if module else None
                    if target is not None:
                        return self.definition(target, node.value.attr, depth + 1)
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        target = self.file_for(node.module)
                        if target is not None:
                            return self.definition(target, alias.name, depth + 1)
        return None


    @staticmethod
    def _imported_module(tree: ast.Module, local: str) -> str | None:
        """The dotted module bound to ``local`` by ``from a.b import c`` or ``import a.b as c``."""
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if (alias.asname or alias.name) == local:
                        return f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname == local:
                        return alias.name
        return None


def _signature(node: ast.AST) -> str:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return f"({_args(node.args)})"
    if isinstance(node, ast.ClassDef):
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                args = _args(item.args)
                return "(" + re.sub(r"^self,?\s*", "", args) + ")"
        fields = [
            ast.unparse(item.target) + (f"={ast.unparse(item.value)}" if item.value is not None else "")
            for item in node.body
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
        ]
        return f"({', '.join(fields)})" if fields else ""
    return ""


def _args(args: ast.arguments) -> str:
    text = ast.unparse(args)
    return text if len(text) < 400 else text[:400] + " ..."


def _methods_summary(node: ast.AST) -> str:
    if not isinstance(node, ast.ClassDef):
        return ""
    members = [t.id for item in node.body if isinstance(item, ast.Assign)
               for t in item.targets if isinstance(t, ast.Name) and t.id.isupper()]
    lines = []
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
            doc = ast.get_docstring(item) or ""
            first = doc.strip().splitlines()[0] if doc.strip() else ""
            lines.append(f"- {item.name}({_args(item.args).removeprefix('self').lstrip(', ')}) {first}".rstrip())
    text = ("Members: " + ", ".join(members)) if members else ""
    if lines:
        text += ("\n\n" if text else "") + "Methods:\n" + "\n".join(lines)
    return text


def api_passages(root: Path) -> Iterator[Passage]:
    """One passage (or a few, for long docstrings) per public Pallas class or function."""
    reader = _ModuleReader(root)
    for path in api_source_files(root):
        alias = PUBLIC_MODULES[path.name]
        tree = reader.tree(path)
        if tree is None:
            continue
        names: list[tuple[str, Path, ast.AST]] = []
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                target = reader.file_for(node.module)
                for imported in node.names:
                    public = imported.asname or imported.name
                    if public.startswith("_") or target is None:
                        continue
                    found = reader.definition(target, imported.name)
                    if found is not None:
                        names.append((public, *found))
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                names.append((node.name, path, node))
        seen: set[str] = set()
        for public, def_path, node in names:
            if public in seen:
                continue
            seen.add(public)
            doc = (ast.get_docstring(node) or "").strip() or "(no docstring in the installed jax)"
            qualified = f"{alias}.{public}"
            kind_word = "class" if isinstance(node, ast.ClassDef) else "function"
            head = f"{qualified}{_signature(node)}"
            body = f"{head}\n{kind_word} {public} in {_module_name(root, def_path)}\n\n{doc}"
            for base_name, base_doc in _base_docs(reader, def_path, node):
                body += f"\n\nInherited from {base_name}:\n{base_doc}"
            methods = _methods_summary(node)
            if methods:
                body += "\n\n" + methods
            yield from split_long(
                Passage(f"api/{qualified}", "api", head, str(def_path), getattr(node, "lineno", 1), body)
            )


def _base_docs(reader: _ModuleReader, path: Path, node: ast.AST) -> Iterator[tuple[str, str]]:
    """(name, docstring) of the direct base classes of ``node`` that jax defines and documents."""
    if not isinstance(node, ast.ClassDef):
        return
    for base in node.bases:
        found = None
        if isinstance(base, ast.Name):
            found = reader.definition(path, base.id)
        elif isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name):
            tree = reader.tree(path)
            module = reader._imported_module(tree, base.value.id) if tree else None
            target = reader.file_for(module) if module else None
            found = reader.definition(target, base.attr) if target else None
        if found and isinstance(found[1], ast.ClassDef):
            doc = (ast.get_docstring(found[1]) or "").strip()
            if doc:
                yield found[1].name, doc


def _module_name(root: Path, path: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def public_names(root: Path) -> dict[str, set[str]]:
    """alias (``pl``, ``pltpu``...) -> every name the public module defines, imports or assigns
    (including names it only offers through a deprecation ``__getattr__`` table)."""
    names: dict[str, set[str]] = {}
    reader = _ModuleReader(root)
    for path in api_source_files(root):
        tree = reader.tree(path)
        found: set[str] = set()
        for node in tree.body if tree else ():
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                found.add(node.name)
            elif isinstance(node, ast.Assign):
                found.update(t.id for t in node.targets if isinstance(t, ast.Name))
        names[PUBLIC_MODULES[path.name]] = {n for n in found if not n.startswith("_")}
    return names


# --------------------------------------------------------------------------- kernel passages


def kernel_passages(root: Path) -> Iterator[Passage]:
    """jax's hand-written Pallas kernels, one passage per top-level function or class."""
    ops = root / "experimental" / "pallas" / "ops"
    for path in kernel_source_files(root):
        try:
            text = path.read_text(encoding="utf-8")
            tree = ast.parse(text, str(path))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        rel = path.relative_to(ops).as_posix()
        for node in tree.body:
            if not isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                continue
            code = ast.get_source_segment(text, node) or ""
            if len(code) > 3000:
                code = code[:3000] + "\n# ... (truncated)"
            yield Passage(f"kernel/{rel}:{node.name}", "kernel", f"{rel}: {node.name}", str(path), node.lineno, code)
