"""The static TPU cost model (worker side: traces with JAX, never runs a kernel, needs no device).

For one call of a task's entry it traces the program (``jax.make_jaxpr``) and, for every
``pallas_call`` in it, counts from the traced program itself:

- **HBM bytes actually moved**: scalar-prefetch operands once (copied to SMEM before the grid
  runs); each pipelined (VMEM or SMEM) operand's index map is evaluated at
  every grid step, in the order the TPU runs the grid (row-major, last axis fastest); a block whose
  index is unchanged from the previous step is not copied again (inputs are fetched when their
  index changes, outputs written back when theirs changes and at the end). Edge blocks that stick
  out of the array count only the bytes inside it. Operands left in HBM (``memory_space=pl.ANY``)
  are copied by the kernel itself: runner/kernel_counts.py counts those DMAs from the body
  (sizes x trip counts; a ``pl.when`` branch bounded by its largest branch, said so).
- **FLOPs and transcendentals** of the kernel body's jaxpr x grid steps: ``dot_general`` counts
  2 x output elements x contracted elements (the MXU share); element-wise arithmetic one per output
  element; reductions one per input element; exp/log/tanh/... one transcendental per element.
  Comparisons, selects, casts and memory ops count nothing. Loops with a static trip count
  (``scan``) multiply their body. Where values decide the work — a ``cond`` (``pl.when``) on a
  scalar-prefetched mask entry (splash attention's ``block_mask``), a ``while`` up to a prefetched
  length — the body is walked at each grid step with that step's program ids and scalar-prefetch
  values (runner/kernel_counts.py) and priced for what runs there; where the values are unknown a
  ``cond`` counts its largest branch and a ``while`` body once (``CallCost.flops_count`` says which
  bound; the notes say why).
- **VMEM footprint**: each pipelined VMEM block x its buffer count (2 unless ``pl.Buffered(n)``)
  plus VMEM scratch.
- **MXU shape efficiency**: per matmul, how the contracted and output-column dims fill the chip's
  MXU (``d / (ceil(d / mxu) * mxu)``) and the rows fill sublanes of 8; FLOP-weighted over matmuls.

The roofline, model "pallasite roofline v4" (``roofline``; every constant below says where it
comes from): for one pallas_call on one TensorCore (both for "parallel" grids of a megacore chip)

    call = bubble + max(memory - bubble, compute + steps x step_overhead)

where compute = max(MXU time at the dtype's rate / (MXU fill efficiency x mxu_efficiency), vector
time), memory = HBM bytes / (bandwidth x hbm_efficiency), and bubble = the first step's input blocks
plus the last step's output blocks over the bandwidth (the pipeline cannot hide them). The per-step
cost does not hide behind the DMAs of that step (it is the core's own work: DMA issue, semaphore
waits, loop bookkeeping) but DMAs hide behind it. The program adds its plain XLA ops
(runner/xla_ops.py: FLOPs at the same rates, the bytes each fused op must move) and
LAUNCH_OVERHEAD_S per launched kernel.

**The XLA reference is priced the way XLA runs it** (``estimate_reference`` with a deviceless libtpu
device): the module libtpu compiles for the chip is read after its TPU passes (runner/compiled_ops.py:
its fusions, copies and custom calls in order, into while bodies x their trip counts, each with its op
class, the HBM bytes it moves — a gather or slice counts the rows it reads, not its whole operand —
and the rows it gathers); ``price_hlo`` prices each class by its own rule: XLA's own cycle estimate
(``estimated_cycles``) at the TensorCore clock x ``xla_cycles_scale`` where XLA ran its cost model,
the op's own vector work at the vector rate where it did not (``COST_MODEL_TYPE_INVALID``: a fallback
number), a gather at least its rows x ``gather_cycles_per_row``, each never less than its HBM bytes at
the achieved bandwidth; an op with none of these (a Mosaic custom call) by its bytes plus a launch.
Without libtpu the reference falls back to the jaxpr path above (its matmuls at the fitted MXU
efficiency).

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

A program running a kernel made without a pallas_call grid (``pl.kernel`` / ``core_map`` over a
TensorCore or SparseCore mesh) is not estimated, and the estimate says why (``unpriced_kernels``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..analysis.types import BlockCost, CallCost, ChipSpec, CostEstimate

from .body_counts import BodyCounts, _size, count_body, sub_jaxprs
from .kernel_counts import count_over_grid

MODEL = "pallasite roofline v4"
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
FACTORS = Factors(mxu_efficiency=0.988, xla_cycles_scale=0.848, step_overhead_s=0.336e-6, hbm_efficiency=1.0,
                  gather_cycles_per_row=8.83)
STEP_OVERHEAD_S = FACTORS.step_overhead_s
# Per launched kernel (pallas_call, or an XLA op XLA gives no cycles for): an assumed order of magnitude, not
# measured here; it moves none of the published points by more than 2%.
LAUNCH_OVERHEAD_S = 2e-6
# The model's error on published TPU times it was NOT fitted on (leave-family-out, benchmarks/
# bench_public_timings.py): estimate / published ranged over [low, high] for each side. An estimate's
# interval is its figure divided by these (``interval``); the benchmark exits 1 when they no longer cover it.
ERROR_BANDS = {"kernel": (0.732, 1.464), "xla": (0.893, 1.124)}
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
    "pl.when/cond bodies and while loops priced at each grid step as the known values (program ids, "
    "scalar-prefetch values) decide them; where they do not, the largest branch / one trip (noted, a bound)",
    "XLA ops outside pallas_calls: FLOPs at the same rates, bytes of each fused op (runner/xla_ops.py)",
    "DMAs a kernel issues itself (pl.ANY operands) counted from its traced body (runner/kernel_counts.py)",
)

class NoEstimate(ValueError):
    """The model cannot estimate this program, and says why (shown as "no estimate: <why>")."""


# --------------------------------------------------------------------------- finding the calls


EVALUATE_ELEMENTS = 1 << 22  # plain ops on known values are evaluated up to this many elements per operand


def pallas_calls(jaxpr: Any, values: dict[Any, Any]) -> Iterator[tuple[Any, list[Any]]]:
    """Every pallas_call equation in ``jaxpr`` (nested jits included), with the concrete value of
    each operand where it is known, else None. Values are known for entry arguments given as
    arrays and literals, and for the results of plain ops computed from known values (evaluated
    here, up to EVALUATE_ELEMENTS elements: group metadata, page tables, dynamic grid sizes) — ops
    that carry a jaxpr of their own (a scatter-add's update, a sort's comparator, a while or cond)
    included, unless a pallas_call is inside (a kernel is never run here)."""
    for eqn in jaxpr.eqns:
        known = [_value(v, values) for v in eqn.invars]
        if eqn.primitive.name == "pallas_call":
            yield eqn, known
            continue
        subs = list(sub_jaxprs(eqn.params))
        if subs:
            kernels = False
            consts = _closed_consts(eqn.params)
            for sub in subs:
                inner = {var: val for var, val in zip(sub.invars, known) if val is not None} if len(sub.invars) == len(known) else {}
                inner.update({var: np.asarray(c) for var, c in zip(sub.constvars, consts.get(id(sub), ()))
                              if hasattr(c, "shape")})
                for found in pallas_calls(sub, inner):
                    kernels = True
                    yield found
                if len(subs) == 1 and len(sub.outvars) == len(eqn.outvars) and eqn.primitive.name in ("pjit", "jit", "closed_call"):
                    for ov, iv in zip(eqn.outvars, sub.outvars):
                        got = _value(iv, inner)
                        if got is not None:
                            values[ov] = got
            if kernels or all(_value(v, values) is not None for v in eqn.outvars):
                continue
        _evaluate(eqn, known, values)


def _evaluate(eqn: Any, known: list[Any], values: dict[Any, Any]) -> None:
    """``eqn``'s results into ``values`` when every operand is known and nothing is too large to evaluate."""
    if not (all(k is not None for k in known) and all(np.size(k) <= EVALUATE_ELEMENTS for k in known) and all(
            math.prod(getattr(v.aval, "shape", ()) or (1,)) <= EVALUATE_ELEMENTS for v in eqn.outvars)):
        return
    try:
        outs = eqn.primitive.bind(*known, **eqn.params)
    except Exception:  # noqa: BLE001 - an op that cannot run here: its results stay unknown
        return
    outs = outs if eqn.primitive.multiple_results else [outs]
    for var, out in zip(eqn.outvars, outs):
        values[var] = np.asarray(out)


