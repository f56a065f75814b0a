"""The small mechanical edits the locate step tries (worker side; Python's ``ast`` only, no jax).

When tier 3 finds a kernel's outputs wrong, NaN or unwritten, or its run failing (an out-of-bounds read,
a deadlocked wait), ``runner/tier3/locate_step.py`` looks for the
one statement whose edit makes every check match. The edits are the inverses of the mistakes kernel
authors make, generated from the file's source for the statements that can touch the failing
``pallas_call``'s outputs:

- a comparison's operator (``<`` and ``<=``, ``>`` and ``>=``, the mirrored one, ``==`` and ``!=``),
  and the constant it compares with, +-1;
- a ``pl.program_id(axis)`` on another axis of the grid;
- a ``pl.when(c)`` condition negated (or its ``jnp.logical_not`` taken away);
- an arithmetic term dropped (``a + 1`` -> ``a``, ``bk // 2`` -> ``bk``, ``(e) - 4`` -> ``e``): an index
  one past, a halved scratch dim, a block entry off the tiling, a ``pl.ds`` length past the block;
- ``a // b`` written ``pl.cdiv(a, b)`` and back (a grid that drops a partial block); a grid entry's dim
  name as another dim the wrapper reads off the inputs' shapes (``m // bn`` -> ``n // bn``);
- an index map's results in another order, or its first two parameters swapped;
- a dtype (an ``out_shape``'s, a scratch buffer's, an ``astype``'s) as the other float type or as the
  wrapper's first input's dtype;
- a scale's exponent negated (``d ** 0.5`` -> ``d ** -0.5``), a reciprocal taken or dropped
  (``1 / x`` -> ``x``), ``sqrt`` and ``rsqrt`` exchanged;
- a ``+=`` in a first-step ``pl.when`` block written ``=`` (an init that accumulates); an accumulator the
  first-step block leaves out initialized there (zeros, or -inf for a running max ``m``; at the index the
  block's own inits write, then whole);
- a ``dimension_semantics`` entry "parallel" made "arbitrary";
- a scratch dim written as a number doubled (a double buffer declared with one slot).

Which statements: the kernel function of the call (its nested functions, and the file's functions it
calls by name), the index maps and block shapes of its BlockSpecs, its ``grid``, ``out_shape``,
``scratch_shapes`` and ``compiler_params``, and the assignments of the function that makes the call
whose names reach it (followed through names assigned in that function, one step at a time). A kernel
statement the traced run never reached (``traced``: the lines its equations came from) is left out.
Each edit carries a score (``order_edits``): how likely such an edit is the fix given what tier 3 saw
(``Signals``: NaN or wrong values, how many of the elements, whether the statement feeds the wrong
output's stores; or the kind of failure and the line tier 3 said it at), highest first. A comparison that
builds a mask (a ``where``'s condition, a value named ``*mask*``) ranks with the ``pl.when`` conditions
whatever the share of elements wrong: one more key in every row moves most outputs.

``candidate_edits(text, call_line, kernel_line, grid_rank, ...)`` -> ``[Edit]``; ``apply(text, edit)``.
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass, field

_CMP_TEXT = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_CMP_PARTNERS = {"<": ("<=", ">"), "<=": ("<", ">="), ">": (">=", "<"), ">=": (">", "<="), "==": ("!=",),
                 "!=": ("==",)}
_FLOATS = ("float32", "bfloat16")
_SCALE_WORDS = ("scale", "temp", "norm", "inv", "rsqrt", "sqrt")


@dataclass(frozen=True)
class Edit:
    """One mechanical edit: replace the text from (line, col) to (end_line, end_col) with ``new``.

    Lines are 1-based, columns ast's UTF-8 byte offsets. ``stmt_line`` is where a finding about it lands
    (the edited expression's first line); ``kind`` one of the module doc's families, ``role`` where it is
    (``kernel``, ``mask`` (a kernel comparison that builds a mask), ``when``, ``index_map``, ``grid``, ``block``,
    ``out_shape``, ``scratch``, ``semantics``,
    ``wrapper``, ``caller``: a scale written elsewhere in the module), ``what`` the change in words, ``score`` its rank (higher is tried first)."""

    line: int
    col: int
    end_line: int
    end_col: int
    new: str
    old: str
    kind: str
    role: str
    what: str
    score: float = 0.0
    in_slice: bool = False


@dataclass(frozen=True)
class Signals:
    """What tier 3 saw of the wrong outputs, for ranking: ``nan`` (outputs left NaN: unwritten or read
    from memory never written), ``fraction`` of the elements wrong (0..1), ``dtype`` (the outputs' kind
    of dtype differs from the reference's), ``output`` the index of the wrong output. Or the run failed:
    ``failure`` "deadlock", "bounds" (an out-of-bounds read or DMA), "block" (an index map names a block
    past the array: its grid, its index map), "error", or "poisoned" (right with random inputs, wrong with
    the inputs the reference never reads poisoned: a mask or a bound), ``failed_line`` where tier 3
    said it (1-based; None: unknown). ``uninitialized``: tier 3 found the NaN computed from memory the kernel
    never wrote (an accumulator not reset on the first step), so an init's edits come first."""

    nan: bool = False
    fraction: float = 1.0
    dtype: bool = False
    output: int = 0
    failure: str = ""
    failed_line: int | None = None
    uninitialized: bool = False


@dataclass
class _Ctx:
    text: str
    tree: ast.Module
    lines: list[str]
    grid_rank: int
    traced: frozenset[int] | None
    np_name: str
    output: int = 0
    edits: list[Edit] = field(default_factory=list)
    seen: set[tuple] = field(default_factory=set)
    masks: set[int] = field(default_factory=set)  # ids of the comparisons that build a mask (``_mask_comparisons``)
    slice_lines: set[int] = field(default_factory=set)

    def seg(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.text, node) or ""

    def add(self, node: ast.AST, new: str, kind: str, role: str, what: str | None = None,
            lines: bool = False) -> None:
        old = self.seg(node)
        if not old or new == old or ("\n" in new and not lines):
            return
        key = (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, new)
        if key in self.seen:
            return
        self.seen.add(key)
        self.edits.append(Edit(node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, new, old, kind,
                               role, what or f"`{_short(old)}` -> `{_short(new)}`"))


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 3] + "..."


def _name(func: ast.AST) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _kw(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _numpy_name(text: str) -> str:
    return "jnp" if "import jax.numpy as jnp" in text or "numpy as jnp" in text else "jax.numpy"


# --------------------------------------------------------------------------- where


def find_call(tree: ast.Module, line: int) -> ast.Call | None:
    """The ``pallas_call(...)`` call written at ``line`` (1-based), or the one whose span holds it."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _name(n.func) == "pallas_call"]
    exact = [c for c in calls if c.lineno == line or getattr(c.func, "lineno", 0) == line]
    if exact:
        return exact[0]
    holding = [c for c in calls if c.lineno <= line <= (c.end_lineno or c.lineno)]
    return min(holding, key=lambda c: (c.end_lineno or c.lineno) - c.lineno) if holding else None


def find_def(tree: ast.Module, line: int | None, name: str | None = None) -> ast.FunctionDef | None:
    """The function whose ``def`` (or first decorator) is at ``line``, else the one named ``name``."""
    defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for fn in defs:
        first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
        if line is not None and line in (fn.lineno, first):
            return fn
    named = [fn for fn in defs if fn.name == name]
    return named[0] if len(named) == 1 else None


def enclosing_function(tree: ast.Module, node: ast.AST) -> ast.FunctionDef | None:
    best = None
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.lineno <= node.lineno <= (fn.end_lineno or 0):
            if best is None or fn.lineno >= best.lineno:
                best = fn
    return best


def _helpers(tree: ast.Module, kernel: ast.AST, traced: frozenset[int] | None = None) -> list[ast.FunctionDef]:
    """The module-level functions of the file the kernel names (two steps deep): called by name, or named
    where a call takes it (``body = _step if n == 1 else _steps; body(...)``, a ``functools.partial``).
    With ``traced`` known, a helper none of whose lines the run reached is left out (the body not taken)."""
    top = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    out: list[ast.FunctionDef] = []
    todo = [kernel]
    for _ in range(2):
        nxt = []
        for fn in todo:
            for node in ast.walk(fn):
                helper = top.get(node.id) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) else None
                if helper is not None and helper is not kernel and helper not in out and _reached(helper, traced):
                    out.append(helper)
                    nxt.append(helper)
        todo = nxt
    return out


def _reached(fn: ast.FunctionDef, traced: frozenset[int] | None) -> bool:
    return traced is None or any(line in traced for line in range(fn.lineno, (fn.end_lineno or fn.lineno) + 1))


# --------------------------------------------------------------------------- the edits


def candidate_edits(text: str, call_line: int, kernel_line: int | None, grid_rank: int,
                    traced: frozenset[int] | None = None, signals: Signals | None = None,
                    kernel_name: str | None = None, n_inputs: int | None = None) -> list[Edit]:
    """Every edit of the module doc for the call at ``call_line``, best first (``order_edits``)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    call = find_call(tree, call_line)
    if call is None:
        return []
    ctx = _Ctx(text, tree, text.splitlines(), max(1, grid_rank), traced, _numpy_name(text),
               (signals or Signals()).output, masks=_mask_comparisons(tree))
    kernel = find_def(tree, kernel_line, kernel_name) or _kernel_of_call(tree, call)
    wrapper = enclosing_function(tree, call)
    if kernel is not None:
        ctx.slice_lines = output_slice(kernel, (signals or Signals()).output, n_inputs)
        for fn in [kernel, *_helpers(tree, kernel, traced)]:
            _kernel_edits(ctx, fn)
    _call_edits(ctx, call, wrapper)
    _scales_elsewhere(ctx, tree)
    return order_edits(ctx.edits, signals or Signals(), ctx.slice_lines)


def _scales_elsewhere(ctx: _Ctx, tree: ast.Module) -> None:
    """Scales written anywhere in the module, after the kernel's and its wrapper's own edits: a task or an
    entry point computes ``D ** -0.5`` or ``1.0 / math.sqrt(head_dim)`` and hands it down as ``sm_scale``.
    Exponents of +-0.5, reciprocals of a square root, and a square root on a line that names a scale."""
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and _half(node.right):
            _binop_edits(ctx, node, "caller")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.left, ast.Constant) \
                and node.left.value in (1, 1.0) and isinstance(node.right, ast.Call) \
                and _name(node.right.func) in ("sqrt", "rsqrt"):
            _binop_edits(ctx, node, "caller")
        elif isinstance(node, ast.Call) and _name(node.func) in ("sqrt", "rsqrt") and len(node.args) == 1 \
                and "scale" in ctx.lines[node.lineno - 1].lower():
            _call_expr_edits(ctx, node, "caller")
            ctx.add(node, f"1.0 / {ctx.seg(node)}", "scale", "caller", f"`{_short(ctx.seg(node))}` -> its reciprocal")


def _half(node: ast.AST) -> bool:
    """The constant 0.5 or -0.5."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and node.value == 0.5


def _kernel_of_call(tree: ast.Module, call: ast.Call) -> ast.FunctionDef | None:
    first = call.args[0] if call.args else _kw(call, "kernel")
    if isinstance(first, ast.Call) and _name(first.func) == "partial" and first.args:
        first = first.args[0]
    return find_def(tree, None, first.id) if isinstance(first, ast.Name) else None


def _ran(ctx: _Ctx, node: ast.AST) -> bool:
    """Whether a kernel statement's lines produced an equation in the traced run (unknown: yes)."""
    if ctx.traced is None:
        return True
    return any(line in ctx.traced for line in range(node.lineno, (getattr(node, "end_lineno", None) or node.lineno) + 1))


def _kernel_edits(ctx: _Ctx, fn: ast.AST) -> None:
    for node in ast.walk(fn):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call) and _name(dec.func) == "when" and len(dec.args) == 1:
                    _when_edits(ctx, dec.args[0])
            if _first_step_block(node):
                _init_accumulates(ctx, node)
                _init_missing(ctx, node, fn)
        elif isinstance(node, ast.Call) and _name(node.func) == "when" and len(node.args) == 1 \
                and not _is_decorator(ctx, node):
            _when_edits(ctx, node.args[0])
        elif isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if isinstance(node, (ast.If, ast.While, ast.For, ast.With)):
                continue  # their parts are walked on their own; a Python loop's bounds are not edited
            if _ran(ctx, node):
                _expression_edits(ctx, node, "kernel")


