"""The roofline that turns a program's counts into seconds on a chip, and the model's factors (worker side,
plain data: no jax).

The roofline, model "pallasite roofline v5" (``roofline``; every constant below says where it
comes from): for one pallas_call on one TensorCore (both for "parallel" grids of a megacore chip)

    call = bubble + own DMAs + max(blocks - bubble, compute + steps x step_overhead)

where compute = max(MXU time at the dtype's rate / (MXU fill efficiency x mxu_efficiency), vector
time), blocks = the pipelined blocks' HBM bytes / (bandwidth x hbm_efficiency), own DMAs = the bytes the
kernel's own DMAs move (pl.ANY operands) at the same rate, and bubble = the first step's input blocks
plus the last step's output blocks over the bandwidth (the pipeline cannot hide them). The kernel's own
DMAs are not hidden behind its compute: the model does not pair each start with its wait, and a kernel
that starts a copy and waits for it at once (tests/data/reward_hacks/dma_hidden.py) hides nothing, so
hiding them would price a kernel that moves its blocks by hand below the same kernel with BlockSpecs. The per-step
cost does not hide behind the DMAs of that step (it is the core's own work: DMA issue, semaphore
waits, loop bookkeeping) but DMAs hide behind it. The program adds its plain XLA ops
(runner/program/module_xla.py: FLOPs at the same rates, the bytes each fused op must move) and
LAUNCH_OVERHEAD_S per launched kernel.

**Achieved-efficiency factors** (``FACTORS``, each named with where it came from, carried in every
estimate as ``CostEstimate.factors`` / the reference's ``factors``): ``mxu_efficiency``,
``xla_cycles_scale`` and ``step_overhead_s`` are *fitted* (least squares on log time) on published TPU
times of three families — jax's Pallas matmul guide (21 v5e times), its block-sparse guide (4 v5e
times), JAXBench's README (2 v6e times) — and checked leave-family-out (benchmarks/
bench_public_timings.py, from benchmarks/data/public_tpu_timings.json); ``gather_cycles_per_row`` is
*derived* from the one published TensorCore gather time (jax's SparseCore guide, 7x);
``hbm_efficiency`` is *assumed* (1.0: no published point is bandwidth-bound). The vector rate is the
chip's clock x lanes x sublanes, one operation per element per cycle; float32 matmuls run at a third
of the bf16 rate (multi-pass). Rates come from the ChipSpec (jax's own table). Every estimate says
which term bounds it (``bound``), its terms (``terms``: compute, HBM, per-op overhead, per-step
overhead) and its **interval** (``interval``: the figure over the model's leave-family-out error band,
``ERROR_BANDS``).

``NoEstimate`` is the pricer's "no estimate: <why>"; ``_moves`` and ``sized_grid`` are the block-copy and
dynamic-grid rules runner/program/kernel_cost.py applies to each Mosaic kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...analysis.types import CallCost, ChipSpec

from .body_counts import BodyCounts

MODEL = "pallasite roofline v5"
FIT_DATA = ("benchmarks/data/public_tpu_timings.json: jax's Pallas matmul and block-sparse guides (TPU v5e) and "
            "JAXBench's README (v6e), Pallas and XLA")


@dataclass(frozen=True)
class Factors:
    """Achieved efficiencies: what the chip delivers of its peak, by term."""

    mxu_efficiency: float  # a Pallas kernel's matmuls (and XLA's without libtpu) at this fraction of the MXU's rate
    xla_cycles_scale: float  # XLA's estimated_cycles for an op x this = its cycles on the chip
    step_overhead_s: float  # per grid step, not hidden by that step's DMAs
    hbm_efficiency: float  # HBM traffic at this fraction of the peak bandwidth
    # an XLA gather fetches at most one row (index tuple) per this many TensorCore cycles
    gather_cycles_per_row: float = 0.0

    def described(self) -> tuple[tuple[str, Any, str], ...]:
        return tuple((name, getattr(self, name), FACTOR_SOURCES[name]) for name in FACTOR_SOURCES)


FIT_FAMILIES = ("jax's Pallas matmul guide (21 TPU v5e times), jax's block-sparse guide (4 v5e times) and JAXBench's "
                "README (2 v6e times)")
_FITTED = f"fitted on {FIT_FAMILIES}; checked leave-family-out (benchmarks/bench_public_timings.py)"
FACTOR_SOURCES = {
    "mxu_efficiency": _FITTED,
    "xla_cycles_scale": _FITTED,
    "step_overhead_s": _FITTED,
    "hbm_efficiency": "assumed (no published bandwidth-bound point to fit it on)",
    "gather_cycles_per_row": ("derived from the one published TensorCore gather time (jax's SparseCore guide, "
                              "TPU 7x: jnp.take of 4,194,304 rows in 18.1 ms); not checked out of sample"),
}

# The fit's result (benchmarks/bench_public_timings.py prints it and exits 1 when a refit moves a factor by
# more than 2%): typed in here so an estimate never depends on the benchmark running.
FACTORS = Factors(mxu_efficiency=0.970, xla_cycles_scale=0.848, step_overhead_s=0.335e-6, hbm_efficiency=1.0,
                  gather_cycles_per_row=8.83)
STEP_OVERHEAD_S = FACTORS.step_overhead_s
# Per launched kernel (pallas_call, or an XLA op XLA gives no cycles for): an assumed order of magnitude, not
# measured here; it moves none of the published points by more than 2%.
LAUNCH_OVERHEAD_S = 2e-6
# The model's error on published TPU times it was NOT fitted on (leave-family-out, benchmarks/
# bench_public_timings.py): estimate / published ranged over [low, high] for each side. An estimate's
# interval is its figure divided by these (``interval``); the benchmark exits 1 when they no longer cover it.
ERROR_BANDS = {"kernel": (0.745, 1.298), "xla": (0.893, 1.124)}
# float32 operands take three bf16 MXU passes (jax's default precision on TPU: bf16_3x).
F32_MATMUL_SLOWDOWN = 3.0
MAX_GRID_STEPS = 1 << 22  # index maps are evaluated at every step up to this many

ASSUMPTIONS = (
    "per grid step overhead (fitted), not hidden by that step's DMAs; first input and last output blocks not hidden",
    "matmuls at the fitted achieved MXU efficiency; HBM at the assumed achieved bandwidth (see factors)",
    "an XLA reference compiled for the chip: each op at XLA's own estimated cycles x the fitted scale, "
    "at least its HBM bytes at the achieved bandwidth",
    "2 us per launched kernel (pallas_call or XLA fusion)",
    "vector unit: one op per element per cycle (clock from the bf16 MXU rate)",
    "float32 matmuls at 1/3 of the bf16 MXU rate",
    "MXU and vector work overlap (compute = the larger)",
    "pl.when/cond bodies and loops priced at each grid step as the known values (program ids, scalar-prefetch "
    "values) decide them; where they do not, the largest branch, and a loop bounded by the refs its body "
    "reaches (noted, an upper bound) or no estimate",
    "XLA ops outside pallas_calls: FLOPs at the same rates, bytes of each fused op (runner/program/module_xla.py)",
    "DMAs a kernel issues itself (pl.ANY operands) counted from its Mosaic body (runner/program/mosaic_counts.py), "
    "not hidden behind its compute",
)


class NoEstimate(ValueError):
    """The model cannot estimate this program, and says why (shown as "no estimate: <why>")."""


# --------------------------------------------------------------------------- counting helpers the pricer shares


def _moves(table: np.ndarray, dims: list[int | None], array_shape: Sequence[int], itemsize_bits: int,
           by_element: Sequence[bool] = ()) -> tuple[int, int]:
    """(copies, bytes): one copy per run of equal consecutive indices, bytes clipped to the array."""
    if len(table) == 0:
        return 0, 0
    change = np.ones(len(table), bool)
    change[1:] = np.any(table[1:] != table[:-1], axis=1)
    starts = table[change]
    elems = np.ones(len(starts), np.int64)
    for d, (size, full) in enumerate(zip(dims, array_shape)):
        if size is None:
            continue
        offset = starts[:, d] if (d < len(by_element) and by_element[d]) else starts[:, d] * size
        elems *= np.clip(full - offset, 0, size)
    return int(change.sum()), int(((elems * itemsize_bits + 7) // 8).sum())


def sized_grid(grid: Any, static: Any, dynamic: list[Any], shown: tuple[Any, ...], unknown: str, source: str,
               notes: set[str]) -> tuple[int, ...]:
    """``grid`` with each dim ``static`` rejects taken in turn from ``dynamic`` (the values that size it, noted
    as computed from ``source``); NoEstimate naming the grid (``shown``) and what is not known (``unknown``)."""
    sizes = iter(dynamic)
    out: list[int] = []
    for g in grid:
        if static(g):
            out.append(int(g))
            continue
        value = next(sizes, None)
        if value is None:
            raise NoEstimate(f"the grid {shown} has a dynamic size computed from values {unknown}")
        out.append(int(np.asarray(value).reshape(-1)[0]))
        notes.add(f"dynamic grid dim {len(out) - 1} = {out[-1]}, computed from {source}")
    return tuple(out)


# --------------------------------------------------------------------------- roofline


def _mxu_rate(chip: ChipSpec, dtype: str) -> float:
    if dtype in ("int8", "uint8"):
        return chip.int8_ops or chip.bf16_flops
    if dtype.startswith("float8"):
        return chip.fp8_ops or chip.bf16_flops
    if dtype in ("float32", "float64"):
        return chip.bf16_flops / F32_MATMUL_SLOWDOWN
    return chip.bf16_flops


def vector_ops_per_s(chip: ChipSpec) -> float:
    """The vector unit's element rate: clock (from the MXU rate) x lanes x sublanes."""
    clock = chip.bf16_flops / (2 * max(chip.num_mxus, 1) * chip.mxu_size * chip.mxu_size)
    return clock * chip.lanes * chip.sublanes


