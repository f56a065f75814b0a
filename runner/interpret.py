"""Tier 3: run a task in TPU interpret mode and report what went wrong (worker side: imports jax).

``run_tier3(task, path, text, target=...)`` runs the task's entry on CPU with
``pltpu.InterpretParams(detect_races=True, uninitialized_memory="nan", out_of_bounds_reads="raise",
num_cores_or_threads=2, random_seed=...)`` (one core, steps in order, to recheck a finding for a
one-core target) forced onto every ``pallas_call`` (jax's
``force_tpu_interpret_mode``; the user's file is not edited), and answers with plain records in the
``runner/errors.py`` format plus ``code``/``tier``/``origin``:

- PLS301 a DMA race, at the kernel line the interpreter names (the other access is related);
- PLS302 an out-of-bounds read or DMA (the interpreter raises instead of clamping);
- PLS303 output blocks left NaN (fresh memory is NaN-filled), naming the block indices;
- PLS304 a result outside the tolerance of the reference, with the max abs/rel error; when
  re-running with the reduction axes "arbitrary" fixes it, at ``dimension_semantics``;
- PLS305 the interpreter rejected something the compiler accepts (semantics order), a warning;
- PLS300 any other exception raised while interpreting.

Shapes: the example inputs are used as they are when small; larger ones are shrunk along dims
that map onto BlockSpec dims, to a couple of blocks each (still multiples of the block shape, so the
tiling rules hold), and when they are still large, by a search over smaller sizes that keeps every
call's blocks (``runner/interpret_shrink.py``); the shapes actually used are returned. Two simulated TensorCores and a
shuffled order of "parallel" grid steps expose a reduction axis wrongly marked parallel (a
pallas_call under ``jax.vmap``, whose semantics jax's interpreter cannot run, runs again without
them: everything but the semantics is still checked); on a one-core target (v5e, v6e) such findings are rechecked as that chip runs the kernel (one core, steps
in order) and, when only two cores get it wrong, reported as warnings. Times are
CPU interpret-mode wall clock: they say nothing about TPU time.
"""

from __future__ import annotations

import contextlib
import functools
import io
import linecache
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas import tpu as pltpu

from . import errors as errors_mod
from .intercept import RecordedCall, SemanticsOverride, block_shapes, dimension_semantics, intercept_pallas_calls
from .interpret_compare import compare, tolerance_for
from .interpret_config import Reduced, config_dicts, config_set, reduce_config
from .interpret_shrink import BUDGET_BYTES, input_bytes, shrink_further
from .interpret_verdicts import (
    VMAPPED_SEMANTICS,
    reference_failure,
    semantics_dropped,
    reference_mismatch,
    state_of,
    upstream_failure,
    upstream_record,
)
from .interpret_records import (
    START,
    CallSites,
    dma_lines,
    dma_order_record,
    exception_record,
    first_user_call,
    kernel_lines,
    race_record,
    result_record,
    semantics_disagreement,
)
from .memory_guard import MemoryStop, stop_near_limit

MAX_ELEMENTS = 1 << 20  # inputs larger than this (per array) are shrunk when the blocks allow
SIMULATED_CORES = 2  # megacore (v4, v5p): "parallel" grid axes are split between two cores
TWO_CORE_CHIPS = "two-core chips such as v4/v5p"
SEED = 7  # order of "parallel" grid steps; fixed so reruns are reproducible


@dataclass
class Run:
    """One interpret-mode run of the entry: outputs or the exception, race reports, time."""

    outputs: Any = None
    error: BaseException | None = None
    races: list[str] = field(default_factory=list)
    seconds: float = 0.0
    noise: str = ""  # what jax printed to stderr meanwhile (the user's stack of a failing operation)
    calls: list[RecordedCall] = field(default_factory=list)


def interpret_params(uninitialized: str = "nan", cores: int = SIMULATED_CORES, seed: int = SEED,
                     dma: str = "on_wait") -> Any:
    return pltpu.InterpretParams(
        detect_races=True,
        uninitialized_memory=uninitialized,
        out_of_bounds_reads="raise",
        num_cores_or_threads=cores,
        random_seed=seed,
        dma_execution_mode=dma,
    )


