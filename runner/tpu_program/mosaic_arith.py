"""The ``arith`` and ``math`` ops of a Mosaic kernel over numpy values, scalars and vectors alike (worker side).

Integers are signless and wrap in their width (numpy arithmetic in the operand dtype); the op says
signed or unsigned (``divui``, ``shrui``, ``cmpi ult``, ``extui``, ``uitofp`` read the bits unsigned).
Where MLIR leaves a result undefined the XLA definition is used, as a TPU gives it: integer division
by zero -1 (unsigned: all ones), remainder by zero the dividend, shifts by the width or more 0 (an
arithmetic right shift: the sign), float -> int casts truncate and saturate, NaN -> 0. Narrow floats
(bf16, f16, fp8) compute through float32 and round to nearest even once per op. ``cmpf`` follows the
ordered/unordered predicates; ``maximumf``/``minimumf`` propagate NaN, ``maxnumf``/``minnumf`` do not.

``HANDLERS`` maps each op name to a builder ``(op, compiler) -> step``; the function each step applies
is chosen once from the result's dtype.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from ..program.mlir_tree import Op, int_attr
from .mosaic_plan import Compiler, Step
from .mosaic_values import BOOL, dtype_of, narrow_float, unsigned, widen

Fn = Callable[..., Any]


def _step(fn: Fn, op: Op) -> Step:
    """The step applying ``fn`` to the op's operand values, its result the op's first."""
    r = op.results[0]
    if len(op.operands) == 1:
        (a,) = op.operands

        def one(env: list, st: Any) -> None:
            env[r] = fn(env[a])

        return one
    if len(op.operands) == 2:
        a, b = op.operands

        def two(env: list, st: Any) -> None:
            env[r] = fn(env[a], env[b])

        return two
    ids = op.operands

    def many(env: list, st: Any) -> None:
        env[r] = fn(*[env[v] for v in ids])

    return many


def _result_dtype(op: Op, c: Compiler) -> np.dtype:
    return dtype_of(c.type(op.results[0]))


def _operand_dtype(op: Op, c: Compiler, i: int = 0) -> np.dtype:
    return dtype_of(c.type(op.operands[i]))


def _through_f32(fn: Fn, dtype: np.dtype) -> Fn:
    """``fn`` over floats of ``dtype``: computed in float32 and rounded once for narrow floats."""
    if not narrow_float(dtype):
        return fn

    def narrowed(*args: Any) -> Any:
        return fn(*[widen(a) for a in args]).astype(dtype)

    return narrowed


def float_op(fn: Fn) -> Callable[[Op, Compiler], Step]:
    def build(op: Op, c: Compiler) -> Step:
        return _step(_through_f32(fn, _result_dtype(op, c)), op)

    return build


def _int_op(make: Callable[[np.dtype], Fn]) -> Callable[[Op, Compiler], Step]:
    def build(op: Op, c: Compiler) -> Step:
        return _step(make(_result_dtype(op, c)), op)

    return build


# --------------------------------------------------------------------------- integer arithmetic


def _bits(dtype: np.dtype) -> int:
    return 1 if dtype == BOOL else dtype.itemsize * 8


def _safe(b: Any) -> tuple[Any, Any]:
    """(b with zeros replaced by 1, where it was zero or None when nowhere)."""
    zero = b == 0
    if not np.any(zero):
        return b, None
    return np.where(zero, np.ones_like(b), b), zero


def _scalar_fast(vector: Fn, scalar: Callable[[int, int], int], dtype: np.dtype) -> Fn:
    """``vector`` for arrays; two numpy scalars in Python ints (numpy's ufuncs cost ~2 us a scalar call,
    most of an index computation), the result wrapped to ``dtype``."""
    bits = dtype.itemsize * 8
    mask, top = (1 << bits) - 1, 1 << (bits - 1)
    make = dtype.type

    def fn(a: Any, b: Any) -> Any:
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return vector(a, b)
        v = scalar(int(a), int(b)) & mask
        return make(v - (1 << bits) if v >= top else v)

    return fn


def _py_trunc_div(a: int, b: int) -> int:
    if b == 0:
        return -1
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def _py_rem(a: int, b: int) -> int:
    return a if b == 0 else a - _py_trunc_div(a, b) * b


def _divsi(dtype: np.dtype) -> Fn:
    return _scalar_fast(_divsi_vector(dtype), _py_trunc_div, dtype)


def _remsi(dtype: np.dtype) -> Fn:
    return _scalar_fast(_remsi_vector(dtype), _py_rem, dtype)


def _divsi_vector(dtype: np.dtype) -> Fn:
    def div(a: Any, b: Any) -> Any:
        safe, zero = _safe(b)
        q = (a - np.fmod(a, safe)) // safe  # exact: a - fmod(a, b) is a multiple of b
        return np.asarray(q).astype(dtype, copy=False) if zero is None else np.where(zero, -1, q).astype(dtype)

    return div


def _remsi_vector(dtype: np.dtype) -> Fn:
    def rem(a: Any, b: Any) -> Any:
        safe, zero = _safe(b)
        r = np.fmod(a, safe)
        return r if zero is None else np.where(zero, a, r).astype(dtype)

    return rem


def _unsigned_div(rem: bool) -> Callable[[np.dtype], Fn]:
    def make(dtype: np.dtype) -> Fn:
        def div(a: Any, b: Any) -> Any:
            ua, ub = unsigned(a).astype(np.uint64), unsigned(b).astype(np.uint64)
            safe = np.where(ub == 0, 1, ub)
            out = np.where(ub == 0, ua, ua % safe) if rem else np.where(ub == 0, np.uint64(2**64 - 1), ua // safe)
            return out.astype(dtype)

        return div

    return make


def _floordiv(dtype: np.dtype) -> Fn:
    def div(a: Any, b: Any) -> Any:
        safe, zero = _safe(b)
        q = a // safe
        return q if zero is None else np.where(zero, -1, q).astype(dtype)

    return _scalar_fast(div, lambda a, b: -1 if b == 0 else a // b, dtype)


def _ceildiv(dtype: np.dtype) -> Fn:
    def div(a: Any, b: Any) -> Any:
        safe, zero = _safe(b)
        q = -((-a) // safe)
        return np.asarray(q).astype(dtype, copy=False) if zero is None else np.where(zero, -1, q).astype(dtype)

    return div


def _shift(kind: str) -> Callable[[np.dtype], Fn]:
    def make(dtype: np.dtype) -> Fn:
        bits = _bits(dtype)

        def shift(a: Any, b: Any) -> Any:
            s = np.asarray(b, np.int64)
            big = (s < 0) | (s >= bits)
            amount = np.where(big, 0, s)
            if kind == "shli":
                return np.where(big, 0, unsigned(a) << amount.astype(np.uint64)).astype(dtype)
            if kind == "shrui":
                return np.where(big, 0, unsigned(a) >> amount.astype(np.uint64)).astype(dtype)
            wa = np.asarray(a, np.int64)
            return np.where(big, wa >> (bits - 1), wa >> amount).astype(dtype)

        return shift

    return make


def _signed_minmax(fn: Fn, pick_first: Callable[[Any, Any], bool]) -> Callable[[np.dtype], Fn]:
    """np.maximum/np.minimum for arrays, a comparison for two scalars (numpy's ufunc call costs ~2 us)."""

    def make(dtype: np.dtype) -> Fn:
        def pick(a: Any, b: Any) -> Any:
            if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
                return fn(a, b)
            return a if pick_first(a, b) else b

        return pick

    return make


def _unsigned_minmax(fn: Fn) -> Callable[[np.dtype], Fn]:
    def make(dtype: np.dtype) -> Fn:
        return lambda a, b: np.asarray(fn(unsigned(a), unsigned(b))).view(dtype)

    return make


def _same_dtype(fn: Fn) -> Callable[[np.dtype], Fn]:
    """``fn`` as it is: numpy keeps the dtype of two operands of one dtype (MLIR's rule), wrapping ints."""

    def make(dtype: np.dtype) -> Fn:
        if dtype == BOOL:  # i1 arithmetic is modulo 2: add and sub are xor, mul is and
            return {operator.add: operator.xor, operator.sub: operator.xor, operator.mul: operator.and_}.get(fn, fn)
        return fn

    return make


# --------------------------------------------------------------------------- comparisons and select

# Python's operators, not numpy's ufuncs: the same on arrays, ~10x cheaper on the scalars of index arithmetic
_CMPI = {0: operator.eq, 1: operator.ne, 2: operator.lt, 3: operator.le, 4: operator.gt, 5: operator.ge}


def _cmpi(op: Op, c: Compiler) -> Step:
    code = int_attr(op.attrs["predicate"])
    fn = _CMPI[code] if code in _CMPI else _CMPI[code - 4]
    if 6 <= code <= 9:
        return _step(lambda a, b: fn(unsigned(a), unsigned(b)), op)
    return _step(fn, op)


def _unordered(fn: Fn) -> Fn:
    return lambda a, b: fn(a, b) | np.isnan(a) | np.isnan(b)


def _ordered(fn: Fn) -> Fn:
    return lambda a, b: fn(a, b) & ~np.isnan(a) & ~np.isnan(b)


_CMPF: dict[int, Fn] = {
    0: lambda a, b: np.zeros(np.broadcast(a, b).shape, bool), 1: operator.eq, 2: operator.gt, 3: operator.ge,
    4: operator.lt, 5: operator.le, 6: _ordered(np.not_equal), 7: lambda a, b: ~np.isnan(a) & ~np.isnan(b),
    8: _unordered(np.equal), 9: _unordered(np.greater), 10: _unordered(np.greater_equal), 11: _unordered(np.less),
    12: _unordered(np.less_equal), 13: operator.ne, 14: lambda a, b: np.isnan(a) | np.isnan(b),
    15: lambda a, b: np.ones(np.broadcast(a, b).shape, bool),
}


def _cmpf(op: Op, c: Compiler) -> Step:
    fn = _CMPF[int_attr(op.attrs["predicate"])]
    if narrow_float(_operand_dtype(op, c)):
        return _step(lambda a, b: fn(widen(a), widen(b)), op)
    return _step(fn, op)


def _select(op: Op, c: Compiler) -> Step:
    if c.type(op.operands[0]).kind == "scalar":  # one condition for the whole value
        return _step(lambda p, a, b: a if p else b, op)
    return _step(np.where, op)


# --------------------------------------------------------------------------- casts


def _extsi(op: Op, c: Compiler) -> Step:
    dtype = _result_dtype(op, c)
    if _operand_dtype(op, c) == BOOL:
        return _step(lambda x: np.where(x, -1, 0).astype(dtype), op)
    return _step(lambda x: x.astype(dtype), op)


def _extui(op: Op, c: Compiler) -> Step:
    dtype = _result_dtype(op, c)
    if _operand_dtype(op, c) == BOOL:
        return _step(lambda x: np.asarray(x).astype(dtype), op)
    return _step(lambda x: unsigned(x).astype(np.uint64).astype(dtype), op)


def _trunci(op: Op, c: Compiler) -> Step:
    dtype = _result_dtype(op, c)
    if dtype == BOOL:
        return _step(lambda x: (x & 1) != 0, op)
    return _step(lambda x: x.astype(dtype), op)


def _index_cast(op: Op, c: Compiler) -> Step:
    src, dtype = _operand_dtype(op, c), _result_dtype(op, c)
    if op.name == "arith.index_castui" and dtype.itemsize > src.itemsize:
        return _extui(op, c)
    if dtype.itemsize > src.itemsize or src == BOOL:
        return _extsi(op, c)
    return _trunci(op, c)


def _itofp(signed: bool) -> Callable[[Op, Compiler], Step]:
    def build(op: Op, c: Compiler) -> Step:
        dtype, src = _result_dtype(op, c), _operand_dtype(op, c)
        if src == BOOL:
            one = -1.0 if signed else 1.0
            return _step(lambda x: np.where(x, one, 0.0).astype(dtype), op)
        if signed:
            return _step(lambda x: np.asarray(x).astype(np.float64).astype(np.float32).astype(dtype), op)
        return _step(lambda x: unsigned(x).astype(np.float64).astype(np.float32).astype(dtype), op)

    return build


def _fptoi(signed: bool) -> Callable[[Op, Compiler], Step]:
    def build(op: Op, c: Compiler) -> Step:
        dtype = _result_dtype(op, c)
        if dtype == BOOL:
            return _step(lambda x: np.trunc(widen(x)) != 0, op)
        target = dtype if signed else np.dtype(f"u{dtype.itemsize}")
        info = np.iinfo(target)

        def convert(x: Any) -> Any:
            f = np.trunc(widen(x).astype(np.float64))
            out = np.where(np.isnan(f), 0, np.clip(f, float(info.min), float(info.max)))
            return np.asarray(out).astype(target).view(dtype) if not signed else np.asarray(out).astype(dtype)

        return _step(convert, op)

    return build


def _float_cast(op: Op, c: Compiler) -> Step:
    """extf / truncf: through float32 (exact for the narrow side), rounded to nearest even."""
    dtype = _result_dtype(op, c)
    return _step(lambda x: widen(x).astype(dtype), op)


def _bitcast(op: Op, c: Compiler) -> Step:
    dtype = _result_dtype(op, c)
    return _step(lambda x: np.asarray(x).view(dtype), op)


# --------------------------------------------------------------------------- math


def _erf(x: Any) -> Any:
    """erf by Abramowitz & Stegun 7.1.26 in float64 (absolute error under 1.5e-7)."""
    x64 = np.asarray(x, np.float64)
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x64))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    y = 1.0 - poly * np.exp(-x64 * x64)
    return np.copysign(y, x64).astype(np.asarray(x).dtype)


