"""A corpus of broken kernels with their known fixes, derived from the broken/fixed twins in tests/data.

Each twin pair (``tier0/*_bad.py`` + ``*_ok.py``, ``compiler/*_broken.py`` + ``*_fixed.py``) differs
in the fix and in its module docstring ("Broken: ..." / "Fixed version of ..."). The known fix is
the diff without the docstring hunks, written as search/replace blocks a model could have sent
(each search made unique in the broken file by widening it with neighbouring lines). ``fix_lines``
are the broken file's lines that fix touches: a verified edit must stay within them.

Plausible wrong fixes for the same case, each of which must never be offered:
  comment    the first line of the fix gets "# fixed" appended (what a model that misread the
             error might send: the mistake is still there)
  suppress   the finding's line gets "# pallasite: ignore[CODE]" (silences instead of fixing)
  partial    only the first changed line of a fix that changes several lines
"""

from __future__ import annotations

import ast
import difflib
import json
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class Case:
    name: str
    path: Path
    broken: str
    fixed: str  # the twin with the broken file's docstring (so only the fix differs)
    blocks: tuple[tuple[str, str], ...]  # (search, replace)
    fix_lines: frozenset[int]  # 0-based lines of ``broken`` the fix touches


def twins() -> list[tuple[str, Path, Path]]:
    out = []
    for bad in sorted((DATA / "tier0").glob("*_bad.py")):
        ok = bad.with_name(bad.name[:-len("_bad.py")] + "_ok.py")
        if ok.exists():
            out.append((f"tier0/{bad.stem[:-4]}", bad, ok))
    for bad in sorted((DATA / "compiler").glob("*_broken.py")):
        ok = bad.with_name(bad.name[:-len("_broken.py")] + "_fixed.py")
        if ok.exists():
            out.append((f"compiler/{bad.stem[:-7]}", bad, ok))
    return out


def _docstring_lines(text: str) -> range:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return range(0)
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant) \
            and isinstance(first.value.value, str):
        return range(first.lineno - 1, first.end_lineno)
    return range(0)


def _without_docstring_change(broken: str, fixed: str) -> str:
    """``fixed`` with ``broken``'s module docstring, so the diff is only the fix."""
    b, f = broken.splitlines(keepends=True), fixed.splitlines(keepends=True)
    bd, fd = _docstring_lines(broken), _docstring_lines(fixed)
    if not bd or not fd:
        return fixed
    return "".join(f[:fd.start] + b[bd.start:bd.stop] + f[fd.stop:])


def _unique_block(lines: list[str], start: int, end: int, text: str) -> tuple[int, int]:
    """Widen [start, end) until the lines occur once in ``text``."""
    lo, hi = start, max(end, start + 1) if end == start else end
    if end == start:  # a pure insertion: anchor on the line before
        lo, hi = max(0, start - 1), start
    while True:
        chunk = "".join(lines[lo:hi])
        if chunk.strip() and text.count(chunk) == 1:
            return lo, hi
        if lo == 0 and hi >= len(lines):
            return lo, hi
        lo, hi = max(0, lo - 1), min(len(lines), hi + 1)


def make_case(name: str, bad: Path, ok: Path) -> Case:
    broken = bad.read_text()
    fixed = _without_docstring_change(broken, ok.read_text())
    a, b = broken.splitlines(keepends=True), fixed.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    blocks, touched = [], set()
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        touched.update(range(i1, i2) if i2 > i1 else (i1,))
        lo, hi = _unique_block(a, i1, i2, broken)
        # the widened lines around the change, taken from both sides
        before, after = a[lo:i1], a[i2:hi]
        blocks.append(("".join(a[lo:hi]), "".join(before + b[j1:j2] + after)))
    return Case(name, bad, broken, fixed, tuple(blocks), frozenset(touched))


def cases() -> list[Case]:
    return [make_case(*t) for t in twins()]


def proposal(blocks, explanation: str = "known fix") -> str:
    return json.dumps({"explanation": explanation,
                       "edits": [{"search": s, "replace": r} for s, r in blocks]})


def wrong_fixes(case: Case, finding_lines: list[int], codes: list[str]) -> dict[str, str]:
    lines = case.broken.splitlines(keepends=True)
    first = min(case.fix_lines)
    out = {}
    line = lines[first]
    if line.strip():
        out["comment"] = proposal([(line, line.rstrip("\n") + "  # fixed\n")], "fixed")
    if finding_lines and codes:
        target = lines[finding_lines[0]]
        if target.strip() and case.broken.count(target) == 1:
            out["suppress"] = proposal([(target, target.rstrip("\n") + f"  # pallasite: ignore[{','.join(codes)}]\n")],
                                       "the rule is too strict here")
    changed = [(s, r) for s, r in case.blocks]
    if len(case.fix_lines) > 1 and changed:
        s, r = changed[0]
        s_lines, r_lines = s.splitlines(keepends=True), r.splitlines(keepends=True)
        if len(s_lines) == len(r_lines):
            diffs = [i for i, (x, y) in enumerate(zip(s_lines, r_lines)) if x != y]
            if len(diffs) > 1 or len(changed) > 1:
                partial = list(s_lines)
                partial[diffs[0]] = r_lines[diffs[0]]
                out["partial"] = proposal([(s, "".join(partial))], "partial fix")
    return out
