"""Kernel code no check ran (client side, never imports jax): PLS308, an information finding.

Tier 3 runs the kernels the file's task reaches; a kernel no task calls (a backward pass next to a
forward-only task), a variant picked by a Python ``if`` (a single-step body used only when one block
covers the sequence), or a branch no shape of the task takes is compiled perhaps, but never run: a bug
there passes every check. The worker returns, per entry whose tier-3 run ran, the lines of the file the
traced kernels' equations came from (``CheckEntry.ran_lines``, ``runner/tier3/traced_lines.py``). A line that
produced no equation is not proof it did not run (``pass``, a shape read), so whole units are judged:
a kernel function's body, each branch of an ``if``, a loop's body, a nested function (a ``pl.when``
body). A unit none of whose lines produced an equation, and which holds something that would (a call
or a subscript), never ran; its outermost such unit is said once, at its first line, with the range
as a related place (the hover over any of its lines says it too).
"""

from __future__ import annotations

import ast
from typing import Any, Iterable, Sequence

from ...analysis.codes import CODES
from ...analysis.types import Finding, Related, Span

CODE = "PLS308"
RANGE_NOTE = "never ran in any check"


def ran_lines(entries: Iterable[Any]) -> frozenset[int] | None:
    """The 1-based lines the tier-3 runs of ``entries`` ran (None: no entry's tier 3 ran)."""
    found: set[int] | None = None
    for entry in entries:
        lines = getattr(entry, "ran_lines", None)
        if lines is not None:
            found = (found or set()) | set(lines)
    return frozenset(found) if found is not None else None


def kernel_def_lines(entries: Iterable[Any]) -> set[int]:
    """The 1-based def lines of the checked file's kernels the entries' runs made (``ReachedCall``)."""
    return {c.kernel_line for e in entries for c in (getattr(e, "reached", None) or ())
            if c.kernel_line is not None and c.kernel_module is None}


def never_ran_findings(text: str, sites: Sequence[Any], ran: frozenset[int] | None,
                       kernel_lines: Iterable[int] = ()) -> list[Finding]:
    """PLS308 for each unit of the file's kernel functions that no tier-3 run reached (module doc). The
    kernel functions: those tier 0's sites name, those the runs made (``kernel_lines``: 1-based def lines),
    and functions of the file taking two or more ``*_ref`` parameters (a kernel passed by a variable)."""
    if ran is None:
        return []
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    wanted = {span.line + 1 for s in sites if (span := getattr(s, "kernel_def_span", None)) is not None}
    wanted |= set(kernel_lines)
    kernels = [fn for fn in defs if fn.lineno in wanted or _takes_refs(fn)]
    kernels = [fn for fn in kernels if not any(k is not fn and k.lineno < fn.lineno <= (k.end_lineno or 0)
                                               for k in kernels)]  # a nested function is its kernel's unit
    out: list[Finding] = []
    for fn in sorted(kernels, key=lambda f: f.lineno):
        for first, last in _unran(fn.body, ran):
            out.append(_finding(first, last, fn.name, text))
    return out


def _takes_refs(fn: ast.AST) -> bool:
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    return sum(p.endswith(("_ref", "_refs")) for p in params) >= 2


def _unran(body: list[ast.stmt], ran: frozenset[int]) -> list[tuple[int, int]]:
    """(first, last) 1-based line ranges of the outermost units of ``body`` that never ran."""
    body = [s for s in body if not _docstring(s)]
    if not body:
        return []
    first, last = body[0].lineno, max(getattr(s, "end_lineno", s.lineno) or s.lineno for s in body)
    if _does_work(body) and not any(line in ran for line in range(first, last + 1)):
        return [(first, last)]
    out: list[tuple[int, int]] = []
    for stmt in body:
        for inner in _units(stmt):
            out += _unran(inner, ran)
    return out


def _units(stmt: ast.stmt) -> list[list[ast.stmt]]:
    if isinstance(stmt, ast.If):
        return [stmt.body, stmt.orelse]
    if isinstance(stmt, (ast.For, ast.While, ast.AsyncFor)):
        return [stmt.body, stmt.orelse]
    if isinstance(stmt, (ast.With, ast.AsyncWith, ast.FunctionDef, ast.AsyncFunctionDef)):
        return [stmt.body]
    if isinstance(stmt, ast.Try):
        return [stmt.body, *[h.body for h in stmt.handlers], stmt.orelse, stmt.finalbody]
    return []


def _does_work(body: list[ast.stmt]) -> bool:
    """Whether the statements hold something that leaves an equation when traced (a call, a subscript)."""
    return any(isinstance(n, (ast.Call, ast.Subscript, ast.BinOp)) for s in body for n in ast.walk(s))


def _docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _finding(first: int, last: int, kernel: str, text: str) -> Finding:
    lines = text.splitlines()
    width = len(lines[first - 1]) if 0 < first <= len(lines) else 0
    indent = width - len(lines[first - 1].lstrip()) if width else 0
    end_width = len(lines[last - 1]) if 0 < last <= len(lines) else 0
    what = f"line {first}" if first == last else f"lines {first}-{last}"
    message = (f"{RANGE_NOTE}: {what} (kernel {kernel}); add a call that reaches them (a task or test whose "
               "inputs take this path), or they are not tested")
    whole = Span(first - 1, 0, last - 1, end_width)
    return Finding(code=CODE, message=message, span=Span(first - 1, indent, first - 1, width),
                   severity=CODES[CODE].severity, tier=3, kernel=kernel, origin="TPU interpreter",
                   related=(Related(whole, f"{RANGE_NOTE}: {what}"),))


def range_at(findings: Iterable[Finding], line: int) -> str | None:
    """The message of the PLS308 whose never-ran range holds 0-based ``line`` (for the hover), else None."""
    for f in findings:
        if f.code != CODE:
            continue
        for r in f.related:
            if r.message.startswith(RANGE_NOTE) and r.span.line <= line <= r.span.end_line:
                return f.message
    return None