def shuffling_seed(calls: list[RecordedCall], tries: int = 64) -> int:
    """A seed under which the interpreter visits every "parallel" grid axis out of order.

    The interpreter permutes each parallel axis with ``jax.random.permutation`` of a key split from
    ``jax.random.key(seed)``; a seed that leaves an axis in order would hide a reduction axis
    wrongly marked parallel, so the first seed that moves every such axis (of size >= 2) is used.
    """
    axes: list[list[int]] = []
    for call in calls:
        sem = dimension_semantics(call.kwargs.get("compiler_params"))
        grid = call.kwargs.get("grid")
        if grid is None and call.kwargs.get("grid_spec") is not None:
            grid = getattr(call.kwargs["grid_spec"], "grid", None)
        if isinstance(grid, int):
            grid = (grid,)
        if sem and grid and len(sem) == len(grid) and all(isinstance(g, int) for g in grid):
            axes.append([g if s == "parallel" else 0 for s, g in zip(sem, grid)])
    if not any(g >= 2 for sizes in axes for g in sizes):
        return SEED
    for seed in range(tries):
        if all(_moves_every_axis(seed, sizes) for sizes in axes):
            return seed
    return SEED


def _moves_every_axis(seed: int, sizes: list[int]) -> bool:
    key = jax.random.key(seed or 0)
    for size in sizes:
        if size == 0:
            continue  # "arbitrary": the interpreter draws nothing for it
        key, sub = jax.random.split(key)
        if size >= 2 and bool(np.all(np.asarray(jax.random.permutation(sub, jnp.arange(size, dtype=jnp.int32))) == np.arange(size))):
            return False
    return True


def interpret_once(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    uninitialized: str = "nan",
    cores: int = SIMULATED_CORES,
    seed: int = SEED,
    dma: str = "on_wait",
    semantics: Callable[[tuple[str, ...]], tuple[str, ...]] | None = None,
    user_files: tuple[str, ...] = (),
    modules: tuple[Any, ...] = (),
    refill_outputs: bool = False,
) -> Run:
    """Run ``fn(*args)`` with every pallas_call in TPU interpret mode; never raises.

    ``refill_outputs``: every kernel's blocked float outputs are filled with NaN at the start of
    each grid step (``refilling_kernel``), so a block a step leaves unwritten comes back NaN instead
    of keeping what an earlier step left in the buffer."""
    from jax._src.pallas.mosaic.interpret import interpret_pallas_call as ipc

    run = Run()
    captured = io.StringIO()
    noise = io.StringIO()  # tracebacks the interpreter's callback threads print
    override = SemanticsOverride(semantics)
    pltpu.reset_tpu_interpret_mode_state()
    if semantics is not None:  # the override acts while pallas_call is traced: a jitted entry's program
        jax.clear_caches()  # from an earlier run would otherwise run its old dimension_semantics again
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(noise), pltpu.force_tpu_interpret_mode(
            interpret_params(uninitialized, cores, seed, dma)
        ), intercept_pallas_calls(rewrite=override, user_files=user_files, modules=modules,
                                  wrap_kernel=refilling_kernel if refill_outputs else None) as calls:
            run.calls = calls
            out = fn(*args)
            run.outputs = jax.tree.map(np.asarray, jax.block_until_ready(out))
    except Exception as exc:  # noqa: BLE001 - the interpreter's verdict
        run.error = exc
    finally:
        run.seconds = time.perf_counter() - start
    run.races = _race_reports(captured.getvalue())
    run.noise = noise.getvalue()[-200_000:]
    if run.races or (ipc.races is not None and ipc.races.races_found and not run.races):
        run.races = run.races or ["RACE DETECTED (the interpreter gave no location)"]
    pltpu.reset_tpu_interpret_mode_state()
    return run


def refilling_kernel(kernel: Callable[..., Any], out_shape: Any, kwargs: dict[str, Any]) -> Callable[..., Any]:
    """``kernel`` preceded, at every grid step, by filling its blocked VMEM float outputs with NaN.

    The kernel's refs come in order: scalar prefetch, inputs, outputs, scratch; the outputs are
    found from the end (the scratch count and the outputs' count are known). Outputs left in
    HBM/ANY memory (written by DMA) are not touched."""
    grid_spec = kwargs.get("grid_spec")
    specs = kwargs.get("out_specs") if grid_spec is None else getattr(grid_spec, "out_specs", None)
    scratch = kwargs.get("scratch_shapes") if grid_spec is None else getattr(grid_spec, "scratch_shapes", None)
    outs = jax.tree.leaves(out_shape, is_leaf=lambda a: hasattr(a, "shape") and hasattr(a, "dtype"))
    spec_list = list(specs) if isinstance(specs, (list, tuple)) else [specs] * len(outs)
    n_scratch = len(jax.tree.leaves(list(scratch or ())))  # each leaf is one scratch ref
    blocked = []
    for i, o in enumerate(outs):
        spec = spec_list[i] if i < len(spec_list) else None
        space = str(getattr(spec, "memory_space", "") or "").upper()
        blocked.append(getattr(spec, "block_shape", None) is not None and "ANY" not in space and "HBM" not in space
                       and "SMEM" not in space and jnp.issubdtype(jnp.dtype(o.dtype), jnp.floating))
    if not any(blocked):
        return kernel

    def refilled(*refs: Any, **params: Any) -> Any:
        first = len(refs) - n_scratch - len(outs)
        for i, fill in enumerate(blocked):
            ref = refs[first + i] if 0 <= first + i < len(refs) else None
            if fill and ref is not None and hasattr(ref, "shape"):
                ref[...] = jnp.full(ref.shape, jnp.nan, ref.dtype)
        return kernel(*refs, **params)

    refilled.__name__ = getattr(kernel, "__name__", "kernel")
    return refilled


