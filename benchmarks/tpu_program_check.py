"""Checking the judge's interpreter of the TPU program against jax's own TPU interpret mode (tests and bench).

``check(fn, args)`` runs a Pallas program two ways and compares each kernel's outputs:

- **jax's reference**: ``fn`` traced to a jaxpr and run op by op, every ``pallas_call`` bound in
  jax's TPU interpret mode (``pltpu.InterpretParams()``: DMAs executed at their wait, memory as jax
  simulates it); each call's operands and outputs are recorded as they pass. Where that mode fails
  on a kernel (it cannot read a reshaped ref: ragged paged attention) or disagrees (it runs the
  ``parallel`` grid axes in a random order, as a megacore split might; a TPU with one core, and this
  interpreter, run them in order), the kernel is also run in jax's HLO interpreter (``interpret=True``:
  the grid in order) and ``Compared.against`` says which reference agreed;
- **ours**: ``fn`` exported for the TPU (runner/program/program_export.export_program, TPU only), each
  ``tpu_custom_call`` found in the module (its backend config, kernel name, result types and
  operand aliases) and run by ``pallasite.runner.tpu_program.run_call`` on the recorded operands.

The calls are matched in order (the module's custom calls in walk order, the pallas_calls as they
ran). A ``Compared`` says, per call, the largest difference, the outcome ("ok", "mismatch",
"unsupported: <op> (<where>)", "fault: ...") and the seconds ours took (the first run, which
decodes and compiles, and a second, warm). CPU only; nothing here is TPU time.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

# OPENBLAS_NUM_THREADS=1: numpy's BLAS threads on a busy 2-core machine made a (8, 128) x (128, 2048)
# product 50x slower (30 ms against 0.6 ms); one thread is steady (set before numpy loads)
for _name, _value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1",
                      "ALLOW_MULTIPLE_LIBTPU_LOAD": "1", "OPENBLAS_NUM_THREADS": "1"}.items():
    os.environ.setdefault(_name, _value)

import numpy as np  # noqa: E402


@dataclass
class CallSpec:
    config: str
    name: str
    results: list[tuple[tuple[int, ...], np.dtype]]
    aliases: dict[int, int]


@dataclass
class Recorded:
    operands: list[np.ndarray]
    outputs: list[np.ndarray]


@dataclass
class Compared:
    name: str
    outcome: str  # "ok", "mismatch", "unsupported: ...", "fault: ...", "error: ..."
    max_diff: float = 0.0
    first_s: float = 0.0
    warm_s: float = 0.0
    ours: list[np.ndarray] = field(default_factory=list)
    reference: list[np.ndarray] = field(default_factory=list)
    against: str = "TPU interpret mode"  # the reference compared with (see the module doc)


def exported_calls(fn: Callable[..., Any], args: list[Any], chip: str = "TPU v6 lite") -> list[CallSpec]:
    """The tpu_custom_calls of ``fn`` exported for the TPU at ``args``' shapes, in walk order."""
    import jax.numpy as jnp
    from jaxlib.mlir import ir

    from pallasite.runner.program import mosaic_ir
    from pallasite.runner.program.mlir_tree import parse_tree, string_attr, walk
    from pallasite.runner.program.program_export import export_program

    sig = [[list(np.shape(a)), str(a.dtype)] for a in args]
    exported = export_program(fn, sig, chip, platforms=("tpu",))
    out = []
    with mosaic_ir.mosaic_context():
        tree = parse_tree(ir.Module.parse(exported.mlir_module()))
        for op in walk(tree.root):
            if op.name != "stablehlo.custom_call" or "tpu_custom_call" not in str(op.attrs.get("call_target_name")):
                continue
            results = [(tuple(int(d) for d in tree.type(r).shape), np.dtype(jnp.dtype(tree.type(r).dtype)))
                       for r in op.results]
            aliases = {}
            for alias in str(op.attrs.get("output_operand_aliases", "")).split("output_operand_alias<")[1:]:
                outs = alias.split("output_tuple_indices = [")[1].split("]")[0]
                operand = int(alias.split("operand_index = ")[1].split(",")[0].split(">")[0])
                aliases[int(outs) if outs.strip() else 0] = operand
            out.append(CallSpec(string_attr(op.attrs["backend_config"]), string_attr(op.attrs["kernel_name"]),
                                results, aliases))
    return out


