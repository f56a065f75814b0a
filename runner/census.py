"""The work census of one pallas_call in an exported module: what its Mosaic kernel computes over the
grid against what its CPU branch (the HLO interpreter's loop) computes (worker side).

The judge tests the CPU branch and prices the TPU branch: a hand-edited module whose TPU kernel
does less than the CPU code would pass the test with a price it did not earn. Both sides are
counted with the same static rules, only ops on arrays (the interpreter's own scalar index
arithmetic is not the kernel's work): matmul FLOPs (``tpu.matmul`` / ``dot_general``: 2 x output x
contracted), element-wise arithmetic and reductions (one per element), transcendentals (one per
element); every branch at its largest, a loop whose trip count the module fixes x its trips (the
interpreter's loop over the grid included; the remainder loop Mosaic adds after a dynamic
``fori_loop`` none), any other loop once. ``Work`` holds the three counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .mlir_tree import Block
from .mosaic_counts import ARITHMETIC as MOSAIC_ARITHMETIC
from .mosaic_counts import MATMULS, REDUCTIONS as MOSAIC_REDUCTIONS
from .mosaic_counts import TRANSCENDENTAL as MOSAIC_TRANSCENDENTAL
from .loop_bounds import difference
from .mosaic_ir import constant_of
from .module_xla import ARITHMETIC, DOTS, REDUCTIONS, TRANSCENDENTAL, while_trips


@dataclass(frozen=True)
class Work:
    mxu_flops: int = 0
    vector_flops: int = 0
    transcendentals: int = 0

    def __add__(self, other: "Work") -> "Work":
        return Work(self.mxu_flops + other.mxu_flops, self.vector_flops + other.vector_flops,
                    self.transcendentals + other.transcendentals)

    def times(self, n: int) -> "Work":
        return Work(self.mxu_flops * n, self.vector_flops * n, self.transcendentals * n)

    def key(self) -> tuple[int, int, int]:
        return (self.mxu_flops, self.transcendentals, self.vector_flops)


def _largest(works: list[Work]) -> Work:
    return max(works, key=Work.key) if works else Work()


def mosaic_work(kernel, block: Block | None = None) -> Work:
    """One execution of the kernel body (or ``block`` of it), nothing known."""
    from .mosaic_counts import matmul_counts
    from .body_counts import BodyCounts

    types = kernel.tree.types
    total = Work()
    for op in (block or kernel.body.regions[0][0]).ops:
        result = types[op.results[0]] if op.results else None
        if op.name in MATMULS:
            dots = BodyCounts()
            matmul_counts(op, types, dots, 128)
            total += Work(mxu_flops=dots.mxu_flops)
        elif result is not None and result.kind == "vector" and op.name in MOSAIC_TRANSCENDENTAL:
            total += Work(transcendentals=result.elements)
        elif result is not None and result.kind == "vector" and op.name in MOSAIC_ARITHMETIC:
            total += Work(vector_flops=result.elements)
        elif op.name in MOSAIC_REDUCTIONS and types[op.operands[0]].kind == "vector":
            total += Work(vector_flops=types[op.operands[0]].elements)
        elif op.name == "scf.for":
            span, step = difference(kernel, op.operands[1], op.operands[0]), constant_of(kernel, op.operands[2])
            trips = 1 if span is None or step is None else max(0, -(-span // max(int(step), 1)))
            total += mosaic_work(kernel, op.regions[0][0]).times(trips)
        elif op.name == "scf.if":
            total += _largest([mosaic_work(kernel, r[0]) for r in op.regions if r])
        elif op.regions:
            for region in op.regions:
                for inner in region:
                    total += mosaic_work(kernel, inner)
    return total


def hlo_work(module, block: Block, value_of: Any = None) -> Work:
    """One execution of a StableHLO ``block`` (a pallas_call's CPU branch), by the same rules;
    ``value_of`` gives values the module alone does not fix (a grid sized from the inputs)."""
    from .body_counts import BodyCounts
    from .module_xla import dot_counts

    types = module.tree.types
    total = Work()
    for op in block.ops:
        result = types[op.results[0]] if op.results else None
        array = result is not None and bool(result.shape)
        if op.name in DOTS:
            dots = BodyCounts()
            dot_counts(op, types, dots, 128)
            total += Work(mxu_flops=dots.mxu_flops)
        elif array and op.name in TRANSCENDENTAL:
            total += Work(transcendentals=result.elements)
        elif array and op.name in ARITHMETIC:
            total += Work(vector_flops=result.elements)
        elif op.name in REDUCTIONS and types[op.operands[0]].shape:
            total += Work(vector_flops=types[op.operands[0]].elements)
        elif op.name == "stablehlo.while":
            trips = while_trips(module, op, value_of)
            total += hlo_work(module, op.regions[1][0], value_of).times(1 if trips is None else trips)
        elif op.name == "stablehlo.case":
            total += _largest([hlo_work(module, r[0], value_of) for r in op.regions if r])
        elif op.name == "func.call":
            callee = module.tree.funcs.get(str(op.attrs.get("callee", "")).lstrip("@"))
            if callee is not None:
                total += hlo_work(module, callee.regions[0][0], value_of)
    return total


TOLERANCE = 0.01  # counts this close are the same work


def verdict(tpu: Work, cpu: Work) -> str:
    """"same work", "less on the TPU" (any count below the CPU's) or "more on the TPU"."""
    words = set()
    for a, b in zip(tpu.key(), cpu.key()):
        if abs(a - b) > TOLERANCE * max(a, b, 1):
            words.add("less" if a < b else "more")
    return "less on the TPU" if "less" in words else "more on the TPU" if words else "same work"
