"""A Mosaic kernel as the exported module carries it (worker side, imports jax lazily).

A pallas_call lowered for the TPU is a ``stablehlo.custom_call @tpu_custom_call`` whose
``backend_config`` JSON holds the kernel's Mosaic module (``custom_call_config.body``: base64 MLIR
bytecode, serialized by ``mosaic-serde``). ``decode_kernel`` parses it (jax/_src/tpu_custom_call.py's
way: the tpu dialect registered, unregistered dialects allowed, ``mosaic-serde{serialize=false}``)
and reads the kernel function's attributes: the grid (``iteration_bounds``, a dynamic size given by
the custom call's leading operands), ``window_params`` (per pipelined operand its block shape
``window_bounds``, its index map ``transform_indices`` — a function of the grid indices and the
scalar-prefetch refs — ``pipeline_mode`` and ``window_kind``), ``scalar_prefetch``,
``scratch_operands`` and ``dimension_semantics``; the config's ``vmem_limit_bytes``.

``index_table`` evaluates an index map at every grid step at once: a small interpreter of the
``arith`` ops (and ``memref.load`` from the scalar-prefetch refs) over numpy columns, one entry per
step, in the order the TPU runs the grid. ``scalar_op`` is the same arithmetic for one value,
shared with runner/program/mosaic_counts.py.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .mlir_tree import Op, Tree, Type, int_attr, int_list, parse_tree, scalar_constant, string_attr, walk

DYNAMIC = -(1 << 63)  # MLIR's marker for a dynamic iteration bound
SERDE = "builtin.module(mosaic-serde{serialize=false})"


class KernelError(ValueError):
    """The kernel's Mosaic module cannot be read or evaluated (the message says what and where)."""


@dataclass(frozen=True)
class Window:
    """One operand's window: None bounds for an operand left in HBM/ANY (the kernel copies it)."""

    bounds: tuple[int, ...] | None
    transform: str | None
    buffers: int | None  # from pipeline_mode (1: synchronous, 2: double-buffered); None: not given
    element: bool  # window_kind element_window: the index map returns element offsets
    padding: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # an element window's (low, high) padding


@dataclass(eq=False)
class Kernel:
    name: str
    tree: Tree
    body: Op  # the kernel's func.func
    grid: tuple[int, ...]  # DYNAMIC where the custom call's operands give the size
    semantics: tuple[str, ...]
    n_prefetch: int
    n_scratch: int
    windows: tuple[Window, ...] | None  # None: a call without a grid (every operand whole)
    arg_types: tuple[Type, ...]  # the kernel function's arguments: grid ids, prefetch, operands, scratch
    vmem_limit: int | None
    keep: Any = None  # the MLIR context the tree's attributes live in
    defs: dict[int, Op] = field(default_factory=dict)  # value id -> the op defining it
    core_type: str = "tc"  # tpu.core_type: "tc" (a TensorCore), "sc_vector_subcore", "sc_scalar_subcore"

    @property
    def n_grid(self) -> int:
        return len(self.grid)

    @property
    def n_dynamic(self) -> int:
        return sum(1 for g in self.grid if g == DYNAMIC)

    def operand_types(self) -> tuple[Type, ...]:
        start = self.n_grid + self.n_prefetch
        return self.arg_types[start:len(self.arg_types) - self.n_scratch]

    def scratch_types(self) -> tuple[Type, ...]:
        return self.arg_types[len(self.arg_types) - self.n_scratch:] if self.n_scratch else ()


def mosaic_context() -> Any:
    from jax._src.interpreters import mlir
    from jax._src.lib import tpu

    ctx = mlir.make_ir_context()
    tpu.register_dialect(ctx)
    ctx.allow_unregistered_dialects = True
    return ctx


