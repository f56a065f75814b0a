"""The values of a kernel's scalar operands (grid sizes, scalar-prefetch tables), from the module
and the judge's inputs (worker side, imports jax lazily).

A kernel's dynamic grid sizes and scalar-prefetch tables are custom-call operands: an input of the
program (its value is the judge's, when it has one), a constant or shape arithmetic of the refined
module (runner/program/module_read.scalar_value), or computed by plain ops from inputs (megablox's group
metadata: cumulative sums, scatters, gathers over ``group_sizes``; a sparse MoE's routing: a matmul, a
top-k and a sort over the tokens). The last are evaluated on a copy of the module cut down to the ops they
need, compiled by XLA for the host CPU (StableHLO's reference interpreter, ``stablehlo.eval_module``,
where that compile fails), when those ops take only known inputs, hold no custom call and no loop whose
trip count the module does not fix (or over MAX_TRIPS), and stay small (EVALUATE_ELEMENTS per value,
inputs included): never the kernels, never the candidate's Python.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .mlir_tree import Op, walk
from .module_read import Module, scalar_value

EVALUATE_ELEMENTS = 1 << 26  # per value: a MoE routing over all of a task's tokens (JAXBench 10p: 8192 x 4096)
INTERPRET_ELEMENTS = 1 << 16  # StableHLO's reference interpreter (where XLA will not compile the cut): index data only
MAX_TRIPS = 1 << 16  # a loop in what is evaluated: at most this many trips


def _input_of(module: Module, value: int, values: Sequence[Any] | None) -> Any:
    """The judge's value of a main argument, else None."""
    args = module.main_block.args
    if value not in args or values is None:
        return None
    kept = list(module.exported.module_kept_var_idx)
    lead = len(args) - len(kept)
    i = args.index(value) - lead
    if i < 0 or i >= len(kept) or kept[i] >= len(values) or values[kept[i]] is None:
        return None
    return np.asarray(values[kept[i]])


def operand_values(module: Module, operands: Sequence[int], values: Sequence[Any] | None) -> list[Any]:
    """Each operand's value where the module and ``values`` decide it, else None."""
    tpu = module.platforms.index("tpu") if "tpu" in module.platforms else None
    out: list[Any] = []
    for v in operands:
        got = _input_of(module, v, values)
        if got is None:
            got = scalar_value(module, v, tpu)
        shape = tuple(d or 0 for d in module.tree.type(v).shape)
        out.append(None if got is None else np.broadcast_to(np.asarray(got), shape).copy())
    missing = [i for i, got in enumerate(out) if got is None]
    if missing:
        found = evaluate(module, [operands[i] for i in missing], values)
        for i, got in zip(missing, found):
            out[i] = got
    return out


def _closure(module: Module, targets: Sequence[int]) -> tuple[set[int], set[int]] | None:
    """(main-block op indices the targets need, main arguments they read), or None when they need
    something the interpreter must not run (see the module docstring)."""
    from .module_xla import while_trips

    top = {r: op for op in module.main_block.ops for r in op.results}
    args = set(module.main_block.args)
    ops: set[int] = set()
    used_args: set[int] = set()
    stack = list(targets)
    while stack:
        v = stack.pop()
        if v in args:
            used_args.add(v)
            continue
        op = top.get(v)
        if op is None:
            return None  # defined inside a region: not reachable from the top level
        if op.index in ops:
            continue
        if not _evaluable(module, op, while_trips):
            return None
        ops.add(op.index)
        stack.extend(_reads(op))
    return ops, used_args


def _evaluable(module: Module, op: Op, while_trips: Any) -> bool:
    for inner in walk(op):
        if inner.name == "stablehlo.custom_call" or inner.name.startswith("func."):
            return False
        if inner.name == "stablehlo.while" and (while_trips(module, inner) or MAX_TRIPS + 1) > MAX_TRIPS:
            return False
        if any(module.tree.type(r).elements > EVALUATE_ELEMENTS for r in inner.results):
            return False
    return True  # a platform case (jax lowers each matmul per platform) runs its TPU branch: the index is given


def _reads(op: Op) -> list[int]:
    """The values ``op`` reads from outside itself (its operands and what its regions capture)."""
    inside: set[int] = set()
    used: list[int] = list(op.operands)
    for inner in walk(op):
        inside.update(inner.results)
        for region in inner.regions:
            for block in region:
                inside.update(block.args)
        if inner is not op:
            used.extend(inner.operands)
    return [v for v in used if v not in inside or v in op.operands]