def _is_decorator(ctx: _Ctx, call: ast.Call) -> bool:
    return any(call in getattr(fn, "decorator_list", ()) for fn in ast.walk(ctx.tree)
               if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _first_step_block(fn: ast.AST) -> bool:
    for dec in getattr(fn, "decorator_list", ()):
        if isinstance(dec, ast.Call) and _name(dec.func) == "when" and dec.args:
            cond = dec.args[0]
            if isinstance(cond, ast.Compare) and any(isinstance(x, ast.Constant) and x.value == 0
                                                     for x in [cond.left, *cond.comparators]):
                return True
    return False


def _init_accumulates(ctx: _Ctx, block: ast.AST) -> None:
    """``r[...] += v`` in a first-step block written ``r[...] = v``."""
    for stmt in getattr(block, "body", ()):
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add) and isinstance(stmt.target, ast.Subscript):
            target, value = ctx.seg(stmt.target), ctx.seg(stmt.value)
            if target and value:
                ctx.add(stmt, f"{target} = {value}", "init", "when",
                        f"`{_short(target)} += ...` -> `{_short(target)} = ...` (the first step's init accumulates)",
                        lines=True)  # a value written over several lines keeps them


def _init_missing(ctx: _Ctx, block: ast.FunctionDef, kernel: ast.AST) -> None:
    """A first-step block that initializes some accumulators and not another: the missing init inserted before
    its first statement (zeros, or ``-inf`` for a running max named ``m``). Candidates: the kernel's refs read
    and written with a subscript outside the block (an accumulator) that the block does not write. Where the
    block's own inits write one index (``acc[h] = ...``: a slot per head) the inserted one writes that index too,
    and the whole ref after it; a ref whose name ends as the block's own do (``acc_scratch_ref`` beside
    ``l_scratch_ref``) comes first, another (a step counter in SMEM) is kind ``init-other``, tried later."""
    targets = [t for st in block.body for t in getattr(st, "targets", [getattr(st, "target", None)])
               if isinstance(t, ast.Subscript) and _ref_name(t)]
    written = {_ref_name(t) for t in targets}
    outside = [n for n in ast.walk(kernel) if isinstance(n, ast.Subscript) and _ref_name(n)
               and not (block.lineno <= n.lineno <= (block.end_lineno or block.lineno))]
    stored = {_ref_name(n) for n in outside if isinstance(n.ctx, ast.Store)}
    loaded = {_ref_name(n) for n in outside if isinstance(n.ctx, ast.Load)}
    first = block.body[0] if block.body else None
    if first is None or not ctx.seg(first):
        return
    indent = " " * first.col_offset
    slots = {ctx.seg(t.slice) for t in targets} - {"...", ""}
    index = slots.pop() if len(slots) == 1 else None  # the one index the block's own inits write
    endings = {name.split("_", 1)[-1] for name in written if "_" in name}
    missing = sorted((stored & loaded) - written - {None}, key=lambda n: n.split("_", 1)[-1] not in endings)
    for name in missing:
        kind = "init" if not endings or name.split("_", 1)[-1] in endings else "init-other"
        for at in ([f"{name}[{index}]"] if index else []) + [name]:
            value = (f"jnp.full_like({at}, -jnp.inf)" if name.split("_")[0] in ("m", "max")
                     else f"jnp.zeros_like({at})")
            value = value.replace("jnp.", f"{ctx.np_name}.")
            target = at if at != name else f"{name}[...]"
            ctx.add(first, f"{target} = {value}\n{indent}{ctx.seg(first)}", kind, "when",
                    f"`{name}` initialized on the first step (`{target} = {value}` added)", lines=True)