def decode_kernel(backend_config: str, kernel_name: str = "", locations: bool = False) -> Kernel:
    """The Mosaic kernel in one tpu_custom_call's backend config (KernelError says why not); with
    ``locations`` every op keeps its MLIR location (mlir_tree.source_line)."""
    from jaxlib.mlir import ir
    from jaxlib.mlir.passmanager import PassManager

    try:
        config = json.loads(backend_config)["custom_call_config"]
        body = base64.b64decode(config["body"])
    except (ValueError, KeyError, TypeError) as exc:
        raise KernelError(f"the tpu_custom_call's backend_config holds no Mosaic body ({exc})") from exc
    ctx = mosaic_context()
    with ctx, ir.Location.unknown():
        try:
            module = ir.Module.parse(body)
            PassManager.parse(SERDE).run(module.operation)
        except Exception as exc:  # noqa: BLE001 - MLIR says what it could not read
            raise KernelError(f"the kernel's Mosaic module does not parse: {str(exc)[:300]}") from exc
        tree = parse_tree(module, locations)
    return _kernel_of(tree, config, kernel_name, ctx)


def decode_call(call: Op) -> Kernel:
    """The Mosaic kernel of one ``tpu_custom_call`` op of a parsed module (runner/program/mlir_tree.py)."""
    config = string_attr(call.attrs["backend_config"]) if "backend_config" in call.attrs else ""
    return decode_kernel(config, string_attr(call.attrs["kernel_name"]) if "kernel_name" in call.attrs else "")


def _kernel_of(tree: Tree, config: dict[str, Any], kernel_name: str, ctx: Any) -> Kernel:
    mains = [f for f in tree.funcs.values() if "window_params" in f.attrs or "iteration_bounds" in f.attrs
             or "dimension_semantics" in f.attrs]
    if len(mains) != 1:
        raise KernelError(f"the Mosaic module has {len(mains)} kernel functions (expected 1)")
    body = mains[0]
    a = body.attrs
    grid = tuple(int_list(a["iteration_bounds"])) if "iteration_bounds" in a else ()
    semantics = tuple(s.split("<")[-1].rstrip(">").strip() for s in str(a.get("dimension_semantics", "[]"))
                      .strip("[]").split(",") if s.strip())
    windows = tuple(_window(w) for w in _dicts(a["window_params"])) if "window_params" in a else None
    args = tuple(tree.type(v) for v in body.regions[0][0].args)
    limit = config.get("vmem_limit_bytes")
    name = kernel_name or string_attr(a["sym_name"])
    defs = {r: op for op in walk(tree.root) for r in op.results}
    core = str(a.get("tpu.core_type", "tc")).split("<")[-1].rstrip(">").strip() or "tc"
    return Kernel(name, tree, body, grid, semantics, int_attr(a.get("scalar_prefetch", "0 : i64")),
                  int_attr(a.get("scratch_operands", "0 : i64")), windows, args,
                  int(limit) if limit is not None else None, ctx, defs, core)


def _dicts(attr: Any) -> list[Any]:
    from jaxlib.mlir import ir

    return [ir.DictAttr(attr[i]) for i in range(len(ir.ArrayAttr(attr)))]


def _window(d: Any) -> Window:
    items = {d[i].name: d[i].attr for i in range(len(d))}
    if "window_bounds" not in items:
        return Window(None, None, None, False)
    mode = str(items.get("pipeline_mode", ""))
    buffers = 1 if "synchronous" in mode else 2 if "double_buffered" in mode else None
    kind = str(items.get("window_kind", ""))
    padding = None
    if "element_window" in kind:  # #tpu.element_window<[low, ...],[high, ...]>
        lists = re.findall(r"\[([^\]]*)\]", kind)
        if len(lists) == 2:
            padding = tuple(tuple(int(x) for x in re.findall(r"-?\d+", part)) for part in lists)
    return Window(tuple(int_list(items["window_bounds"])), string_attr(items["transform_indices"]), buffers,
                  "element_window" in kind, padding)


# --------------------------------------------------------------------------- scalar arithmetic