def evaluate(module: Module, targets: Sequence[int], values: Sequence[Any] | None) -> list[Any]:
    """The targets' values by the reference interpreter on the module cut down to them (None each when
    they cannot be evaluated here)."""
    cut = _closure(module, targets)
    if cut is None:
        return [None] * len(targets)
    ops, used_args = cut
    tpu = module.platforms.index("tpu") if "tpu" in module.platforms else 0
    inputs = {}
    for a in used_args:
        got = np.asarray(tpu, np.int32) if a == module.platform_arg else _input_of(module, a, values)
        if got is None or got.size > EVALUATE_ELEMENTS:
            return [None] * len(targets)
        inputs[a] = got
    try:
        return _run_cut(module, targets, ops, inputs)
    except Exception:  # noqa: BLE001 - the interpreter could not run it: the values stay unknown
        return [None] * len(targets)


def _run_cut(module: Module, targets: Sequence[int], keep: set[int], inputs: dict[int, Any]) -> list[Any]:
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import func as func_dialect
    from jaxlib.mlir.dialects import stablehlo

    refined = module.keep[1]
    with refined.context, ir.Location.unknown():
        copy = ir.Module.parse(refined.operation.get_asm(enable_debug_info=False))
        by_index = _ops_by_index(copy)
        main_op = by_index[module.main.index]
        block = main_op.regions[0].blocks[0]
        arg_pos = {a: i for i, a in enumerate(module.main_block.args)}
        values = [_ir_value(by_index, module, block, arg_pos, t) for t in targets]
        pairs = list(zip(list(block.operations), module.main_block.ops))
        with ir.InsertionPoint(pairs[-1][0]):
            func_dialect.ReturnOp(values)
        for op, mine in reversed(pairs):
            if mine.index not in keep:
                op.erase()
        kept_args = [i for i, a in enumerate(module.main_block.args) if a in inputs]
        for i in reversed(range(len(block.arguments))):
            if i not in kept_args:
                block.erase_argument(i)
        arg_types = [a.type for a in block.arguments]
        main_op.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(arg_types, [v.type for v in values]))
        arrays = [np.ascontiguousarray(_as(inputs[module.main_block.args[i]], t)) for i, t in zip(kept_args, arg_types)]
        try:
            return _run_on_cpu(copy, arrays)
        except Exception:  # noqa: BLE001 - XLA would not compile it: the reference interpreter, slow (small only)
            if any(a.size > INTERPRET_ELEMENTS for a in arrays):
                raise
            args = [ir.DenseElementsAttr.get(a, type=t) for a, t in zip(arrays, arg_types)]
            return [_numpy(r) for r in stablehlo.eval_module(copy, args)]


def _run_on_cpu(copy: Any, inputs: list[Any]) -> list[Any]:
    """The cut-down module compiled by XLA for the host CPU and run on ``inputs``."""
    import jax
    from jax._src import compiler, xla_bridge
    from jax._src.lib import xla_client as xc

    backend = xla_bridge.get_backend("cpu")
    device = backend.devices()[0]
    exe = backend.compile_and_load(copy, xc.DeviceList((device,)), compiler.get_compile_options(1, 1, backend=backend))
    out = exe.execute_sharded([jax.device_put(x, device) for x in inputs])
    return [np.asarray(r[0]) for r in out.disassemble_into_single_device_arrays()]


def _numpy(attr: Any) -> Any:
    from jaxlib.mlir import ir

    try:
        return np.array(ir.DenseIntElementsAttr(attr))
    except (ValueError, TypeError):
        return np.array(ir.DenseFPElementsAttr(attr))


def _as(value: Any, t: Any) -> Any:
    import jax.numpy as jnp
    from jaxlib.mlir import ir

    from .mlir_tree import parse_type

    shaped = ir.RankedTensorType(t)
    name = parse_type(str(t)).dtype or "int32"
    return np.asarray(value, dtype=jnp.dtype(name)).reshape(shaped.shape)


def _ops_by_index(root: Any) -> dict[int, Any]:
    out: dict[int, Any] = {}

    def visit(op: Any) -> None:
        out[len(out)] = op
        for region in op.regions:
            for b in region.blocks:
                for inner in b.operations:
                    visit(inner.operation)

    visit(root.operation if hasattr(root, "operation") else root)
    return out


def _ir_value(by_index: dict[int, Any], module: Module, block: Any, arg_pos: dict[int, int], value: int) -> Any:
    if value in arg_pos:
        return block.arguments[arg_pos[value]]
    op, i = module.defs[value]
    return by_index[op.index].results[i]