def recorded_calls(fn: Callable[..., Any], args: list[Any], hlo: bool = False,
                   chip: str = "TPU v6 lite") -> tuple[list[Recorded], Any]:
    """Each pallas_call's operands and outputs as ``fn`` runs in jax's TPU interpret mode (or with
    ``hlo`` its HLO interpreter), in the custom call's operand order (dynamic grid bounds, scalar
    prefetch, inputs), and fn's result. ``fn`` is traced once (for ``chip``, as the export is: some
    kernels read the chip's tiling while they trace) and its jaxpr evaluated op by op, each pallas_call
    bound in the interpret mode with its operands recorded."""
    import jax
    from jax.experimental.pallas import tpu as pltpu
    from jax.sharding import AbstractDevice, AbstractMesh, use_abstract_mesh

    mesh = AbstractMesh((1,), ("x",), abstract_device=AbstractDevice(device_kind=chip, num_cores=1, platform="tpu"))
    with use_abstract_mesh(mesh):
        closed = jax.make_jaxpr(fn)(*args)
    seen: list[Recorded] = []
    mode = True if hlo else pltpu.InterpretParams()

    def record(operands: list[Any], params: dict[str, Any]) -> list[Any]:
        from jax._src.pallas.pallas_call import pallas_call_p

        outs = pallas_call_p.bind(*operands, **dict(params, interpret=mode))
        seen.append(Recorded([np.asarray(o) for o in operands], [np.asarray(o) for o in outs]))
        return list(outs)

    try:
        result = _evaluate(closed.jaxpr, closed.consts, list(args), record)
        jax.block_until_ready(result)
    finally:
        pltpu.reset_tpu_interpret_mode_state()
    return seen, result


def _evaluate(jaxpr: Any, consts: list[Any], args: list[Any], record: Callable[..., list[Any]]) -> list[Any]:
    """``jaxpr`` run op by op; pallas_calls (also inside jit, custom_jvp and custom_vjp calls) go to ``record``."""
    from jax._src import core
    from jax._src.pallas.pallas_call import pallas_call_p

    env: dict[Any, Any] = {}

    def read(v: Any) -> Any:
        return v.val if isinstance(v, core.Literal) else env[v]

    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    for eqn in jaxpr.eqns:
        vals = [read(v) for v in eqn.invars]
        inner = _inner_jaxpr(eqn)
        if eqn.primitive is pallas_call_p:
            outs = record(vals, eqn.params)
        elif inner is not None:
            outs = _evaluate(inner.jaxpr, list(inner.consts), vals, record)
        else:
            with eqn.ctx.manager:
                outs = eqn.primitive.bind(*vals, **eqn.primitive.get_bind_params(eqn.params))
            outs = outs if eqn.primitive.multiple_results else [outs]
        for v, x in zip(eqn.outvars, outs):
            env[v] = x
    return [read(v) for v in jaxpr.outvars]


def _inner_jaxpr(eqn: Any) -> Any:
    """The closed jaxpr a call-like eqn runs (jit, custom_jvp/vjp calls, closed_call), when it holds a
    pallas_call; None otherwise (the eqn is bound as it is)."""
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        inner = eqn.params.get(key)
        if inner is not None and hasattr(inner, "consts") and _holds_pallas(inner.jaxpr):
            return inner
    return None


def _holds_pallas(jaxpr: Any) -> bool:
    from jax._src.pallas.pallas_call import pallas_call_p

    for eqn in jaxpr.eqns:
        if eqn.primitive is pallas_call_p:
            return True
        for value in eqn.params.values():
            inner = getattr(value, "jaxpr", None)
            if inner is not None and hasattr(inner, "eqns") and _holds_pallas(inner):
                return True
    return False


