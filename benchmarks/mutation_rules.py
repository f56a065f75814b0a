"""Site rules of the public mutation corpus (issue 50): which bug is planted where, and how a check is scored.

Written and committed before any mutant of the corpus was checked (``benchmarks/mutation_rules_2026-12-06.md``
says when); the benchmark that uses them is ``benchmarks/bench_mutations_public.py``. Only Python's ``ast``
reads the files here (never pallasite's analysis, never the kernels' behaviour), so the sites do not depend on
the checker. Every edit keeps the file's line count (``mutations.apply``), so a line of the mutant is the same
line of the unmutated file, and every mutant must parse.

Words used below:

- *kernel function*: a function of the file passed as the kernel of a ``pallas_call`` or ``emit_pipeline``
  (by name, through ``functools.partial(name, ...)``, or through a local name bound once to either), or a
  function with two or more parameters named ``*_ref``/``*_refs``/``*_hbm``/``*_vmem``/``*_smem``; the
  functions nested in it belong to it.
- *output parameter*: a kernel function's parameter whose name, less a ``_ref``/``_refs``/``_hbm``/``_vmem``
  suffix, is ``o``/``out``/``output`` or starts with ``o_``/``out_``/``output_`` or ends with ``_out``/``_output``.
- *store*: ``r[...] = v``, ``r.at[...][...] = v``, ``r[...] += v`` or ``pl.store(r, ...)`` (``r`` a name).
- *init block*: a function nested in a kernel function decorated ``@pl.when(A == 0)`` (either side the literal 0).
- *resolve a name*: a name used as a keyword's value is followed to its one assignment in the same function
  (or at module level); a name assigned more than once is not followed.

The classes (each site's true lines in brackets; a finding within ±1 of one is "at the line"):

1. ``index-map-swap``: an index_map of a ``BlockSpec`` (a lambda, or a def of the file named there) whose
   first two parameters both appear in its body gets those two parameters' names swapped
   (``lambda i, j: (i, j)`` becomes ``lambda j, i: (i, j)``). [the parameters' line, the BlockSpec's line]
2. ``block-misaligned``: in a ``BlockSpec`` without ``memory_space`` whose block shape is a tuple literal, the
   last or second-to-last entry ``e`` (not ``None``, not a ``pl.Squeezed()``/``pl.Element(...)``-like call, not
   an int literal below 8) becomes ``(e) - 4`` (a literal ``v`` becomes ``v - 4``): off the (8, 128) tiling.
   [the entry's line, the BlockSpec's line]
3. ``grid-past-end``: an entry ``e`` of a ``grid=`` tuple (of ``pallas_call``, ``GridSpec``,
   ``PrefetchScalarGridSpec``, ``emit_pipeline``; a name resolved) becomes ``(e) + 1``. [the entry's line,
   the ``grid=`` keyword's line]
4. ``out-shape-dtype``: the dtype of a ``ShapeDtypeStruct`` written in (or resolved from) a ``pallas_call``'s
   ``out_shape=`` becomes ``jnp.int32`` (``jnp.float32`` when its text names an int type); ``jax.numpy.`` when
   the file binds no ``jnp``. [the dtype's line, the ShapeDtypeStruct's line]
5. ``scratch-shrunk``: in a ``VMEM(shape, dtype)``/``SMEM(shape, dtype)`` call with a tuple shape, the first
   entry ``e`` that is not the literal 1 becomes ``(e) // 2``. [the entry's line, the call's line]
6. ``parallel-reduction``: an ``"arbitrary"`` entry (or ``...ARBITRARY``) of a ``dimension_semantics`` tuple
   (keyword, dict key, or a name resolved) becomes ``"parallel"`` (``...PARALLEL``) when a kernel function of
   the file has an init block on that axis (``pl.program_id(axis) == 0``, or a name bound to it: the axis
   carries an accumulator). Checked for a two-TensorCore chip (``TARGETS``). [the entry's line]
7. ``dma-past-end``: the source of ``make_async_copy``/``async_copy``/``sync_copy`` given as ``X.at[i, ...]``:
   its first index ``i`` becomes ``(i) + 1``, or ``pl.ds(s, n)`` becomes ``pl.ds((s) + 1, n)`` (a slice
   ``a:b`` is not a site). [the index's line, the copy call's line]
8. ``output-unwritten``: the one store to an output parameter in its kernel function becomes ``pass`` when the
   parameter's name is used nowhere else there but for ``.shape``/``.dtype``/``.ndim`` (no DMA into it, not
   handed to a helper). [the store's line, the parameter's line]
9. ``acc-init-removed``: in an init block, a store ``r[...] = v`` (or ``pl.store(r, ...)``) to a ref the kernel
   function also reads (a load ``r[...]``, ``pl.load(r, ...)`` or ``r[...] += ...``) becomes ``pass``.
   [the store's line, the ``pl.when`` line, the ``def`` line]
10. ``acc-init-accumulates``: the same stores written ``r[...] = v`` become ``r[...] += v`` (the init reads
    memory nothing wrote). [as 9]
11. ``when-inverted``: the condition ``c`` of a ``pl.when(c)`` becomes ``jnp.logical_not(c)``
    (``jax.numpy.`` when the file binds no ``jnp``). [the ``pl.when`` line, the condition's line]

Per file and class at most ``CAP`` mutants: the sites with the smallest sha256 of
``"{file id}|{class}|{line}|{col}"`` (a smaller ``--cap`` keeps a prefix of the same order). Two sites of one
class at one position are one site.

Scoring (``score``): the mutant's report and its unmutated file's report (same tiers, same chip) from
``pallasite check --format json``; a finding is *new* when its (code, line) is not in the unmutated file's
report; the mutant is *caught* when a new finding is an error, or a warning whose code is in the class's
``EXPECTED_WARNINGS``; *at the line* when one such finding starts within ±1 of a true line. "Could not
check" codes (PLS9xx, PLS205, PLS305-307) never catch.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass

import mutations
from mutations import Edit

CAP = 2
CLASSES = ("index-map-swap", "block-misaligned", "grid-past-end", "out-shape-dtype", "scratch-shrunk",
           "parallel-reduction", "dma-past-end", "output-unwritten", "acc-init-removed", "acc-init-accumulates",
           "when-inverted")
TARGETS = {"parallel-reduction": "v5p"}  # a two-TensorCore chip; every other class: v6e
RUNTIME_WARNINGS = frozenset({"PLS300", "PLS301", "PLS302", "PLS303", "PLS304"})
EXPECTED_WARNINGS = {c: RUNTIME_WARNINGS for c in CLASSES} | {
    "block-misaligned": RUNTIME_WARNINGS | {"PLS010"},
    "parallel-reduction": RUNTIME_WARNINGS | {"PLS016"},
}
NEVER_CATCH = frozenset({"PLS205", "PLS305", "PLS306", "PLS307"})  # and every PLS9xx
_REF_SUFFIX = re.compile(r"_(ref|refs|hbm|vmem|smem)$")
_KERNEL_PARAM = re.compile(r"_(ref|refs|hbm|vmem|smem)$")
_SHAPE_ATTRS = {"shape", "dtype", "ndim"}
_NOT_A_SIZE = {"Squeezed", "squeezed", "Element", "BoundedSlice", "Blocked"}


@dataclass(frozen=True)
class Site:
    """One mutant: the class, where (line, col), the edits, the true lines, and a one-line description."""

    cls: str
    line: int
    col: int
    edits: tuple[Edit, ...]
    true_lines: tuple[int, ...]
    what: str


# --------------------------------------------------------------------------- reading the file


def _name(func: ast.AST) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _calls(tree: ast.AST, *names: str):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in names:
            yield node


def _kw(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(child): parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}


def _scope(node: ast.AST, parents: dict[int, ast.AST], tree: ast.Module) -> ast.AST:
    cur = parents.get(id(node))
    while cur is not None and not isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        cur = parents.get(id(cur))
    return cur if cur is not None else tree


def _resolve(value: ast.expr, node: ast.AST, parents: dict[int, ast.AST], tree: ast.Module) -> ast.expr:
    """A name followed to its one assignment in the enclosing function (else at module level)."""
    if not isinstance(value, ast.Name):
        return value
    for scope in (_scope(node, parents, tree), tree):
        found = [a for a in ast.walk(scope) if isinstance(a, ast.Assign) and len(a.targets) == 1
                 and isinstance(a.targets[0], ast.Name) and a.targets[0].id == value.id
                 and (scope is not tree or a in tree.body)]
        if len(found) == 1:
            return found[0].value
        if found:
            return value
    return value


def _params(fn: ast.AST) -> list[ast.arg]:
    return fn.args.posonlyargs + fn.args.args


def kernel_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    """The file's kernel functions (the module doc says which)."""
    defs: dict[str, list[ast.FunctionDef]] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            defs.setdefault(fn.name, []).append(fn)
    parents = _parents(tree)
    out: list[ast.FunctionDef] = []

    def add(expr: ast.expr | None, at: ast.AST) -> None:
        if expr is None:
            return
        expr = _resolve(expr, at, parents, tree)
        if isinstance(expr, ast.Call) and _name(expr.func) == "partial" and expr.args:
            expr = _resolve(expr.args[0], at, parents, tree)
        if isinstance(expr, ast.Name):
            for fn in defs.get(expr.id, ()):
                if fn not in out:
                    out.append(fn)

    for call in _calls(tree, "pallas_call", "emit_pipeline"):
        add(call.args[0] if call.args else _kw(call, "kernel") or _kw(call, "body"), call)
    for group in defs.values():
        for fn in group:
            if fn not in out and sum(bool(_KERNEL_PARAM.search(a.arg)) for a in _params(fn)) >= 2:
                out.append(fn)
    return [fn for fn in out if not any(fn is not k and _inside(fn, k) for k in out)]