def _race_reports(text: str) -> list[str]:
    return [("RACE DETECTED" + part).strip() for part in text.split("RACE DETECTED")[1:]]


# --------------------------------------------------------------------------- shapes and inputs


def probe_calls(fn: Callable[..., Any], args: tuple[Any, ...], modules: tuple[Any, ...] = ()) -> list[RecordedCall]:
    """The pallas_calls ``fn`` makes for these abstract args (traced with eval_shape, nothing runs)."""
    from .reach import traced_calls

    return traced_calls(fn, args, modules)


def shrink_shapes(args: tuple[Any, ...], calls: list[RecordedCall], max_elements: int = MAX_ELEMENTS,
                  blocks_per_dim: int = 2) -> tuple[tuple[Any, ...], bool]:
    """Smaller abstract args that keep every dim a multiple of the blocks it is cut into.

    Nothing is touched unless an array is above ``max_elements``; a dim shrinks only when it is the dim of a
    pallas_call operand with the same shape, cut by a block dim smaller than it, to
    ``blocks_per_dim`` blocks (one when the size is not a multiple of that many). Sizes shared by
    several dims (matmul's K) shrink to the same value. Returns (args, whether anything changed).
    """
    leaves, treedef = jax.tree.flatten(args)
    if all(math.prod(getattr(a, "shape", ())) <= max_elements for a in leaves):
        return args, False
    blocks: dict[int, set[int]] = {}  # original size -> block dims that cut it
    fixed: set[int] = set()  # sizes some operand takes whole (block == size or no block)
    for call in calls:
        specs = block_shapes(_in_specs(call))
        for operand, spec in zip(call.operands or (), specs):
            if not isinstance(operand, jax.ShapeDtypeStruct):
                continue
            for i, size in enumerate(operand.shape):
                b = spec.block_shape[i] if spec.block_shape and i < len(spec.block_shape) else None
                if b is None or b >= size or size % b:
                    fixed.add(size)
                else:
                    blocks.setdefault(size, set()).add(b)
    new_size: dict[int, int] = {}
    for size, bs in blocks.items():
        if size in fixed:
            continue
        unit = math.lcm(*bs)
        target = unit * blocks_per_dim if size % (unit * blocks_per_dim) == 0 else unit
        if target < size:
            new_size[size] = target
    if not new_size:
        return args, False
    out = []
    for a in leaves:  # every array, small ones too: a size shared with a large one (matmul's K) must
        shape = getattr(a, "shape", None)  # shrink in both, or the reference cannot take them
        small_given = math.prod(shape or ()) <= max_elements and not isinstance(a, jax.ShapeDtypeStruct)
        if shape is None or small_given or not any(d in new_size for d in shape):  # given values stay
            out.append(a)
            continue
        out.append(jax.ShapeDtypeStruct(tuple(new_size.get(d, d) for d in shape), a.dtype))
    new_args = jax.tree.unflatten(treedef, out)
    return new_args, new_args != args


def _in_specs(call: RecordedCall) -> Any:
    """The call's input BlockSpecs, given directly or inside a ``grid_spec`` (PrefetchScalarGridSpec)."""
    specs = call.kwargs.get("in_specs")
    grid_spec = call.kwargs.get("grid_spec")
    if specs is None and grid_spec is not None:
        specs = getattr(grid_spec, "in_specs", None)
        prefetch = getattr(grid_spec, "num_scalar_prefetch", 0) or 0
        if prefetch and call.operands:  # scalar-prefetch operands come first and have no BlockSpec
            specs = [None] * prefetch + list(specs if isinstance(specs, (list, tuple)) else [specs])
    return specs


