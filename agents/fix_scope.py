"""What a verified fix may change: a minimal edit near the findings, adding no new powers.

A fix is checked by running it (the compiler tiers import the file), and "verified" is what the user
applies without reading: so a proposal that compiles is not enough. ``unsafe_edit(original,
candidate, findings)`` names, as sentences, every way the edit goes beyond fixing what the
findings name ([] when it does not):

- code written away from every finding (its line, the lines of its related places, and the lines
  that define a name the finding's line uses, each with ``SLACK`` lines around it); a line only
  deleted adds no code and may be anywhere;
- powers the original did not have: new imports, calls of ``exec``/``eval``/``compile``/
  ``__import__``/``open``/``getattr``/``setattr``/``globals``/``vars``/``breakpoint``/``input``,
  uses of ``os``, ``sys``, ``subprocess``, ``socket``, ``shutil``, ``ctypes``, ``pathlib``,
  ``importlib``, ``builtins``, ``pickle``, ``marshal``, ``base64``, ``codecs``, ``zlib``, dunder
  attributes (``__globals__``, ``__code__``, ``__builtins__``, ``__subclasses__``), long encoded
  literals, and new top-level ``raise`` statements (a fix that fails at import is no fix).

Counted against the original, so a kernel that already uses ``os`` may keep doing so. Pure text
analysis: no import of what it reads.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

SLACK = 3
POWER_CALLS = frozenset({"exec", "eval", "compile", "__import__", "open", "getattr", "setattr", "delattr",
                         "globals", "vars", "locals", "breakpoint", "input", "memoryview"})
POWER_MODULES = frozenset({"os", "sys", "subprocess", "socket", "shutil", "ctypes", "pathlib", "importlib",
                           "builtins", "pickle", "marshal", "base64", "codecs", "zlib", "gc", "inspect", "signal",
                           "threading", "multiprocessing", "urllib", "http", "requests", "tempfile", "glob", "io"})
POWER_ATTRIBUTES = frozenset({"__globals__", "__code__", "__builtins__", "__subclasses__", "__dict__", "__class__",
                              "__bases__", "__mro__", "__getattribute__", "__import__", "__loader__", "__spec__"})
_ENCODED = re.compile(r"^[A-Za-z0-9+/=_\-\\x]{64,}$")


def _powers(tree: ast.AST) -> Counter:
    """Each power the code uses, counted: ("import", name), ("call", name), ("module", name), ..."""
    found: Counter = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(("import", alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.update(("import", f"{node.module}.{alias.name}") for alias in node.names)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in POWER_CALLS:
            found[("call", node.func.id)] += 1
        elif isinstance(node, ast.Name) and node.id in POWER_MODULES:
            found[("module", node.id)] += 1
        elif isinstance(node, ast.Attribute) and node.attr in POWER_ATTRIBUTES:
            found[("attribute", node.attr)] += 1
        elif isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and len(node.value) >= 64:
            text = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
            if _ENCODED.match(text.replace("\n", "")):
                found[("encoded literal", f"{len(node.value)} characters")] += 1
    if isinstance(tree, ast.Module):
        found.update(("top-level raise", "raise") for node in tree.body if isinstance(node, ast.Raise))
    return found


def _describe(kind: str, name: str) -> str:
    return {"import": f"imports {name}", "call": f"calls {name}()", "module": f"uses the module {name}",
            "attribute": f"reaches {name}", "encoded literal": f"adds an encoded literal ({name})",
            "top-level raise": "raises at import"}[kind]


def written_lines(original: str, candidate: str) -> set[int]:
    """0-based lines of ``original`` where the edit writes something: lines it replaces, and the line
    it inserts before (a line only deleted adds no code, so it is not counted)."""
    out: set[int] = set()
    matcher = difflib.SequenceMatcher(a=original.splitlines(), b=candidate.splitlines(), autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            out.update(range(i1, max(i2, i1 + 1)))
    return out


def allowed_lines(original: str, findings: Iterable[Any]) -> set[int]:
    """The lines a fix of ``findings`` may change: each finding's and related place's lines, and
    the definitions of the names used on them, with ``SLACK`` lines around each."""
    lines = original.splitlines()
    near: set[int] = set()
    for finding in findings:
        span = finding.span
        near.update(range(span.line, span.end_line + 1))
        for related in getattr(finding, "related", ()) or ():
            where = getattr(related, "span", None)
            if where is not None and (getattr(related, "path", None) in (None, getattr(finding, "path", None))):
                near.update(range(where.line, where.end_line + 1))
    names = {n for i in near if 0 <= i < len(lines) for n in re.findall(r"[A-Za-z_]\w*", lines[i])}
    try:
        tree = ast.parse(original)
    except SyntaxError:
        tree = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.FunctionDef, ast.ClassDef)):
            targets = [node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else \
                [t.id for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)]
            if names.intersection(targets):
                end = node.lineno if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else node.end_lineno or node.lineno
                near.update(range(node.lineno - 1, end))
    return {i for line in near for i in range(line - SLACK, line + SLACK + 1)}


def unsafe_edit(original: str, candidate: str, findings: Iterable[Any]) -> list[str]:
    """Why ``candidate`` is more than a minimal fix of ``findings`` in ``original`` (sentences)."""
    findings = list(findings)
    why: list[str] = []
    try:
        before, after = _powers(ast.parse(original)), _powers(ast.parse(candidate))
    except SyntaxError:
        return []  # the checker says what does not parse
    added = after - before
    why += [_describe(kind, name) for (kind, name) in sorted(added)]
    outside = sorted(written_lines(original, candidate) - allowed_lines(original, findings))  # no finding: none
    if outside:
        shown = ", ".join(str(i + 1) for i in outside[:6]) + (" ..." if len(outside) > 6 else "")
        why.append(f"writes code at line(s) {shown}, away from every finding it fixes")
    return why