def _ref_name(node: ast.AST | None) -> str | None:
    """``acc_ref`` of ``acc_ref[...]`` / ``acc_ref[0]`` (a subscript of a plain name), else None."""
    return node.value.id if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) else None


def _when_edits(ctx: _Ctx, cond: ast.expr) -> None:
    text = ctx.seg(cond)
    if isinstance(cond, ast.Call) and _name(cond.func) == "logical_not" and len(cond.args) == 1:
        ctx.add(cond, ctx.seg(cond.args[0]), "when", "when", f"`{_short(text)}` -> `{_short(ctx.seg(cond.args[0]))}`")
    elif isinstance(cond, ast.UnaryOp) and isinstance(cond.op, (ast.Not, ast.Invert)):
        ctx.add(cond, ctx.seg(cond.operand), "when", "when")
    elif isinstance(cond, ast.Compare) and len(cond.ops) == 1 and isinstance(cond.ops[0], (ast.Eq, ast.NotEq)):
        other = "!=" if isinstance(cond.ops[0], ast.Eq) else "=="
        ctx.add(cond, f"{ctx.seg(cond.left)} {other} {ctx.seg(cond.comparators[0])}", "when", "when",
                f"the pl.when condition `{_short(text)}` negated (`{other}`)")
    else:
        ctx.add(cond, f"{ctx.np_name}.logical_not({text})", "when", "when", f"the pl.when condition `{_short(text)}` negated")
    _expression_edits(ctx, cond, "when")