def random_inputs(args: tuple[Any, ...], seed: int = 0) -> tuple[Any, ...]:
    """Concrete arrays for abstract args: floats ~ N(0, 1); integers and bools are 0 (often indices)."""
    rng = np.random.default_rng(seed)

    def make(a: Any) -> Any:
        if not hasattr(a, "shape") or not hasattr(a, "dtype"):
            return a
        dtype = jnp.dtype(a.dtype)
        if jnp.issubdtype(dtype, jnp.floating):
            return jnp.asarray(rng.standard_normal(a.shape, dtype=np.float32)).astype(dtype)
        if jnp.issubdtype(dtype, jnp.complexfloating):
            return jnp.asarray(rng.standard_normal(a.shape) + 1j * rng.standard_normal(a.shape)).astype(dtype)
        return jnp.zeros(a.shape, dtype)

    return jax.tree.map(make, args, is_leaf=lambda a: hasattr(a, "shape") and hasattr(a, "dtype"))


def describe_shapes(args: Any) -> str:
    leaves = jax.tree.leaves(args, is_leaf=lambda a: hasattr(a, "shape") and hasattr(a, "dtype"))
    return ", ".join(f"{jnp.dtype(a.dtype).name}{list(a.shape)}" for a in leaves if hasattr(a, "shape"))


# --------------------------------------------------------------------------- the tier


def run_tier3(task: Any, path: str, text: str | None = None, say: Callable[[str], None] | None = None,
              target: str | None = None) -> dict[str, Any]:
    """Tier 3 for one task (a ``tasks_runtime.RuntimeTask``-like object); a plain JSON dict.

    The first run simulates two TensorCores (a megacore chip). For a one-core ``target`` (v5e, v6e)
    whatever that run finds is checked again as the target runs it (one core, grid steps in order):
    what is wrong only with two cores becomes a warning that says so (``one_core_verdict``).

    ``{"state": "ok"|"error", "errors": [record...], "seconds": float, "shapes": str,
    "shrunk": bool, "note": "tier 3: ..."}`` — every record has ``tier`` 3 and a ``code``.
    """
    say = say or (lambda _m: None)
    source = text if text is not None else _read(path)
    result: dict[str, Any] = {"state": "ok", "errors": [], "seconds": 0.0, "shapes": "", "shrunk": False}
    try:
        abstract = task.abstract_args()
    except Exception:  # noqa: BLE001 - the task's inputs failed; tier 1 reports the details
        result["state"] = "skipped: the example inputs failed"
        return result
    namespaces = _namespaces(task.entry)
    reduced = None
    try:
        calls = probe_calls(task.entry, abstract, namespaces)
        if _too_large(abstract):  # first the task's own CONFIG at a smaller size: its tables stay its own
            reduced = reduce_config(task, abstract, calls, lambda args: probe_calls(task.entry, args, namespaces))
    except Exception:  # noqa: BLE001 - tracing failed: the shrink below says so
        calls = []
    held = contextlib.ExitStack()
    if reduced is not None:
        held.enter_context(config_set(config_dicts(task), dict(reduced.values)))
    with held:
        return _run_tier3_at(task, path, source, say, target, result, abstract, reduced, calls)


def _too_large(args: Any) -> bool:
    leaves = [a for a in jax.tree.leaves(args) if hasattr(a, "shape")]
    return input_bytes(args) > BUDGET_BYTES or any(math.prod(a.shape) > MAX_ELEMENTS for a in leaves)


