"""What one execution of a kernel body computes, counted from its jaxpr: FLOPs, the MXU's share
with its fill efficiency, transcendentals, per primitive; and the walk into nested jaxprs. The cost
model (``cost_model.py``), the kernel's own DMA counts (``kernel_counts.py``) and the XLA ops around
the kernels (``xla_ops.py``) all build on it, so none of them imports another in a circle.
Worker side: plain data over jax's jaxpr objects (no jax import needed).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_TRANSCENDENTAL = frozenset({
    "exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos", "tan", "rsqrt", "sqrt",
    "cbrt", "pow", "erf", "erfc", "erf_inv", "atan2", "asin", "acos", "atan", "sinh", "cosh", "asinh",
    "acosh", "atanh", "lgamma", "digamma",
})
_ARITHMETIC = frozenset({
    "add", "add_any", "sub", "mul", "div", "rem", "max", "min", "neg", "abs", "sign", "floor", "ceil",
    "round", "integer_pow", "square", "reciprocal", "clamp", "nextafter",
})
_REDUCTIONS = frozenset({
    "reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "argmax", "argmin", "cumsum", "cummax",
    "cummin", "cumprod", "cumlogsumexp",
})



@dataclass
class BodyCounts:
    """Per-grid-step counts of a kernel body."""

    flops: int = 0
    mxu_flops: int = 0
    transcendentals: int = 0
    dots: list[tuple[int, str, float]] = field(default_factory=list)  # (flops, operand dtype, efficiency)
    notes: set[str] = field(default_factory=set)

    def add(self, other: "BodyCounts", times: int = 1) -> None:
        self.flops += other.flops * times
        self.mxu_flops += other.mxu_flops * times
        self.transcendentals += other.transcendentals * times
        self.dots.extend((f * times, d, e) for f, d, e in other.dots)
        self.notes |= other.notes
        if len(self.dots) > 64:  # a walk over many grid steps: one entry per (dtype, fill) is enough
            merged: dict[tuple[str, float], int] = {}
            for f, d, e in self.dots:
                merged[(d, e)] = merged.get((d, e), 0) + f
            self.dots = [(f, d, e) for (d, e), f in merged.items()]


def _size(aval: Any) -> int:
    shape = getattr(aval, "shape", ())
    return int(np.prod(shape, dtype=np.int64)) if shape else 1


def _fill(dim: int, unit: int) -> float:
    return dim / (math.ceil(dim / unit) * unit) if dim > 0 else 1.0


def add_dot(counts: BodyCounts, lhs: Any, rhs: Any, out_elements: int, dims: Any, dtype: str, mxu: int) -> None:
    """One matmul: 2 x output elements x contracted elements, on the MXU, with how its contracted and
    output-column dims fill the MXU and its rows the sublanes of 8. ``dims``: (lhs contracting, lhs
    batch, rhs contracting, rhs batch). Shared by the jaxpr, Mosaic and StableHLO counts."""
    lc, lb, rc, rb = dims
    contract = int(np.prod([lhs[d] or 0 for d in lc], dtype=np.int64)) if lc else 1
    flops = 2 * out_elements * contract
    rows = int(np.prod([lhs[d] or 0 for d in range(len(lhs)) if d not in lc and d not in lb], dtype=np.int64)) or 1
    cols = int(np.prod([rhs[d] or 0 for d in range(len(rhs)) if d not in rc and d not in rb], dtype=np.int64)) or 1
    counts.flops += flops
    counts.mxu_flops += flops
    counts.dots.append((flops, dtype, _fill(contract, mxu) * _fill(cols, mxu) * _fill(rows, 8)))


def count_leaf(eqn: Any, counts: BodyCounts, mxu: int = 128) -> bool:
    """Add one equation's own work to ``counts`` when it is arithmetic (a matmul, an element-wise or
    transcendental op, a reduction); False for anything else (control flow, memory ops, casts)."""
    name = eqn.primitive.name
    if name == "dot_general":
        lhs, rhs = (v.aval for v in eqn.invars)
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        add_dot(counts, lhs.shape, rhs.shape, _size(eqn.outvars[0].aval), (lc, lb, rc, rb), str(lhs.dtype), mxu)
    elif name in _TRANSCENDENTAL:
        counts.transcendentals += _size(eqn.outvars[0].aval)
    elif name in _ARITHMETIC:
        counts.flops += _size(eqn.outvars[0].aval)
    elif name in _REDUCTIONS:
        counts.flops += _size(eqn.invars[0].aval)
    else:
        return False
    return True


def count_body(jaxpr: Any, mxu: int = 128) -> BodyCounts:
    """FLOPs, MXU FLOPs and transcendentals of one execution of ``jaxpr`` (a kernel body), with no
    values known: a ``pl.when``/``cond`` counts its largest branch, a ``while`` body once.
    runner/kernel_counts.py counts the same per grid step from the values the task's inputs give."""
    counts = BodyCounts()
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "pallas_call":  # a kernel's body is counted per grid step by call_cost, never inline
            continue
        if count_leaf(eqn, counts, mxu):
            continue
        if name == "scan":
            counts.add(count_body(eqn.params["jaxpr"].jaxpr, mxu), int(eqn.params["length"]))
        elif name == "cond":
            branches = [count_body(b.jaxpr, mxu) for b in eqn.params["branches"]]
            counts.add(max(branches, key=lambda c: (c.flops, c.transcendentals)))
            if len({(c.flops, c.transcendentals) for c in branches}) > 1:
                counts.notes.add("a pl.when/cond body is counted on every grid step")
        elif name == "while":
            once = count_body(eqn.params["body_jaxpr"].jaxpr, mxu)
            counts.add(once)
            if once.flops or once.transcendentals:
                counts.notes.add("a while loop body is counted once (trip count unknown statically)")
        else:
            for sub in sub_jaxprs(eqn.params):
                counts.add(count_body(sub, mxu))
    return counts


