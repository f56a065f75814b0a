"""Smaller inputs for a tier-3 run, found by tracing: when the first rule cannot shrink enough.

Tier 3's first rule (``interpret.shrink_shapes``) shrinks a dim when it is cut into blocks by a
BlockSpec of an operand with the entry input's very shape. Real tasks often reshape, transpose or
``vmap`` their inputs first (JAXBench's attention kernels), so the pallas_call's operands have
other shapes, heads and batch dims are squeezed (block ``None``), and the run stays at full size:
interpret mode then copies hundreds of MiB many times and meets the worker's memory limit.

``shrink_further`` tries, per size value of the inputs' dims (largest byte share first), smaller
sizes (2, 1/8, 1/4, 1/2 of it) for every dim of that size, then for one dim at a time (the heads
of an attention input share their size with the head dim), and keeps a try only when the entry
still traces (``jax.eval_shape``, nothing runs) and every pallas_call it makes keeps the block
and scratch shapes it had: the grid shrinks, the kernel's blocks and tiling stay as written. It
stops once the inputs fit ``budget`` bytes. Worker side: imports jax.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import jax

from ..intercept import block_shapes

BUDGET_BYTES = 32 << 20  # inputs above this are shrunk further before an interpret run
MAX_TRIES = 24  # traces spent at most


def input_bytes(args: Any) -> int:
    return sum(math.prod(a.shape) * jax.numpy.dtype(a.dtype).itemsize
               for a in jax.tree.leaves(args) if hasattr(a, "shape") and hasattr(a, "dtype"))


def blocks_of(calls: list[Any]) -> list[tuple]:
    """What must not change when the inputs shrink: each call's block and scratch shapes, and for
    each operand and output dim whether its block tiles it (at most as large, dividing it)."""
    out = []
    for call in calls:
        grid_spec = call.kwargs.get("grid_spec")
        ins = getattr(grid_spec, "in_specs", None) if grid_spec is not None else call.kwargs.get("in_specs")
        outs = getattr(grid_spec, "out_specs", None) if grid_spec is not None else call.kwargs.get("out_specs")
        scratch = getattr(grid_spec, "scratch_shapes", None) if grid_spec is not None else call.kwargs.get("scratch_shapes")
        prefetch = int(getattr(grid_spec, "num_scalar_prefetch", 0) or 0) if grid_spec is not None else 0
        in_blocks, out_blocks = block_shapes(ins), block_shapes(outs)
        operands = [o for o in jax.tree.leaves(tuple(call.operands or ())[prefetch:]) if hasattr(o, "shape")]
        results = [o for o in jax.tree.leaves(call.out_shape) if hasattr(o, "shape")]
        tiles = tuple(_tiles(a.shape, b.block_shape) for a, b in zip(operands + results, in_blocks + out_blocks))
        out.append((tuple(b.block_shape for b in in_blocks), tuple(b.block_shape for b in out_blocks),
                    tuple(tuple(getattr(s, "shape", ()) or ()) for s in (scratch or ())), tiles))
    return out


def _tiles(shape: tuple[int, ...], block: tuple[int | None, ...] | None) -> tuple[bool, ...]:
    if block is None or len(block) != len(shape):
        return ()
    return tuple(b is None or (b <= d and d % b == 0) for d, b in zip(shape, block))


def shrink_further(fn: Callable[..., Any], args: tuple[Any, ...], calls: list[Any],
                   probe: Callable[[tuple[Any, ...]], list[Any]], budget: int = BUDGET_BYTES) -> tuple[tuple[Any, ...], bool]:
    """Smaller abstract ``args`` for ``fn`` that keep every call's blocks (see the module doc);
    ``probe(args)`` traces ``fn`` and returns its recorded calls. Returns (args, changed)."""
    if input_bytes(args) <= budget or not calls:
        return args, False
    want = blocks_of(calls)
    state = {"current": args, "tries": 0}

    def attempt(make: Callable[[Any, int], Any], size: int) -> None:
        for new in _smaller(size):
            if state["tries"] >= MAX_TRIES:
                return
            state["tries"] += 1
            trial = make(state["current"], new)
            try:
                traced = probe(trial)
            except Exception:  # noqa: BLE001 - the entry does not take this size: try the next
                continue
            if traced and blocks_of(traced) == want:
                state["current"] = trial
                return

    for size in _sizes_by_bytes(args):  # every dim of one size together (a batch, a sequence length)
        if input_bytes(state["current"]) <= budget:
            break
        attempt(lambda a, new, size=size: _replace(a, size, new), size)
    for leaf, axis, size in _dims_by_bytes(state["current"]):  # then one dim at a time (heads next to head_dim)
        if input_bytes(state["current"]) <= budget:
            break
        attempt(lambda a, new, leaf=leaf, axis=axis: _replace_one(a, leaf, axis, new), size)
    return state["current"], state["current"] is not args


def _sizes_by_bytes(args: Any) -> list[int]:
    """The dim sizes of the inputs (above 2), the ones holding most bytes first."""
    share: dict[int, int] = {}
    for a in jax.tree.leaves(args):
        if not (hasattr(a, "shape") and hasattr(a, "dtype")):
            continue
        nbytes = math.prod(a.shape) * jax.numpy.dtype(a.dtype).itemsize
        for d in set(a.shape):
            if d > 2:
                share[d] = share.get(d, 0) + nbytes
    return sorted(share, key=lambda d: (-share[d], -d))


def _dims_by_bytes(args: Any) -> list[tuple[int, int, int]]:
    """(leaf, axis, size) of every dim above 2, in the largest leaves first."""
    leaves = [a for a in jax.tree.leaves(args) if hasattr(a, "shape") and hasattr(a, "dtype")]
    order = sorted(range(len(leaves)), key=lambda i: -math.prod(leaves[i].shape) * jax.numpy.dtype(leaves[i].dtype).itemsize)
    return [(i, axis, d) for i in order for axis, d in enumerate(leaves[i].shape) if d > 2]


def _replace_one(args: Any, leaf: int, axis: int, new: int) -> Any:
    leaves, treedef = jax.tree.flatten(args, is_leaf=lambda a: hasattr(a, "shape") and hasattr(a, "dtype"))
    arrays = [i for i, a in enumerate(leaves) if hasattr(a, "shape") and hasattr(a, "dtype")]
    index = arrays[leaf]
    a = leaves[index]
    leaves[index] = jax.ShapeDtypeStruct(tuple(new if i == axis else d for i, d in enumerate(a.shape)), a.dtype)
    return jax.tree.unflatten(treedef, leaves)


def _smaller(size: int) -> list[int]:
    out = []
    for new in (2, size // 8, size // 4, size // 2):
        if 1 < new < size and size % new == 0 and new not in out:
            out.append(new)
    return out


def _replace(args: Any, size: int, new: int) -> Any:
    def one(a: Any) -> Any:
        if not (hasattr(a, "shape") and hasattr(a, "dtype")) or size not in a.shape:
            return a
        return jax.ShapeDtypeStruct(tuple(new if d == size else d for d in a.shape), a.dtype)

    return jax.tree.map(one, args, is_leaf=lambda a: hasattr(a, "shape") and hasattr(a, "dtype"))
