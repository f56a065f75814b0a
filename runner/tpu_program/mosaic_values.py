"""Values of a Mosaic kernel as numpy: dtypes, constants, float widths, fresh memory (worker side).

- MLIR element types map to numpy dtypes (``dtype_of``): ``f32`` float32, ``bf16``/``f16``/fp8 jax's
  ml_dtypes types, ``i1`` bool, ``iN`` the *signed* numpy int of that width (MLIR integers are
  signless: the op says whether it reads them signed or unsigned, ``unsigned`` views them), ``index``
  int64. Scalars are numpy scalars of those dtypes, vectors numpy arrays.
- Narrow floats compute through float32 and round once per op (``widen``/``narrow``), as a TPU
  without a bf16 unit does and as one with it rounds; bf16 -> f32 by the bit shift (exact, fast).
- ``constant_of`` reads an ``arith.constant``'s attribute through the MLIR bindings (splat, dense,
  scalar, bool) into the result's dtype.
- ``garbage`` fills fresh memory: NaN for floats, a fixed bit pattern for ints, so a kernel that
  reads what it never wrote shows it in its outputs.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..program.mlir_tree import Type

_SIGNLESS = {"uint8": "int8", "uint16": "int16", "uint32": "int32", "uint64": "int64", "uint4": "int4"}
_UNSIGNED = {np.dtype(np.int8): np.uint8, np.dtype(np.int16): np.uint16, np.dtype(np.int32): np.uint32,
             np.dtype(np.int64): np.uint64, np.dtype(np.bool_): np.bool_}
F32 = np.dtype(np.float32)
INDEX = np.dtype(np.int64)
BOOL = np.dtype(np.bool_)
SEMAPHORE = np.dtype(np.int64)  # a semaphore's count


@functools.lru_cache(maxsize=None)
def named_dtype(name: str) -> np.dtype:
    """The numpy dtype of a dtype name ("float32", "bfloat16", "int4", ...); unsigned names map to the
    signed dtype of their width (Mosaic's integers are signless)."""
    name = _SIGNLESS.get(name, name)
    try:
        return np.dtype(name)
    except TypeError:
        import jax.numpy as jnp

        return np.dtype(getattr(jnp, name))


def dtype_of(t: Type) -> np.dtype | None:
    """The numpy dtype of a value's element type, None for one with none (semaphores, tokens)."""
    if not t.dtype:
        return None
    return named_dtype(t.dtype)


def is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or _ml_float(dtype)


@functools.lru_cache(maxsize=None)
def _ml_float(dtype: np.dtype) -> bool:
    return dtype.name.startswith(("bfloat16", "float8", "float4", "float6"))


def narrow_float(dtype: np.dtype) -> bool:
    """A float narrower than 32 bits (computed through float32)."""
    return is_float(dtype) and dtype.itemsize < 4 or _ml_float(dtype)


def widen(x: Any) -> Any:
    """``x`` as float32 (exact for every narrower float; float32 itself not copied); bf16 by the bit
    shift. Round back with ``.astype(dtype)`` (to nearest even, NaN kept)."""
    x = np.asarray(x)
    if x.dtype.name == "bfloat16":
        return (x.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return x.astype(np.float32, copy=False)


def unsigned(x: Any) -> Any:
    """A signless integer value read as unsigned (a view, same bits)."""
    x = np.asarray(x)
    return x.view(_UNSIGNED[x.dtype]) if x.dtype in _UNSIGNED else x


def cast_scalar(value: Any, dtype: np.dtype) -> Any:
    """A Python or numpy number as a numpy scalar of ``dtype``, integers wrapped to its width."""
    if dtype.kind in "iu":
        bits = dtype.itemsize * 8
        v = int(value) & ((1 << bits) - 1)
        if dtype.kind == "i" and v >= 1 << (bits - 1):
            v -= 1 << bits
        return dtype.type(v)
    if dtype.kind == "b":
        return np.bool_(bool(value) and value != 0)
    return np.asarray(value, dtype=np.float64).astype(dtype)[()]


def garbage(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Fresh memory: NaN for floats, the bytes 0xA5 for the rest (ints -1515870811 in int32, bools True)."""
    if is_float(dtype):
        return np.full(shape, np.nan, dtype=dtype)
    out = np.empty(shape, dtype=dtype)
    if dtype == BOOL:
        out.fill(True)
    else:
        out.view(np.uint8).fill(0xA5) if out.size else None
    return out


def fill_value(dtype: np.dtype) -> Any:
    """The value ``garbage`` puts in every element of ``dtype`` (for padding beyond an array's edge)."""
    return garbage((1,), dtype)[0]


# --------------------------------------------------------------------------- constants


def constant_of(attr: Any, t: Type) -> Any:
    """An ``arith.constant``'s value: a numpy scalar or array of the result's dtype and shape."""
    from jaxlib.mlir import ir

    dtype = dtype_of(t)
    if dtype is None:
        raise ValueError(f"a constant of type {t.text}")
    shape = tuple(int(d or 0) for d in t.shape)
    try:
        dense = ir.DenseElementsAttr(attr)
    except (ValueError, TypeError):
        dense = None
    if dense is None:
        value = _scalar_attr(attr, dtype)
        return cast_scalar(value, dtype) if t.kind == "scalar" else np.full(shape, value, dtype=dtype)
    if dense.is_splat:
        value = _scalar_attr(dense.get_splat_value(), dtype)
        if t.kind == "scalar":
            return cast_scalar(value, dtype)
        return np.full(shape, cast_scalar(value, dtype), dtype=dtype)
    values = _dense_values(dense, dtype)
    out = np.asarray(values).reshape(shape)
    return _as_dtype(out, dtype)


def _as_dtype(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype.kind in "iu" and values.dtype.kind in "iu":
        bits = dtype.itemsize * 8
        wrapped = np.asarray(values, dtype=np.int64) & ((1 << bits) - 1) if bits < 64 else values
        return np.asarray(wrapped).astype(np.dtype(f"u{dtype.itemsize}")).view(dtype)
    return values.astype(dtype)


def _scalar_attr(attr: Any, dtype: np.dtype) -> Any:
    from jaxlib.mlir import ir

    if dtype == BOOL:
        try:
            return bool(ir.BoolAttr(attr).value)
        except (ValueError, TypeError):
            return ir.IntegerAttr(attr).value != 0
    if is_float(dtype):
        return ir.FloatAttr(attr).value
    return ir.IntegerAttr(attr).value


def _dense_values(dense: Any, dtype: np.dtype) -> Any:
    from jaxlib.mlir import ir

    if not narrow_float(dtype) or dtype.kind == "f":
        try:
            got = np.array(dense)
            if got.dtype != object:
                return got
        except (ValueError, TypeError, RuntimeError):
            pass
    kind = ir.DenseFPElementsAttr if is_float(dtype) else ir.DenseIntElementsAttr
    typed = kind(dense)
    return [typed[i] for i in range(len(typed))]


# --------------------------------------------------------------------------- attributes


def ints(attr: Any) -> list[int]:
    """The ints of an array attribute: ``array<i64: 1, 2>``, ``[0 : i64, 128 : i64]``, ``dense<[1, 0]>``."""
    from jaxlib.mlir import ir

    for kind in (ir.DenseI64ArrayAttr, ir.DenseI32ArrayAttr, ir.DenseBoolArrayAttr):
        try:
            return [int(x) for x in kind(attr)]
        except (ValueError, TypeError):
            continue
    try:
        array = ir.ArrayAttr(attr)
        return [int(ir.IntegerAttr(array[i]).value) for i in range(len(array))]
    except (ValueError, TypeError):
        pass
    try:
        return [int(x) for x in np.array(ir.DenseIntElementsAttr(attr)).reshape(-1)]
    except (ValueError, TypeError):
        raise ValueError(f"not a list of ints: {str(attr)[:80]}") from None


def int_of(attr: Any) -> int:
    from jaxlib.mlir import ir

    return int(ir.IntegerAttr(attr).value)


def flag(attrs: dict[str, Any], name: str) -> bool:
    """A bool attribute, False when absent."""
    value = attrs.get(name)
    return value is not None and str(value) == "true"


def enum_of(attr: Any) -> str:
    """The case of an enum attribute (``#vector.kind<add>`` -> "add")."""
    text = str(attr)
    return text.rsplit("<", 1)[-1].rstrip(">").strip() if "<" in text else text
