"""An MLIR module as plain Python objects: ops, blocks, value ids and parsed types (worker side).

The exported program's StableHLO module and each Mosaic kernel's module are read once through the
MLIR Python bindings into ``Op``/``Block`` trees; everything after that (pricing a kernel at every
grid step, following data flow, counting the XLA ops) walks plain Python, which is ~100x faster
than asking the bindings again at every step. Values are small ints (``Tree.types`` holds each
one's type); an op keeps its raw attributes (``attrs``: name -> MLIR attribute, valid while the
context lives) and the few that the walks need are read by the helpers below.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# MLIR element types -> numpy/jax dtype names (the names the traced cost model prints)
_DTYPES = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16", "i1": "bool",
           "i4": "int4", "ui4": "uint4", "i8": "int8", "ui8": "uint8", "i16": "int16", "ui16": "uint16",
           "i32": "int32", "ui32": "uint32", "i64": "int64", "ui64": "uint64", "index": "int64",
           "f8E4M3FN": "float8_e4m3fn", "f8E5M2": "float8_e5m2", "f8E4M3B11FNUZ": "float8_e4m3b11fnuz",
           "f8E4M3FNUZ": "float8_e4m3fnuz", "f8E5M2FNUZ": "float8_e5m2fnuz", "f8E4M3": "float8_e4m3",
           "f8E8M0FNU": "float8_e8m0fnu", "f4E2M1FN": "float4_e2m1fn", "complex<f32>": "complex64",
           "complex<f64>": "complex128"}
_BITS = {"float64": 64, "float32": 32, "float16": 16, "bfloat16": 16, "bool": 8, "int4": 4, "uint4": 4, "int8": 8,
         "uint8": 8, "int16": 16, "uint16": 16, "int32": 32, "uint32": 32, "int64": 64, "uint64": 64,
         "float4_e2m1fn": 4, "complex64": 64, "complex128": 128}
_SHAPED = re.compile(r"^(tensor|memref|vector)<(.*)>$", re.S)
_SPACE = re.compile(r"#tpu\.memory_space<(\w+)>")


@dataclass(frozen=True)
class Type:
    """One value's type: ``kind`` "tensor", "memref", "vector" or "scalar" (an int, float or index),
    else "other" (tokens, semaphores); ``shape`` with None for a dynamic dim; ``space`` a memref's
    TPU memory space ("vmem", "smem", "any", "hbm", "semaphore_mem"), else ""."""

    kind: str
    shape: tuple[int | None, ...] = ()
    dtype: str = ""
    space: str = ""
    text: str = ""

    @functools.cached_property
    def elements(self) -> int:
        return math.prod(d or 0 for d in self.shape)

    @property
    def bits(self) -> int:
        return bits(self.dtype)

    @property
    def nbytes(self) -> int:
        return (self.elements * self.bits + 7) // 8


def bits(dtype: str) -> int:
    if dtype in _BITS:
        return _BITS[dtype]
    return 8 if dtype.startswith("float8") else 0


_TYPES: dict[str, Type] = {}


def parse_type(text: str) -> Type:
    """A Type from MLIR's printed form (``tensor<?x128xf32>``, ``memref<2xi32, #tpu.memory_space<smem>>``)."""
    hit = _TYPES.get(text)
    if hit is not None:
        return hit
    m = _SHAPED.match(text)
    if m is None:
        kind = "scalar" if text in _DTYPES else "other"
        out = Type(kind, (), _DTYPES.get(text, ""), "", text)
    else:
        body = m.group(2)
        space = _SPACE.search(body)
        main = body.split(",", 1)[0].strip()
        if "complex<" in main:  # "complex" holds an "x": split the dims off before it
            cut = main.index("complex<")
            parts = main[:cut].split("x")[:-1] + [main[cut:]]
        else:
            parts = main.split("x")
        elem = parts[-1]
        dims: list[int | None] = []
        for p in parts[:-1]:
            dims.append(None if p == "?" else int(p) if p.isdigit() else None)
        out = Type(m.group(1), tuple(dims), _DTYPES.get(elem, ""), space.group(1) if space else "", text)
    if len(_TYPES) < 100_000:
        _TYPES[text] = out
    return out


@dataclass(eq=False)
class Block:
    args: tuple[int, ...]
    ops: list["Op"] = field(default_factory=list)
    plan: Any = None  # what a walk of it always does, computed once (runner/program/mosaic_counts.py)


@dataclass(eq=False)
class Op:
    name: str
    operands: tuple[int, ...]
    results: tuple[int, ...]
    attrs: dict[str, Any]
    regions: tuple[tuple[Block, ...], ...] = ()
    index: int = 0  # position in the walk order of its module (the same order in a fresh parse)
    code: int = -1  # what a walk does with it, decided once (runner/program/mosaic_counts.py)
    cache: Any = None  # what that walk computed once for it (a constant, its work, its DMA size)
    loc: Any = None  # its MLIR location (an ``ir.Location``), kept only when parse_tree was asked to


@dataclass(eq=False)
class Tree:
    """A parsed module: its top-level op, the type of every value, its functions by name."""

    root: Op
    types: dict[int, Type]
    funcs: dict[str, Op]
    count: int = 0

    def type(self, value: int) -> Type:
        return self.types.get(value, Type("other"))


