"""One Mosaic kernel of an exported module, counted for the roofline (worker side): its grid, its blocks'
copies, its own DMAs, its work and VMEM, from the kernel's MLIR.

Per pipelined operand (a window with an index map) the index map is evaluated at every grid step
(runner/program/mosaic_ir.index_table) and its copies counted by ``roofline._moves`` (an unchanged index
is not copied again; edge blocks clipped to the array); operands left in HBM/ANY are the kernel's
own DMAs (runner/program/mosaic_counts.py); scalar-prefetch operands are copied once; VMEM is each
pipelined VMEM block x its buffers (2 unless the window's ``pipeline_mode`` says synchronous) plus
VMEM scratch. The grid's dynamic sizes and the scalar-prefetch values are what the caller knows of
the custom call's operands; unknown prefetch values are zeros for the index maps (noted), unknown
dynamic sizes give no estimate (NoEstimate says why).

Conventions kept from the traced pricer this one replaced, so figures stay comparable: an operand whose
block is the whole array at index 0 is double-buffered (Mosaic's lowering marks it synchronous; a
pallas_call's default is two buffers); operand names follow the pallas_call's (``args[i]`` counting
scalar-prefetch operands, ``outputs`` / ``outputs[i]``). A kernel on the SparseCore (``tpu.core_type``
``sc_*``) is not estimated, and ``sparsecore_why`` says which public facts are missing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...analysis.types import BlockCost, CallCost

from .body_counts import BodyCounts
from .checked_classes import kernel_class
from .roofline import MAX_GRID_STEPS, NoEstimate, _moves, sized_grid
from .mlir_tree import Type
from .mosaic_counts import count_kernel
from .mosaic_ir import DYNAMIC, Kernel, KernelError, Window, index_table


def resolve_grid(k: Kernel, dynamic: list[Any]) -> tuple[tuple[int, ...], set[str]]:
    """The grid with its dynamic sizes from the custom call's leading operands (``dynamic``: their
    values where known)."""
    notes: set[str] = set()
    grid = sized_grid(k.grid, lambda g: g != DYNAMIC, dynamic, tuple("?" if g == DYNAMIC else g for g in k.grid),
                      "the pricer was not given (abstract inputs, or computed by ops it cannot evaluate): pass the "
                      "input values (the judge's, or an inputs() function that makes the index arrays) to estimate "
                      "it", "the module's inputs", notes)
    return grid, notes


def sparsecore_why(k: Kernel, chip: str = "") -> str:
    """Why a SparseCore kernel has no estimate: the public facts a rule would need that no table gives."""
    sc = sparsecore_info(chip)
    known = (f"the chip table (jax's get_tpu_info_for_chip) gives {chip}'s SparseCores ({sc.num_cores}), their "
             f"subcores ({sc.num_subcores}), lanes ({sc.num_lanes}) and DMA granule ({sc.dma_granule_size_bytes} B)"
             if sc is not None else f"the installed jax's chip table has no SparseCore for {chip or 'this chip'}")
    mesh = "VectorSubcoreMesh" if "vector" in k.core_type else "ScalarSubcoreMesh"
    return (f"kernel {k.name} runs on the SparseCore ({k.core_type}: pl.kernel/core_map over a {mesh}): {known}, "
            "but no public source gives the SparseCore's clock, its vector issue rate or the rate a subcore issues "
            "DMAs and indexed gathers at, and the one published SparseCore timing that moves data (jax's SparseCore "
            "guide: a 4,194,304-row gather on TPU 7x) would fit such a rate with no other point to check it on: "
            "time it on a device")


def sparsecore_info(chip: str) -> Any:
    """jax's SparseCoreInfo for the chip named ``chip`` (v5p, v6e, 7x, ...), or None."""
    try:
        from jax.experimental.pallas import tpu as pltpu

        from ...analysis.types import chip_target

        return pltpu.get_tpu_info_for_chip(pltpu.ChipVersion(chip_target(chip).chip_version), 1).sparse_core
    except Exception:  # noqa: BLE001 - an unknown chip or an older jax: said as unknown
        return None


def _squeezed(bounds: tuple[int, ...], block: Type) -> tuple[int | None, ...]:
    """The block shape with None for the squeezed dims (window dims of 1 that the kernel's ref drops;
    which of several 1s is squeezed does not change a byte)."""
    kept = list(block.shape) if block.kind == "memref" else list(bounds)
    drop = len(bounds) - len(kept)
    out: list[int | None] = []
    j = 0
    for b in bounds:
        if drop > 0 and b == 1 and (j >= len(kept) or kept[j] != 1):
            out.append(None)
            drop -= 1
        else:
            out.append(b)
            j += 1
    return tuple(out)


def _windows(k: Kernel, arrays: list[Type]) -> tuple[Window | None, ...]:
    if k.windows is not None:
        if len(k.windows) != len(arrays):
            raise KernelError(f"the kernel has {len(k.windows)} windows for {len(arrays)} operands and results")
        return k.windows
    return tuple(None if t.space in ("any", "hbm") else Window(tuple(a.shape), None, None, False)  # type: ignore[arg-type]
                 for t, a in zip(k.operand_types(), arrays))