def _run_tier3_at(task: Any, path: str, source: str, say: Callable[[str], None], target: str | None,
                  result: dict[str, Any], abstract: tuple[Any, ...], reduced: Reduced | None,
                  calls: list[RecordedCall]) -> dict[str, Any]:
    """Tier 3 at the shapes found here (``calls``: the entry's at the full shapes), or at ``reduced``
    (the task's CONFIG, held by the caller)."""
    try:
        if reduced is not None:
            shapes, shrunk = reduced.shapes, True
            calls = probe_calls(task.entry, shapes, _namespaces(task.entry))
        else:
            if not calls:
                raise ValueError("the entry did not trace at the full shapes")
            shapes, shrunk = shrink_shapes(abstract, calls)
            if shrunk:
                calls = probe_calls(task.entry, shapes, _namespaces(task.entry))  # the smaller shapes must still trace
            if input_bytes(shapes) > BUDGET_BYTES:  # still large: search smaller sizes that keep every block
                shapes, more = shrink_further(task.entry, shapes, calls,
                                              lambda args: probe_calls(task.entry, args, _namespaces(task.entry)))
                if more:
                    shrunk, calls = True, probe_calls(task.entry, shapes, _namespaces(task.entry))
    except Exception:  # noqa: BLE001 - tracing failed: run the given shapes and let the run report
        shapes, shrunk, calls = abstract, False, []
    result["shapes"] = describe_shapes(shapes)
    result["shrunk"] = shrunk
    result["full_shapes"] = describe_shapes(abstract) if shrunk else None
    # at a reduced CONFIG the task's own inputs function makes the arrays (its tables included)
    inputs, made_up = _concrete_inputs(task, shapes, shrunk and reduced is None)
    seed = shuffling_seed(calls)
    say(f"tier 3: {task.name} (TPU interpret mode on CPU, {result['shapes']})")
    run = interpret_once(task.entry, inputs, seed=seed, user_files=(path,), modules=_namespaces(task.entry))
    total = run.seconds
    records = diagnose(run, task, inputs, path, source, say, seed)
    total += sum(records.pop("_reruns", []))
    cores = target_cores(target)
    if cores == 1 and state_of(records["errors"]) == "error":
        # Wrong with two simulated TensorCores: is it wrong on this one-core chip too? Its single core
        # runs every grid axis in order, as if all were "arbitrary".
        say(f"tier 3: {task.name} again as on {target} (1 TensorCore, grid steps in order)")
        own_run = interpret_once(task.entry, inputs, cores=1, semantics=_all_arbitrary, user_files=(path,),
                                 modules=_namespaces(task.entry))
        own = diagnose(own_run, task, inputs, path, source, say, seed, one_core=True, calls=run.calls)
        total += own_run.seconds + sum(own.pop("_reruns", []))
        records["errors"] = one_core_verdict(own["errors"], records["errors"], target)
    if made_up and _has_integers(shapes):
        _soften_result_records(records["errors"])
    result["errors"] = records["errors"]
    result["seconds"] = round(total, 3)
    result["state"] = state_of(result["errors"])
    result["note"] = (
        f"tier 3: {task.name} ran in {total:.1f} s in CPU interpret mode (not TPU time): "
        + shrink_note(result["shapes"], result["full_shapes"], reduced.describe() if reduced else None)
    )
    return result


def shrink_note(shapes: str, full_shapes: str | None, config: str | None = None) -> str:
    """Where the interpret run ran: the example inputs' shapes, or the shrunk ones and what they came from."""
    if not full_shapes:
        return f"interpret run at {shapes}"
    if config:
        return (f"interpret run at {shapes}, shrunk from {full_shapes} (the task's own inputs at CONFIG "
                f"{config}: its tables and indices as it draws them, block shapes kept)")
    return (f"interpret run at {shapes}, shrunk from {full_shapes} (block shapes kept, the grid shrunk "
            "to two blocks per tiled dim)")


def tier3_entry(entry: dict[str, Any], task: Any, path: str, say: Callable[[str], None] | None = None,
                target: str | None = None) -> None:
    """Fill one ``check`` result entry (runner/checks.py) with tier 3: state, records, time note."""
    failed = [t for t in ("1", "2") if entry["tiers"].get(t) == "error"]
    if failed:
        entry["tiers"]["3"] = f"skipped: tier {failed[0]} failed"
        return
    source = "".join(linecache.getlines(path)) or None  # the editor's buffer when one was sent
    try:
        out = run_tier3(task, path, source, say, target)
    except Exception as exc:  # noqa: BLE001 - a bug of ours must not lose tiers 1-2
        rec = errors_mod.record(exc, path, stage="tier 3")
        rec.update(tier=3, code="PLS300", origin="pallasite runner")
        out = {"state": "error", "errors": [rec], "note": None}
    entry["tiers"]["3"] = out["state"]
    entry["errors"].extend(out["errors"])
    if out.get("note"):
        entry.setdefault("notes", []).append(out["note"])
    entry["tier3"] = {k: out.get(k) for k in ("seconds", "shapes", "shrunk")}