UNPRICED_KERNELS = ("mpmd_map", "core_map")  # pl.kernel / core_map over a mesh: no grid of BlockSpecs to walk


def unpriced_kernels(jaxpr: Any) -> list[str]:
    """Kernels in ``jaxpr`` (nested jits included) made without a pallas_call grid — ``pl.kernel`` or
    ``core_map`` over a TensorCore or SparseCore mesh (jax's ``mpmd_map`` / ``core_map``) — each in words
    (the primitive and its mesh), which the model cannot price: their work is a hand-written body of DMAs
    and loops on cores the model has no rates for (SparseCore subcores) or no grid to walk."""
    found: list[str] = []
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in UNPRICED_KERNELS:
            meshes = eqn.params.get("meshes") or (eqn.params.get("mesh"),)
            kinds = ", ".join(type(m).__name__ for m in meshes if m is not None) or "a mesh"
            found.append(f"{'pl.kernel' if name == 'mpmd_map' else 'core_map'} over {kinds}")
            continue
        for sub in sub_jaxprs(eqn.params):
            found.extend(unpriced_kernels(sub))
    return found


def _closed_consts(params: dict[str, Any]) -> dict[int, Sequence[Any]]:
    """id(inner jaxpr) -> the consts of the ClosedJaxpr holding it."""
    out: dict[int, Sequence[Any]] = {}
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if hasattr(item, "consts") and hasattr(getattr(item, "jaxpr", None), "eqns"):
                out[id(item.jaxpr)] = item.consts
    return out