def _block(k: Kernel, i: int, window: Window | None, array: Type, kernel_arg: Type, grid: tuple[int, ...],
           prefetch: list[np.ndarray], n_in: int, n_out: int, notes: set[str]) -> tuple[BlockCost, int]:
    role = "in" if i < n_in else "out"
    position = i if role == "in" else i - n_in
    origin = f"args[{k.n_prefetch + i}]" if role == "in" else ("outputs" if n_out == 1 else f"outputs[{position}]")
    shape = tuple(int(s) for s in array.shape)  # type: ignore[arg-type]
    space = kernel_arg.space or "vmem"
    if window is None or window.bounds is None:
        notes.add(f"{origin} stays in HBM (pl.ANY): the kernel copies it itself (its DMAs are counted)")
        return BlockCost(role, position, origin, shape, shape, array.dtype, "any", 0, 0, 0), 0
    dims = _squeezed(window.bounds, kernel_arg)
    if window.transform is None:
        table = np.zeros((1, len(dims)), np.int64)
    else:
        table = index_table(k, window, grid, prefetch)
    fetches, moved = _moves(table, list(dims), shape, array.bits, (window.element,) * len(dims))
    buffers = window.buffers or 2
    if buffers == 1 and tuple(window.bounds) == shape and not table.any():
        buffers = 2  # a whole-array block at index 0: Mosaic's lowering forces it synchronous (see the docstring)
    vmem = 0
    if space == "vmem":
        vmem = buffers * int(np.prod([d or 1 for d in dims], dtype=np.int64)) * array.bits // 8
    return BlockCost(role, position, origin, shape, dims, array.dtype, space, buffers, fetches, moved), vmem


def kernel_cost(k: Kernel, operands: list[Type], results: list[Type], dynamic: list[Any],
                prefetch_known: list[Any], mxu: int = 128) -> tuple[CallCost, BodyCounts]:
    """Count one kernel: ``operands`` the custom call's operand types after the dynamic grid sizes
    (scalar-prefetch operands first), ``results`` its result types, ``dynamic`` / ``prefetch_known``
    the values the caller knows (None where not). Raises NoEstimate / KernelError with the reason."""
    grid, notes = resolve_grid(k, dynamic)
    steps = int(np.prod(grid, dtype=np.int64)) if grid else 1
    if steps > MAX_GRID_STEPS:
        raise NoEstimate(f"grid {grid} has {steps} steps; the cost model evaluates index maps at up to {MAX_GRID_STEPS}")
    arrays = [*operands[k.n_prefetch:], *results]
    if any(d is None for a in [*operands, *results] for d in a.shape):
        raise NoEstimate("the module has symbolic dimensions: price it at a signature with concrete sizes")
    prefetch = []
    for value, t in zip(prefetch_known, operands[:k.n_prefetch]):
        if value is None:
            notes.add("scalar-prefetch values unknown (abstract example inputs): zeros assumed")
            value = np.zeros(tuple(int(s) for s in t.shape), np.int64)  # type: ignore[arg-type]
        prefetch.append(np.asarray(value))
    blocks, vmem = [], 0
    n_in = len(operands) - k.n_prefetch
    for i, (window, array, arg) in enumerate(zip(_windows(k, arrays), arrays, k.operand_types())):
        block, v = _block(k, i, window, array, arg, grid, prefetch, n_in, len(results), notes)
        blocks.append(block)
        vmem += v
    scratch = sum(t.elements * t.bits // 8 for t in k.scratch_types() if t.space == "vmem")
    prefetch_bytes = sum(t.nbytes for t in operands[:k.n_prefetch])
    first, walked, sampled = count_kernel(k, grid, list(prefetch_known), mxu)
    return _call(k, grid, steps, blocks, vmem, scratch, prefetch_bytes, first, walked, sampled, notes)


def _call(k: Kernel, grid: tuple[int, ...], steps: int, blocks: list[BlockCost], vmem: int, scratch: int,
          prefetch_bytes: int, first: Any, walked: Any, sampled: str | None, notes: set[str]) -> tuple[CallCost, BodyCounts]:
    if walked is None:  # nothing in the body depends on values: every step does the same work
        body, dmas = BodyCounts(), None
        body.add(first.compute, steps)
    else:
        body, dmas = walked.compute, walked
        notes |= walked.notes | ({sampled} if sampled else set())
        notes.add("work priced at each grid step from the known values (program ids, scalar-prefetch values): "
                  "pl.when bodies where they run, while loops for the trips they turn"
                  + ("" if walked.compute_kind == "exact" else f" ({walked.compute_kind}: see the other notes)"))
    if dmas is not None and dmas.copies:
        notes.add(f"the kernel's own DMAs: {dmas.copies} copies, {dmas.bytes} bytes over the grid"
                  + ("" if dmas.exact else f" ({dmas.kind}: see the other notes)"))
    mxu_eff = (sum(f * e for f, _, e in body.dots) / body.mxu_flops) if body.mxu_flops else 1.0
    cost = CallCost(
        kernel=k.name, grid=grid, steps=steps, blocks=tuple(blocks), scratch_bytes=scratch,
        vmem_bytes=vmem + scratch, vmem_limit_bytes=k.vmem_limit, hbm_bytes=sum(b.hbm_bytes for b in blocks) + prefetch_bytes,
        flops=body.flops, mxu_flops=body.mxu_flops, transcendentals=body.transcendentals,
        mxu_efficiency=round(mxu_eff, 6), dimension_semantics=k.semantics,
        notes=tuple(sorted(notes | body.notes | first.compute.notes)),
        dma_bytes=dmas.bytes if dmas else 0, dma_copies=dmas.copies if dmas else 0,
        dma_count=dmas.kind if dmas else "exact", flops_count=dmas.compute_kind if dmas else "exact",
        kernel_class=kernel_class(body.mxu_flops, body.transcendentals, dmas.copies if dmas else 0, k.n_prefetch > 0))
    return cost, body