def target_cores(target: str | None) -> int:
    """TensorCores that share one kernel's "parallel" grid axes on ``target`` (megacore: 2, else 1).

    jax's own chip table decides (``ChipVersion.supports_megacore``); an unknown or missing target
    is simulated with two cores, the stricter case.
    """
    if not target:
        return SIMULATED_CORES
    from ..analysis.types import chip_target

    try:
        version = pltpu.ChipVersion(chip_target(target).chip_version)
    except ValueError:
        return SIMULATED_CORES
    return SIMULATED_CORES if version.supports_megacore else 1


def one_core_verdict(own: list[dict[str, Any]], two_core: list[dict[str, Any]], target: str) -> list[dict[str, Any]]:
    """The records for a one-core ``target``: its own run's findings stay as they are; an error only
    the two-core run found becomes a warning saying the kernel is right (or not wrong in that way) on
    ``target`` but wrong on megacore chips."""
    if any(r.get("severity", "error") == "error" for r in own):
        lead = f"also wrong on {TWO_CORE_CHIPS}: "
    else:
        lead = f"correct on {target} (1 TensorCore) but wrong on {TWO_CORE_CHIPS}: "
    own_codes = {r.get("code") for r in own}
    out = list(own)
    for rec in two_core:
        if rec.get("code") in own_codes:
            continue  # the one-core run found it too: its record says it
        if rec.get("severity", "error") == "error":
            rec = dict(rec, severity="warning", sentence=lead + rec["sentence"])
            rec["message"] = rec["sentence"]
        out.append(rec)
    return out


def _all_arbitrary(sem: tuple[str, ...]) -> tuple[str, ...]:
    return ("arbitrary",) * len(sem)


def _no_semantics(sem: tuple[str, ...]) -> None:
    return None  # every grid axis "arbitrary", however many vmap added


ZEROED_INTS = ("integer inputs were filled with 0 because example_inputs() gives only their shapes; if they are "
               "indices or sizes, return concrete arrays from example_inputs() for a faithful tier-3 run")


def _has_integers(args: Any) -> bool:
    leaves = jax.tree.leaves(args, is_leaf=lambda a: hasattr(a, "shape") and hasattr(a, "dtype"))
    return any(not jnp.issubdtype(jnp.dtype(a.dtype), jnp.inexact) for a in leaves if hasattr(a, "dtype"))


def _soften_result_records(records: list[dict[str, Any]]) -> None:
    """Wrong or unwritten outputs computed from made-up integer inputs are a warning, with the reason."""
    for rec in records:
        if rec.get("code") in ("PLS303", "PLS304"):
            rec["severity"] = "warning"
            rec["sentence"] += f" ({ZEROED_INTS})"
            rec["message"] = rec["sentence"]


