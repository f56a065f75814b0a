"""Static arithmetic on a pallas_call's block shapes: VMEM footprint, grid steps, tiling legality.

Plain functions of ``KernelSite`` / ``BlockSpecInfo`` values as tier 0 reads them from the source
(no jax): the server's hovers show them, and a cost model can build on them. Every number is an
estimate from the source, not a measurement: the compiler adds its own internal scratch, and a
block that is not static (a name, not an int) is left out and the total marked incomplete.

- footprint: every pipelined VMEM block twice (the pipeline double-buffers it), plus the VMEM
  scratch buffers once; blocks in another memory space (``pl.ANY``, SMEM) are not counted.
- tiling: the last block dim must be a multiple of 128 lanes and the second-to-last a multiple
  of the element type's row tiling (``dtypes.sublane_rows``), unless the dim spans the whole array.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, Sequence

from .dtypes import DTYPE_BITS, LANES, block_bytes, sublane_rows
from .origins import trace
from .types import BlockSpecInfo, KernelSite, ScratchInfo

Shape = Sequence[int | str | None]


class Footprint(NamedTuple):
    """VMEM bytes one grid step holds; ``complete`` is False when some size was not static
    (then ``bytes`` is a lower bound)."""

    bytes: int
    complete: bool


@dataclass(frozen=True)
class Tiling:
    """Whether a block's last two dims fit the TPU tiling for an element size."""

    legal: bool | None  # None: rank < 2 (no rule) or dims not static (cannot tell)
    problems: tuple[str, ...] = ()  # why not, when not legal
    rows: int | None = None
    lanes: int | None = None
    rows_needed: int | None = None  # the row multiple the element size needs

    @property
    def text(self) -> str:
        """One line for people: "tiling: legal (8 rows % 8, 128 lanes % 128)" and the like."""
        if self.legal is None:
            if self.rows_needed is None:
                return "tiling: rank < 2, no (rows, lanes) rule applies"
            return "tiling: not static, cannot tell"
        if not self.legal:
            return "tiling: legal only if these dims span the whole array (" + "; ".join(self.problems) + ")"
        return f"tiling: legal ({self.rows} rows % {self.rows_needed}, {self.lanes} lanes % {LANES})"


def block_elements(shape: Shape | None) -> int | None:
    """Elements in one block; None when a dim is not a static int (None dims are squeezed: 1)."""
    if shape is None:
        return None
    if any(isinstance(d, str) for d in shape):
        return None
    return math.prod(1 if d is None else d for d in shape)


def in_vmem(spec: BlockSpecInfo) -> bool:
    """Whether the block is pipelined through VMEM (the default memory space)."""
    return spec.memory_space in (None, "VMEM")


def scratch_bytes(scratch: ScratchInfo) -> int | None:
    """Bytes of one VMEM scratch buffer; None for other kinds or when shape/dtype are not static."""
    if scratch.kind != "VMEM" or scratch.dtype is None:
        return None
    bits = DTYPE_BITS.get(scratch.dtype.split(".")[-1])
    elems = block_elements(scratch.shape)
    return None if bits is None or elems is None else block_bytes(elems, bits)


def vmem_footprint(site: KernelSite, bits: int) -> Footprint:
    """Double-buffered VMEM bytes of the site's blocks (at ``bits`` per element) plus its VMEM
    scratch (at the scratch's own dtype)."""
    total, complete = 0, True
    for spec in (*(site.in_specs or ()), *(site.out_specs or ())):
        if not in_vmem(spec):
            continue
        elems = block_elements(spec.block_shape)
        if elems is None:
            complete = False
            continue
        total += 2 * block_bytes(elems, bits)
    for scratch in site.scratch_shapes or ():
        size = scratch_bytes(scratch)
        if size is None:
            complete = complete and scratch.kind != "VMEM"
        else:
            total += size
    if site.in_specs is None or site.out_specs is None:
        complete = False
    return Footprint(total, complete)


def static_dims(text: str, spec: BlockSpecInfo, tree=None) -> list[int] | None:
    """The block's dims as ints (squeezed dims 1): tier 0's reading, else each dim traced to the
    literal it was written as (``analysis/origins.py``, no arithmetic between); None if one is not."""
    if spec.block_shape is None or len(spec.dim_spans) != len(spec.block_shape):
        return None
    out = []
    for dim, span in zip(spec.block_shape, spec.dim_spans):
        if dim is None or isinstance(dim, int):
            out.append(1 if dim is None else dim)
            continue
        origin = trace(text, span, tree=tree)  # tree: the text's ast module, when the caller has it
        if origin is None or not origin.exact or not isinstance(origin.value, int) or isinstance(origin.value, bool):
            return None
        out.append(origin.value)
    return out


def grid_steps(grid: Sequence[int | str] | None) -> int | None:
    """How many steps the grid runs (1 for an empty grid); None when a dim is not static."""
    if grid is None or any(not isinstance(g, int) for g in grid):
        return None
    return math.prod(grid) if grid else 1


def tiling(shape: Shape | None, bits: int) -> Tiling:
    """The tiling rule applied to a block's last two dims for an element size in bits."""
    if not shape or len(shape) < 2:
        return Tiling(None)
    rows, lanes = shape[-2], shape[-1]
    need = sublane_rows(bits)
    if not isinstance(rows, int) or not isinstance(lanes, int):
        return Tiling(None, rows_needed=need)
    problems = []
    if lanes % LANES:
        problems.append(f"last dim {lanes} is not a multiple of {LANES}")
    if rows % need:
        problems.append(f"rows {rows} is not a multiple of {need}")
    return Tiling(not problems, tuple(problems), rows, lanes, need)


def tiling_verdict(shape: Shape | None, bits: int) -> str:
    """``tiling(shape, bits)`` as one line of text."""
    return tiling(shape, bits).text