def _expression_edits(ctx: _Ctx, root: ast.AST, role: str) -> None:
    for node in ast.walk(root):
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            _compare_edits(ctx, node, role)
        elif isinstance(node, ast.Call):
            _call_expr_edits(ctx, node, role)
        elif isinstance(node, ast.BinOp):
            _binop_edits(ctx, node, role)


def _mask_comparisons(tree: ast.Module) -> set[int]:
    """The comparisons that build a mask: in a ``where``'s condition, or in a value assigned to a name that
    says mask (``causal_mask = col_ids <= row_ids``). A mask off by one lets one more key into every row, so
    most outputs move: these rank with the ``pl.when`` conditions however many elements are wrong."""
    out: set[int] = set()
    for node in ast.walk(tree):
        roots: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and "mask" in t.id.lower() for t in targets):
                roots.append(node.value)
        elif isinstance(node, ast.Call) and _name(node.func) == "where" and node.args:
            roots.append(node.args[0])
        out |= {id(n) for root in roots for n in ast.walk(root) if isinstance(n, ast.Compare)}
    return out


def _compare_edits(ctx: _Ctx, node: ast.Compare, role: str) -> None:
    op = _CMP_TEXT.get(type(node.ops[0]))
    if op is None:
        return
    role = "mask" if id(node) in ctx.masks and role == "kernel" else role
    left, right = ctx.seg(node.left), ctx.seg(node.comparators[0])
    if not left or not right:
        return
    for other in _CMP_PARTNERS[op]:
        ctx.add(node, f"{left} {other} {right}", "comparison", role)
    for side, text in ((node.comparators[0], right), (node.left, left)):
        if isinstance(side, ast.Constant) and type(side.value) is int:
            for k in (1, -1):
                new = (f"{left} {op} {side.value + k}" if side is node.comparators[0]
                       else f"{side.value + k} {op} {right}")
                ctx.add(node, new, "off-by-one", role)
        elif not isinstance(side, ast.Constant) and op in ("<", "<=", ">", ">="):
            bumped = f"{text} - 1" if op in ("<=", ">=") else f"{text} + 1"
            new = f"{left} {op} {bumped}" if side is node.comparators[0] else f"{bumped} {op} {right}"
            ctx.add(node, new, "off-by-one", role)


def _call_expr_edits(ctx: _Ctx, node: ast.Call, role: str) -> None:
    name = _name(node.func)
    if name in ("program_id", "num_programs") and node.args and isinstance(node.args[0], ast.Constant) \
            and type(node.args[0].value) is int:
        axis = node.args[0].value
        for other in range(ctx.grid_rank):
            if other != axis:
                ctx.add(node.args[0], str(other), "program-id-axis", role,
                        f"`{name}({axis})` -> `{name}({other})` (another grid axis)")
    elif name == "cdiv" and len(node.args) == 2:
        ctx.add(node, f"{ctx.seg(node.args[0])} // {ctx.seg(node.args[1])}", "cdiv", role)
    elif name in ("sqrt", "rsqrt") and len(node.args) == 1:
        other = "rsqrt" if name == "sqrt" else "sqrt"
        prefix = "jax.lax." if other == "rsqrt" else f"{ctx.np_name}."
        ctx.add(node, f"{prefix}{other}({ctx.seg(node.args[0])})", "scale", role)
    elif name == "astype" and len(node.args) == 1:
        _dtype_edits(ctx, node.args[0], role)
    elif name == "ds" and len(node.args) == 2 and isinstance(node.args[1], ast.Name):
        pass  # a length that is a plain name: dropping a term does not apply; the block's own size is unknown here