def _round_half_away(x: Any) -> Any:
    r = np.trunc(x)
    return r + np.where(np.abs(x - r) >= 0.5, np.sign(x), 0).astype(np.asarray(x).dtype)


def _ipowi(dtype: np.dtype) -> Fn:
    def power(a: Any, b: Any) -> Any:
        base, exp = np.asarray(a, dtype).copy(), np.asarray(b, np.int64).copy()
        out = np.ones(np.broadcast(base, exp).shape, dtype)
        for _ in range(64):
            if not np.any(exp > 0):
                break
            out = np.where((exp & 1) == 1, out * base, out).astype(dtype)
            base, exp = (base * base).astype(dtype), exp >> 1
        return np.where(exp < 0, 0, out).astype(dtype) if np.any(np.asarray(b) < 0) else out

    return power


def _popcount(dtype: np.dtype) -> Fn:
    def count(x: Any) -> Any:
        u = unsigned(x).astype(np.uint64)
        total = np.zeros(u.shape, np.int64)
        for i in range(_bits(dtype)):
            total += ((u >> np.uint64(i)) & np.uint64(1)).astype(np.int64)
        return total.astype(dtype)

    return count


def _leading_zeros(dtype: np.dtype) -> Fn:
    bits = _bits(dtype)

    def count(x: Any) -> Any:
        u = unsigned(x).astype(np.uint64)
        out = np.full(u.shape, bits, np.int64)
        for i in range(bits):
            out = np.where((u >> np.uint64(i)) & np.uint64(1) == 1, bits - 1 - i, out)
        return out.astype(dtype)

    return count


