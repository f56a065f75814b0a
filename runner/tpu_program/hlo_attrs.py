"""The attributes of a StableHLO op, read into plain Python values for the TPU program's executor
(runner/tpu_program/hlo_exec.py), and where an op comes from (worker side, imports jax lazily).

Each reader takes the raw MLIR attribute an ``Op`` of runner/program/mlir_tree.py keeps (valid while the
module's MLIR context lives) and returns ints, lists, strings or numpy arrays; an attribute it cannot
read raises ``AttrError`` (the planner turns it into an ``Unsupported`` naming the op). ``constant``
reads a ``dense<...>`` tensor: through the buffer numpy reads for the types it knows, else from the
printed form (bf16, f16, the 8-bit floats: decimal or hex bytes; sub-byte ints: decimal).
``where_of`` turns an MLIR location into ``file:line`` (the innermost frame that names a file), else
the location's name.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np


class AttrError(ValueError):
    """An attribute the executor cannot read (the message names it)."""


def _is(attr: Any, cls: Any) -> bool:
    """Whether ``attr`` is an MLIR attribute of class ``cls`` (the bindings' casts refuse other kinds)."""
    if isinstance(attr, cls):
        return True
    try:
        cls(attr)
    except (ValueError, TypeError):
        return False
    return True


def dtype_of(name: str) -> Any:
    """The numpy dtype of a runner/program/mlir_tree.py dtype name ("bfloat16", "int4", ...)."""
    import jax.numpy as jnp

    if not name:
        raise AttrError("an element type the executor does not know")
    try:
        return np.dtype(getattr(jnp, name)) if hasattr(jnp, name) else np.dtype(name)
    except TypeError as exc:
        raise AttrError(f"element type {name}") from exc


def ints(attr: Any) -> list[int]:
    """A ``array<i64: ...>`` or a ``dense<...>`` of integers as a flat list."""
    from jaxlib.mlir import ir

    if _is(attr, ir.DenseI64ArrayAttr):
        return list(ir.DenseI64ArrayAttr(attr))
    if _is(attr, ir.DenseI32ArrayAttr):
        return list(ir.DenseI32ArrayAttr(attr))
    if _is(attr, ir.DenseIntElementsAttr):
        return [int(x) for x in np.asarray(ir.DenseIntElementsAttr(attr)).reshape(-1)]
    raise AttrError(f"not a list of integers: {str(attr)[:80]}")


def pairs(attr: Any) -> list[tuple[int, int]]:
    """A ``dense<[[lo, hi], ...]>`` padding attribute as pairs."""
    flat = ints(attr)
    if len(flat) % 2:
        raise AttrError(f"padding of odd length: {str(attr)[:80]}")
    return [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]


def bools(attr: Any) -> list[bool]:
    from jaxlib.mlir import ir

    if _is(attr, ir.DenseBoolArrayAttr):
        return list(ir.DenseBoolArrayAttr(attr))
    if _is(attr, ir.DenseElementsAttr):
        return [bool(x) for x in np.asarray(ir.DenseElementsAttr(attr)).reshape(-1)]
    raise AttrError(f"not a list of booleans: {str(attr)[:80]}")


def integer(attr: Any) -> int:
    from jaxlib.mlir import ir

    if _is(attr, ir.IntegerAttr):
        return int(ir.IntegerAttr(attr).value)
    raise AttrError(f"not an integer: {str(attr)[:80]}")


def boolean(attr: Any) -> bool:
    from jaxlib.mlir import ir

    if _is(attr, ir.BoolAttr):
        return bool(ir.BoolAttr(attr).value)
    raise AttrError(f"not a boolean: {str(attr)[:80]}")


def string(attr: Any) -> str:
    from jaxlib.mlir import ir

    if _is(attr, ir.StringAttr):
        return str(ir.StringAttr(attr).value)
    if _is(attr, ir.FlatSymbolRefAttr):
        return str(ir.FlatSymbolRefAttr(attr).value)
    raise AttrError(f"not a string: {str(attr)[:80]}")


def enum(attr: Any, kind: str) -> str:
    """The value of a StableHLO enum attribute: kind "comparison_direction", "comparison_type" or "precision"."""
    from jaxlib.mlir.dialects import stablehlo

    cls = {"comparison_direction": stablehlo.ComparisonDirectionAttr, "comparison_type": stablehlo.ComparisonTypeAttr,
           "precision": stablehlo.PrecisionAttr}[kind]
    if not _is(attr, cls):
        raise AttrError(f"not a {kind}: {str(attr)[:80]}")
    return str(cls(attr).value)


def precisions(attr: Any) -> list[str]:
    from jaxlib.mlir import ir

    if not _is(attr, ir.ArrayAttr):
        raise AttrError(f"not a precision config: {str(attr)[:80]}")
    arr = ir.ArrayAttr(attr)
    return [enum(arr[i], "precision") for i in range(len(arr))]


def default_accuracy(attr: Any) -> bool:
    """Whether a ``result_accuracy`` attribute asks for nothing but the default."""
    from jaxlib.mlir.dialects import stablehlo

    if not _is(attr, stablehlo.ResultAccuracyAttr):
        return False
    acc = stablehlo.ResultAccuracyAttr(attr)
    return "DEFAULT" in str(acc.mode) and acc.atol == 0 and acc.rtol == 0 and acc.ulps == 0


_ALIAS = re.compile(r"output_tuple_indices = \[([^\]]*)\], operand_index = (\d+), operand_tuple_indices = \[([^\]]*)\]")


def output_aliases(attr: Any) -> dict[int, int]:
    """A custom call's ``output_operand_aliases`` as {output index: operand index}."""
    from jaxlib.mlir import ir

    if not _is(attr, ir.ArrayAttr):
        raise AttrError(f"output_operand_aliases: {str(attr)[:80]}")
    arr = ir.ArrayAttr(attr)
    out: dict[int, int] = {}
    for i in range(len(arr)):
        m = _ALIAS.search(str(arr[i]))
        if m is None or m.group(3).strip():
            raise AttrError(f"output_operand_aliases entry {str(arr[i])[:120]}")
        outs = [int(x) for x in m.group(1).split(",") if x.strip()]
        if len(outs) > 1:
            raise AttrError(f"output_operand_aliases entry {str(arr[i])[:120]}")
        out[outs[0] if outs else 0] = int(m.group(2))
    return out


# --------------------------------------------------------------------------- constants

_HEX = re.compile(r'^dense<"0x([0-9A-Fa-f]*)">')
_NUMBER = re.compile(r"0x[0-9A-Fa-f]+|[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan)|true|false")


def constant(attr: Any, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """The numpy value of a ``dense<...>`` attribute of the given result type."""
    from jaxlib.mlir import ir

    if not _is(attr, ir.DenseElementsAttr):
        raise AttrError(f"a constant that is not a dense tensor: {str(attr)[:80]}")
    dense = ir.DenseElementsAttr(attr)
    size = int(np.prod(shape, dtype=np.int64))
    if dtype.kind in "biuf" and dtype.itemsize >= 1 and dtype.name in _NUMPY_NATIVE:
        try:
            got = np.array(dense)
        except (TypeError, ValueError, RuntimeError):
            got = None
        if got is not None and got.dtype != object:
            got = got.astype(dtype, copy=False)
            return np.broadcast_to(got.reshape(-1)[0], shape).copy() if dense.is_splat else got.reshape(shape)
    return _from_text(str(attr), shape, dtype, size, dense.is_splat)


_NUMPY_NATIVE = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                           "float32", "float64"})