def _namespaces(fn: Any) -> tuple[dict[str, Any], ...]:
    """The globals of the entry's module, where ``from ... import pallas_call`` binds the name."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    fn = getattr(fn, "__wrapped__", fn)
    namespace = getattr(fn, "__globals__", None)
    return (namespace,) if isinstance(namespace, dict) else ()


def _concrete_inputs(task: Any, shapes: tuple[Any, ...], shrunk: bool) -> tuple[tuple[Any, ...], bool]:
    """(arguments, made up): the task's own arrays when its inputs function makes them at the shapes
    used; else random ones (``random_inputs``)."""
    if not shrunk and getattr(task, "inputs", None) is not None:
        try:
            made = task.inputs()
        except Exception:  # noqa: BLE001 - fall back to random inputs
            made = None
        if made is not None:
            made = tuple(made) if isinstance(made, (list, tuple)) else (made,)
            leaves = jax.tree.leaves(made, is_leaf=lambda a: hasattr(a, "shape"))
            if leaves and not any(isinstance(a, jax.ShapeDtypeStruct) for a in leaves):
                return made, False
            if any(not isinstance(a, jax.ShapeDtypeStruct) for a in leaves):
                # some given, some only shaped (a page table next to the pages' shape): keep the arrays
                # given (indices mean something), make up the others; made up only if an integer was
                mixed = _given_or_made(made, random_inputs(made))
                if mixed is not None:
                    return mixed, any(isinstance(a, jax.ShapeDtypeStruct) and not jnp.issubdtype(jnp.dtype(a.dtype), jnp.inexact)
                                      for a in leaves)
    return random_inputs(shapes), True


def _given_or_made(given: Any, made: Any) -> Any:
    """``given``'s concrete arrays, ``made``'s where ``given`` holds only a ShapeDtypeStruct (None when
    the two trees do not match)."""
    try:
        return jax.tree.map(lambda g, m: m if isinstance(g, jax.ShapeDtypeStruct) else g, given, made,
                            is_leaf=lambda a: hasattr(a, "shape") and hasattr(a, "dtype"))
    except (ValueError, TypeError):
        return None


def diagnose(run: Run, task: Any, inputs: tuple[Any, ...], path: str, source: str, say: Callable[[str], None],
             seed: int = SEED, one_core: bool = False, calls: list[RecordedCall] | None = None) -> dict[str, Any]:
    """Records for one run; reruns variants (arbitrary semantics, zero-filled memory) to explain.

    ``one_core``: the run was one TensorCore with every axis "arbitrary" (a v5e/v6e chip); its
    reruns keep that, and "parallel" semantics cannot be the cause there. ``calls``: the calls an
    earlier run of the same entry recorded (a run served from jax's trace cache records none, and
    its findings would lose the kernel's places).
    """
    errors: list[dict[str, Any]] = []
    reruns: list[float] = []
    dropped = False  # dimension_semantics left out of every run (the interpreter cannot run them under vmap)
    prefixed = False  # every run with the parallel axes as a prefix (the interpreter rejected the order written)

    def again(**kw: Any) -> Run:
        kw.setdefault("seed", seed)
        if prefixed:
            kw.setdefault("semantics", _parallel_prefix)
        if one_core or dropped:
            kw.setdefault("cores", 1)
            kw.setdefault("semantics", _no_semantics if dropped else _all_arbitrary)
        rerun = interpret_once(task.entry, inputs, user_files=(path,), modules=_namespaces(task.entry), **kw)
        reruns.append(rerun.seconds)
        return rerun

    traced = run.calls or calls or []  # a rerun served from jax's trace cache records no call: keep the first run's
    if run.error is not None and VMAPPED_SEMANTICS.search(str(run.error)):
        say(f"tier 3: {task.name} again without dimension_semantics (jax's interpreter cannot run them under vmap)")
        retry = again(semantics=_no_semantics, cores=1)
        if retry.error is None or not VMAPPED_SEMANTICS.search(str(retry.error)):
            run, dropped = retry, True
            errors.append(semantics_dropped(run.error, path))
    call = first_user_call(run.calls, path) or first_user_call(traced, path)
    sites = CallSites(source, path)
    if run.error is not None and _semantics_rejected(run.error):
        errors.append(semantics_disagreement(run.error, call, sites, path))
        say(f"tier 3: {task.name} again with the grid's parallel axes as a prefix")
        run = again(semantics=_parallel_prefix)
        prefixed = True  # the reruns that explain this run (zero-filled memory) run the same order
        call = first_user_call(run.calls, path) or call

    for report in run.races:
        errors.append(race_record(report, call, sites, path))
    if run.error is not None:
        rec = exception_record(run.error, call, sites, path, run.noise)
        why = upstream_failure(run.error, rec) if rec.get("code") == "PLS300" else None
        errors.append(upstream_record(rec, why) if why else rec)
        return {"errors": errors, "_reruns": reruns}
    if run.races:  # the race explains any wrong numbers; comparing would only repeat it
        return {"errors": errors, "_reruns": reruns}
    copies = dma_lines(call, path)
    if copies:  # the race detector misses two DMAs writing one buffer: vary when DMAs complete
        say(f"tier 3: {task.name} again with DMAs completing as soon as they start")
        eager = again(dma="eager")
        if eager.races:  # the detector saw it with this timing
            errors.extend(race_record(report, call, sites, path) for report in eager.races)
            return {"errors": errors, "_reruns": reruns}
        if eager.error is None:
            moved = compare(eager.outputs, run.outputs, tolerance_for(task, run.outputs))
            if moved:
                errors.append(dma_order_record(moved[0], copies, kernel_lines(call, path, START), path))
                return {"errors": errors, "_reruns": reruns}

    expected = None
    reference = getattr(task, "reference", None)
    mismatch = reference_mismatch(reference, inputs, path) if reference is not None else None
    if mismatch is not None:  # a note: the outputs are still checked for what needs no reference
        errors.append(mismatch)
        reference = None
    if reference is not None:
        try:  # a reference that loops in Python over a task's sequences can outgrow the worker (JAXBench 7p)
            with stop_near_limit():
                expected = jax.tree.map(np.asarray, reference(*inputs))
        except (Exception, MemoryStop) as exc:  # noqa: BLE001 - the reference failed: a note, not the kernel's error
            errors.append(reference_failure(exc, path))

    def problems_of(r: Run) -> list[dict[str, Any]]:  # a float of another width is said once, not rerun
        return [p for p in compare(r.outputs, expected, tolerance_for(task, r.outputs)) if not p.get("width")]

    first = compare(run.outputs, expected, tolerance_for(task, run.outputs))
    errors.extend(result_record(p, call, sites, path, None, None) for p in first if p.get("width"))  # a warning
    problems = [p for p in first if not p.get("width")]
    if not problems:
        return {"errors": errors, "_reruns": reruns}
    if any(p["kind"] == "dtype" for p in problems):  # a declared dtype the results do not have: no rerun explains it
        errors.extend(result_record(p, call, sites, path, None, None) for p in problems if p["kind"] == "dtype")
        return {"errors": errors, "_reruns": reruns}

    cause = None
    sem = dimension_semantics(call.kwargs.get("compiler_params")) if call else None
    if sem and "parallel" in sem and not one_core:
        say(f"tier 3: {task.name} again with every grid axis \"arbitrary\"")
        rerun = again(semantics=lambda s: ("arbitrary",) * len(s), cores=1)
        if rerun.error is None and not rerun.races and not problems_of(rerun):
            cause = ("semantics", _guilty_axes(sem, again, problems_of))
    if cause is None and any(p["kind"] == "nan" for p in problems):
        say(f"tier 3: {task.name} again with fresh memory zero-filled")
        rerun = again(uninitialized="zero")
        if rerun.error is None:
            cause = ("unwritten", None) if _still_fill(problems, rerun.outputs) else ("uninitialized", None)
    if cause is None and any(p["kind"] == "mismatch" for p in problems):
        # a step that writes nothing to its output block leaves there what an earlier step wrote (the
        # buffer is reused): refill the output blocks with NaN before each step to see it
        say(f"tier 3: {task.name} again with the output blocks refilled with NaN before each step")
        rerun = again(refill_outputs=True)
        refilled = [p for p in problems_of(rerun) if p["kind"] == "nan"] if rerun.error is None else []
        if refilled and _only_where_wrong(refilled, problems):
            problems, cause = refilled, ("skipped", None)
    if cause and cause[0] == "semantics":  # one finding: the wrong numbers have one cause
        problems = [p for p in problems if p["kind"] == "mismatch"] or problems[:1]
    for problem in problems:
        errors.append(result_record(problem, call, sites, path, cause, sem))
    return {"errors": errors, "_reruns": reruns}


def _only_where_wrong(refilled: list[dict[str, Any]], problems: list[dict[str, Any]]) -> bool:
    """Whether the NaN the refilled run shows lies only where the first run was wrong, and not
    everywhere (an output the kernel accumulates into across steps comes back NaN in every block
    when refilled: that is not a skipped store)."""
    wrong = {p["index"]: p["mask"] for p in problems if p["kind"] == "mismatch" and p.get("mask") is not None}
    for p in refilled:
        bad = wrong.get(p["index"])
        mask = np.asarray(p["mask"])
        if bad is None or mask.all() or np.any(mask & ~np.asarray(bad)):
            return False
    return True


def _guilty_axes(sem: tuple[str, ...], again: Callable[..., Run], problems_of: Callable[[Run], list]) -> list[int]:
    """The innermost parallel axis that, made "arbitrary" with every axis after it, fixes the result."""
    for axis in reversed([i for i, s in enumerate(sem) if s == "parallel"]):
        def flip(s: tuple[str, ...], axis: int = axis) -> tuple[str, ...]:
            return tuple("arbitrary" if i >= axis else v for i, v in enumerate(s))

        run = again(semantics=flip)
        if run.error is None and not run.races and not problems_of(run):
            return [axis]
    return []


def _still_fill(problems: list[dict[str, Any]], outputs: Any) -> bool:
    """Whether the NaN regions read exactly 0 with zero-filled memory: never written, not computed."""
    leaves = jax.tree.leaves(outputs)
    for p in problems:
        if p["kind"] != "nan" or p["index"] is None or p["index"] >= len(leaves):
            continue
        values = np.asarray(leaves[p["index"]]).astype(np.float64)[p["mask"]]
        if values.size and not np.all(values == 0):
            return False
    return True


def _parallel_prefix(sem: tuple[str, ...]) -> tuple[str, ...]:
    out, seen_other = [], False
    for s in sem:
        if s != "parallel":
            seen_other = True
        out.append("arbitrary" if seen_other and s == "parallel" else s)
    return tuple(out)


def _semantics_rejected(exc: BaseException) -> bool:
    return "parallel semantics must form a prefix" in str(exc)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""