def parse_tree(module: Any, locations: bool = False) -> Tree:
    """Read ``module`` (an ``ir.Module`` or ``ir.Operation``) into a Tree; with ``locations`` each Op keeps
    its MLIR location (``Op.loc``, formatted by ``source_line``; ~2 us an op, so only when asked)."""
    ids: dict[Any, int] = {}
    types: dict[int, Type] = {}
    funcs: dict[str, Op] = {}
    counter = [0]

    def vid(value: Any) -> int:
        got = ids.get(value)
        if got is None:
            got = ids[value] = len(ids)
            types[got] = parse_type(str(value.type))
        return got

    def convert(op: Any) -> Op:
        op = op.operation
        named = op.attributes
        attrs = {name: named[name] for name in named}
        index = counter[0]
        counter[0] += 1
        operands = tuple(vid(v) for v in op.operands)
        results = tuple(vid(v) for v in op.results)
        regions = tuple(tuple(Block(tuple(vid(a) for a in b.arguments), [convert(o) for o in b.operations])
                              for b in region.blocks) for region in op.regions)
        out = Op(op.name, operands, results, attrs, regions, index, loc=op.location if locations else None)
        if op.name == "func.func" and "sym_name" in attrs:
            funcs[string_attr(attrs["sym_name"])] = out
        return out

    root = convert(getattr(module, "operation", module))
    return Tree(root, types, funcs, counter[0])


def walk(op: Op):
    """``op`` and every op nested in it, in walk order."""
    yield op
    for region in op.regions:
        for block in region:
            for inner in block.ops:
                yield from walk(inner)


_FILE_LOC = re.compile(r'"([^"]+)":(\d+)(?::(\d+))?')
_CALLSITE = re.compile(r'callsite\("([^"]*)"\("([^"]+)":(\d+)[^)]*\) at "([^"]*)"\("([^"]+)":(\d+)')


def source_line(op: Op) -> str:
    """Where ``op`` came from as ``file:line``: the first file location in its MLIR location (the
    innermost frame jax recorded), else its location's name, else "" (no location kept). In a
    ``callsite(callee at caller)`` whose two frames are the same function, the caller's line: jax's
    lowering cache can give an op the callee frame of an earlier identical op (a second ``ref[...] =``
    in a kernel got the first one's line)."""
    if op.loc is None:
        return ""
    text = str(op.loc)
    site = _CALLSITE.search(text)
    if site is not None and site.group(1) == site.group(4):
        return f"{site.group(5)}:{site.group(6)}"
    hit = _FILE_LOC.search(text)
    if hit is not None:
        return f"{hit.group(1)}:{hit.group(2)}"
    name = re.search(r'loc\("([^"]*)"', text)
    return name.group(1) if name else ""


# --------------------------------------------------------------------------- attributes


def string_attr(attr: Any) -> str:
    text = str(attr)
    if text.startswith('"') and text.endswith('"'):
        from jaxlib.mlir import ir

        return ir.StringAttr(attr).value
    return text.lstrip("@")


def int_list(attr: Any) -> list[int]:
    """The ints of a dense array / dense elements attribute (``array<i64: 4, 4>``, ``dense<[1, 0]>``)."""
    text = str(attr)
    if text.startswith("array<"):
        inner = text[len("array<"):-1]
        body = inner.split(":", 1)[1] if ":" in inner else ""
    elif text.startswith("dense<"):
        body = text[len("dense<"):].split(">", 1)[0]
    else:
        body = text
    return [int(x) for x in re.findall(r"-?\d+", body)]


def int_attr(attr: Any) -> int:
    return int(str(attr).split(":")[0].strip())


def scalar_constant(op: Op, types: dict[int, Type]) -> Any:
    """The value of a scalar or splat ``arith.constant``/``stablehlo.constant`` (numpy), else None."""
    attr = op.attrs.get("value")
    if attr is None:
        return None
    text = str(attr)
    if text.startswith("dense<"):
        inner = text[len("dense<"):].split(">")[0]
        if inner.startswith("[") or inner.startswith('"'):
            return None
        text = inner
    else:
        text = text.split(":")[0].strip()
    dtype = types[op.results[0]].dtype if op.results else ""
    try:
        if text in ("true", "false"):
            return np.asarray(text == "true")
        if text.startswith("0x"):
            return _from_hex(text, dtype)
        if dtype.startswith(("int", "uint")) or dtype == "bool":
            return np.asarray(int(text), dtype=np.int64)
        return np.asarray(float(text), dtype=np.float64)
    except ValueError:
        return None


def _from_hex(text: str, dtype: str) -> Any:
    raw = int(text, 16)
    if dtype == "float32":
        return np.asarray(np.uint32(raw).view(np.float32), dtype=np.float64)
    if dtype == "float64":
        return np.asarray(np.uint64(raw).view(np.float64))
    if dtype.startswith(("int", "uint")):
        return np.asarray(raw, dtype=np.int64)
    return np.asarray(np.nan)  # a half-precision pattern: the value matters to nothing we count