def _value(var: Any, values: dict[Any, Any]) -> Any:
    if hasattr(var, "val"):  # a Literal
        return np.asarray(var.val)
    try:
        return values.get(var)
    except TypeError:
        return None


# --------------------------------------------------------------------------- one pallas_call


def _block_dims(block_shape: Sequence[Any], array_shape: Sequence[int]) -> tuple[list[int | None], list[bool]]:
    """Per dim: the block size (None: squeezed, one element) and whether the index map returns an
    element offset (``pl.Element``, bounded slices) rather than a block index."""
    dims: list[int | None] = []
    by_element: list[bool] = []
    for b, full in zip(block_shape, array_shape):
        size = getattr(b, "block_size", None)
        if size is None and isinstance(b, int):
            size = b
        kind = type(b).__name__
        dims.append(None if size is None or kind == "Squeezed" else int(size))
        by_element.append(kind in ("Element", "BoundedSlice"))
    return dims, by_element


def _index_table(index_jaxpr: Any, grid: Sequence[int], prefetch: Sequence[Any]) -> np.ndarray:
    """The index map's result at every grid step, shape (steps, ndim), in execution order."""
    import jax
    from jax._src.state import discharge

    steps = int(np.prod(grid, dtype=np.int64)) if grid else 1
    points = np.indices(tuple(grid) or (1,), dtype=np.int32).reshape(len(grid) or 1, -1).T[:, : len(grid)]
    closed = discharge.discharge_state(index_jaxpr) if prefetch else index_jaxpr
    n_out = len(index_jaxpr.jaxpr.outvars)

    def at(*idx: Any) -> Any:
        outs = jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *idx, *prefetch)
        return [jax.numpy.asarray(o, dtype=np.int32) for o in outs[:n_out]]

    if steps == 0:
        return np.zeros((0, n_out), np.int64)
    if not grid:
        return np.asarray([[int(v) for v in at()]], np.int64)
    cols = jax.vmap(at)(*(points[:, d] for d in range(len(grid))))
    return np.stack([np.broadcast_to(np.asarray(c), (steps,)) for c in cols], axis=1).astype(np.int64)


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