def _bubble_bytes(cost: CallCost) -> int:
    """The first step's input blocks and the last step's output blocks (one copy each)."""
    return sum(b.hbm_bytes // b.fetches for b in cost.blocks if b.fetches and b.memory_space != "any")


def roofline(calls: Sequence[tuple[CallCost, BodyCounts]], chip: ChipSpec, xla: Any = None,
             factors: Factors = FACTORS) -> dict[str, Any]:
    """Seconds on ``chip`` of the pallas_calls and of the program's plain XLA ops (``xla``:
    runner/program/module_xla.XlaOps), by the formula in the module docstring; with each term summed (``terms``:
    compute, HBM, per-op overhead (launches), per-step overhead)."""
    compute = memory = steps = bubble = seconds = 0.0
    vpu = vector_ops_per_s(chip)
    bandwidth = chip.hbm_bytes_per_s * factors.hbm_efficiency
    launches = len(calls)
    for cost, body in calls:
        cores = chip.device_cores if chip.device_cores > 1 and "parallel" in cost.dimension_semantics else 1
        mxu_s = sum(f / (_mxu_rate(chip, d) * max(e, 1e-9)) for f, d, e in body.dots) / (cores * factors.mxu_efficiency)
        vector_s = ((cost.flops - cost.mxu_flops) + cost.transcendentals) / (vpu * cores)
        c = max(mxu_s, vector_s)
        blocks = cost.hbm_bytes / (bandwidth * cores)
        dma = cost.dma_bytes / (bandwidth * cores)
        o = cost.steps * factors.step_overhead_s / cores
        bub = min(_bubble_bytes(cost) / bandwidth, blocks)
        compute, memory, steps, bubble = compute + c, memory + blocks + dma, steps + o, bubble + bub
        seconds += bub + dma + max(blocks - bub, c + o)
    xla_s = 0.0
    if xla is not None:
        mxu_s = sum(f / (_mxu_rate(chip, d) * max(e, 1e-9)) for f, d, e in xla.dots) / factors.mxu_efficiency
        vector_s = ((xla.flops - xla.mxu_flops) + xla.transcendentals) / vpu
        xla_c, xla_m = max(mxu_s, vector_s), xla.hbm_bytes / bandwidth
        compute, memory = compute + xla_c, memory + xla_m
        xla_s = max(xla_c, xla_m)
        launches += xla.launches
    launch = launches * LAUNCH_OVERHEAD_S
    seconds += xla_s + launch
    terms = {"compute": compute, "memory": memory, "overhead": steps + launch}
    return {"seconds": seconds, "compute_s": compute, "memory_s": memory, "overhead_s": steps + launch,
            "bound": max(terms, key=terms.get), "factors": factors.described(),
            "terms": (("compute", compute), ("hbm", memory), ("per-op overhead", launch), ("per-step overhead", steps)),
            "interval": interval(seconds, "kernel" if calls else "xla")}


def tensorcore_clock_hz(chip: ChipSpec) -> float:
    """The TensorCore clock XLA's estimated cycles count: the bf16 MXU rate over 4 MXUs of the chip's
    size x 2 FLOPs (v5e: 197e12 / (4 x 128^2 x 2) = 1.50 GHz; v6e: 920e12 / (4 x 256^2 x 2) = 1.75 GHz,
    Google's "4.7x v5e's peak with 256x256 MXUs"; jax's table lists 2 MXUs for v6e, which would make
    its cycle estimates of an 8192x8192x28672 GEMM faster than the chip's peak)."""
    return chip.bf16_flops / (2 * 4 * chip.mxu_size * chip.mxu_size)


def peak_compute_s(xla: Any, chip: ChipSpec) -> float:
    """The program's matmuls at the chip's peak MXU rate (bf16's for float32 operands): no program
    runs faster (the compute floor an estimate is held to, as engine/device_floor.py holds a device's)."""
    return sum(f / (_mxu_rate(chip, d if d != "float32" else "bfloat16")) for f, d, _ in xla.dots) if xla else 0.0


# op classes whose time above their HBM bytes no public point checks out of sample (the interval's low end
# lets them fall to their bytes): XLA's cycle estimates are fitted and checked on its matmul fusions only
UNCHECKED_CLASSES = frozenset({"vector", "copy", "gather", "scatter"})


def price_hlo(ops: Sequence[Any], chip: ChipSpec, factors: Factors = FACTORS, floor_s: float = 0.0) -> dict[str, Any]:
    """Seconds on ``chip`` of a compiled module's ops (runner/program/compiled_ops.hlo_ops), one after another:
    each op at max(XLA's cycles / clock x scale, its HBM bytes at the achieved bandwidth); a gather or
    scatter at least its rows x ``gather_cycles_per_row``; an op with neither at its bytes plus a launch.
    The ops' compute never below ``floor_s`` (the matmuls at the chip's peak: ``peak_compute_s``).
    Besides the terms: ``by_class`` (seconds per op class) and ``unchecked_s`` (what the classes no
    public point checks add above their bytes: ``interval``'s low end drops it)."""
    clock = tensorcore_clock_hz(chip)
    vpu = vector_ops_per_s(chip)
    bandwidth = chip.hbm_bytes_per_s * factors.hbm_efficiency
    compute = memory = overhead = unchecked = 0.0
    by_class: dict[str, float] = {}
    for op in ops:
        m = op.hbm_bytes / bandwidth * op.times
        klass = getattr(op, "klass", "vector")
        rows = getattr(op, "slices", 0) * factors.gather_cycles_per_row / clock * op.times \
            if klass in ("gather", "scatter") else 0.0
        cycles = op.cycles
        if cycles is not None and getattr(op, "cost_model", "") == "INVALID":
            # XLA ran no cost model for it (its number is a fallback: a broadcast at 22-49 elements a cycle,
            # slower than HBM): the op's own vector work at the vector rate, the rate a kernel's body gets
            cycles = getattr(op, "work", 0) / vpu * clock / factors.xla_cycles_scale
        if cycles is None and not rows:
            memory += m
            overhead += LAUNCH_OVERHEAD_S * op.times
            by_class[klass] = by_class.get(klass, 0.0) + m + LAUNCH_OVERHEAD_S * op.times
            continue
        c = max(cycles / clock * factors.xla_cycles_scale * op.times if cycles is not None else 0.0, rows)
        if c >= m:
            compute += c
            if klass in UNCHECKED_CLASSES:
                unchecked += c - m
        else:
            memory += m
        by_class[klass] = by_class.get(klass, 0.0) + max(c, m)
    compute = max(compute, floor_s - memory) if floor_s > compute + memory else compute
    terms = {"compute": compute, "memory": memory, "overhead": overhead}
    return {"seconds": compute + memory + overhead, "compute_s": compute, "memory_s": memory, "overhead_s": overhead,
            "bound": max(terms, key=terms.get), "factors": factors.described(),
            "terms": (("compute", compute), ("hbm", memory), ("per-op overhead", overhead), ("per-step overhead", 0.0)),
            "by_class": tuple(sorted(by_class.items(), key=lambda kv: -kv[1])), "unchecked_s": unchecked,
            "interval": interval(compute + memory + overhead, "xla", unchecked)}


def interval(seconds: float, side: str, unchecked_s: float = 0.0) -> tuple[float, float] | None:
    """(low, high) seconds an estimate may be: its figure over the model's leave-family-out error band
    for that side (``ERROR_BANDS``: "kernel" or "xla"), the low end also letting the op classes no public
    point checks (``unchecked_s``) fall to their bytes. None for a figure that is not positive."""
    if not seconds > 0:
        return None
    lo_err, hi_err = ERROR_BANDS[side]
    low = max(seconds - unchecked_s, 1e-12) / hi_err
    return (min(low, seconds / hi_err), max(seconds / lo_err, seconds / hi_err))
