"""Site rules of the second public mutation corpus (issue 57): issue 50's eleven classes
(``benchmarks/mutation_rules.py``, unchanged) and four more, the mistakes issue 57 names; how a check is scored.

Written and committed before any mutant of this corpus was checked (``benchmarks/mutation_rules_2026-12-06_issue57.md``
says when). Only Python's ``ast`` reads the files here (never pallasite's analysis), every edit keeps the line
count, and every mutant must parse, as in issue 50's rules. The words (*kernel function*, *init block*, *resolve a
name*) are that module's.

The four new classes (each site's true lines in brackets; a finding within +-1 of one is "at the line"):

12. ``mask-off-by-one``: in a kernel function, a comparison with one operator ``<``, ``<=``, ``>`` or ``>=`` one of
    whose sides mentions ``iota`` (``broadcasted_iota``, ``lax.iota``, ``jnp.arange``) or ``program_id``, directly
    or through a name assigned once in that function from such an expression, gets its off-by-one partner
    (``<`` <-> ``<=``, ``>`` <-> ``>=``). [the comparison's line]
13. ``init-wrong-axis``: an init block whose condition is ``pl.program_id(A) == 0`` written with an int literal
    ``A`` (either side) gets ``A - 1`` when ``A > 0``, else ``A + 1`` (another grid axis: the accumulator is zeroed
    on the wrong axis). [the ``pl.when`` line]
14. ``scale-inverted``: ``X ** -0.5`` (or ``X ** (-0.5)``) becomes ``X ** 0.5``; ``1 / <sqrt>(X)`` or ``1.0 /
    <sqrt>(X)`` (``sqrt`` of ``math``/``jnp``/``np``/``lax``) becomes ``<sqrt>(X)``; ``lax.rsqrt(X)`` becomes
    ``jnp.sqrt(X)`` (``jax.numpy.`` when the file binds no ``jnp``): a softmax scale written as its reciprocal.
    Anywhere in the file. [the expression's line]
15. ``cdiv-floor``: an entry ``pl.cdiv(a, b)`` (or ``cdiv(a, b)``) of a ``grid=`` tuple (of ``pallas_call``,
    ``GridSpec``, ``PrefetchScalarGridSpec``, ``emit_pipeline``; a name resolved) becomes ``a // b``: the grid drops
    a partial last block. [the entry's line, the ``grid=`` keyword's line]

Per file and class at most ``CAP`` mutants, the smallest sha256 of ``"{file id}|{class}|{line}|{col}"`` as before.

Scoring (``score``): issue 50's, with the runtime codes PLS300-304 as the new classes' expected warnings (and
PLS016 for ``init-wrong-axis``: a carried axis said by tier 0). Also read, not part of caught / at the line:
``verified``, a catching finding at the line whose fix is titled "verified: ..." (the locate step's, issue 57).
"""

from __future__ import annotations

import ast
import re

import mutation_rules as v1
import mutations
from mutation_rules import Site, _calls, _name, _replace, _resolve

CAP = 2
NEW_CLASSES = ("mask-off-by-one", "init-wrong-axis", "scale-inverted", "cdiv-floor")
CLASSES = v1.CLASSES + NEW_CLASSES
TARGETS = dict(v1.TARGETS)
NEVER_CATCH = v1.NEVER_CATCH
RUNTIME_WARNINGS = v1.RUNTIME_WARNINGS
EXPECTED_WARNINGS = dict(v1.EXPECTED_WARNINGS) | {c: v1.RUNTIME_WARNINGS for c in NEW_CLASSES} | {
    "init-wrong-axis": v1.RUNTIME_WARNINGS | {"PLS016"}}
_OFF_BY_ONE = {ast.Lt: "<=", ast.LtE: "<", ast.Gt: ">=", ast.GtE: ">"}
_MASKY = re.compile(r"\b(?:broadcasted_iota|iota|arange|program_id)\b")
_SQRT = {"sqrt"}


def sites(text: str) -> dict[str, list[Site]]:
    """Every site of every class (issue 50's and the new ones) in ``text`` (before the cap), by class."""
    found = v1.sites(text)
    tree = ast.parse(text)
    ctx = v1._Ctx(text, tree)
    for cls in NEW_CLASSES:
        found[cls] = []
    for rule in (_mask_off_by_one, _init_wrong_axis, _scale_inverted, _cdiv_floor):
        for site in rule(ctx):
            if not any((s.line, s.col) == (site.line, site.col) for s in found[site.cls]):
                found[site.cls].append(site)
    return found


def _assigned_from_masky(fn: ast.AST, ctx: v1._Ctx) -> set[str]:
    """Names assigned once in ``fn`` from an expression mentioning iota or program_id."""
    counts: dict[str, int] = {}
    masky: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            counts[name] = counts.get(name, 0) + 1
            if _MASKY.search(ctx.seg(node.value)):
                masky.add(name)
    return {n for n in masky if counts.get(n) == 1}