def _bits(dtype: Any) -> int:
    return int(np.dtype(dtype).itemsize * 8) if not str(dtype).startswith(("int4", "uint4", "float4")) else 4


def _compiler_params(params: Any) -> Any:
    if isinstance(params, dict):
        return params.get("mosaic_tpu") or params.get("mosaic") or next(iter(params.values()), None)
    return params


def call_cost(eqn: Any, operands: list[Any], mxu: int = 128) -> tuple[CallCost, BodyCounts]:
    """Count one pallas_call equation (see the module docstring for what is counted): its cost and
    its work summed over the whole grid."""
    gm = eqn.params["grid_mapping"]
    n_dynamic = int(getattr(gm, "num_dynamic_grid_bounds", 0) or 0)
    dynamic, operands = list(operands[:n_dynamic]), list(operands[n_dynamic:])
    notes: set[str] = set()
    grid = _grid(gm, dynamic, notes)
    steps = int(np.prod(grid, dtype=np.int64)) if grid else 1
    prefetch, known_prefetch = _prefetch(gm, operands, len(grid), notes)
    if steps > MAX_GRID_STEPS:
        raise ValueError(f"grid {grid} has {steps} steps; the cost model evaluates index maps at up to {MAX_GRID_STEPS}")
    blocks, vmem = _block_costs(gm, grid, prefetch, notes)
    scratch = _scratch_bytes(gm)
    prefetch_bytes = sum(int(p.size) * p.dtype.itemsize for p in prefetch)  # copied to SMEM once
    body, dmas = _body_work(eqn, gm, grid, steps, known_prefetch, mxu, notes)
    cp = _compiler_params(eqn.params.get("compiler_params"))
    semantics = tuple(str(s).split(".")[-1].lower() for s in (getattr(cp, "dimension_semantics", None) or ()))
    limit = getattr(cp, "vmem_limit_bytes", None)
    mxu_eff = (sum(f * e for f, _, e in body.dots) / body.mxu_flops) if body.mxu_flops else 1.0
    cost = CallCost(
        kernel=_kernel_name(eqn), grid=grid, steps=steps, blocks=tuple(blocks), scratch_bytes=scratch,
        vmem_bytes=vmem + scratch, vmem_limit_bytes=int(limit) if limit else None,
        hbm_bytes=sum(b.hbm_bytes for b in blocks) + prefetch_bytes, flops=body.flops, mxu_flops=body.mxu_flops,
        transcendentals=body.transcendentals, mxu_efficiency=round(mxu_eff, 6),
        dimension_semantics=semantics, notes=tuple(sorted(notes | body.notes)),
        dma_bytes=dmas.bytes if dmas else 0, dma_copies=dmas.copies if dmas else 0,
        dma_count=dmas.kind if dmas else "exact", flops_count=dmas.compute_kind if dmas else "exact")
    return cost, body


def _grid(gm: Any, dynamic: list[Any], notes: set[str]) -> tuple[int, ...]:
    """The call's grid, a dynamic dim read from the values that size it (noted); NoEstimate without them."""
    return sized_grid(gm.grid, lambda g: isinstance(g, (int, np.integer)), dynamic, tuple(str(x) for x in gm.grid),
                      "the example inputs do not give (abstract inputs, or computed by ops too large to evaluate "
                      "here): pass concrete inputs (an inputs() function with the index arrays) to estimate it",
                      "the task's inputs", notes)


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


def _prefetch(gm: Any, operands: list[Any], n_grid: int, notes: set[str]) -> tuple[list[Any], list[Any]]:
    """The scalar-prefetch values the index maps read (zeros where unknown, noted), and the known ones
    (None where unknown: the body's walk keeps them unknown)."""
    prefetch, known_prefetch = [], []
    for value, aval in zip(operands[:int(gm.num_index_operands)], gm.index_map_avals[n_grid:]):
        known_prefetch.append(None if value is None else np.asarray(value))
        if value is None:
            notes.add("scalar-prefetch values unknown (abstract example inputs): zeros assumed")
            value = np.zeros(aval.shape, aval.dtype)
        prefetch.append(np.asarray(value))
    return prefetch, known_prefetch


