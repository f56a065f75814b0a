"""Feasibility of a tuning configuration, decided before anything is compiled.

Input: the cost model's counted facts for the configuration (``CostEstimate``: every pallas_call's
grid, block shapes, array shapes, dtypes and VMEM footprint, from tracing alone). A configuration
is rejected, with every reason that applies, when

- ``trace``: the entry does not even trace with it (the error is the reason);
- ``tiling``: a VMEM block's last dim is not a multiple of 128 lanes, or its second-to-last is not
  a multiple of the dtype's native rows (8 for 32/16-bit, 32 for 8-bit, 64 for 4-bit), unless the
  dim is the whole array dim (the rule is analysis/footprint.py's ``tiling``, the hovers' too;
  analysis/dtypes.py has the table and where it was verified);
- ``vmem``: blocks x buffers + scratch exceed the scoped-VMEM limit (the call's own
  ``vmem_limit_bytes`` when set, else the chip's measured default);
- ``empty``: a grid axis has 0 steps (``m // BM`` with a block larger than its array): the kernel
  never runs, its outputs are never written, and the cost model would price an empty program as the
  fastest of all;
- ``padding``: a VMEM block dim is larger than its array dim rounded up to the tiling (a block of
  1024 over 512 rows): every step along that dim works on padding past the array's end, a
  contraction over it reads whatever lies there, and a block of the array's own size covers it.

A block dim that does not divide its array dim, or exceeds it only up to the tiling (the edge block
is padded to a whole tile), is *not* a reason: the TPU compiler accepts it (tests/test_feasibility.py
compiles 6p_Paged_Attention's (None, 8, 128) block over a (64, 64, 1) output with libtpu), and the
cost model counts only the bytes inside the array. ``tiling`` and ``vmem`` never reject what the
compiler accepts; ``empty`` and ``padding`` reject programs the compiler accepts but that do no work
or only wasted work, so tune never ranks, walks to or tests them.

Pure arithmetic over plain values; never imports JAX.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .dtypes import DTYPE_BITS, LANES, sublane_rows
from .footprint import tiling
from .types import CostEstimate

REASONS = ("trace", "empty", "padding", "tiling", "vmem")
WORK = ("empty", "padding")  # reasons the compiler cannot overrule: it accepts these programs


@dataclass(frozen=True)
class Rejection:
    reason: str  # one of REASONS
    message: str


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.2f} MiB"


def rejections(estimate: CostEstimate, scoped_vmem_limit: int | None) -> tuple[Rejection, ...]:
    """Every reason ``estimate``'s configuration cannot run; () when it is feasible."""
    if estimate.status != "ok":
        return (Rejection("trace", estimate.error or "the entry did not trace"),)
    out: list[Rejection] = []
    for call in estimate.calls:
        out += _no_work(call)
        for block in call.blocks:
            if block.memory_space == "any":
                continue
            where = f"{call.kernel} {block.origin} block {block.block_shape} of {block.array_shape}"
            if block.memory_space != "vmem":
                continue
            bits = DTYPE_BITS.get(block.dtype, 32)
            # the one tiling rule (analysis/footprint.py), with a dim spanning the whole array exempt
            shape = list(block.block_shape)
            if len(shape) >= 2:
                if shape[-1] == block.array_shape[-1]:
                    shape[-1] = LANES
                if shape[-2] == block.array_shape[-2]:
                    shape[-2] = sublane_rows(bits)
            for problem in tiling(shape, bits).problems:
                out.append(Rejection("tiling", f"{where}: {problem} ({block.dtype} tiling)"))
        limit = call.vmem_limit_bytes or scoped_vmem_limit
        if limit is not None and call.vmem_bytes > limit:
            source = "its vmem_limit_bytes" if call.vmem_limit_bytes else "the chip's scoped-VMEM limit"
            out.append(Rejection("vmem", f"{call.kernel}: blocks x buffers + scratch = {_mib(call.vmem_bytes)} "
                                         f"exceed {source} {_mib(limit)}"))
    return tuple(out)


def _array_text(block) -> str:
    return f"{block.origin} {tuple(block.array_shape)}"


