"""What a program's plain XLA ops cost (everything outside its pallas_calls), counted from its jaxpr.

The same roofline prices a Pallas kernel's wrapper ops (transposes, pads, the final reshape) and a
plain-JAX reference, so the two sides of an estimated speedup share one model (runner/cost_model.py).

- **FLOPs**: ``body_counts.count_body`` over the program (pallas_call bodies excluded: they are
  counted per grid step by ``cost_model.call_cost``); matmuls at the dtype's MXU rate.
- **HBM bytes each fused op must move** (a fusion rule in the spirit of XLA's producer-consumer
  fusion): element-wise ops, broadcasts, reshapes and converts fuse into their consumer and move
  nothing themselves; every other op (matmul, reduction, transpose, gather, concatenate, ...) is a
  fusion root that reads the *materialized* values its operands come from (program inputs or
  earlier roots, traced back through fused ops) and writes its result. A program output made by
  fused ops is written once and reads its sources. ``scan`` bodies count once per iteration.
- **Launches**: one per fusion root (each is one TPU kernel launch in XLA's program).

Worker side: walks jaxprs (needs JAX's objects, imports nothing of JAX itself).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# ops XLA fuses into their consumer (they move no bytes of their own)
FUSED = frozenset({
    "add", "add_any", "sub", "mul", "div", "rem", "max", "min", "neg", "abs", "sign", "floor", "ceil",
    "round", "integer_pow", "square", "reciprocal", "clamp", "nextafter", "pow", "exp", "exp2", "log",
    "log1p", "expm1", "tanh", "logistic", "sin", "cos", "tan", "rsqrt", "sqrt", "cbrt", "erf", "erfc",
    "erf_inv", "atan2", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "lgamma",
    "digamma", "select_n", "convert_element_type", "broadcast_in_dim", "reshape", "squeeze",
    "expand_dims", "iota", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not", "xor", "is_finite",
    "stop_gradient", "copy", "copy_p", "shift_left", "shift_right_logical", "shift_right_arithmetic",
    "bitcast_convert_type", "reduce_precision", "real", "imag", "population_count", "clz",
})
# containers whose body is inlined (their equations are the program's)
_INLINE = ("pjit", "jit", "closed_call", "core_call", "remat", "checkpoint", "custom_jvp_call",
           "custom_vjp_call", "custom_vjp_call_jaxpr", "shard_map")


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


def _bytes(aval: Any) -> int:
    shape = getattr(aval, "shape", None)
    dtype = getattr(aval, "dtype", None)
    if shape is None or dtype is None:
        return 0
    try:
        return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    except TypeError:  # an extended dtype (PRNG keys, semaphores)
        return 0


def _inner(params: dict[str, Any]) -> Any:
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        value = params.get(key)
        if value is not None:
            return getattr(value, "jaxpr", value)
    return None


def count_xla_ops(jaxpr: Any, mxu: int = 128) -> XlaOps:
    """Count ``jaxpr``'s ops outside pallas_calls (see the module docstring)."""
    from .body_counts import count_body

    out = XlaOps()
    body = count_body(jaxpr, mxu)  # pallas_call bodies are skipped there
    out.flops, out.mxu_flops, out.transcendentals = body.flops, body.mxu_flops, body.transcendentals
    out.dots, out.notes = list(body.dots), set(body.notes)
    _walk(jaxpr, out, {v: (v,) for v in jaxpr.invars}, set(jaxpr.outvars), 1)
    return out


def _walk(jaxpr: Any, out: XlaOps, sources: dict[Any, tuple[Any, ...]], outputs: set[Any], times: int) -> None:
    """``sources``: for each var, the materialized vars it is computed from (itself if materialized)."""
    def src(var: Any) -> tuple[Any, ...]:
        if hasattr(var, "val"):  # a literal
            return ()
        return sources.get(var, (var,))

    def read(vars_: Iterable[Any]) -> int:
        seen: dict[Any, int] = {}
        for v in vars_:
            for s in src(v):
                seen[s] = _bytes(s.aval)
        return sum(seen.values())

    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "pallas_call":  # its blocks are counted by cost_model.call_cost; its outputs are in HBM
            for v in eqn.outvars:
                sources[v] = (v,)
            continue
        inner = _inner(eqn.params) if name in _INLINE or name.startswith("custom_") else None
        if inner is not None and len(inner.invars) == len(eqn.invars):
            inner_sources = {iv: src(ov) for iv, ov in zip(inner.invars, eqn.invars)}
            _walk(inner, out, inner_sources, set(), times)
            for ov, iv in zip(eqn.outvars, inner.outvars):
                sources[ov] = () if hasattr(iv, "val") else inner_sources.get(iv, (iv,))
            continue
        if name in FUSED:
            merged: dict[Any, None] = {}
            for v in eqn.invars:
                merged.update(dict.fromkeys(src(v)))
            for v in eqn.outvars:
                sources[v] = tuple(merged)
            continue
        if name == "scan":  # a loop of XLA ops: its body's roots run once per iteration
            length = int(eqn.params["length"])
            inner = eqn.params["jaxpr"].jaxpr
            _walk(inner, out, {iv: src(ov) for iv, ov in zip(inner.invars, eqn.invars)}, set(), times * length)
        elif name in ("while", "cond"):
            out.notes.add(f"XLA {name} ops: counted as one op moving its operands")
        # a fusion root: reads its operands' materialized sources, writes its results
        moved = read(eqn.invars) + sum(_bytes(v.aval) for v in eqn.outvars)
        out.hbm_bytes += moved * times
        out.launches += times
        out.roots.append(name)
        for v in eqn.outvars:
            sources[v] = (v,)
    for v in outputs:  # program outputs made by fused ops: one fusion writes each
        if hasattr(v, "val") or src(v) in ((), (v,)):
            continue
        out.hbm_bytes += (read([v]) + _bytes(v.aval)) * times
        out.launches += times
        out.roots.append("fusion")


# --------------------------------------------------------------------------- the compiled module

# The compiled module's reader lives in runner/compiled_ops.py; these names stay importable from here.
from .compiled_ops import HloOp, hlo_ops, type_bytes as _type_bytes  # noqa: E402,F401