def _block_costs(gm: Any, grid: tuple[int, ...], prefetch: list[Any], notes: set[str]) -> tuple[list[BlockCost], int]:
    """Each input's and output's blocks (copies and HBM bytes over the grid), and their VMEM buffers' bytes."""
    blocks: list[BlockCost] = []
    vmem = 0
    n_in = int(gm.num_inputs)
    for i, bm in enumerate(gm.block_mappings):
        role = "in" if i < n_in else "out"
        array = bm.array_aval
        space = str(getattr(bm.block_aval, "memory_space", "default"))
        space = "vmem" if space in ("default", "vmem", "None") else space
        dims, by_element = _block_dims(bm.block_shape, array.shape)
        bits = _bits(array.dtype)
        buffers = int(getattr(bm.pipeline_mode, "buffer_count", 2) or 2)
        block_elems = int(np.prod([d or 1 for d in dims], dtype=np.int64))
        if space == "any":
            fetches, moved, buffers = 0, 0, 0
            notes.add(f"{bm.origin} stays in HBM (pl.ANY): the kernel copies it itself (its DMAs are counted)")
        else:
            table = _index_table(bm.index_map_jaxpr, grid, prefetch)
            fetches, moved = _moves(table, dims, array.shape, bits, by_element)
            if space == "vmem":
                vmem += buffers * block_elems * bits // 8
        blocks.append(BlockCost(role=role, position=i if role == "in" else i - n_in, origin=str(bm.origin),
                                array_shape=tuple(int(s) for s in array.shape), block_shape=tuple(dims),
                                dtype=str(array.dtype), memory_space=space, buffers=buffers, fetches=fetches,
                                hbm_bytes=moved))
    return blocks, vmem


def _scratch_bytes(gm: Any) -> int:
    """The VMEM scratch buffers' bytes."""
    scratch = 0
    for aval in gm.scratch_avals:
        if str(getattr(aval, "memory_space", "")) in ("vmem", "default", "None"):
            try:
                scratch += _size(aval) * _bits(aval.dtype) // 8
            except TypeError:
                pass
    return scratch


def _body_work(eqn: Any, gm: Any, grid: tuple[int, ...], steps: int, known_prefetch: list[Any], mxu: int,
               notes: set[str]) -> tuple[BodyCounts, Any]:
    """The body's work over the grid and the kernel's own DMAs (None when no step depends on values:
    each step's work counted once, times the steps); what was priced how is noted."""
    walked, sampled = count_over_grid(eqn.params["jaxpr"], grid, known_prefetch, mxu,  # unknown values stay unknown
                                      tuple(getattr(gm, "vmapped_dims", ()) or ()))
    if walked is None:  # nothing in the body depends on values: every step does the same work
        body, dmas = BodyCounts(), None
        body.add(count_body(eqn.params["jaxpr"], mxu), steps)
    else:
        body, dmas = walked.compute, walked
        notes |= walked.notes | ({sampled} if sampled else set())
        notes.add("work priced at each grid step from the known values (program ids, scalar-prefetch values): "
                  "pl.when bodies where they run, while loops for the trips they turn"
                  + ("" if walked.compute_kind == "exact" else f" ({walked.compute_kind}: see the other notes)"))
    if dmas is not None and dmas.copies:
        notes.add(f"the kernel's own DMAs: {dmas.copies} copies, {dmas.bytes} bytes over the grid"
                  + ("" if dmas.exact else f" ({dmas.kind}: see the other notes)"))
    return body, dmas