def _from_text(text: str, shape: tuple[int, ...], dtype: Any, size: int, splat: bool) -> np.ndarray:
    body = text.split(" : ")[0]
    hexed = _HEX.match(body)
    if hexed is not None:
        raw = bytes.fromhex(hexed.group(1))
        if dtype.itemsize * 8 != _bits(dtype) or len(raw) not in (dtype.itemsize, dtype.itemsize * size):
            raise AttrError(f"a hex constant of {dtype.name} ({len(raw)} bytes for {size} elements)")
        got = np.frombuffer(raw, dtype=dtype)
        return np.broadcast_to(got[0], shape).copy() if got.size == 1 else got.reshape(shape)
    inner = body[len("dense<"):].rsplit(">", 1)[0] if body.startswith("dense<") else ""
    tokens = _NUMBER.findall(inner)
    values = [_token(t, dtype) for t in tokens]
    if len(values) == 1 and (splat or size == 1):
        return np.full(shape, values[0], dtype=dtype)
    if len(values) != size:
        raise AttrError(f"a {dtype.name} constant the executor cannot read ({len(values)} values for {size})")
    wide = np.float64 if "float" in dtype.name else np.bool_ if dtype == np.bool_ else np.int64
    return np.asarray(values, dtype=wide).astype(dtype).reshape(shape)


def _token(token: str, dtype: Any) -> Any:
    if token in ("true", "false"):
        return token == "true"
    if token.startswith("0x"):
        raw = int(token, 16)
        width = _bits(dtype)
        return np.frombuffer(raw.to_bytes(max(width // 8, 1), "little"), dtype=dtype)[0] if width >= 8 else raw
    if "float" in dtype.name:
        return float(token)
    return int(token)


def _bits(dtype: Any) -> int:
    import jax.numpy as jnp

    try:
        return int(jnp.finfo(dtype).bits)
    except (TypeError, ValueError):
        try:
            return int(jnp.iinfo(dtype).bits)
        except (TypeError, ValueError):
            return dtype.itemsize * 8


# --------------------------------------------------------------------------- locations

_FILE = re.compile(r'"([^"]+)":(\d+):\d+')
_NAME = re.compile(r'loc\("([^"]+)"')


def where_of(location: str) -> str:
    """``file:line`` of the innermost frame of an MLIR location that names a file, else its name, else "unknown"."""
    m = _FILE.search(location)
    if m is not None:
        return f"{m.group(1)}:{m.group(2)}"
    m = _NAME.search(location)
    return m.group(1) if m is not None else "unknown location"


def locations(module: Any) -> list[str]:
    """The location of every op of an ``ir.Module`` in walk order (runner/program/mlir_tree.py's ``Op.index``)."""
    out: list[str] = []

    def visit(op: Any) -> None:
        op = op.operation
        out.append(str(op.location))
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    visit(inner)

    visit(getattr(module, "operation", module))
    return out