def sub_jaxprs(params: dict[str, Any]) -> Iterator[Any]:
    """The jaxprs inside an equation's params (a ClosedJaxpr's ``.jaxpr``, or a Jaxpr itself)."""
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            inner = getattr(item, "jaxpr", item)
            if hasattr(inner, "eqns"):
                yield inner


def certain_mxu_flops(jaxpr: Any) -> dict[str, int]:
    """The matmul FLOPs a program certainly does, by operand dtype: ``dot_general``s that run on every
    execution — in the program and in each pallas_call's body (x its static grid steps), scans x
    their length — and none inside a ``cond``/``pl.when`` or ``while`` (values decide whether they
    run) or in a kernel with a dynamic grid. A lower bound of the work, so the compute floor it makes
    (engine/device_floor.py: these FLOPs at the chip's peak) is never too high. Worker side, no jax."""
    out: dict[str, int] = {}

    def walk(jx: Any, times: int) -> None:
        for eqn in jx.eqns:
            name = eqn.primitive.name
            if name == "dot_general":
                lhs = eqn.invars[0].aval
                (lc, _rc), _ = eqn.params["dimension_numbers"]
                contract = int(np.prod([lhs.shape[d] for d in lc], dtype=np.int64)) if lc else 1
                dtype = str(lhs.dtype)
                out[dtype] = out.get(dtype, 0) + 2 * _size(eqn.outvars[0].aval) * contract * times
            elif name == "pallas_call":
                grid = tuple(getattr(eqn.params["grid_mapping"], "grid", ()) or ())
                if all(isinstance(g, (int, np.integer)) for g in grid):
                    steps = int(np.prod(grid, dtype=np.int64)) if grid else 1
                    walk(getattr(eqn.params["jaxpr"], "jaxpr", eqn.params["jaxpr"]), times * steps)
            elif name == "scan":
                walk(eqn.params["jaxpr"].jaxpr, times * int(eqn.params["length"]))
            elif name in ("cond", "while"):
                continue
            else:
                for sub in sub_jaxprs(eqn.params):
                    walk(sub, times)

    walk(jaxpr, 1)
    return out