def _binop_edits(ctx: _Ctx, node: ast.BinOp, role: str) -> None:
    left, right = node.left, node.right
    if isinstance(node.op, ast.Pow) and isinstance(right, (ast.Constant, ast.UnaryOp)):
        exp = ctx.seg(right)
        negated = exp[1:].strip() if exp.startswith("-") else f"-{exp}"
        ctx.add(node, f"{ctx.seg(left)} ** {negated}", "scale", role, f"the exponent of `{_short(ctx.seg(node))}` negated")
        return
    if isinstance(node.op, ast.Div) and isinstance(left, ast.Constant) and left.value in (1, 1.0):
        ctx.add(node, _paren(ctx, right), "scale", role, f"`{_short(ctx.seg(node))}` -> `{_short(ctx.seg(right))}` (no reciprocal)")
        return
    if isinstance(node.op, ast.FloorDiv):
        ctx.add(node, f"pl.cdiv({ctx.seg(left)}, {ctx.seg(right)})", "cdiv", role)
    for keep, drop in ((left, right), (right, left)):
        if isinstance(drop, ast.Constant) and isinstance(drop.value, (int, float)) and not isinstance(drop.value, bool) \
                and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Div)) \
                and not (drop is left and isinstance(node.op, (ast.Sub, ast.FloorDiv, ast.Div))):
            ctx.add(node, _paren(ctx, keep), "operand", role,
                    f"`{_short(ctx.seg(node))}` -> `{_short(ctx.seg(keep))}` (the term `{ctx.seg(drop)}` dropped)")
    if isinstance(node.op, ast.Mult) and _scale_like(ctx, node):
        for a, b in ((left, right), (right, left)):
            if _scale_like(ctx, b):  # at the use: after the scale's own definition is tried
                ctx.add(node, f"{_paren(ctx, a)} / {_paren(ctx, b)}", "scale-use", role,
                        f"`{_short(ctx.seg(node))}` -> divided by `{_short(ctx.seg(b))}`")


def _scale_like(ctx: _Ctx, node: ast.AST) -> bool:
    return any(word in ctx.seg(node).lower() for word in _SCALE_WORDS)


def _paren(ctx: _Ctx, node: ast.AST) -> str:
    text = ctx.seg(node)
    return f"({text})" if isinstance(node, (ast.BinOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Lambda)) else text


def _dtype_edits(ctx: _Ctx, node: ast.expr, role: str, input_dtype: str | None = None) -> None:
    text = ctx.seg(node)
    options = [f"{ctx.np_name}.{d}" for d in _FLOATS] + ([input_dtype] if input_dtype else [])
    for new in options:
        if new.split(".")[-1] != text.split(".")[-1]:
            ctx.add(node, new, "dtype", role)


# --------------------------------------------------------------------------- the call's own parts


def _call_edits(ctx: _Ctx, call: ast.Call, wrapper: ast.AST | None) -> None:
    resolve = lambda e: _resolve(e, wrapper, ctx.tree)  # noqa: E731
    spec_holder = resolve(_kw(call, "grid_spec")) if _kw(call, "grid_spec") is not None else None
    holders = [call] + ([spec_holder] if isinstance(spec_holder, ast.Call) else [])
    input_dtype = _first_param_dtype(wrapper)
    for holder in holders:
        grid = _kw(holder, "grid")
        if grid is not None:
            _grid_edits(ctx, resolve(grid), wrapper)
        for key in ("in_specs", "out_specs"):
            specs = _kw(holder, key)
            if specs is not None:
                _spec_edits(ctx, resolve(specs), wrapper)
                if key == "out_specs":
                    ctx.slice_lines |= _output_spec_lines(resolve(specs), ctx.output)
        scratch = _kw(holder, "scratch_shapes")
        if scratch is not None:
            for node in ast.walk(resolve(scratch)):
                if isinstance(node, ast.Call) and _name(node.func) in ("VMEM", "SMEM") and node.args:
                    _expression_edits(ctx, node.args[0], "scratch")
                    _scratch_dim_edits(ctx, resolve(node.args[0]))
                    if len(node.args) > 1:
                        _dtype_edits(ctx, node.args[1], "scratch", input_dtype)
    out_shape = _kw(call, "out_shape")
    if out_shape is not None:
        for node in ast.walk(resolve(out_shape)):
            if isinstance(node, ast.Call) and _name(node.func) == "ShapeDtypeStruct":
                dtype = node.args[1] if len(node.args) > 1 else _kw(node, "dtype")
                if dtype is not None:
                    _dtype_edits(ctx, dtype, "out_shape", input_dtype)
    params = _kw(call, "compiler_params")
    if params is not None:
        _semantics_edits(ctx, resolve(params), wrapper)
    if wrapper is not None:
        _wrapper_edits(ctx, call, wrapper)


def _scratch_dim_edits(ctx: _Ctx, shape: ast.expr | None) -> None:
    """A scratch dim written as a number, doubled: a buffer with one slot where the kernel uses two (a double
    buffer, a semaphore pair) reads past its end. (A dim written as an expression gets the operand edits.)"""
    for dim in shape.elts if isinstance(shape, (ast.Tuple, ast.List)) else ():
        if isinstance(dim, ast.Constant) and type(dim.value) is int and 0 < dim.value <= 64:
            ctx.add(dim, str(2 * dim.value), "scratch-dim", "scratch",
                    f"scratch dim `{dim.value}` -> `{2 * dim.value}` (a buffer with twice the slots)")


