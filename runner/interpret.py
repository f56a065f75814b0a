"""Tier 3: run a task in TPU interpret mode and report what went wrong (worker side: imports jax).

``run_tier3(task, path, text)`` runs the task's entry on CPU with
``pltpu.InterpretParams(detect_races=True, uninitialized_memory="nan", out_of_bounds_reads="raise",
num_cores_or_threads=2, random_seed=...)`` forced onto every ``pallas_call`` (jax's
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
tiling rules hold), and the shapes actually used are returned. Two simulated TensorCores and a
shuffled order of "parallel" grid steps expose a reduction axis wrongly marked parallel. Times are
CPU interpret-mode wall clock: they say nothing about TPU time.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import io
import linecache
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas import tpu as pltpu

from . import errors as errors_mod
from .intercept import RecordedCall, SemanticsOverride, block_shapes, dimension_semantics, intercept_pallas_calls

ORIGIN = "TPU interpreter"
# Default (atol, rtol) by output dtype; a task's TOLERANCE overrides them.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-5, 1e-5),
    "float16": (1e-3, 1e-3),
    "bfloat16": (2e-2, 2e-2),
}
MAX_ELEMENTS = 1 << 20  # inputs larger than this (per array) are shrunk when the blocks allow
SIMULATED_CORES = 2  # megacore (v4, v5p, 7x): "parallel" grid axes are split between two cores
SEED = 7  # order of "parallel" grid steps; fixed so reruns are reproducible


@dataclass
class Run:
    """One interpret-mode run of the entry: outputs or the exception, race reports, time."""

    outputs: Any = None
    error: BaseException | None = None
    races: list[str] = field(default_factory=list)
    seconds: float = 0.0
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
) -> Run:
    """Run ``fn(*args)`` with every pallas_call in TPU interpret mode; never raises."""
    from jax._src.pallas.mosaic.interpret import interpret_pallas_call as ipc

    run = Run()
    captured = io.StringIO()
    noise = io.StringIO()  # tracebacks the interpreter's callback threads print
    override = SemanticsOverride(semantics)
    pltpu.reset_tpu_interpret_mode_state()
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(noise), pltpu.force_tpu_interpret_mode(
            interpret_params(uninitialized, cores, seed, dma)
        ), intercept_pallas_calls(rewrite=override, user_files=user_files, modules=modules) as calls:
            run.calls = calls
            out = fn(*args)
            run.outputs = jax.tree.map(np.asarray, jax.block_until_ready(out))
    except Exception as exc:  # noqa: BLE001 - the interpreter's verdict
        run.error = exc
    finally:
        run.seconds = time.perf_counter() - start
    run.races = _race_reports(captured.getvalue())
    if run.races or (ipc.races is not None and ipc.races.races_found and not run.races):
        run.races = run.races or ["RACE DETECTED (the interpreter gave no location)"]
    pltpu.reset_tpu_interpret_mode_state()
    return run


def _race_reports(text: str) -> list[str]:
    return [("RACE DETECTED" + part).strip() for part in text.split("RACE DETECTED")[1:]]


# --------------------------------------------------------------------------- shapes and inputs


def probe_calls(fn: Callable[..., Any], args: tuple[Any, ...], modules: tuple[Any, ...] = ()) -> list[RecordedCall]:
    """The pallas_calls ``fn`` makes for these abstract args (traced with eval_shape, nothing runs)."""
    with intercept_pallas_calls(modules=modules) as calls:
        jax.eval_shape(fn, *args)
    return list(calls)


def shrink_shapes(args: tuple[Any, ...], calls: list[RecordedCall], max_elements: int = MAX_ELEMENTS) -> tuple[tuple[Any, ...], bool]:
    """Smaller abstract args that keep every dim a multiple of the blocks it is cut into.

    Only arrays above ``max_elements`` are touched; a dim shrinks only when it is the dim of a
    pallas_call operand with the same shape, cut by a block dim smaller than it. Sizes shared by
    several dims (matmul's K) shrink to the same value. Returns (args, whether anything changed).
    """
    leaves, treedef = jax.tree.flatten(args)
    if all(math.prod(getattr(a, "shape", ())) <= max_elements for a in leaves):
        return args, False
    blocks: dict[int, set[int]] = {}  # original size -> block dims that cut it
    fixed: set[int] = set()  # sizes some operand takes whole (block == size or no block)
    for call in calls:
        specs = block_shapes(call.kwargs.get("in_specs"))
        for operand, spec in zip(call.operands or (), specs):
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
        target = unit * 2 if size % (unit * 2) == 0 else unit
        if target < size:
            new_size[size] = target
    if not new_size:
        return args, False
    out = []
    for a in leaves:
        shape = getattr(a, "shape", None)
        if shape is None or math.prod(shape) <= max_elements:
            out.append(a)
            continue
        out.append(jax.ShapeDtypeStruct(tuple(new_size.get(d, d) for d in shape), a.dtype))
    new_args = jax.tree.unflatten(treedef, out)
    return new_args, new_args != args


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


def run_tier3(task: Any, path: str, text: str | None = None, say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Tier 3 for one task (a ``tasks_runtime.RuntimeTask``-like object); a plain JSON dict.

    ``{"state": "ok"|"error", "errors": [record...], "seconds": float, "shapes": str,
    "shrunk": bool, "note": "tier 3: ..."}`` — every record has ``tier`` 3 and a ``code``.
    """
    say = say or (lambda _m: None)
    source = text if text is not None else _read(path)
    result: dict[str, Any] = {"state": "ok", "errors": [], "seconds": 0.0, "shapes": "", "shrunk": False}
    try:
        abstract = task.abstract_args()
    except Exception as exc:  # noqa: BLE001 - the task's inputs failed; tier 1 reports the details
        result["state"] = "skipped: the example inputs failed"
        return result
    try:
        calls = probe_calls(task.entry, abstract, _namespaces(task.entry))
        shapes, shrunk = shrink_shapes(abstract, calls)
        if shrunk:
            calls = probe_calls(task.entry, shapes, _namespaces(task.entry))  # the smaller shapes must still trace
    except Exception:  # noqa: BLE001 - tracing failed: run the given shapes and let the run report
        shapes, shrunk, calls = abstract, False, []
    result["shapes"] = describe_shapes(shapes)
    result["shrunk"] = shrunk
    inputs = _concrete_inputs(task, shapes, shrunk)
    seed = shuffling_seed(calls)
    say(f"tier 3: {task.name} (TPU interpret mode on CPU, {result['shapes']})")
    run = interpret_once(task.entry, inputs, seed=seed, user_files=(path,), modules=_namespaces(task.entry))
    total = run.seconds
    records = diagnose(run, task, inputs, path, source, say, seed)
    for extra in records.pop("_reruns", []):
        total += extra
    result["errors"] = records["errors"]
    result["seconds"] = round(total, 3)
    result["state"] = "error" if any(r.get("severity", "error") == "error" for r in result["errors"]) else "ok"
    result["note"] = (
        f"tier 3: {task.name} ran in {total:.1f} s in CPU interpret mode (not TPU time) "
        f"at {result['shapes']}" + (" (shrunk from the example inputs)" if shrunk else "")
    )
    return result


def tier3_entry(entry: dict[str, Any], task: Any, path: str, say: Callable[[str], None] | None = None) -> None:
    """Fill one ``check`` result entry (runner/checks.py) with tier 3: state, records, time note."""
    failed = [t for t in ("1", "2") if entry["tiers"].get(t) == "error"]
    if failed:
        entry["tiers"]["3"] = f"skipped: tier {failed[0]} failed"
        return
    source = "".join(linecache.getlines(path)) or None  # the editor's buffer when one was sent
    try:
        out = run_tier3(task, path, source, say)
    except Exception as exc:  # noqa: BLE001 - a bug of ours must not lose tiers 1-2
        rec = errors_mod.record(exc, path, stage="tier 3")
        rec.update(tier=3, code="PLS300", origin="pallasite runner")
        out = {"state": "error", "errors": [rec], "note": None}
    entry["tiers"]["3"] = out["state"]
    entry["errors"].extend(out["errors"])
    if out.get("note"):
        entry.setdefault("notes", []).append(out["note"])
    entry["tier3"] = {k: out.get(k) for k in ("seconds", "shapes", "shrunk")}


def _namespaces(fn: Any) -> tuple[dict[str, Any], ...]:
    """The globals of the entry's module, where ``from ... import pallas_call`` binds the name."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    fn = getattr(fn, "__wrapped__", fn)
    namespace = getattr(fn, "__globals__", None)
    return (namespace,) if isinstance(namespace, dict) else ()


def _concrete_inputs(task: Any, shapes: tuple[Any, ...], shrunk: bool) -> tuple[Any, ...]:
    """The task's own arrays when its inputs function makes them at the shapes used; else random."""
    if not shrunk and getattr(task, "inputs", None) is not None:
        try:
            made = task.inputs()
        except Exception:  # noqa: BLE001 - fall back to random inputs
            made = None
        if made is not None:
            made = tuple(made) if isinstance(made, (list, tuple)) else (made,)
            leaves = jax.tree.leaves(made, is_leaf=lambda a: hasattr(a, "shape"))
            if leaves and not any(isinstance(a, jax.ShapeDtypeStruct) for a in leaves):
                return made
    return random_inputs(shapes)


def diagnose(run: Run, task: Any, inputs: tuple[Any, ...], path: str, source: str, say: Callable[[str], None],
             seed: int = SEED) -> dict[str, Any]:
    """Records for one run; reruns variants (arbitrary semantics, zero-filled memory) to explain."""
    errors: list[dict[str, Any]] = []
    reruns: list[float] = []

    def again(**kw: Any) -> Run:
        kw.setdefault("seed", seed)
        rerun = interpret_once(task.entry, inputs, user_files=(path,), modules=_namespaces(task.entry), **kw)
        reruns.append(rerun.seconds)
        return rerun

    call = _first_user_call(run.calls, path)
    sites = _CallSites(source, path)
    if run.error is not None and _semantics_rejected(run.error):
        errors.append(_semantics_disagreement(run.error, call, sites, path))
        say(f"tier 3: {task.name} again with the grid's parallel axes as a prefix")
        run = again(semantics=_parallel_prefix)
        call = _first_user_call(run.calls, path) or call

    for report in run.races:
        errors.append(_race_record(report, call, sites, path))
    if run.error is not None:
        errors.append(_exception_record(run.error, call, sites, path))
        return {"errors": errors, "_reruns": reruns}
    if run.races:  # the race explains any wrong numbers; comparing would only repeat it
        return {"errors": errors, "_reruns": reruns}
    dma_lines = _dma_lines(call, path)
    if dma_lines:  # the race detector misses two DMAs writing one buffer: vary when DMAs complete
        say(f"tier 3: {task.name} again with DMAs completing as soon as they start")
        eager = again(dma="eager")
        if eager.races:  # the detector saw it with this timing
            errors.extend(_race_record(report, call, sites, path) for report in eager.races)
            return {"errors": errors, "_reruns": reruns}
        if eager.error is None:
            moved = compare(eager.outputs, run.outputs, _tolerance(task, run.outputs))
            if moved:
                errors.append(_dma_order_record(moved[0], dma_lines, _kernel_lines(call, path, _START), path))
                return {"errors": errors, "_reruns": reruns}

    expected = None
    reference = getattr(task, "reference", None)
    if reference is not None:
        try:
            expected = jax.tree.map(np.asarray, reference(*inputs))
        except Exception as exc:  # noqa: BLE001 - the user's reference failed
            rec = errors_mod.record(exc, path, stage="tier 3")
            rec.update(code="PLS300", tier=3, origin="the reference", sentence="the reference raised: " + rec["sentence"])
            errors.append(rec)

    def problems_of(r: Run) -> list[dict[str, Any]]:
        return compare(r.outputs, expected, _tolerance(task, r.outputs))

    problems = problems_of(run)
    if not problems:
        return {"errors": errors, "_reruns": reruns}

    cause = None
    sem = dimension_semantics(call.kwargs.get("compiler_params")) if call else None
    if sem and "parallel" in sem:
        say(f"tier 3: {task.name} again with every grid axis \"arbitrary\"")
        rerun = again(semantics=lambda s: ("arbitrary",) * len(s), cores=1)
        if rerun.error is None and not rerun.races and not problems_of(rerun):
            cause = ("semantics", _guilty_axes(sem, again, problems_of))
    if cause is None and any(p["kind"] == "nan" for p in problems):
        say(f"tier 3: {task.name} again with fresh memory zero-filled")
        rerun = again(uninitialized="zero")
        if rerun.error is None:
            cause = ("unwritten", None) if _still_fill(problems, rerun.outputs) else ("uninitialized", None)
    if cause and cause[0] == "semantics":  # one finding: the wrong numbers have one cause
        problems = [p for p in problems if p["kind"] == "mismatch"] or problems[:1]
    for problem in problems:
        errors.append(_result_record(problem, call, sites, path, cause, sem))
    return {"errors": errors, "_reruns": reruns}


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


# --------------------------------------------------------------------------- comparing results


def _tolerance(task: Any, outputs: Any) -> tuple[float, float] | None:
    tol = getattr(task, "tolerance", None)
    if isinstance(tol, dict) and ("atol" in tol or "rtol" in tol):
        return float(tol.get("atol", 0.0)), float(tol.get("rtol", 0.0))
    leaves = jax.tree.leaves(outputs)
    if not leaves:
        return None
    name = jnp.dtype(leaves[0].dtype).name
    return TOLERANCES.get(name, (0.0, 0.0))


def compare(outputs: Any, expected: Any, tolerance: tuple[float, float] | None) -> list[dict[str, Any]]:
    """Problems with the outputs: NaN-filled (never written) regions, and values off the reference."""
    problems: list[dict[str, Any]] = []
    outs = jax.tree.leaves(outputs)
    refs = jax.tree.leaves(expected) if expected is not None else [None] * len(outs)
    if expected is not None and len(refs) != len(outs):
        return [{"kind": "structure", "index": None,
                 "message": f"the kernel returned {len(outs)} array(s) but the reference {len(refs)}"}]
    atol, rtol = tolerance or (0.0, 0.0)
    for index, (out, ref) in enumerate(zip(outs, refs)):
        out = np.asarray(out)
        unwritten = _unwritten(out)
        if ref is not None:
            ref = np.asarray(ref)
            if ref.shape != out.shape:
                problems.append({"kind": "structure", "index": index,
                                 "message": f"output {index} has shape {out.shape}, the reference {ref.shape}"})
                continue
            unwritten &= ~_unwritten(ref.astype(out.dtype)) if ref.dtype == out.dtype else ~np.isnan(ref.astype(np.float64))
        if unwritten.any():
            problems.append({"kind": "nan", "index": index, "mask": unwritten, "shape": out.shape})
        if ref is None:
            continue
        o = out.astype(np.float64)
        r = ref.astype(np.float64)
        valid = ~unwritten & np.isfinite(r)
        diff = np.abs(o - r)
        bad = valid & ~(diff <= atol + rtol * np.abs(r))
        if bad.any():
            worst = float(np.max(np.where(bad, diff, 0.0)))
            rel = float(np.max(np.where(bad, diff / np.maximum(np.abs(r), 1e-30), 0.0)))
            problems.append({"kind": "mismatch", "index": index, "count": int(bad.sum()), "size": int(out.size),
                             "max_abs": worst, "max_rel": rel, "atol": atol, "rtol": rtol, "mask": bad,
                             "shape": out.shape})
    return problems


def _unwritten(a: np.ndarray) -> np.ndarray:
    """Where the interpreter's fill value survived: NaN for floats, the max value for integers."""
    if np.issubdtype(a.dtype, np.floating) or a.dtype.name == "bfloat16":
        return np.isnan(a.astype(np.float32))
    if np.issubdtype(a.dtype, np.integer):
        return a == np.iinfo(a.dtype).max
    return np.zeros(a.shape, bool)


def blocks_hit(mask: np.ndarray, block: tuple[int | None, ...] | None) -> list[tuple[int, ...]]:
    """The block indices (per the out BlockSpec) that contain a True in ``mask``."""
    if block is None or len(block) != mask.ndim:
        block = mask.shape
    step = tuple(b if isinstance(b, int) and b > 0 else 1 for b in block)
    idx = np.argwhere(mask)
    return sorted({tuple(int(i // s) for i, s in zip(row, step)) for row in idx})


# --------------------------------------------------------------------------- records


class _CallSites:
    """Lines of a pallas_call's keyword arguments, read from the user's source with ``ast``."""

    def __init__(self, source: str, path: str):
        self.path = path
        try:
            self.tree = ast.parse(source)
        except SyntaxError:
            self.tree = None

    def keyword_line(self, call_line: int | None, *names: str) -> tuple[int, int] | None:
        """(line, column) 1-based/0-based of keyword ``names[0]`` (then nested ``names[1:]``)."""
        if self.tree is None or call_line is None:
            return None
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and node.lineno <= call_line <= (node.end_lineno or node.lineno):
                func = node.func
                callee = func.func if isinstance(func, ast.Call) else func
                if not (isinstance(callee, (ast.Attribute, ast.Name)) and _name_of(callee) == "pallas_call"):
                    continue
                call = func if isinstance(func, ast.Call) else node
                found = _find_keyword(call, names)
                if found is not None:
                    return found
        return None


    def element_line(self, call_line: int | None, keyword: str, index: int) -> tuple[int, int] | None:
        """(line, column) of element ``index`` of a list/tuple keyword argument (e.g. in_specs[1])."""
        if self.tree is None or call_line is None or index < 0:
            return None
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and node.lineno <= call_line <= (node.end_lineno or node.lineno):
                callee = node.func.func if isinstance(node.func, ast.Call) else node.func
                if not (isinstance(callee, (ast.Attribute, ast.Name)) and _name_of(callee) == "pallas_call"):
                    continue
                call = node.func if isinstance(node.func, ast.Call) else node
                for kw in call.keywords:
                    if kw.arg == keyword and isinstance(kw.value, (ast.List, ast.Tuple)) and index < len(kw.value.elts):
                        element = kw.value.elts[index]
                        return element.lineno, element.col_offset
        return None


def _name_of(node: ast.AST) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def _find_keyword(node: ast.AST, names: tuple[str, ...]) -> tuple[int, int] | None:
    for sub in ast.walk(node):
        if isinstance(sub, ast.keyword) and sub.arg == names[0]:
            if len(names) == 1:
                return sub.lineno, sub.col_offset
            return _find_keyword(sub.value, names[1:]) or (sub.lineno, sub.col_offset)
    return None


def _first_user_call(calls: list[RecordedCall], path: str) -> RecordedCall | None:
    import os

    target = os.path.realpath(path)
    for call in calls:
        if call.file and os.path.realpath(call.file) == target:
            return call
    return calls[0] if calls else None


def _base(code: str, sentence: str, path: str, lines: list[tuple[int, int | None]], severity: str = "error") -> dict[str, Any]:
    return {
        "stage": "tier 3", "tier": 3, "code": code, "origin": ORIGIN, "severity": severity,
        "type": code, "sentence": sentence, "message": sentence, "detail": None, "frames": [],
        "mentions": [{"line": line, "column": col} for line, col in lines if line is not None],
        "refs": [], "vmem": None, "mosaic_codes": [], "syntax": None,
    }


def _call_line(call: RecordedCall | None, path: str) -> int | None:
    import os

    if call is None or not call.file or os.path.realpath(call.file) != os.path.realpath(path):
        return None
    return call.line


_FRAME = re.compile(r"(?P<kind>read|write) of (?P<buf>\([^)]*\))\[(?P<range>.*?)\] from (?P<who>\d+), (?P<core>\d+),? (?P<where>\S+?):(?P<line>\d+):(?P<col>\d+)(?: \((?P<fn>[^)]*)\))?")


def _race_record(report: str, call: RecordedCall | None, sites: _CallSites, path: str) -> dict[str, Any]:
    import os

    accesses = []
    for m in _FRAME.finditer(report):
        in_file = os.path.realpath(m.group("where")) == os.path.realpath(path)
        accesses.append({"kind": m.group("kind"), "dma": int(m.group("who")) >= 100, "core": int(m.group("core")),
                         "line": int(m.group("line")) if in_file else None, "col": int(m.group("col")),
                         "buffer": m.group("buf")})
    # The finding goes on a core's own access (the DMA's is related); two cores: the first one.
    accesses.sort(key=lambda a: (a["dma"], a["line"] is None))
    if len(accesses) >= 2:
        a, b = accesses[0], accesses[1]
        who_b = "an async copy (DMA)" if b["dma"] else f"core {b['core']}"
        line_b = f" at line {b['line']}" if b["line"] else ""
        who_a = "an async copy (DMA)" if a["dma"] else f"core {a['core']}"
        sentence = (f"DMA race: this {a['kind']} of {_buffer_name(a['buffer'])} by {who_a} is not ordered "
                    f"with the {b['kind']} by {who_b}{line_b}")
    else:
        sentence = "DMA race detected by the TPU interpreter"
    lines = [(x["line"], x["col"] - 1 if x["col"] else None) for x in accesses if x["line"]]
    if not lines:
        lines = [(_call_line(call, path), None)]
    rec = _base("PLS301", sentence, path, lines)
    rec["detail"] = report
    return rec


def _dma_order_record(problem: dict[str, Any], dma_lines: list[int], starts: list[int], path: str) -> dict[str, Any]:
    """PLS301 when the result depends on when async copies complete (no racing line named).

    Marked: the second ``.start()`` of the kernel (the first copy issued while another may still be
    in flight), else its first async copy.
    """
    how = (f"max abs difference {problem['max_abs']:.3g}" if problem["kind"] == "mismatch"
           else "some blocks come back NaN")
    sentence = ("DMA race: the result depends on when the async copies complete — with each DMA finishing as soon as "
                f"it starts instead of at its wait, output {problem.get('index') or 0} changes ({how}). Two copies "
                f"probably write one buffer, or a buffer is reused before its copy is waited on (async copies at "
                f"lines {', '.join(map(str, dma_lines))}); the interpreter's race detector did not name a line")
    anchor = starts[1] if len(starts) >= 2 else dma_lines[0]
    return _base("PLS301", sentence, path, [(anchor, None)] + [(line, None) for line in dma_lines if line != anchor])


def _buffer_name(buf: str) -> str:
    space = buf.strip("()").split(",")[0].strip(" '\"")
    return {"vmem": "a VMEM buffer", "smem": "an SMEM buffer", "hbm": "an HBM buffer"}.get(space, "a buffer")


_OOB = re.compile(r"Out-of-bounds (?:read|write|swap|block index)[^\n]*")


def _exception_record(exc: BaseException, call: RecordedCall | None, sites: _CallSites, path: str) -> dict[str, Any]:
    rec = errors_mod.record(exc, path, stage="tier 3")
    full = str(exc) + "\n" + "\n".join(str(getattr(e, "args", "")) for e in (exc.__cause__, exc.__context__) if e)
    m = _OOB.search(full)
    rec.update(tier=3, origin=ORIGIN, severity="error")
    if m:
        rec["code"] = "PLS302"
        what = _oob_sentence(m.group(0))
        rec["sentence"] = f"{what}: on a TPU this reads past the array (interpret=True alone would clamp it silently)"
        block = _BLOCK_OOB.search(m.group(0))
        if block:
            spec = _spec_line(block.group("name"), call, sites, path)
            window = ", ".join(f"{a}:{b}" for a, b in _SLICE.findall(block.group("window")))
            rec["sentence"] = (f"the index_map of input {block.group('name')} returns block {block.group('block')} at grid "
                               f"step {block.group('step')}: it reads [{window}] of an array of shape "
                               f"{block.group('shape')}, past its end")
            if spec is not None:
                rec["mentions"] = [{"line": spec[0], "column": spec[1]}]
                rec["frames"] = []  # the BlockSpec is the place, not the pallas_call frame
            return rec
        dma_lines = _dma_lines(call, path) if re.search(r"\b(hbm|vmem|any)\b", m.group(0)) else []
        if dma_lines:
            rec["mentions"] = [{"line": line, "column": None} for line in dma_lines] + rec["mentions"]
            if len(dma_lines) > 1:
                rec["sentence"] += " (the interpreter does not say which copy: the first of the kernel's DMAs is marked)"
    else:
        rec["code"] = "PLS300"
    return rec


_BLOCK_OOB = re.compile(r'Out-of-bounds block index (?P<block>\(.*?\)) for input "(?P<name>[^"]+)" in iteration '
                        r'(?P<step>\(.*?\)).*?reading \[(?P<window>.*)\] but input has shape (?P<shape>\(.*?\))')


def _spec_line(name: str, call: RecordedCall | None, sites: "_CallSites", path: str) -> tuple[int, int] | None:
    """Where the in_specs entry of the kernel parameter ``name`` is written (line 1-based, column)."""
    import inspect

    if call is None:
        return None
    try:
        params = list(inspect.signature(call.kernel).parameters)
    except (TypeError, ValueError):
        return None
    if name not in params:
        return None
    grid_spec = call.kwargs.get("grid_spec")
    prefetch = int(getattr(grid_spec, "num_scalar_prefetch", 0) or 0)
    index = params.index(name) - prefetch
    return sites.element_line(_call_line(call, path), "in_specs", index)


_SLICE = re.compile(r"slice\((-?\d+), (-?\d+), (?:1|None)\)")


def _oob_sentence(text: str) -> str:
    """'Out-of-bounds read of (0 0 hbm 100): reading [(slice(32, 40, 1), ...)] but buffer has shape
    (32, 128).' -> 'Out-of-bounds read: [32:40, 0:128] of an HBM buffer of shape (32, 128)'."""
    m = re.match(r"Out-of-bounds (read|write|swap) of \(\d+ \d+ (\w+) \d+\): \w+ \[(.*)\] but buffer has shape (\(.*?\))", text)
    if not m:
        return text.rstrip(".")
    window = ", ".join(f"{a}:{b}" for a, b in _SLICE.findall(m.group(3))) or m.group(3)
    kind = "DMA read" if m.group(1) == "read" and m.group(2) in ("hbm", "any") else m.group(1)
    return f"Out-of-bounds {kind}: [{window}] of {_buffer_name('(' + m.group(2) + ')')} of shape {m.group(4)}"


_COPY = re.compile(r"\b(?:make_async_copy|async_copy|make_async_remote_copy)\s*\(")
_START = re.compile(r"\.start\(\s*\)")


def _dma_lines(call: RecordedCall | None, path: str) -> list[int]:
    """Lines of the kernel (in the user's file) that make an async copy, in order."""
    return _kernel_lines(call, path, _COPY)


def _kernel_lines(call: RecordedCall | None, path: str, pattern: re.Pattern[str]) -> list[int]:
    """1-based lines of the call's kernel function (in the user's file) matching ``pattern``."""
    import inspect
    import os

    if call is None or not call.kernel_file or os.path.realpath(call.kernel_file) != os.path.realpath(path):
        return []
    try:
        lines, first = inspect.getsourcelines(call.kernel)
    except (OSError, TypeError):
        return []
    return [first + i for i, line in enumerate(lines) if pattern.search(line)]


def _semantics_disagreement(exc: BaseException, call, sites: _CallSites, path: str) -> dict[str, Any]:
    line = sites.keyword_line(_call_line(call, path), "compiler_params", "dimension_semantics")
    sem = dimension_semantics(call.kwargs.get("compiler_params")) if call else None
    sentence = (f"the TPU interpreter rejects dimension_semantics {sem!r}: it needs the \"parallel\" axes to come "
                "first, while the TPU compiler accepts this order. Tier 3 ran with the later parallel axes as "
                "\"arbitrary\"; the compiler tiers decide what compiles")
    rec = _base("PLS305", sentence, path, [line or (_call_line(call, path), None)], severity="warning")
    rec["detail"] = str(exc)
    return rec


def _result_record(problem, call, sites, path, cause, sem) -> dict[str, Any]:
    call_line = _call_line(call, path)
    out_blocks = block_shapes(call.kwargs.get("out_specs")) if call else []
    index = problem.get("index") or 0
    block = out_blocks[index].block_shape if index < len(out_blocks) else None
    where = [(call_line, None)]
    if cause and cause[0] == "semantics":
        axes = cause[1]
        line = sites.keyword_line(call_line, "compiler_params", "dimension_semantics")
        where = [line] if line else where
        axis_text = f"grid axis {axes[0]}" if axes else "a grid axis marked \"parallel\""
        explain = (f"; {axis_text} carries state from step to step (a reduction) but is marked \"parallel\": with it "
                   "\"arbitrary\" the result matches the reference. Parallel steps may run in any order and be split "
                   "between TensorCores")
    elif cause and cause[0] == "uninitialized":
        line = sites.keyword_line(call_line, "scratch_shapes")
        where = [line] if line else where
        explain = ("; the NaN is computed, not left over: the kernel reads memory it never wrote, such as an "
                   "accumulator or scratch buffer not reset on the first step of the reduction"
                   + (" (the scratch buffers are marked)" if line else ""))
    elif cause and cause[0] == "unwritten":
        line = sites.keyword_line(call_line, "out_specs")
        where = [line] if line else where
        explain = "; no grid step writes these blocks: check the out_specs index_map and the kernel's pl.when conditions"
    else:
        explain = ""
    if problem["kind"] == "nan":
        hit = blocks_hit(problem["mask"], block)
        total = math.prod(-(-n // (b or 1)) for n, b in zip(problem["shape"], block or problem["shape"]))
        shown = ", ".join(str(b) for b in hit[:8]) + (" ..." if len(hit) > 8 else "")
        sentence = (f"output {index}: {len(hit)} of {total} blocks (block shape {tuple(block) if block else problem['shape']}) "
                    f"come back NaN, the interpreter's fill for memory never written: blocks {shown}" + explain)
        code = "PLS303"
    elif problem["kind"] == "mismatch":
        sentence = (f"output {index} differs from the reference in {problem['count']} of {problem['size']} elements: "
                    f"max abs error {problem['max_abs']:.3g}, max rel error {problem['max_rel']:.3g} "
                    f"(atol {problem['atol']:g}, rtol {problem['rtol']:g})" + explain)
        code = "PLS304"
    else:
        sentence = problem["message"]
        code = "PLS304"
    if cause and cause[0] == "semantics" and code == "PLS303":
        code = "PLS304"  # the cause is the wrong semantics, not an unwritten block
    return _base(code, sentence, path, where)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""
