"""The plain XLA ops of an exported module (everything outside its Mosaic kernels), counted from its
StableHLO (worker side): what the same roofline prices around a kernel and in a plain-JAX reference,
so the two sides of an estimated speedup share one model.

- **FLOPs** (``count_flops``, body_counts.py's rules on StableHLO ops): ``dot_general`` 2 x output
  elements x contracted elements (the MXU share, with its fill efficiency); element-wise arithmetic
  one per output element; reductions (``reduce``, ``reduce_window``) one per input element;
  transcendentals one per element; a ``while`` whose trip count the module fixes (a ``scan``,
  a ``fori_loop`` with static bounds, the HLO interpreter's loop over a grid) x its trips, else once
  (noted); a ``case`` its largest branch.
- **HBM bytes** (``count_bytes``, a fusion rule in the spirit of XLA's producer-consumer fusion):
  element-wise ops, broadcasts, reshapes and converts fuse into their consumer; every other op is a fusion root that reads the
  materialized values its operands come from and writes its results; a program output made by
  fused ops is written once; kernel results are materialized.

Platform cases are taken at the TPU's branch; a pallas_call's own pair (runner/program/module_read.py)
is the kernel, counted by runner/program/kernel_cost.py, never here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .body_counts import BodyCounts, add_dot
from .mlir_tree import Block, Op, Type
from .module_read import TPU_CALL, Module, apply_scalar, scalar_value, target


@dataclass
class XlaOps:
    """The plain XLA ops of one program, per execution."""

    flops: int = 0
    mxu_flops: int = 0
    transcendentals: int = 0
    dots: list[tuple[int, str, float]] = field(default_factory=list)
    hbm_bytes: int = 0
    launches: int = 0
    roots: list[str] = field(default_factory=list)  # the fusion roots' primitive names (for the report)
    notes: set[str] = field(default_factory=set)


_ELEMENTWISE = ("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "negate", "abs", "sign",
                "floor", "ceil", "round_nearest_afz", "round_nearest_even", "clamp")
ARITHMETIC = frozenset({f"stablehlo.{n}" for n in _ELEMENTWISE} | {"chlo.next_after"})
TRANSCENDENTAL = frozenset({f"stablehlo.{n}" for n in ("exponential", "exponential_minus_one", "log", "log_plus_one",
                                                        "tanh", "logistic", "sine", "cosine", "tan", "rsqrt", "sqrt",
                                                        "cbrt", "power", "atan2")}
                           | {f"chlo.{n}" for n in ("erf", "erfc", "erf_inv", "asin", "acos", "atan", "sinh", "cosh",
                                                    "asinh", "acosh", "atanh", "lgamma", "digamma", "tan")})
REDUCTIONS = frozenset({"stablehlo.reduce", "stablehlo.reduce_window"})
DOTS = frozenset({"stablehlo.dot_general", "stablehlo.dot"})
FUSED = ARITHMETIC | TRANSCENDENTAL | frozenset(f"stablehlo.{n}" for n in (
    "select", "convert", "broadcast_in_dim", "dynamic_broadcast_in_dim", "reshape", "dynamic_reshape", "iota",
    "dynamic_iota", "compare", "and", "or", "not", "xor", "is_finite", "shift_left", "shift_right_logical",
    "shift_right_arithmetic", "bitcast_convert", "reduce_precision", "real", "imag", "popcnt",
    "count_leading_zeros", "get_dimension_size")) | frozenset({"chlo.is_inf", "chlo.is_neg_inf", "chlo.is_pos_inf"})
_FREE_CALLS = ("shape_assertion",)
_DOT = re.compile(r"(lhs|rhs)_(batching|contracting)_dimensions = \[([\d, ]*)\]")


def dot_counts(op: Op, types: dict[int, Type], counts: BodyCounts, mxu: int) -> None:
    lhs, rhs, out = types[op.operands[0]], types[op.operands[1]], types[op.results[0]]
    dims = {"lhs_batching": [], "rhs_batching": [], "lhs_contracting": [len(lhs.shape) - 1], "rhs_contracting": [0]}
    if "dot_dimension_numbers" in op.attrs:
        dims.update({"lhs_contracting": [], "rhs_contracting": []})
        for side, kind, nums in _DOT.findall(str(op.attrs["dot_dimension_numbers"])):
            dims[f"{side}_{kind}"] = [int(x) for x in nums.replace(" ", "").split(",") if x]
    add_dot(counts, lhs.shape, rhs.shape, out.elements, (dims["lhs_contracting"], dims["lhs_batching"],
                                                          dims["rhs_contracting"], dims["rhs_batching"]), lhs.dtype, mxu)


def leaf(op: Op, types: dict[int, Type], counts: BodyCounts, mxu: int) -> bool:
    """One StableHLO op's own work (body_counts.count_leaf's rules); False if it is no arithmetic."""
    from .mosaic_counts import leaf_work

    return leaf_work(op, types, counts, mxu, (DOTS, dot_counts, TRANSCENDENTAL, ARITHMETIC, REDUCTIONS))


def while_trips(module: Module, op: Op, value_of: Any = None) -> int | None:
    """The trip count of a ``while`` that counts a carried integer up (or down) by a constant to a
    bound the loop does not change, from values the module fixes (``value_of``: a function giving
    the loop's initial operands' values where the module alone does not); else None."""
    def initial(v: int, depth: int = 0) -> Any:
        got = scalar_value(module, v)
        if got is not None or value_of is None:
            return got
        got = value_of(v)  # a top-level value: from the judge's inputs through the module's ops
        found = module.defs.get(v)
        if got is not None or found is None or depth > 16 or module.tree.type(v).elements > 64:
            return got
        args = [initial(x, depth + 1) for x in found[0].operands]  # scalar arithmetic inside a branch
        return None if any(a is None for a in args) else apply_scalar(found[0], args, module.tree.type(v))

    cond, body = op.regions[0][0], op.regions[1][0]
    if not cond.ops or not body.ops or cond.ops[-1].operands == ():
        return None
    test = module.defs.get(cond.ops[-1].operands[0])
    if test is None or test[0].name != "stablehlo.compare":
        return None
    returned = body.ops[-1].operands
    invariant = {cond.args[j]: initial(op.operands[j]) for j in range(len(cond.args))
                 if j < len(returned) and returned[j] == body.args[j]}
    invariant = {k: v for k, v in invariant.items() if v is not None}
    cmp = test[0]
    direction = str(cmp.attrs["comparison_direction"]).split()[-1].rstrip(">")
    a, b = cmp.operands
    if a not in cond.args:
        return None
    i = cond.args.index(a)
    start = initial(op.operands[i])
    bound = scalar_value(module, b, env=invariant)
    step_def = module.defs.get(returned[i])
    if start is None or bound is None or step_def is None or step_def[0].name not in ("stablehlo.add",
                                                                                      "stablehlo.subtract"):
        return None
    inc_op = step_def[0]
    others = [v for v in inc_op.operands if v != body.args[i]]
    inc = scalar_value(module, others[0]) if len(others) == 1 else None
    if inc is None or int(inc) == 0:
        return None
    inc = int(inc) if inc_op.name == "stablehlo.add" else -int(inc)
    span = int(bound) - int(start) + (1 if direction in ("LE", "GE") else 0)
    if direction in ("LT", "LE") and inc > 0 or direction in ("GT", "GE") and inc < 0:
        return max(0, -(-span // inc)) if inc > 0 else max(0, -(-(-span) // -inc))
    return None


def count_flops(module: Module, block: Block, mxu: int = 128) -> BodyCounts:
    """The work of one execution of ``block`` (see the module docstring), kernels excluded."""
    counts = BodyCounts()
    types = module.tree.types
    for op in block.ops:
        if leaf(op, types, counts, mxu):
            continue
        if op.name == "stablehlo.while":
            trips = while_trips(module, op)
            once = count_flops(module, op.regions[1][0], mxu)
            counts.add(once, trips if trips is not None else 1)
            if trips is None and (once.flops or once.transcendentals):
                counts.notes.add("a while loop body is counted once (trip count unknown statically)")
        elif op.name == "stablehlo.case":
            branch = _platform_branch(module, op)
            if branch == "kernel":
                continue
            if branch is not None:
                counts.add(count_flops(module, branch, mxu))
                continue
            branches = [count_flops(module, r[0], mxu) for r in op.regions if r]
            if branches:
                counts.add(max(branches, key=lambda c: (c.flops, c.transcendentals)))
                if len({(c.flops, c.transcendentals) for c in branches}) > 1:
                    counts.notes.add("a pl.when/cond body is counted on every grid step")
        elif op.name == "func.call":
            callee = module.tree.funcs.get(_callee(op))
            if callee is not None:
                counts.add(count_flops(module, callee.regions[0][0], mxu))
    return counts


def _callee(op: Op) -> str:
    return str(op.attrs.get("callee", "")).lstrip("@")


def _platform_branch(module: Module, op: Op) -> Any:
    """For a platform case: "kernel" (a pallas_call's pair or the index map: not XLA ops) or its TPU
    branch's block; None for any other case."""
    for case, kind in module.cases:
        if case is op:
            if kind in ("pair", "map"):
                return "kernel"
            t = module.branch_at(op, "tpu")
            return op.regions[t][0] if t is not None else "kernel"
    return None


# --------------------------------------------------------------------------- bytes


def _bytes(t: Type) -> int:
    if t.kind not in ("tensor",) or not t.dtype:
        return 0
    return t.elements * max(t.bits // 8, 1)


def count_bytes(module: Module, out: XlaOps) -> None:
    """Add the fused-op HBM bytes and launches of the TPU program to ``out``."""
    block = module.main_block
    sources: dict[int, tuple[int, ...]] = {a: (a,) for a in block.args}
    if module.platform_arg is not None:
        sources[module.platform_arg] = ()
    _walk(module, block, out, sources, set(block.ops[-1].operands) if block.ops else set(), 1)


def _walk(module: Module, block: Block, out: XlaOps, sources: dict[int, tuple[int, ...]], outputs: set[int],
          times: int) -> None:
    types = module.tree.types

    def src(v: int) -> tuple[int, ...]:
        return sources.get(v, (v,))

    def read(values: Any) -> int:
        seen: dict[int, int] = {}
        for v in values:
            for s in src(v):
                seen[s] = _bytes(types[s])
        return sum(seen.values())

    for op in block.ops:
        if op.name in ("stablehlo.return", "func.return"):
            continue
        if _inline(module, op, out, sources, times, src):
            continue
        if op.name == "stablehlo.constant":  # a literal, or (several values) materialized like a traced const
            sources[op.results[0]] = (op.results[0],) if _dense(op) else ()
            continue
        if op.name in FUSED:
            merged: dict[int, None] = {}
            for v in op.operands:
                merged.update(dict.fromkeys(src(v)))
            for r in op.results:
                sources[r] = tuple(merged)
            continue
        if op.name == "stablehlo.while":
            trips = while_trips(module, op)
            if trips is not None:
                body = op.regions[1][0]
                inner = dict(sources)
                inner.update({a: src(v) for a, v in zip(body.args, op.operands)})
                _walk(module, body, out, inner, set(), times * trips)
            else:
                out.notes.add("XLA while ops: counted as one op moving its operands")
        elif op.name == "stablehlo.case":
            out.notes.add("XLA cond ops: counted as one op moving its operands")
        moved = read(op.operands) + sum(_bytes(types[r]) for r in op.results)
        out.hbm_bytes += moved * times
        out.launches += times
        out.roots.append(op.name.split(".")[-1])
        for r in op.results:
            sources[r] = (r,)
    for v in outputs:  # program outputs made by fused ops: one fusion writes each
        if src(v) in ((), (v,)):
            continue
        out.hbm_bytes += (read([v]) + _bytes(types[v])) * times
        out.launches += times
        out.roots.append("fusion")


def _dense(op: Op) -> bool:
    """A constant with more than one distinct value (materialized in HBM, like a traced program's consts)."""
    return str(op.attrs.get("value", "")).startswith(("dense<[", 'dense<"'))


def _inline(module: Module, op: Op, out: XlaOps, sources: dict[int, tuple[int, ...]], times: int, src: Any) -> bool:
    """Kernels, platform cases and calls: handled here (True) rather than as XLA ops."""
    if op.name == "stablehlo.custom_call":
        if target(op) == TPU_CALL:
            for r in op.results:
                sources[r] = (r,)
            return True
        return target(op) in _FREE_CALLS
    if op.name == "stablehlo.case":
        branch = _platform_branch(module, op)
        if branch is None:
            return False
        if branch == "kernel":
            kind = next(k for c, k in module.cases if c is op)
            for r in op.results:
                sources[r] = () if kind == "map" else (r,)
            return True
        _walk(module, branch, out, sources, set(), times)
        for r, v in zip(op.results, branch.ops[-1].operands):
            sources[r] = src(v)
        return True
    if op.name == "func.call":
        callee = module.tree.funcs.get(_callee(op))
        if callee is None:
            return False
        body = callee.regions[0][0]
        inner = {a: src(v) for a, v in zip(body.args, op.operands)}
        _walk(module, body, out, inner, set(), times)
        for r, v in zip(op.results, body.ops[-1].operands):
            sources[r] = inner.get(v, (v,))
        return True
    return False


def count_module_xla(module: Module, mxu: int = 128) -> XlaOps:
    """The TPU program's plain XLA ops (FLOPs and fused-op bytes; see the module docstring)."""
    out = XlaOps()
    body = count_flops(module, module.main_block, mxu)
    out.flops, out.mxu_flops, out.transcendentals = body.flops, body.mxu_flops, body.transcendentals
    out.dots, out.notes = list(body.dots), set(body.notes)
    count_bytes(module, out)
    return out