def _resolve(expr: ast.expr | None, scope: ast.AST | None, tree: ast.Module) -> ast.expr | None:
    """A name followed to its one assignment in ``scope`` (else at module level)."""
    if not isinstance(expr, ast.Name):
        return expr
    for holder in ([scope] if scope is not None else []) + [tree]:
        found = [a for a in ast.walk(holder) if isinstance(a, ast.Assign) and len(a.targets) == 1
                 and isinstance(a.targets[0], ast.Name) and a.targets[0].id == expr.id
                 and (holder is not tree or a in tree.body)]
        if len(found) == 1:
            return found[0].value
        if found:
            return expr
    return expr


def _first_param_dtype(wrapper: ast.AST | None) -> str | None:
    if wrapper is None:
        return None
    params = wrapper.args.posonlyargs + wrapper.args.args
    params = [p for p in params if p.arg not in ("self", "cls")]
    return f"{params[0].arg}.dtype" if params else None


def _grid_edits(ctx: _Ctx, grid: ast.expr | None, wrapper: ast.AST | None) -> None:
    if grid is None:
        return
    entries = grid.elts if isinstance(grid, (ast.Tuple, ast.List)) else [grid]
    dims = _dim_names(wrapper)
    for entry in entries:
        entry = _resolve(entry, wrapper, ctx.tree) if isinstance(entry, ast.Name) else entry
        if entry is None:
            continue
        if isinstance(entry, ast.BinOp) and isinstance(entry.op, ast.FloorDiv):
            ctx.add(entry, f"pl.cdiv({ctx.seg(entry.left)}, {ctx.seg(entry.right)})", "cdiv", "grid")
        _expression_edits(ctx, entry, "grid")
        for name in [n for n in ast.walk(entry) if isinstance(n, ast.Name) and n.id in dims]:
            for other in dims:
                if other != name.id:
                    ctx.add(name, other, "dim-name", "grid", f"`{name.id}` -> `{other}` (another dim of the inputs)")


def _dim_names(wrapper: ast.AST | None) -> list[str]:
    """Names the wrapper binds to the inputs' dims (``m, k = x.shape``; ``n = y.shape[1]``), in order."""
    out: list[str] = []
    for node in ast.walk(wrapper) if wrapper is not None else ():
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        value, target = node.value, node.targets[0]
        shape_of = isinstance(value, ast.Attribute) and value.attr == "shape"
        indexed = isinstance(value, ast.Subscript) and isinstance(value.value, ast.Attribute) \
            and value.value.attr == "shape"
        if shape_of and isinstance(target, ast.Tuple):
            out += [e.id for e in target.elts if isinstance(e, ast.Name) and e.id != "_" and e.id not in out]
        elif indexed and isinstance(target, ast.Name) and target.id not in out:
            out.append(target.id)
    return out


def _spec_edits(ctx: _Ctx, specs: ast.expr | None, wrapper: ast.AST | None) -> None:
    if specs is None:
        return
    named = [_resolve(n, wrapper, ctx.tree) for n in ast.walk(specs) if isinstance(n, ast.Name)]  # q_spec = BlockSpec(...)
    for node in [*ast.walk(specs), *(n for r in named if isinstance(r, ast.Call) for n in ast.walk(r))]:
        if not (isinstance(node, ast.Call) and _name(node.func) == "BlockSpec"):
            continue
        shape = node.args[0] if node.args else _kw(node, "block_shape")
        imap = node.args[1] if len(node.args) > 1 else _kw(node, "index_map")
        if shape is not None:
            shape = _resolve(shape, wrapper, ctx.tree)
            _expression_edits(ctx, shape, "block")
        if isinstance(imap, ast.Name):
            imap = find_def(ctx.tree, None, imap.id) or imap
        if isinstance(imap, (ast.Lambda, ast.FunctionDef)):
            _index_map_edits(ctx, imap)


def _output_spec_lines(specs: ast.expr | None, output: int) -> set[int]:
    """The lines of the wrong output's BlockSpec (where its elements land): part of the slice."""
    if isinstance(specs, (ast.Tuple, ast.List)):
        specs = specs.elts[output] if output < len(specs.elts) else None
    if specs is None:
        return set()
    return {n.lineno for n in ast.walk(specs) if hasattr(n, "lineno")}


def _index_map_edits(ctx: _Ctx, imap: ast.Lambda | ast.FunctionDef) -> None:
    result = imap.body if isinstance(imap, ast.Lambda) else next(
        (n.value for n in ast.walk(imap) if isinstance(n, ast.Return) and n.value is not None), None)
    if isinstance(result, ast.Tuple) and len(result.elts) >= 2:
        parts = [ctx.seg(e) for e in result.elts]
        for a, b in itertools.combinations(range(len(parts)), 2):
            if parts[a] == parts[b]:
                continue
            swapped = list(parts)
            swapped[a], swapped[b] = swapped[b], swapped[a]
            ctx.add(result, "(" + ", ".join(swapped) + ("," if len(swapped) == 1 else "") + ")", "index-map-order",
                    "index_map", f"index map results `({', '.join(parts)})` -> `({', '.join(swapped)})`")
    params = imap.args.posonlyargs + imap.args.args
    if len(params) >= 2 and result is not None:
        a, b = params[0], params[1]
        node = _Span(a.lineno, a.col_offset, b.end_lineno, b.end_col_offset)
        if _span_text(ctx, node) == f"{a.arg}, {b.arg}":  # (a def's or a lambda's; ``*_`` after them kept)
            ctx.add(node, f"{b.arg}, {a.arg}", "index-map-order", "index_map",
                    f"index map parameters `{a.arg}, {b.arg}` swapped")
    if result is not None:
        _expression_edits(ctx, result, "index_map")