_CMP = {"eq": np.equal, "ne": np.not_equal, "slt": np.less, "sle": np.less_equal, "sgt": np.greater,
        "sge": np.greater_equal, "ult": np.less, "ule": np.less_equal, "ugt": np.greater, "uge": np.greater_equal,
        "oeq": np.equal, "one": np.not_equal, "olt": np.less, "ole": np.less_equal, "ogt": np.greater,
        "oge": np.greater_equal, "ueq": np.equal, "une": np.not_equal}
_CMP_CODES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")
_FCMP_CODES = ("false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult", "ule", "une",
               "uno", "true")


def _trunc_div(a: Any, b: Any) -> Any:
    b = np.where(b == 0, 1, b)
    q = np.abs(a) // np.abs(b)
    return np.where(np.sign(a) * np.sign(b) < 0, -q, q)


def _ceil_div(a: Any, b: Any) -> Any:
    b = np.where(b == 0, 1, b)
    return -((-a) // b)


_BINARY = {
    "arith.addi": np.add, "arith.subi": np.subtract, "arith.muli": np.multiply, "arith.divsi": _trunc_div,
    "arith.divui": _trunc_div, "arith.floordivsi": lambda a, b: a // np.where(b == 0, 1, b),
    "arith.ceildivsi": _ceil_div, "arith.ceildivui": _ceil_div,
    "arith.remsi": lambda a, b: np.fmod(a, np.where(b == 0, 1, b)),
    "arith.remui": lambda a, b: np.fmod(a, np.where(b == 0, 1, b)),
    "arith.maxsi": np.maximum, "arith.minsi": np.minimum, "arith.maxui": np.maximum, "arith.minui": np.minimum,
    "arith.andi": np.bitwise_and, "arith.ori": np.bitwise_or, "arith.xori": np.bitwise_xor,
    "arith.shli": np.left_shift, "arith.shrsi": np.right_shift, "arith.shrui": np.right_shift,
    "arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply,
    "arith.divf": lambda a, b: np.divide(a, np.where(b == 0, 1, b)), "arith.maximumf": np.maximum,
    "arith.minimumf": np.minimum, "arith.maxnumf": np.fmax, "arith.minnumf": np.fmin,
}
_CASTS = frozenset({"arith.index_cast", "arith.index_castui", "arith.extui", "arith.extsi", "arith.trunci",
                    "arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui", "arith.extf", "arith.truncf",
                    "arith.bitcast"})


def scalar_op(op: Op, args: list[Any], types: dict[int, Type]) -> Any:
    """The result of one arith op on known numpy values (scalars or columns), else None (not arithmetic
    this interpreter knows)."""
    name = op.name
    if name == "arith.constant":
        return scalar_constant(op, types)
    if name in _BINARY:
        with np.errstate(all="ignore"):
            out = _BINARY[name](args[0], args[1])
        return out.astype(np.int64) if np.asarray(out).dtype.kind in "iub" and name.endswith(("i", "si", "ui")) \
            else out
    if name in _CASTS:
        if name in ("arith.fptosi", "arith.fptoui"):
            return np.trunc(args[0]).astype(np.int64)
        if name == "arith.trunci" and types[op.results[0]].dtype == "bool":
            return np.asarray(args[0]).astype(np.int64) & 1
        return args[0]
    if name in ("arith.cmpi", "arith.cmpf"):
        codes = _CMP_CODES if name == "arith.cmpi" else _FCMP_CODES
        pred = codes[int_attr(op.attrs["predicate"])]
        fn = _CMP.get(pred)
        return None if fn is None else fn(args[0], args[1]).astype(np.int64)
    if name == "arith.select":
        return np.where(np.asarray(args[0]) != 0, args[1], args[2])
    if name in ("arith.negf",):
        return -args[0]
    return None


# --------------------------------------------------------------------------- index maps


def constant_of(k: Kernel, value: int) -> Any:
    """The value of a scalar defined by an ``arith.constant`` in the kernel's module, else None."""
    op = k.defs.get(value)
    if op is None or op.name != "arith.constant" or k.tree.types[value].kind != "scalar":
        return None
    return scalar_op(op, [], k.tree.types)


def index_table(kernel: Kernel, window: Window, grid: tuple[int, ...], prefetch: list[np.ndarray]) -> np.ndarray:
    """The index map's result at every grid step, shape (steps, ndim), in execution order (row-major,
    last axis fastest); ``prefetch`` the scalar-prefetch values (zeros where unknown)."""
    func = kernel.tree.funcs.get(window.transform or "")
    if func is None:
        raise KernelError(f"the index map function @{window.transform} is not in the kernel's module")
    steps = int(np.prod(grid, dtype=np.int64)) if grid else 1
    block = func.regions[0][0]
    points = np.indices(tuple(grid) or (1,), dtype=np.int64).reshape(len(grid) or 1, -1)
    env: dict[int, Any] = {}
    n = len(grid)
    for i, arg in enumerate(block.args):
        env[arg] = points[i] if i < n else prefetch[i - n] if i - n < len(prefetch) else None
    outs = _run_block(block, env, kernel.tree.types, func_name=window.transform or "")
    if steps == 0:
        return np.zeros((0, len(outs)), np.int64)
    return np.stack([np.broadcast_to(np.asarray(o, dtype=np.int64), (steps,)) for o in outs], axis=1) \
        if outs else np.zeros((steps, 0), np.int64)


def _run_block(block: Any, env: dict[int, Any], types: dict[int, Type], func_name: str) -> list[Any]:
    for op in block.ops:
        if op.name in ("func.return", "scf.yield"):
            return [env[v] for v in op.operands]
        args = [env.get(v) for v in op.operands]
        if op.name == "memref.load":
            ref, idx = args[0], args[1:]
            if ref is None:
                raise KernelError(f"index map @{func_name} reads a ref that is not a scalar-prefetch operand")
            ref = np.asarray(ref)
            clipped = tuple(np.clip(np.asarray(i, np.int64), 0, max(s - 1, 0)) for i, s in zip(idx, ref.shape))
            env[op.results[0]] = ref[clipped].astype(np.int64) if ref.size else np.zeros_like(clipped[0]) \
                if clipped else ref
            continue
        if op.name == "scf.if":
            cond = np.asarray(args[0]) != 0
            then = _run_block(op.regions[0][0], env, types, func_name)
            other = _run_block(op.regions[1][0], env, types, func_name) if op.regions[1] else []
            for r, a, b in zip(op.results, then, other):
                env[r] = np.where(cond, a, b)
            continue
        if op.name == "scf.for":
            for r, v in zip(op.results, _run_for(op, args, env, types, func_name)):
                env[r] = v
            continue
        got = scalar_op(op, args, types) if all(a is not None for a in args) else None
        if got is None:
            raise KernelError(f"index map @{func_name}: cannot evaluate `{op.name}`")
        env[op.results[0]] = got
    raise KernelError(f"index map @{func_name} has no return")


MAX_INDEX_TRIPS = 1 << 16


def _run_for(op: Op, args: list[Any], env: dict[int, Any], types: dict[int, Type], func_name: str) -> list[Any]:
    """An ``scf.for`` in an index map, over every grid step at once: each step runs its own trips
    (the iteration values of a step whose loop has ended stay)."""
    if any(a is None for a in args[:3]):
        raise KernelError(f"index map @{func_name}: a loop bound it cannot evaluate")
    lb, ub, step = (np.asarray(a, np.int64) for a in args[:3])
    carry = list(args[3:])
    step = np.where(step == 0, 1, step)
    trips = int(np.max(-(-(ub - lb) // step), initial=0))
    if trips > MAX_INDEX_TRIPS:
        raise KernelError(f"index map @{func_name}: a loop of {trips} trips")
    block = op.regions[0][0]
    for t in range(max(trips, 0)):
        iv = lb + t * step
        active = iv < ub
        env[block.args[0]] = iv
        for a, c in zip(block.args[1:], carry):
            env[a] = c
        new = _run_block(block, env, types, func_name)
        carry = [np.where(active, n, c) for n, c in zip(new, carry)]
    return carry
