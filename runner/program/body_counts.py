"""What one execution of a kernel body computes: FLOPs, the MXU's share with its fill efficiency,
transcendentals (``BodyCounts``), and the one matmul rule (``add_dot``) the Mosaic kernel counts
(runner/program/mosaic_counts.py) and the XLA ops around the kernels (runner/program/module_xla.py) share, so neither
imports the other in a circle. Worker side: plain data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class BodyCounts:
    """Per-grid-step counts of a kernel body."""

    flops: int = 0
    mxu_flops: int = 0
    transcendentals: int = 0
    dots: list[tuple[int, str, float]] = field(default_factory=list)  # (flops, operand dtype, efficiency)
    notes: set[str] = field(default_factory=set)

    def add(self, other: "BodyCounts", times: int = 1) -> None:
        self.flops += other.flops * times
        self.mxu_flops += other.mxu_flops * times
        self.transcendentals += other.transcendentals * times
        self.dots.extend((f * times, d, e) for f, d, e in other.dots)
        self.notes |= other.notes
        if len(self.dots) > 64:  # a walk over many grid steps: one entry per (dtype, fill) is enough
            merged: dict[tuple[str, float], int] = {}
            for f, d, e in self.dots:
                merged[(d, e)] = merged.get((d, e), 0) + f
            self.dots = [(f, d, e) for (d, e), f in merged.items()]


def _fill(dim: int, unit: int) -> float:
    return dim / (math.ceil(dim / unit) * unit) if dim > 0 else 1.0


def add_dot(counts: BodyCounts, lhs: Any, rhs: Any, out_elements: int, dims: Any, dtype: str, mxu: int) -> None:
    """One matmul: 2 x output elements x contracted elements, on the MXU, with how its contracted and
    output-column dims fill the MXU and its rows the sublanes of 8. ``dims``: (lhs contracting, lhs
    batch, rhs contracting, rhs batch). Shared by the jaxpr, Mosaic and StableHLO counts."""
    lc, lb, rc, rb = dims
    contract = int(np.prod([lhs[d] or 0 for d in lc], dtype=np.int64)) if lc else 1
    flops = 2 * out_elements * contract
    rows = int(np.prod([lhs[d] or 0 for d in range(len(lhs)) if d not in lc and d not in lb], dtype=np.int64)) or 1
    cols = int(np.prod([rhs[d] or 0 for d in range(len(rhs)) if d not in rc and d not in rb], dtype=np.int64)) or 1
    counts.flops += flops
    counts.mxu_flops += flops
    counts.dots.append((flops, dtype, _fill(contract, mxu) * _fill(cols, mxu) * _fill(rows, 8)))