@dataclass(frozen=True)
class _Span:
    lineno: int
    col_offset: int
    end_lineno: int
    end_col_offset: int


def _span_text(ctx: _Ctx, node: _Span) -> str:
    if node.lineno != node.end_lineno:
        return ""
    raw = ctx.lines[node.lineno - 1].encode()
    return raw[node.col_offset:node.end_col_offset].decode(errors="replace")


def _semantics_edits(ctx: _Ctx, params: ast.expr | None, wrapper: ast.AST | None) -> None:
    if params is None:
        return
    value = None
    for node in ast.walk(params):
        if isinstance(node, ast.keyword) and node.arg == "dimension_semantics":
            value = node.value
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == "dimension_semantics":
                    value = v
    value = _resolve(value, wrapper, ctx.tree) if value is not None else None
    if not isinstance(value, (ast.Tuple, ast.List)):
        return
    for axis, entry in enumerate(value.elts):
        text = ctx.seg(entry)
        if "parallel" in text.lower():
            new = text.replace("parallel", "arbitrary").replace("PARALLEL", "ARBITRARY")
            ctx.add(entry, new, "semantics", "semantics", f"dimension_semantics[{axis}] `{text}` -> `{new}`")


def _wrapper_edits(ctx: _Ctx, call: ast.Call, wrapper: ast.AST) -> None:
    """Assignments of the wrapper whose names reach the call (followed one assignment at a time)."""
    used = {n.id for n in ast.walk(call) if isinstance(n, ast.Name)}
    assigns = [a for a in ast.walk(wrapper) if isinstance(a, ast.Assign) and a.lineno < call.lineno]
    reached: list[ast.Assign] = []
    for _ in range(4):
        grown = False
        for a in assigns:
            targets = {n.id for t in a.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if a not in reached and targets & used:
                reached.append(a)
                used |= {n.id for n in ast.walk(a.value) if isinstance(n, ast.Name)}
                grown = True
        if not grown:
            break
    for a in sorted(reached, key=lambda a: a.lineno):
        _expression_edits(ctx, a.value, "wrapper")


# --------------------------------------------------------------------------- the slice and the ranking


def output_slice(kernel: ast.AST, output: int = 0, n_inputs: int | None = None) -> set[int]:
    """Lines of the kernel's statements the wrong output's stores depend on, by names (refs included: a
    store to ``acc_ref`` defines it, a read uses every store to it), with the ``pl.when`` conditions that
    guard them. ``output``: which output (counted after the ``n_inputs`` inputs); unknown: every
    parameter that is stored to and never read counts as an output."""
    params = [p.arg for p in kernel.args.posonlyargs + kernel.args.args]
    stmts = [s for s in ast.walk(kernel) if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr))]
    defs_uses = [(s, _defined(s), _used(s)) for s in stmts]
    if n_inputs is not None and 0 <= n_inputs + output < len(params):
        wanted = {params[n_inputs + output]}
    else:
        stored = {d for _, ds, _ in defs_uses for d in ds} & set(params)
        read = {u for s, _, us in defs_uses for u in us if not isinstance(s, ast.AugAssign)} & set(params)
        wanted = (stored - read) or stored
    lines: set[int] = set()
    needed = set(wanted)
    for _ in range(len(stmts) + 1):
        grown = False
        for s, ds, us in defs_uses:
            if ds & needed and s.lineno not in lines:
                lines.add(s.lineno)
                needed |= us
                grown = True
        if not grown:
            break
    for fn in ast.walk(kernel):
        if isinstance(fn, ast.FunctionDef) and fn is not kernel and any(s.lineno in lines for s in fn.body):
            lines.update(d.lineno for d in fn.decorator_list)
    return lines


def _defined(stmt: ast.stmt) -> set[str]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if hasattr(stmt, "target") else []
    out = set()
    for t in targets:
        base = t
        while isinstance(base, (ast.Subscript, ast.Attribute)):
            base = base.value
        if isinstance(base, ast.Name):
            out.add(base.id)
        out |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and _name(stmt.value.func) in ("store", "swap") \
            and stmt.value.args and isinstance(stmt.value.args[0], ast.Name):
        out.add(stmt.value.args[0].id)
    return out


def _used(stmt: ast.stmt) -> set[str]:
    value = getattr(stmt, "value", None)
    out = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)} if value is not None else set()
    if isinstance(stmt, ast.AugAssign):
        out |= _defined(stmt)
    for t in getattr(stmt, "targets", []):
        if isinstance(t, ast.Subscript):
            out |= {n.id for n in ast.walk(t.slice) if isinstance(n, ast.Name)}
    return out


# Base scores by family, per what tier 3 saw: NaN/unwritten outputs, a few wrong elements, most wrong.
_NAN = {"scale-use": 1, "dim-name": 7, "cdiv": 9, "when": 8, "init": 8, "program-id-axis": 8, "index-map-order": 7, "semantics": 6,
        "comparison": 5, "off-by-one": 5, "operand": 5, "dtype": 3, "scale": 2}
_FEW = {"scale-use": 1, "dim-name": 6, "comparison": 9, "off-by-one": 8, "cdiv": 7, "operand": 7, "when": 6, "index-map-order": 6,
        "program-id-axis": 5, "init": 5, "semantics": 5, "dtype": 3, "scale": 3}