def _mask_off_by_one(ctx: v1._Ctx):
    for fn in ctx.kernels:
        names = _assigned_from_masky(fn, ctx)
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _OFF_BY_ONE):
                continue
            sides = (node.left, node.comparators[0])
            if not any(_MASKY.search(ctx.seg(s)) or any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(s))
                       for s in sides):
                continue
            new = f"{ctx.seg(node.left)} {_OFF_BY_ONE[type(node.ops[0])]} {ctx.seg(node.comparators[0])}"
            yield Site("mask-off-by-one", node.lineno, node.col_offset, (_replace(node, new),), (node.lineno,),
                       f"line {node.lineno}: mask comparison `{ctx.seg(node)}` -> `{new}`")


def _init_wrong_axis(ctx: v1._Ctx):
    for fn in ctx.kernels:
        for block in ast.walk(fn):
            when = v1._when_cond(block)
            if when is None or block is fn:
                continue
            dec, cond = when
            if not (isinstance(cond, ast.Compare) and len(cond.ops) == 1 and isinstance(cond.ops[0], ast.Eq)):
                continue
            sides = [cond.left, cond.comparators[0]]
            zero = [s for s in sides if isinstance(s, ast.Constant) and s.value == 0 and type(s.value) is int]
            pid = [s for s in sides if isinstance(s, ast.Call) and _name(s.func) == "program_id" and s.args
                   and isinstance(s.args[0], ast.Constant) and type(s.args[0].value) is int]
            if not zero or not pid:
                continue
            arg = pid[0].args[0]
            axis = arg.value
            new = str(axis - 1 if axis > 0 else axis + 1)
            yield Site("init-wrong-axis", arg.lineno, arg.col_offset, (_replace(arg, new),),
                       tuple(sorted({dec.lineno, arg.lineno})), f"line {arg.lineno}: init on program_id({axis}) -> program_id({new})")


def _scale_inverted(ctx: v1._Ctx):
    np_name = ctx.np
    for node in ast.walk(ctx.tree):
        new = None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            exp = node.right
            value = exp.operand.value if isinstance(exp, ast.UnaryOp) and isinstance(exp.op, ast.USub) \
                and isinstance(exp.operand, ast.Constant) else None
            if value == 0.5:
                new = f"{ctx.seg(node.left)} ** 0.5"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.left, ast.Constant) \
                and node.left.value in (1, 1.0) and isinstance(node.right, ast.Call) and _name(node.right.func) in _SQRT:
            new = ctx.seg(node.right)
        elif isinstance(node, ast.Call) and _name(node.func) == "rsqrt" and len(node.args) == 1 and np_name:
            new = f"{np_name}.sqrt({ctx.seg(node.args[0])})"
        if new is None or "\n" in ctx.seg(node):
            continue
        yield Site("scale-inverted", node.lineno, node.col_offset, (_replace(node, new),), (node.lineno,),
                   f"line {node.lineno}: scale `{ctx.seg(node)}` -> `{new}`")


def _cdiv_floor(ctx: v1._Ctx):
    for call in _calls(ctx.tree, "pallas_call", "GridSpec", "PrefetchScalarGridSpec", "emit_pipeline"):
        kw = next((k for k in call.keywords if k.arg == "grid"), None)
        if kw is None:
            continue
        grid = _resolve(kw.value, call, ctx.parents, ctx.tree)
        if not isinstance(grid, ast.Tuple):
            continue
        for e in grid.elts:
            if isinstance(e, ast.Call) and _name(e.func) == "cdiv" and len(e.args) == 2 and "\n" not in ctx.seg(e):
                new = f"{ctx.seg(e.args[0])} // {ctx.seg(e.args[1])}"
                yield Site("cdiv-floor", e.lineno, e.col_offset, (_replace(e, new),),
                           tuple(sorted({e.lineno, kw.value.lineno})), f"line {e.lineno}: grid entry {ctx.seg(e)} -> {new}")


def mutants(file_id: str, text: str, cap: int = CAP) -> list[tuple[Site, str]]:
    """The chosen sites of every class with the mutated text; a site whose text does not parse is an error."""
    found = sites(text)
    return [(site, v1.made(file_id, text, site)) for cls in CLASSES for site in v1.choose(file_id, cls, found[cls], cap)]


def _catches(f: dict, cls: str) -> bool:
    code = f.get("code", "")
    if code.startswith("PLS9") or code in v1.NEVER_CATCH:
        return False
    return f.get("severity") == "error" or (f.get("severity") == "warning" and code in EXPECTED_WARNINGS[cls])


def score(cls: str, true_lines: tuple[int, ...], base: list[dict], mutant: list[dict]) -> tuple[bool, bool, list[dict]]:
    """(caught, at the line, the catching findings) of a mutant's findings against its base's (issue 50's rule)."""
    before = {(f.get("code"), f.get("line")) for f in base}
    new = [f for f in mutant if (f.get("code"), f.get("line")) not in before and _catches(f, cls)]
    at = any(abs(f["line"] - t) <= 1 for f in new for t in true_lines)
    return bool(new), at, new


def verified(true_lines: tuple[int, ...], new: list[dict]) -> bool:
    """Whether a catching finding at the line carries the locate step's verified fix."""
    return any(f.get("verified") and any(abs(f["line"] - t) <= 1 for t in true_lines) for f in new)