def _kernel_name(eqn: Any) -> str:
    """The kernel function's name: ``name=`` when given, else from the body's debug info
    ("fused_kernel at /path/file.py:13")."""
    if eqn.params.get("name"):
        return str(eqn.params["name"])
    src = getattr(getattr(eqn.params["jaxpr"], "debug_info", None), "func_src_info", None) or ""
    return src.split(" at ")[0] or "kernel"


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
    runner/xla_ops.XlaOps), by the formula in the module docstring; with each term summed (``terms``:
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
        m = (cost.hbm_bytes + cost.dma_bytes) / (bandwidth * cores)
        o = cost.steps * factors.step_overhead_s / cores
        bub = min(_bubble_bytes(cost) / bandwidth, m)
        compute, memory, steps, bubble = compute + c, memory + m, steps + o, bubble + bub
        seconds += bub + max(m - bub, c + o)
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
    """Seconds on ``chip`` of a compiled module's ops (runner/compiled_ops.hlo_ops), one after another:
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


# --------------------------------------------------------------------------- an entry call


def program_hash(closed: Any, eqns: Sequence[Any]) -> str:
    """A hash of the traced program: the outer jaxpr plus each call's kernel body, grid, block
    shapes, index maps and compiler params (configurations with the same hash run the same code)."""
    h = hashlib.sha256(str(closed).encode())
    for eqn in eqns:
        gm = eqn.params["grid_mapping"]
        h.update(str(eqn.params["jaxpr"]).encode())
        h.update(repr(tuple(gm.grid)).encode())
        for bm in gm.block_mappings:
            h.update(repr((bm.block_shape, str(bm.block_aval), str(bm.index_map_jaxpr), repr(bm.pipeline_mode))).encode())
        h.update(repr(eqn.params.get("compiler_params")).encode())
    return h.hexdigest()[:16]


def estimate(fn: Callable[..., Any], args: Sequence[Any], chip: ChipSpec,
             config: tuple[tuple[str, Any], ...] = (), xla_bytes: float | None = None,
             factors: Factors = FACTORS, parts: list[Any] | None = None) -> CostEstimate:
    """Trace ``fn(*args)`` and estimate it on ``chip``: its pallas_calls and its plain XLA ops (a
    reference without any pallas_call is all XLA ops). ``args`` may mix arrays (their values feed
    scalar-prefetch index maps) and ShapeDtypeStructs. ``xla_bytes``: the bytes XLA's own compile
    for the chip says the XLA ops move, replacing the fusion count (estimate_reference). ``parts``:
    a list that receives (the counted calls, the XLA ops), for ``roofline`` under other factors
    (the benchmark's fit)."""
    import jax

    from .xla_ops import count_xla_ops

    abstract = [jax.ShapeDtypeStruct(a.shape, a.dtype) if hasattr(a, "shape") else a for a in args]
    try:
        # a fresh function each time: jax caches traces by function, and a configuration applied
        # through module globals (constants, TUNED_PARAMS) would otherwise hit the first trace
        closed = jax.make_jaxpr(lambda *a: fn(*a))(*abstract)
    except Exception as exc:  # noqa: BLE001 - the user's code failed to trace with this config
        return CostEstimate(chip=chip.name, config=config, status="trace_error",
                            error=f"{type(exc).__name__}: {exc}"[:2000], assumptions=ASSUMPTIONS, model=MODEL)
    values = {var: np.asarray(a) for var, a in zip(closed.jaxpr.invars, args)
              if hasattr(a, "shape") and not isinstance(a, jax.ShapeDtypeStruct)}
    values.update({var: np.asarray(c) for var, c in zip(closed.jaxpr.constvars, closed.consts) if hasattr(c, "shape")})
    unpriced = unpriced_kernels(closed.jaxpr)
    if unpriced:
        why = (f"the program runs {', '.join(sorted(set(unpriced)))}: the cost model prices "
               "pallas_call grids on a TensorCore only (a pl.kernel/core_map body is hand-written DMAs and loops, "
               "and SparseCore subcores have no rates in its chip table); time it on a device")
        return CostEstimate(chip=chip.name, config=config, status="trace_error", error=why, assumptions=ASSUMPTIONS,
                            model=MODEL)
    try:
        found = list(pallas_calls(closed.jaxpr, values))
        counted = [call_cost(eqn, operands, chip.mxu_size) for eqn, operands in found]
        xla = count_xla_ops(closed.jaxpr, chip.mxu_size)
    except NoEstimate as exc:  # the model knows why it cannot say (a dynamic grid without its sizes...)
        return CostEstimate(chip=chip.name, config=config, status="trace_error", error=f"no estimate: {exc}"[:2000],
                            assumptions=ASSUMPTIONS, model=MODEL)
    except Exception as exc:  # noqa: BLE001 - an index map the model cannot evaluate
        return CostEstimate(chip=chip.name, config=config, status="trace_error",
                            error=f"cost model: {type(exc).__name__}: {exc}"[:2000], assumptions=ASSUMPTIONS, model=MODEL)
    if xla_bytes is not None:
        xla.hbm_bytes = int(xla_bytes)
    if parts is not None:
        parts.append((counted, xla))
    roof = roofline(counted, chip, xla, factors)
    return CostEstimate(chip=chip.name, config=config, status="ok", calls=tuple(c for c, _ in counted),
                        program_hash=program_hash(closed, [e for e, _ in found]), assumptions=ASSUMPTIONS,
                        model=MODEL, xla_bytes=xla.hbm_bytes, xla_flops=xla.flops, **roof)


def estimate_reference(reference: Callable[..., Any], args: Sequence[Any], chip: ChipSpec,
                       device: Any = None, factors: Factors = FACTORS) -> dict[str, Any]:
    """The plain-JAX reference, priced the way XLA runs it when ``device`` (a deviceless libtpu
    topology device) is given: the module libtpu compiles for the chip, op by op (``price_hlo``: XLA's
    own cycle estimate per fusion x the fitted scale, each op at least its HBM bytes); else by the
    jaxpr path the kernel takes (``estimate``: its FLOPs at the fitted MXU efficiency, the fused-op
    bytes of runner/xla_ops.py). A reference that itself calls pallas_call takes the jaxpr path (its
    kernels are Mosaic custom calls XLA gives no cycles for). XLA's cost analysis rides along
    (``xla``), for display only. A reference that takes other arguments than the kernel (JAXBench's
    paged attention, megablox) is estimated through its own task: ``workload(*create_inputs())`` of
    its module (``own_inputs``)."""
    from .xla_ops import hlo_ops

    reference, args, own = own_inputs(reference, args)
    xla, text = xla_reference_cost(reference, args, device, chip.name, want_text=True)
    on_chip = bool(xla and not xla.get("error") and "compiled for" in xla.get("source", "") and xla.get("bytes_accessed"))
    parts: list[Any] = []
    est = estimate(reference, args, chip, xla_bytes=xla["bytes_accessed"] if on_chip else None, factors=factors,
                   parts=parts)
    out: dict[str, Any] = {"model": MODEL, "chip": chip.name}
    if est.status != "ok":
        out["error"] = f"the reference could not be estimated: {est.error}"
    else:
        ops, notes = hlo_ops(text) if (text and not est.calls) else ([], set())
        if ops:
            priced = price_hlo(ops, chip, factors, floor_s=peak_compute_s(parts[0][1], chip))
            out.update(priced, flops=est.xla_flops, bytes_accessed=sum(o.hbm_bytes * o.times for o in ops),
                       ops=len(ops),
                       priced_by=(f"XLA's compiled module for {chip.name} (deviceless libtpu): {len(ops)} ops, each "
                                  "at XLA's estimated cycles x the fitted scale, at least its HBM bytes at the "
                                  "achieved bandwidth"),
                       bytes_source=f"the compiled module's ops for {chip.name} (their operands and results in HBM)")
            if notes:
                out["notes"] = sorted(notes)
        else:
            out.update(seconds=est.seconds, compute_s=est.compute_s, memory_s=est.memory_s, overhead_s=est.overhead_s,
                       bound=est.bound, flops=est.xla_flops, bytes_accessed=est.xla_bytes, factors=est.factors,
                       terms=est.terms, interval=est.interval,
                       priced_by="the traced program's ops (runner/xla_ops.py), the kernel's formula",
                       bytes_source=(f"XLA cost_analysis compiled for {chip.name} (deviceless libtpu)" if on_chip
                                     else "fused-op count of the traced program (runner/xla_ops.py)"))
        if est.calls:
            out["note"] = "the reference itself calls pallas_call: its kernels are estimated like the candidate's"
    if xla:
        out["xla"] = xla
        if xla.get("optimal_seconds"):
            out["optimal_seconds"] = xla["optimal_seconds"]  # XLA's own figure, shown beside, never divided
    out["source"] = f"estimate ({MODEL}, {chip.name}) of the reference"
    if own:
        out["source"] += " on its own inputs (workload(*create_inputs()) of its file: it takes other arguments)"
    return out


def own_inputs(reference: Callable[..., Any], args: Sequence[Any]) -> tuple[Callable[..., Any], tuple[Any, ...], bool]:
    """(reference, args, False) when the reference takes the kernel's arguments; else its module's
    ``workload`` over the module's own ``create_inputs()`` (runner/timing_inputs.own_task, as the
    correctness checks run it) made abstractly (nothing allocated), its Python values (a static group
    size) kept static: (call, array args, True)."""
    import jax

    from .timing_inputs import own_task

    try:
        jax.eval_shape(reference, *args)
        return reference, tuple(args), False
    except Exception:  # noqa: BLE001 - another signature or layout: its own task's inputs, if it has one
        pass
    own = own_task(reference)
    if own is None:
        return reference, tuple(args), False
    workload, make = own
    statics: dict[int, Any] = {}

    def arrays_only() -> tuple[Any, ...]:
        made = make()
        statics.clear()
        statics.update({i: m for i, m in enumerate(made) if not hasattr(m, "shape")})
        return tuple(m for i, m in enumerate(made) if i not in statics)

    shapes = jax.eval_shape(arrays_only)
    count = len(shapes) + len(statics)

    def call(*arrays: Any) -> Any:
        it = iter(arrays)
        return workload(*(statics[i] if i in statics else next(it) for i in range(count)))

    return call, tuple(shapes), True


def xla_reference_cost(reference: Callable[..., Any], args: Sequence[Any], device: Any = None,
                       chip: str | None = None, want_text: bool = False) -> Any:
    """XLA's own cost analysis of the plain-JAX reference: compiled deviceless for the chip's TPU
    topology when ``device`` (a libtpu topology device) is given — flops, bytes and XLA's
    ``optimal_seconds`` for that chip — else from the CPU lowering (flops and bytes only). With
    ``want_text``: (that, the compiled module's text or None)."""
    import jax

    abstract = [jax.ShapeDtypeStruct(a.shape, a.dtype) if hasattr(a, "shape") else a for a in args]
    source = "XLA cost_analysis of the reference (CPU lowering)"
    text = None
    try:
        if device is not None:
            placed = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=jax.sharding.SingleDeviceSharding(device))
                      for a in abstract]
            with jax.default_device(device):
                compiled = jax.jit(reference).trace(*placed).lower().compile()
            analysis = compiled.cost_analysis()
            try:
                text = compiled.as_text()
            except Exception:  # noqa: BLE001 - no text: the reference takes the jaxpr path
                text = None
            source = f"XLA cost_analysis of the reference compiled for {chip} (deviceless libtpu)"
        else:
            analysis = jax.jit(reference).lower(*abstract).cost_analysis()
    except Exception as exc:  # noqa: BLE001
        if device is not None:  # the TPU compile failed: fall back to the CPU lowering's counts
            return xla_reference_cost(reference, args, want_text=want_text)
        got = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        return (got, None) if want_text else got
    if isinstance(analysis, (list, tuple)):
        analysis = analysis[0] if analysis else {}
    if not analysis:
        return (None, text) if want_text else None
    keep = {"flops": "flops", "transcendentals": "transcendentals", "bytes accessed": "bytes_accessed",
            "optimal_seconds": "optimal_seconds"}
    out = {new: float(analysis[old]) for old, new in keep.items() if old in analysis}
    out["source"] = source
    return (out, text) if want_text else out