def run_ours(spec: CallSpec, operands: list[np.ndarray]) -> tuple[list[np.ndarray], float, float]:
    from pallasite.runner.tpu_program import run_call

    started = time.perf_counter()
    outs = run_call(spec.config, spec.name, operands, spec.results, spec.aliases)
    first = time.perf_counter() - started
    started = time.perf_counter()
    run_call(spec.config, spec.name, operands, spec.results, spec.aliases)
    return outs, first, time.perf_counter() - started


def difference(ours: np.ndarray, ref: np.ndarray) -> float:
    """The largest |ours - ref| relative to max(1, |ref|) (inf where one is NaN and the other not;
    exact 0/1 for integers and bools)."""
    a, b = np.asarray(ours), np.asarray(ref)
    if a.shape != b.shape:
        return float("inf")
    if a.dtype.kind in "iub" and b.dtype.kind in "iub":
        return float(np.any(a.astype(np.int64) != b.astype(np.int64)))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    nan = np.isnan(a64) != np.isnan(b64)
    if np.any(nan):
        return float("inf")
    both = ~np.isnan(a64)
    if not np.any(both):
        return 0.0
    with np.errstate(invalid="ignore"):
        rel = np.abs(a64[both] - b64[both]) / np.maximum(1.0, np.abs(b64[both]))
    same_inf = (a64[both] == b64[both])
    return float(np.max(np.where(same_inf, 0.0, rel)))


def tolerance(outputs: list[np.ndarray]) -> float:
    """What counts as agreeing for these outputs: exact for integers, 2e-2 relative for bf16/f16 and
    narrower, 2e-3 for float32 (summation order and transcendental ulps differ from XLA's CPU)."""
    kinds = [np.asarray(o).dtype for o in outputs]
    if all(k.kind in "iub" for k in kinds):
        return 0.0
    if any(k.itemsize < 4 for k in kinds if k.kind not in "iub"):
        return 2e-2
    return 2e-3


def check(fn: Callable[..., Any], args: list[Any], chip: str = "TPU v6 lite") -> list[Compared]:
    """Each kernel of ``fn`` at ``args`` run by the interpreter and by jax's TPU interpret mode."""
    from pallasite.runner.tpu_program import KernelFault, Unsupported

    specs = exported_calls(fn, args, chip)
    against, failed = "TPU interpret mode", None
    try:
        recorded, _ = recorded_calls(fn, args, chip=chip)
    except Exception as exc:  # noqa: BLE001 - jax's TPU interpret mode cannot run it: its HLO interpreter
        failed = f"TPU interpret mode failed: {type(exc).__name__}"
        recorded, _ = recorded_calls(fn, args, hlo=True, chip=chip)
        against = f"the HLO interpreter ({failed})"
    if len(specs) != len(recorded):
        return [Compared("?", f"error: {len(specs)} tpu_custom_calls exported, {len(recorded)} pallas_calls ran")]
    out = []
    in_order: list[Recorded] | None = None
    for n, (spec, rec) in enumerate(zip(specs, recorded)):
        try:
            ours, first, warm = run_ours(spec, rec.operands)
        except Unsupported as exc:
            out.append(Compared(spec.name, f"unsupported: {exc.op_name} ({exc.where})"))
            continue
        except KernelFault as exc:
            out.append(Compared(spec.name, f"fault: {exc.message}"))
            continue
        diff = max((difference(a, b) for a, b in zip(ours, rec.outputs)), default=0.0)
        row = Compared(spec.name, "ok" if diff <= tolerance(rec.outputs) else "mismatch", diff, first, warm, ours,
                       rec.outputs, against)
        if row.outcome == "mismatch" and failed is None:  # the parallel axes in order: the HLO interpreter
            in_order = in_order if in_order is not None else recorded_calls(fn, args, hlo=True, chip=chip)[0]
            other = in_order[n].outputs
            again = max((difference(a, b) for a, b in zip(ours, other)), default=0.0)
            if again <= tolerance(other):
                row = Compared(spec.name, "ok", again, first, warm, ours, other,
                               f"the HLO interpreter (TPU interpret mode differs by {diff:.2g})")
        out.append(row)
    return out
