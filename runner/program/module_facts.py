"""What the judge checks in an exported program besides its price, read from the module alone
(worker side, imports jax lazily).

``module_facts(blob)`` returns a ``ModuleFacts``:

- the platforms it was lowered for, its Mosaic kernels (``tpu_custom_call``s of the TPU program)
  with their names, grids, block shapes per operand and memory spaces;
- whether each output depends on a kernel's result (data flow through the main function, every
  platform case followed into its TPU branch): an output computed around the kernels is not the
  kernel's work;
- the FLOPs and transcendentals of the plain XLA ops outside the kernels and inside them, so the
  judge can say "the work is not in the pallas_call";
- every custom call with its operand and result types and where it runs (``"tpu"``, ``"cpu"`` or
  ``"all"``), for the judge's allowlist;
- every ``stablehlo.case`` on the platform index that is not a pallas_call's own TPU/CPU pair
  (``lax.platform_dependent`` or a hand edit), for the record: the judge runs the TPU program alone;
- per kernel whether its body reads the grid's size at run time (``tpu.iteration_bound``, what
  ``pl.num_programs`` lowers to in a module exported with symbolic sizes) or an operand's dynamic dim
  (``memref.dim``): a kernel whose behaviour may change with the size, verified at some sizes only.

Never raises: a module it cannot read gives ``ModuleFacts(error=...)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence



@dataclass(frozen=True)
class CustomCall:
    target: str
    operand_types: tuple[str, ...]  # MLIR types, e.g. "tensor<1024x512xf32>"
    result_types: tuple[str, ...]
    where: str  # "tpu" / "cpu": inside that branch of a platform case; "all": runs on every platform


@dataclass(frozen=True)
class KernelFacts:
    name: str
    grid: tuple[int | None, ...]  # None: a dynamic size the judge's values do not give
    dimension_semantics: tuple[str, ...]
    block_shapes: tuple[tuple[int, ...] | None, ...]  # per operand then result; None: left in HBM (pl.ANY)
    memory_spaces: tuple[str, ...]  # per operand then result: "vmem", "smem", "any", ...
    operand_types: tuple[str, ...]
    result_types: tuple[str, ...]
    flops: int | None  # the kernel's work as priced (runner/program/kernel_cost.py), None when it could not be
    transcendentals: int | None
    reads_size: tuple[str, ...] = ()  # the size ops its body reads at run time ("tpu.iteration_bound", ...)


@dataclass(frozen=True)
class ModuleFacts:
    platforms: tuple[str, ...] = ()
    kernels: tuple[KernelFacts, ...] = ()
    outputs_from_kernels: tuple[bool, ...] = ()  # per output: depends on some kernel's result
    xla_flops: int = 0  # the plain XLA ops of the TPU program (outside kernels)
    xla_mxu_flops: int = 0
    xla_transcendentals: int = 0
    kernel_flops: int = 0  # summed over the kernels' priced counts
    kernel_flops_known: bool = True  # False: some kernel could not be priced (its work is not in kernel_flops)
    kernel_transcendentals: int = 0
    custom_calls: tuple[CustomCall, ...] = ()
    platform_branches: tuple[str, ...] = ()  # platform cases that are not a pallas_call's own pair
    notes: tuple[str, ...] = ()
    error: str | None = None  # the module could not be read: why (nothing else is filled)

    @property
    def kernel_names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.kernels)

    @property
    def size_reads(self) -> tuple[str, ...]:
        """"<kernel>: <op>" for each kernel whose behaviour may depend on the size it runs at."""
        return tuple(f"{k.name}: {', '.join(k.reads_size)}" for k in self.kernels if k.reads_size)


def module_facts(blob: Any, signature: Sequence[Sequence[Any]] | None = None, *,
                 values: Sequence[Any] | None = None, mxu: int = 128) -> ModuleFacts:
    """The facts of ``blob`` (bytes, a ``jax.export.Exported`` or a read module_read.Module) at
    ``signature`` (needed for symbolic dims); ``values``: the judge's inputs where known."""
    from .module_read import Module, read_module

    try:
        module = blob if isinstance(blob, Module) else read_module(blob, signature)
        return _facts(module, values, mxu)
    except Exception as exc:  # noqa: BLE001 - a module the judge cannot read: said, never raised
        return ModuleFacts(error=f"{type(exc).__name__}: {str(exc)[:500]}")


def _facts(module: Any, values: Any, mxu: int) -> ModuleFacts:
    from .module_xla import count_flops

    kernels = tuple(_kernel_facts(module, site, values, mxu) for site in module.kernels)
    xla = count_flops(module, module.main_block, mxu)
    notes = list(module.notes)
    branches = tuple(f"a stablehlo.case on the platform index (op #{op.index}) whose branches are not a "
                     f"pallas_call's own TPU/CPU pair: {len(op.regions)} branches of "
                     f"{', '.join(str(len(r[0].ops)) for r in op.regions if r)} ops"
                     for op, kind in module.cases if kind == "branch")
    return ModuleFacts(
        platforms=module.platforms, kernels=kernels, outputs_from_kernels=outputs_from_kernels(module),
        xla_flops=xla.flops, xla_mxu_flops=xla.mxu_flops, xla_transcendentals=xla.transcendentals,
        kernel_flops=sum(k.flops or 0 for k in kernels), kernel_flops_known=all(k.flops is not None for k in kernels),
        kernel_transcendentals=sum(k.transcendentals or 0 for k in kernels),
        custom_calls=tuple(custom_calls(module)), platform_branches=branches, notes=tuple(notes))