_MOST = {"scale-use": 3, "dim-name": 6, "scale": 8, "program-id-axis": 8, "when": 8, "init": 8, "index-map-order": 7, "semantics": 7,
         "dtype": 6, "comparison": 5, "operand": 5, "off-by-one": 4, "cdiv": 4}
# A run that failed: a wait nothing signals (a copy's start under the wrong condition, the wrong slot), a read
# or copy past a buffer (a grid, an index, a scratch dim, a bound), any other error.
_DEADLOCK = {"when": 10, "comparison": 7, "off-by-one": 6, "program-id-axis": 6, "operand": 5, "index-map-order": 4,
             "scratch-dim": 4, "cdiv": 3, "dim-name": 3, "init": 2, "semantics": 2, "dtype": 1, "scale": 0, "scale-use": 0}
_BOUNDS = {"scratch-dim": 9, "off-by-one": 8, "operand": 8, "index-map-order": 8, "cdiv": 7, "dim-name": 7,
           "program-id-axis": 7, "comparison": 6, "when": 5, "init": 2, "semantics": 2, "dtype": 1, "scale": 0,
           "scale-use": 0}
_BLOCK = {"index-map-order": 10, "cdiv": 8, "dim-name": 8, "off-by-one": 7, "operand": 7, "program-id-axis": 4,
          "comparison": 3, "when": 2, "scratch-dim": 1, "init": 0, "semantics": 2, "dtype": 0, "scale": 0,
          "scale-use": 0}
_ERROR = {**_BOUNDS, "when": 7, "dtype": 4}
# Right with random inputs, wrong with the inputs the reference never reads poisoned: a mask or a bound lets
# one element too many in.
_POISONED = {"comparison": 10, "off-by-one": 9, "operand": 6, "cdiv": 5, "when": 4, "index-map-order": 3,
             "program-id-axis": 3, "dim-name": 3, "scratch-dim": 2, "init": 1, "semantics": 1, "dtype": 0, "scale": 0,
             "scale-use": 0}
_FAILURES = {"deadlock": _DEADLOCK, "bounds": _BOUNDS, "block": _BLOCK, "error": _ERROR, "poisoned": _POISONED}
_BLOCK_ROLE = {"index_map": 3.0, "grid": 2.0, "block": 1.0, "wrapper": 1.0, "kernel": -3.0, "mask": -3.0,
               "when": -3.0}
NEAR_FAILURE, NEXT_TO_FAILURE = 6, 2  # an edit at the line tier 3 said the run failed at (or next to it): tried early
UNINITIALIZED_INIT, UNINITIALIZED_WHEN = 2.0, 2.0  # tier 3 saw memory read before any write (``Signals``)
_ROLE = {"mask": 4.5, "when": 1.0, "kernel": 0.5, "index_map": 0.5, "grid": 0.5, "semantics": 0.5,
         "out_shape": 0.3, "wrapper": 0.3, "scratch": 0.2, "block": 0.0}


def order_edits(edits: list[Edit], signals: Signals, slice_lines: set[int] = frozenset()) -> list[Edit]:
    """The edits scored (module doc) and sorted, best first; ties keep source order."""
    table = _FAILURES.get(signals.failure) or (_NAN if signals.nan else _FEW if signals.fraction < 0.1 else _MOST)
    near = signals.failed_line
    scored = []
    for e in edits:
        other = e.kind.endswith("-other")  # a less likely edit of its family
        roles = _BLOCK_ROLE if signals.failure == "block" else _ROLE
        score = table.get(e.kind.removesuffix("-other"), 3) - 2 * other + roles.get(e.role, 0.0)
        if near is not None and e.line <= near <= e.end_line:
            score += NEAR_FAILURE
        elif near is not None and e.line - 1 <= near <= e.end_line + 1:
            score += NEXT_TO_FAILURE
        if signals.dtype and e.kind == "dtype":
            score += 6
        if signals.uninitialized:  # memory read before any write: the first step's init, or a pl.when's condition
            score += UNINITIALIZED_INIT * (e.kind == "init") + UNINITIALIZED_WHEN * (e.role == "when")
        in_slice = e.line in slice_lines
        if in_slice:
            score += 2
        scored.append(Edit(**{**e.__dict__, "score": score, "in_slice": in_slice}))
    return sorted(scored, key=lambda e: -e.score)


# --------------------------------------------------------------------------- applying


def apply(text: str, edit: Edit) -> str:
    """``text`` with ``edit`` made (ast's byte columns honoured)."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    a = starts[edit.line - 1] + _char_col(lines[edit.line - 1], edit.col)
    b = starts[edit.end_line - 1] + _char_col(lines[edit.end_line - 1], edit.end_col)
    return text[:a] + edit.new + text[b:]


def _char_col(line: str, col: int) -> int:
    """ast's columns are UTF-8 byte offsets; str indices are code points."""
    return len(line.encode("utf-8")[:col].decode("utf-8", errors="ignore"))


def char_columns(text: str, edit: Edit) -> tuple[int, int]:
    """The edit's start and end columns as code points (what an editor counts)."""
    lines = text.splitlines()
    start = _char_col(lines[edit.line - 1], edit.col) if edit.line - 1 < len(lines) else edit.col
    end = _char_col(lines[edit.end_line - 1], edit.end_col) if edit.end_line - 1 < len(lines) else edit.end_col
    return start, end