def _no_work(call) -> list[Rejection]:
    """``empty``: a grid axis of 0 steps; ``padding``: a VMEM block dim past its array dim rounded up to the
    tiling (the last dim to 128 lanes, the second-to-last to the dtype's rows, the others not at all)."""
    out: list[Rejection] = []
    zero = [i for i, n in enumerate(call.grid) if n == 0]
    if zero:
        outs = [b for b in call.blocks if b.role == "out"]
        larger = [b for b in call.blocks if any(isinstance(d, int) and d > a for d, a in
                                                 zip(b.block_shape, b.array_shape))]
        said = f"{', '.join(_array_text(b) for b in outs)} never written" if outs else "nothing is computed"
        why = (f" ({larger[0].origin} block {tuple(larger[0].block_shape)} is larger than its array "
               f"{tuple(larger[0].array_shape)}: a floor-divided grid gives 0 steps)") if larger else ""
        axes = ", ".join(str(i) for i in zero)
        out.append(Rejection("empty", f"{call.kernel}: grid {tuple(call.grid)} has 0 steps along axis {axes}: the "
                                      f"kernel never runs, {said}{why}"))
    for block in call.blocks:
        if block.memory_space != "vmem" or len(block.block_shape) != len(block.array_shape):
            continue
        rows = sublane_rows(DTYPE_BITS.get(block.dtype, 32))
        rank = len(block.block_shape)
        for i, (dim, size) in enumerate(zip(block.block_shape, block.array_shape)):
            tile = LANES if i == rank - 1 else rows if i == rank - 2 else 1
            if isinstance(dim, int) and dim > -(-size // tile) * tile:
                out.append(Rejection("padding", f"{call.kernel} {block.origin} block {tuple(block.block_shape)} of "
                                                f"{tuple(block.array_shape)}: dim {i} is {dim}, larger than the "
                                                f"array's {size}: its blocks are padding past the array's end (a "
                                                f"block of {size} covers it)"))
    return out


def summarize(rejected: Iterable[Sequence[Rejection]]) -> dict[str, int]:
    """Rejected configurations per first reason, e.g. {"vmem": 12, "tiling": 3}."""
    return dict(Counter(r[0].reason for r in rejected if r))


# --------------------------------------------------------------------------- learning from the compiler

# the compiler's out-of-VMEM finding: pallasite's code (analysis/codes.py) and XLA's stable error code
VMEM_CODES = ("PLS201", "E1001")
_MIB = re.compile(r"(?i)size\s+([\d.]+)\s*([KMG])i?B?\s+and\s+limit\s+([\d.]+)\s*([KMG])i?B?")
_UNIT = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def out_of_vmem(why: str, evidence: str = "") -> bool:
    """Whether a compile failure (``CompileResult.why`` / ``.evidence``) is the compiler running out of VMEM."""
    text = f"{why}\n{evidence}"
    return any(code in text for code in VMEM_CODES) or "CompileTimeScopedVmemOom" in text


def compiler_vmem(evidence: str) -> tuple[int, int] | None:
    """(bytes the compiler tried to allocate, its scoped limit) from its out-of-VMEM message ("Scoped
    allocation with size 18.35M and limit 16.00M exceeded ..."), or None when the message gives no sizes."""
    m = _MIB.search(evidence or "")
    if not m:
        return None
    return int(float(m.group(1)) * _UNIT[m.group(2).upper()]), int(float(m.group(3)) * _UNIT[m.group(4).upper()])


def _vmem_blocks(estimate: CostEstimate) -> tuple | None:
    """Per call: its kernel, VMEM limit, scratch bytes and each VMEM block's (buffers, dims); None if no trace."""
    if estimate.status != "ok":
        return None
    return tuple((call.kernel, call.vmem_limit_bytes, call.scratch_bytes,
                  tuple((b.buffers, tuple(1 if d is None else d for d in b.block_shape))
                        for b in call.blocks if b.memory_space == "vmem"))
                 for call in estimate.calls)


def at_least_as_large(big: CostEstimate, small: CostEstimate) -> bool:
    """Whether ``big`` asks at least as much VMEM as ``small`` in every respect: the same calls and blocks, each
    VMEM block elementwise at least as large with at least as many buffers, at least as much scratch, and no
    higher ``vmem_limit_bytes``. A compiler that ran out of VMEM for ``small`` runs out for ``big`` too (what
    it adds of its own, internal scratch and temporaries, grows with the blocks); when the two are not
    comparable (different calls, ranks or limits) the answer is False: nothing is learned."""
    a, b = _vmem_blocks(big), _vmem_blocks(small)
    if a is None or b is None or len(a) != len(b):
        return False
    for (kernel_a, limit_a, scratch_a, blocks_a), (kernel_b, limit_b, scratch_b, blocks_b) in zip(a, b):
        if kernel_a != kernel_b or limit_a != limit_b or scratch_a < scratch_b or len(blocks_a) != len(blocks_b):
            return False
        for (buf_a, dims_a), (buf_b, dims_b) in zip(blocks_a, blocks_b):
            if buf_a < buf_b or len(dims_a) != len(dims_b) or any(x < y for x, y in zip(dims_a, dims_b)):
                return False
    return True


def counted_vmem(estimate: CostEstimate) -> int | None:
    """The pre-check's count for the configuration: the largest call's blocks x buffers + scratch."""
    if estimate.status != "ok" or not estimate.calls:
        return None
    return max(call.vmem_bytes for call in estimate.calls)