SIZE_OPS = frozenset({"tpu.iteration_bound", "memref.dim"})  # what a kernel body reads of its size at run time


def size_reads(kernel: Any) -> tuple[str, ...]:
    """The size ops ``kernel``'s body reads at run time (runner/program/mosaic_ir.Kernel), in walk order, once each."""
    from .mlir_tree import walk

    return tuple(dict.fromkeys(op.name for op in walk(kernel.body) if op.name in SIZE_OPS))


def _kernel_facts(module: Any, site: Any, values: Any, mxu: int) -> KernelFacts:
    from .kernel_cost import kernel_cost, resolve_grid
    from .module_values import operand_values
    from .mosaic_ir import DYNAMIC, decode_call

    call, types = site.call, module.tree.types
    k = decode_call(call)
    known = operand_values(module, call.operands[:k.n_dynamic + k.n_prefetch], values)
    operands = [types[v] for v in call.operands[k.n_dynamic:]]
    results = [types[v] for v in call.results]
    try:
        grid: tuple[int | None, ...] = resolve_grid(k, known[:k.n_dynamic])[0]
    except ValueError:  # a dynamic size the values do not give: None there
        sizes = iter(known[:k.n_dynamic])
        grid = tuple(g if g != DYNAMIC else _size(next(sizes, None)) for g in k.grid)
    try:
        cost, _ = kernel_cost(k, operands, results, known[:k.n_dynamic], known[k.n_dynamic:], mxu)
        flops, trans = cost.flops, cost.transcendentals
    except Exception:  # noqa: BLE001 - the price says why; the facts go on without it
        flops = trans = None
    arrays = operands[k.n_prefetch:] + results
    if k.windows is not None:
        blocks = tuple(None if w.bounds is None else tuple(w.bounds) for w in k.windows)
    else:  # no grid: every operand whole, except those left in HBM
        blocks = tuple(None if t.space in ("any", "hbm") else tuple(int(d or 0) for d in a.shape)
                       for a, t in zip(arrays, k.operand_types()))
    return KernelFacts(
        name=k.name, grid=grid, dimension_semantics=k.semantics, block_shapes=blocks,
        memory_spaces=tuple(t.space or "vmem" for t in k.operand_types()),
        operand_types=tuple(t.text for t in operands), result_types=tuple(t.text for t in results),
        flops=flops, transcendentals=trans, reads_size=size_reads(k))


def _size(value: Any) -> int | None:
    import numpy as np

    return None if value is None else int(np.asarray(value).reshape(-1)[0])


# --------------------------------------------------------------------------- data flow and custom calls


def outputs_from_kernels(module: Any) -> tuple[bool, ...]:
    """Per output of main: whether its value depends on some kernel's result (the TPU program's data flow)."""
    deps: dict[int, frozenset[int]] = {}
    index = {id(site.call): i for i, site in enumerate(module.kernels)}
    _flow(module, module.main_block, deps, index)
    ret = module.main_block.ops[-1]
    return tuple(bool(deps.get(v)) for v in ret.operands)


def _flow(module: Any, block: Any, deps: dict[int, frozenset[int]], index: dict[int, int]) -> frozenset[int]:
    """Propagate kernel dependence through ``block``; returns what its terminator's operands depend on."""
    empty: frozenset[int] = frozenset()
    kinds = {id(op): kind for op, kind in module.cases}
    for op in block.ops:
        ins = frozenset().union(*(deps.get(v, empty) for v in op.operands)) if op.operands else empty
        if id(op) in index:
            out = ins | {index[id(op)]}
        elif id(op) in kinds and kinds[id(op)] != "map":
            t = module.branch_at(op, "tpu")
            branch = op.regions[t][0] if t is not None else None
            if branch is not None:
                _flow(module, branch, deps, index)
                for r, v in zip(op.results, branch.ops[-1].operands):
                    deps[r] = deps.get(v, empty)
                continue
            out = ins
        elif op.regions:
            out = ins
            for region in op.regions:
                for inner in region:
                    for a in inner.args:
                        deps[a] = ins
                    out = out | _flow(module, inner, deps, index)
        else:
            out = ins
        for r in op.results:
            deps[r] = out
    last = block.ops[-1] if block.ops else None
    return frozenset().union(*(deps.get(v, empty) for v in last.operands)) if last and last.operands else empty


def custom_calls(module: Any) -> list[CustomCall]:
    """Every custom call the main function holds, with where it runs."""
    from .module_read import target

    out: list[CustomCall] = []
    kinds = {id(op): kind for op, kind in module.cases}

    def visit(block: Any, where: str) -> None:
        for op in block.ops:
            if op.name == "stablehlo.custom_call":
                out.append(CustomCall(target(op), tuple(module.tree.type(v).text for v in op.operands),
                                      tuple(module.tree.type(v).text for v in op.results), where))
            if id(op) in kinds and kinds[id(op)] != "map":
                for i, region in enumerate(op.regions):
                    platform = next((p for p in module.platforms if module.branch_at(op, p) == i), "none")
                    for inner in region:
                        visit(inner, platform if where == "all" else where)
                continue
            for region in op.regions:
                for inner in region:
                    visit(inner, where)

    visit(module.main_block, "all")
    return out