def _inside(inner: ast.AST, outer: ast.AST) -> bool:
    return outer.lineno <= inner.lineno and inner.end_lineno <= outer.end_lineno and inner is not outer


def _is_output(name: str) -> bool:
    base = _REF_SUFFIX.sub("", name)
    return base in ("o", "out", "output") or base.startswith(("o_", "out_", "output_")) \
        or base.endswith(("_out", "_output"))


def _stored_name(stmt: ast.AST) -> str | None:
    """The ref name a store statement writes (see the module doc), else None."""
    target = None
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
    elif isinstance(stmt, ast.AugAssign):
        target = stmt.target
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and _name(stmt.value.func) == "store" \
            and stmt.value.args and isinstance(stmt.value.args[0], ast.Name):
        return stmt.value.args[0].id
    if isinstance(target, ast.Subscript):
        base = target.value
        if isinstance(base, ast.Subscript) and isinstance(base.value, ast.Attribute) and base.value.attr == "at":
            base = base.value.value
        if isinstance(base, ast.Name):
            return base.id
    return None


def _read_names(fn: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name):
            out.add(node.value.id)
        elif isinstance(node, ast.AugAssign) and (name := _stored_name(node)):
            out.add(name)
        elif isinstance(node, ast.Call) and _name(node.func) == "load" and node.args and isinstance(node.args[0], ast.Name):
            out.add(node.args[0].id)
    return out