def _reciprocal(x: Any) -> Any:
    return np.reciprocal(x)


def _fma(a: Any, b: Any, c: Any) -> Any:
    dtype = np.asarray(a).dtype
    return (np.asarray(a, np.float64) * b + c).astype(dtype)


_FLOAT = {
    "arith.addf": operator.add, "arith.subf": operator.sub, "arith.mulf": operator.mul, "arith.divf": operator.truediv,
    "arith.remf": np.fmod, "arith.negf": operator.neg, "arith.maximumf": np.maximum, "arith.minimumf": np.minimum,
    "arith.maxnumf": np.fmax, "arith.minnumf": np.fmin,
    "math.exp": np.exp, "math.exp2": np.exp2, "math.expm1": np.expm1, "math.log": np.log, "math.log2": np.log2,
    "math.log10": np.log10, "math.log1p": np.log1p, "math.sqrt": np.sqrt, "math.rsqrt": lambda x: 1 / np.sqrt(x),
    "math.cbrt": np.cbrt, "math.tanh": np.tanh, "math.sin": np.sin, "math.cos": np.cos, "math.tan": np.tan,
    "math.asin": np.arcsin, "math.acos": np.arccos, "math.atan": np.arctan, "math.atan2": np.arctan2,
    "math.sinh": np.sinh, "math.cosh": np.cosh, "math.asinh": np.arcsinh, "math.acosh": np.arccosh,
    "math.atanh": np.arctanh, "math.absf": np.abs, "math.floor": np.floor, "math.ceil": np.ceil,
    "math.trunc": np.trunc, "math.round": _round_half_away, "math.roundeven": np.rint, "math.copysign": np.copysign,
    "math.powf": np.power, "math.erf": _erf, "math.erfc": lambda x: 1 - _erf(x), "math.fma": _fma,
    "tpu.reciprocal": _reciprocal,
}
_INT: dict[str, Callable[[np.dtype], Fn]] = {
    "arith.addi": _same_dtype(operator.add), "arith.subi": _same_dtype(operator.sub),
    "arith.muli": _same_dtype(operator.mul), "arith.andi": _same_dtype(operator.and_),
    "arith.ori": _same_dtype(operator.or_), "arith.xori": _same_dtype(operator.xor),
    "arith.maxsi": _signed_minmax(np.maximum, operator.ge), "arith.minsi": _signed_minmax(np.minimum, operator.le),
    "arith.maxui": _unsigned_minmax(np.maximum), "arith.minui": _unsigned_minmax(np.minimum),
    "arith.divsi": _divsi, "arith.remsi": _remsi, "arith.divui": _unsigned_div(False),
    "arith.remui": _unsigned_div(True), "arith.floordivsi": _floordiv, "arith.ceildivsi": _ceildiv,
    "arith.shli": _shift("shli"), "arith.shrui": _shift("shrui"), "arith.shrsi": _shift("shrsi"),
    "math.absi": _same_dtype(np.abs), "math.ipowi": _ipowi, "math.ctpop": _popcount, "math.ctlz": _leading_zeros,
}


