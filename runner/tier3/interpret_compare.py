"""Tier 3's verdict on numbers: outputs against the reference, and regions the kernel never wrote.

The TPU interpreter fills fresh memory with NaN (integers: their max value), so an output block no
grid step wrote, or one computed from memory never written, comes back as that fill value.
``compare`` separates those regions ("nan") from values outside the tolerance ("mismatch"), and
says when an output is of another kind of dtype than the reference's ("dtype": integers where the
reference has floats) or a float of another width ("dtype" with ``width``: bfloat16 where the reference
returns float32; its values are still compared, at the output's tolerance).
Plain numpy and jax.tree; no interpreter state.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

# Default (atol, rtol) by output dtype; a task's TOLERANCE overrides them.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-5, 1e-5),
    "float16": (1e-3, 1e-3),
    "bfloat16": (2e-2, 2e-2),
}
# JAXBench's and KernelBench's own rule for their tasks (JAXBench harness/correctness.py: atol=rtol=1e-2, "the
# same tolerance as KernelBench"): a task in their layout that states none is held to what its benchmark holds
# it to, not to float32's 1e-5, which a float32 contraction misses by accumulation order alone (K=1024 in four
# blocks of 256: about 1,000 of 262,144 elements off by up to 8e-5; docs/task-convention.md)
BENCHMARK_FORMATS = ("jaxbench", "kernelbench")
BENCHMARK_TOLERANCE = (1e-2, 1e-2)
BENCHMARK_SOURCE = "JAXBench's own default for its tasks, atol=rtol=1e-2"


class Tolerance(tuple):
    """(atol, rtol), unpacked as a pair, with ``source``: where it came from, said in every verdict that
    compares ("the task's TOLERANCE in baseline.py", "the float32 default", ...)."""

    source: str

    def __new__(cls, atol: float, rtol: float, source: str = "") -> "Tolerance":
        made = super().__new__(cls, (float(atol), float(rtol)))
        made.source = source
        return made

    def __reduce__(self) -> Any:
        return (Tolerance, (self[0], self[1], self.source))


def tolerance_for(task: Any, outputs: Any) -> Tolerance | None:
    """The tolerance ``outputs`` are compared at: the task's own (its ``tolerance``, read by the task readers
    from TOLERANCE, a JAXBench task's CONFIG atol/rtol, or MaxKernel's YAML), else its benchmark's rule for a
    JAXBench or KernelBench task, else the output dtype's default. A default that every reference value lies
    within (zeros would pass) is taken relative to the largest output, so the comparison proves something."""
    tol = getattr(task, "tolerance", None)
    if isinstance(tol, dict) and ("atol" in tol or "rtol" in tol):
        source = getattr(task, "tolerance_source", None) or "the task's TOLERANCE"
        return Tolerance(float(tol.get("atol", 0.0)), float(tol.get("rtol", 0.0)), source)
    leaves = jax.tree.leaves(outputs)
    if not leaves:
        return None
    name = jnp.dtype(leaves[0].dtype).name
    atol, rtol = TOLERANCES.get(name, (0.0, 0.0))
    source = f"the {name} default; a task states its own with TOLERANCE"
    if getattr(task, "format", None) in BENCHMARK_FORMATS and name in TOLERANCES:
        atol, rtol = max(atol, BENCHMARK_TOLERANCE[0]), max(rtol, BENCHMARK_TOLERANCE[1])
        source = (f"{BENCHMARK_SOURCE}" + ("" if (atol, rtol) == BENCHMARK_TOLERANCE else f" ({name}: {atol:g})")
                  + "; a task states its own with TOLERANCE or CONFIG atol/rtol in baseline.py")
    top = output_scale(outputs, atol, rtol)
    if top is not None:
        atol, source = atol * top, f"{source}; atol relative to the largest output, {top:.3g}"
    return Tolerance(atol, rtol, source)


def output_scale(expected: Any, atol: float, rtol: float) -> float | None:
    """The largest |value| of ``expected`` when an all-zero output would pass at (atol, rtol) (every finite
    value within atol + rtol * |value|), else None: such an atol proves nothing at this scale."""
    top = 0.0
    degenerate = False
    for ref in jax.tree.leaves(expected):
        r = np.asarray(ref).astype(np.float64)
        finite = np.abs(r[np.isfinite(r)])
        if finite.size == 0:
            continue
        top = max(top, float(finite.max()))
        degenerate = degenerate or bool(np.all(finite <= atol + rtol * finite))
    return top if degenerate and top > 0.0 else None


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
            if _kind(out.dtype) != _kind(ref.dtype):  # int results where the reference has floats, ...
                problems.append({"kind": "dtype", "index": index, "dtype": out.dtype.name, "expected": ref.dtype.name,
                                 "shape": out.shape})
                continue
            if out.dtype != ref.dtype and _kind(out.dtype) == "f":  # a float of another width: said, then compared
                problems.append({"kind": "dtype", "index": index, "dtype": out.dtype.name, "expected": ref.dtype.name,
                                 "shape": out.shape, "width": True})
            unwritten &= ~_unwritten(ref.astype(out.dtype)) if ref.dtype == out.dtype else ~np.isnan(ref.astype(np.float64))
        if unwritten.any():
            problems.append({"kind": "nan", "index": index, "mask": unwritten, "shape": out.shape, "dtype": out.dtype.name})
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
                             "source": getattr(tolerance, "source", ""),
                             "shape": out.shape, "dtype": out.dtype.name})
    return problems


def _kind(dtype: np.dtype) -> str:
    """"f" floating (bfloat16 included), "i" integer, "b" bool, "c" complex."""
    if dtype.name == "bfloat16" or np.issubdtype(dtype, np.floating):
        return "f"
    if np.issubdtype(dtype, np.complexfloating):
        return "c"
    return "b" if dtype == np.bool_ else "i"


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