def _when_cond(fn: ast.AST) -> tuple[ast.Call, ast.expr] | None:
    for dec in getattr(fn, "decorator_list", ()):
        if isinstance(dec, ast.Call) and _name(dec.func) == "when" and len(dec.args) == 1:
            return dec, dec.args[0]
    return None


def _numpy(text: str) -> str | None:
    """How the file names jax.numpy: ``jnp``, ``jax.numpy``, or None."""
    if re.search(r"^\s*(import jax\.numpy as jnp|from jax import numpy as jnp)\b", text, re.MULTILINE):
        return "jnp"
    if re.search(r"^\s*import jax\b", text, re.MULTILINE):
        return "jax.numpy"
    return None


def _plus(seg: str, node: ast.expr, op: str, k: int) -> str:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return str({"+": node.value + k, "-": node.value - k, "//": node.value // k}[op])
    return f"({seg}) {op} {k}"


# --------------------------------------------------------------------------- the rules


def sites(text: str) -> dict[str, list[Site]]:
    """Every site of every class in ``text`` (before the cap), by class."""
    tree = ast.parse(text)
    ctx = _Ctx(text, tree)
    found: dict[str, list[Site]] = {c: [] for c in CLASSES}
    for rule in (_index_map_swap, _block_misaligned, _grid_past_end, _out_shape_dtype, _scratch_shrunk,
                 _parallel_reduction, _dma_past_end, _output_unwritten, _acc_init, _when_inverted):
        for site in rule(ctx):
            if not any((s.line, s.col) == (site.line, site.col) for s in found[site.cls]):
                found[site.cls].append(site)
    return found


@dataclass
class _Ctx:
    text: str
    tree: ast.Module

    def __post_init__(self) -> None:
        self.parents = _parents(self.tree)
        self.kernels = kernel_functions(self.tree)
        self.np = _numpy(self.text)

    def seg(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.text, node) or ""


def _replace(node: ast.AST, new: str) -> Edit:
    return Edit(node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, new)


def _index_map_swap(ctx: _Ctx):
    defs = {}
    for fn in ast.walk(ctx.tree):
        if isinstance(fn, ast.FunctionDef):
            defs[fn.name] = None if fn.name in defs else fn
    seen: set[int] = set()
    for call in _calls(ctx.tree, "BlockSpec"):
        imap = call.args[1] if len(call.args) > 1 else _kw(call, "index_map")
        fn = imap if isinstance(imap, ast.Lambda) else defs.get(imap.id) if isinstance(imap, ast.Name) else None
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        params = _params(fn)
        if len(params) < 2:
            continue
        a, b = params[0], params[1]
        body = fn.body if isinstance(fn, ast.Lambda) else fn
        used = {n.id for n in ast.walk(body) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        if a.arg not in used or b.arg not in used:
            continue
        edits = (Edit(a.lineno, a.col_offset, a.lineno, a.col_offset + len(a.arg.encode()), b.arg),
                 Edit(b.lineno, b.col_offset, b.lineno, b.col_offset + len(b.arg.encode()), a.arg))
        yield Site("index-map-swap", a.lineno, a.col_offset, edits, tuple(sorted({a.lineno, call.lineno})),
                   f"line {a.lineno}: index_map parameters {a.arg}, {b.arg} swapped")


def _block_misaligned(ctx: _Ctx):
    for call in _calls(ctx.tree, "BlockSpec"):
        if _kw(call, "memory_space") is not None:
            continue
        shape = call.args[0] if call.args else _kw(call, "block_shape")
        if not isinstance(shape, ast.Tuple) or not shape.elts:
            continue
        for e in shape.elts[-2:] if len(shape.elts) >= 2 else shape.elts:
            if isinstance(e, ast.Starred) or (isinstance(e, ast.Constant) and (e.value is None or (
                    type(e.value) is int and e.value < 8))) or (isinstance(e, ast.Call) and _name(e.func) in _NOT_A_SIZE) \
                    or (isinstance(e, ast.Attribute) and e.attr in _NOT_A_SIZE):
                continue
            if isinstance(e, ast.Constant) and type(e.value) is not int:
                continue
            yield Site("block-misaligned", e.lineno, e.col_offset, (_replace(e, _plus(ctx.seg(e), e, "-", 4)),),
                       tuple(sorted({e.lineno, call.lineno})), f"line {e.lineno}: block entry {ctx.seg(e)} -> {_plus(ctx.seg(e), e, '-', 4)}")


def _grid_past_end(ctx: _Ctx):
    for call in _calls(ctx.tree, "pallas_call", "GridSpec", "PrefetchScalarGridSpec", "emit_pipeline"):
        kw = next((k for k in call.keywords if k.arg == "grid"), None)
        if kw is None:
            continue
        grid = _resolve(kw.value, call, ctx.parents, ctx.tree)
        if not isinstance(grid, ast.Tuple):
            continue
        for e in grid.elts:
            if isinstance(e, ast.Starred):
                continue
            yield Site("grid-past-end", e.lineno, e.col_offset, (_replace(e, _plus(ctx.seg(e), e, "+", 1)),),
                       tuple(sorted({e.lineno, kw.value.lineno})), f"line {e.lineno}: grid entry {ctx.seg(e)} -> {_plus(ctx.seg(e), e, '+', 1)}")


def _out_shape_dtype(ctx: _Ctx):
    if ctx.np is None:
        return
    for call in _calls(ctx.tree, "pallas_call"):
        value = _kw(call, "out_shape")
        if value is None:
            continue
        value = _resolve(value, call, ctx.parents, ctx.tree)
        for sds in _calls(value, "ShapeDtypeStruct"):
            dtype = sds.args[1] if len(sds.args) > 1 else _kw(sds, "dtype")
            if dtype is None:
                continue
            new = f"{ctx.np}.float32" if "int" in ctx.seg(dtype) else f"{ctx.np}.int32"
            yield Site("out-shape-dtype", dtype.lineno, dtype.col_offset, (_replace(dtype, new),),
                       tuple(sorted({dtype.lineno, sds.lineno})), f"line {dtype.lineno}: out_shape dtype {ctx.seg(dtype)} -> {new}")


def _scratch_shrunk(ctx: _Ctx):
    for call in _calls(ctx.tree, "VMEM", "SMEM"):
        shape = call.args[0] if call.args else _kw(call, "shape")
        if not isinstance(shape, ast.Tuple):
            continue
        e = next((x for x in shape.elts if not isinstance(x, ast.Starred)
                  and not (isinstance(x, ast.Constant) and x.value == 1)), None)
        if e is None:
            continue
        yield Site("scratch-shrunk", e.lineno, e.col_offset, (_replace(e, _plus(ctx.seg(e), e, "//", 2)),),
                   tuple(sorted({e.lineno, call.lineno})), f"line {e.lineno}: scratch dim {ctx.seg(e)} -> {_plus(ctx.seg(e), e, '//', 2)}")


def _semantics_tuples(ctx: _Ctx):
    for node in ast.walk(ctx.tree):
        value, at = None, node
        if isinstance(node, ast.keyword) and node.arg == "dimension_semantics":
            value = node.value
            at = next((c for c in ast.walk(ctx.tree) if isinstance(c, ast.Call) and node in c.keywords), node)
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == "dimension_semantics":
                    value = v
        if value is not None:
            value = _resolve(value, at, ctx.parents, ctx.tree)
            if isinstance(value, (ast.Tuple, ast.List)):
                yield value


def _parallel_reduction(ctx: _Ctx):
    facts = mutations.Facts(ctx.tree, ctx.text, [], set(), kernel_fns=list(ctx.kernels))
    for tup in _semantics_tuples(ctx):
        for axis, e in enumerate(tup.elts):
            seg = ctx.seg(e)
            if "arbitrary" not in seg.lower() or not mutations.inits_on_axis(facts, axis):
                continue
            new = seg.replace("arbitrary", "parallel").replace("ARBITRARY", "PARALLEL")
            yield Site("parallel-reduction", e.lineno, e.col_offset, (_replace(e, new),), (e.lineno,),
                       f"line {e.lineno}: dimension_semantics[{axis}] arbitrary -> parallel")


def _dma_past_end(ctx: _Ctx):
    for call in _calls(ctx.tree, "make_async_copy", "async_copy", "sync_copy"):
        src = call.args[0] if call.args else _kw(call, "src_ref")
        if not (isinstance(src, ast.Subscript) and isinstance(src.value, ast.Attribute) and src.value.attr == "at"):
            continue
        idx = src.slice.elts[0] if isinstance(src.slice, ast.Tuple) and src.slice.elts else src.slice
        if isinstance(idx, (ast.Slice, ast.Starred)):
            continue
        if isinstance(idx, ast.Call) and _name(idx.func) in ("ds", "dslice"):
            if not idx.args:
                continue
            idx = idx.args[0]
        yield Site("dma-past-end", idx.lineno, idx.col_offset, (_replace(idx, _plus(ctx.seg(idx), idx, "+", 1)),),
                   tuple(sorted({idx.lineno, call.lineno})), f"line {idx.lineno}: DMA source index {ctx.seg(idx)} -> {_plus(ctx.seg(idx), idx, '+', 1)}")


def _output_unwritten(ctx: _Ctx):
    for fn in ctx.kernels:
        for p in _params(fn):
            if not _is_output(p.arg):
                continue
            stores = [s for s in ast.walk(fn) if isinstance(s, ast.stmt) and _stored_name(s) == p.arg]
            if len(stores) != 1:
                continue
            store = stores[0]
            inside = {id(n) for n in ast.walk(store)}
            other = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == p.arg and id(n) not in inside
                     and not (isinstance(ctx.parents.get(id(n)), ast.Attribute) and ctx.parents[id(n)].attr in _SHAPE_ATTRS)]
            if other:
                continue
            yield Site("output-unwritten", store.lineno, store.col_offset, (mutations._statement_to_pass(store),),
                       tuple(sorted({store.lineno, p.lineno})), f"line {store.lineno}: the one store to {p.arg} removed")


def _acc_init(ctx: _Ctx):
    for fn in ctx.kernels:
        reads = _read_names(fn)
        for block in ast.walk(fn):
            when = _when_cond(block)
            if when is None or block is fn:
                continue
            dec, cond = when
            if not (isinstance(cond, ast.Compare) and len(cond.ops) == 1 and isinstance(cond.ops[0], ast.Eq) and any(
                    isinstance(x, ast.Constant) and x.value == 0 and type(x.value) is int for x in (cond.left, cond.comparators[0]))):
                continue
            for stmt in block.body:
                name = _stored_name(stmt)
                if name is None or isinstance(stmt, ast.AugAssign) or name not in reads:
                    continue
                true = tuple(sorted({stmt.lineno, dec.lineno, block.lineno}))
                yield Site("acc-init-removed", stmt.lineno, stmt.col_offset, (mutations._statement_to_pass(stmt),), true,
                           f"line {stmt.lineno}: init of {name} removed")
                edit = _assign_to_augment(ctx, stmt)
                if edit is not None:
                    yield Site("acc-init-accumulates", stmt.lineno, stmt.col_offset, (edit,), true,
                               f"line {stmt.lineno}: init of {name} written +=")


def _assign_to_augment(ctx: _Ctx, stmt: ast.stmt) -> Edit | None:
    """The ``=`` of ``r[...] = v`` as ``+=`` (the first ``=`` after the target, on the target's last line)."""
    if not isinstance(stmt, ast.Assign):
        return None
    target = stmt.targets[0]
    line = ctx.text.splitlines()[target.end_lineno - 1].encode()
    at = line.find(b"=", target.end_col_offset)
    if at < 0 or line[at:at + 2] == b"==":
        return None
    return Edit(target.end_lineno, at, target.end_lineno, at + 1, "+=")


def _when_inverted(ctx: _Ctx):
    if ctx.np is None:
        return
    for call in _calls(ctx.tree, "when"):
        if len(call.args) != 1 or call.keywords:
            continue
        c = call.args[0]
        yield Site("when-inverted", call.lineno, call.col_offset,
                   (_replace(c, f"{ctx.np}.logical_not({ctx.seg(c)})"),), tuple(sorted({call.lineno, c.lineno})),
                   f"line {call.lineno}: pl.when condition inverted")


# --------------------------------------------------------------------------- choosing and scoring


def choose(file_id: str, cls: str, found: list[Site], cap: int = CAP) -> list[Site]:
    """At most ``cap`` sites, by the hash order the module doc gives."""
    key = lambda s: hashlib.sha256(f"{file_id}|{cls}|{s.line}|{s.col}".encode()).hexdigest()
    return sorted(found, key=key)[:cap]


def made(file_id: str, text: str, site: Site) -> str:
    """The mutant's text; an edit that changes nothing or a text that does not parse is an error."""
    new = mutations.apply(text, site.edits)
    if new == text:
        raise ValueError(f"{file_id}: {site.what}: the edit changes nothing")
    try:
        ast.parse(new)
    except SyntaxError as exc:
        raise ValueError(f"{file_id}: {site.what}: the mutant does not parse ({exc})") from None
    return new


def mutants(file_id: str, text: str, cap: int = CAP) -> list[tuple[Site, str]]:
    """The chosen sites of every class with the mutated text; a site whose text does not parse is an error."""
    found = sites(text)
    return [(site, made(file_id, text, site)) for cls in CLASSES for site in choose(file_id, cls, found[cls], cap)]


def _catches(f: dict, cls: str) -> bool:
    code = f.get("code", "")
    if code.startswith("PLS9") or code in NEVER_CATCH:
        return False
    return f.get("severity") == "error" or (f.get("severity") == "warning" and code in EXPECTED_WARNINGS[cls])


def score(cls: str, true_lines: tuple[int, ...], base: list[dict], mutant: list[dict]) -> tuple[bool, bool, list[dict]]:
    """(caught, at the line, the catching findings) of a mutant's findings against its base's."""
    before = {(f.get("code"), f.get("line")) for f in base}
    new = [f for f in mutant if (f.get("code"), f.get("line")) not in before and _catches(f, cls)]
    at = any(abs(f["line"] - t) <= 1 for f in new for t in true_lines)
    return bool(new), at, new