def _fpowi(op: Op, c: Compiler) -> Step:
    dtype = _result_dtype(op, c)
    return _step(lambda a, b: np.power(widen(a), np.asarray(b, np.float32)).astype(dtype), op)


def _float_predicate(fn: Fn) -> Callable[[Op, Compiler], Step]:
    def build(op: Op, c: Compiler) -> Step:
        return _step(lambda x: fn(widen(x)), op)

    return build


HANDLERS: dict[str, Callable[[Op, Compiler], Step]] = {name: float_op(fn) for name, fn in _FLOAT.items()}
HANDLERS.update({name: _int_op(make) for name, make in _INT.items()})
HANDLERS.update({
    "arith.cmpi": _cmpi, "arith.cmpf": _cmpf, "arith.select": _select,
    "arith.extsi": _extsi, "arith.extui": _extui, "arith.trunci": _trunci,
    "arith.index_cast": _index_cast, "arith.index_castui": _index_cast,
    "arith.sitofp": _itofp(True), "arith.uitofp": _itofp(False), "arith.fptosi": _fptoi(True),
    "arith.fptoui": _fptoi(False), "arith.extf": _float_cast, "arith.truncf": _float_cast,
    "arith.bitcast": _bitcast, "math.fpowi": _fpowi,
    "math.isnan": _float_predicate(np.isnan), "math.isinf": _float_predicate(np.isinf),
    "math.isfinite": _float_predicate(np.isfinite), "tpu.weird": _float_predicate(lambda x: ~np.isfinite(x)),
})

