"""The comparisons a candidate passes before any time is taken, and the record each rejection is (worker
side: imports jax).

Each check returns plain records ``{"trick": NAME, "message": ...}`` whose message names what the
candidate did; `time` and `profile` refuse to time a candidate with a rejection. The judge reads the
tricks of the program itself from its module (runner/judging/exported_run.py: ``no_pallas_call``,
``pallas_call_unused``, ``calls_reference``, ``kernel_fault``); the comparisons here give:

- ``partial_write``: output elements came back as the NaN fill of fresh memory;
- ``cached_result``: on a second set of fresh inputs the candidate returned what the reference
  gives for the first set (a result kept from an earlier call);
- ``precomputed_result``: on fresh inputs it returned what the reference gives for the task's own
  example inputs (an answer computed ahead of time);
- ``input_mutation``: an input was donated (deleted) or its values changed by the call;
- ``wrong_result``: outputs outside the task's tolerance of the reference;
- ``shape_specialised``: right at the example shape, wrong (or failing) at a second shape;
- ``degenerate_comparison``: all zeros (or a constant) would pass this comparison, so passing it
  proves nothing: the task's inputs or tolerance must change.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np

from ..program.certain_work import sub_jaxprs
from ..tier3.interpret_compare import compare


def reject(trick: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"trick": trick, "message": message, **extra}


# --------------------------------------------------------------------------- the traced program


def floor_work(fn: Callable[..., Any], args: tuple[Any, ...]) -> dict[str, Any] | None:
    """The matmul FLOPs the program certainly does at these shapes, by dtype (runner/program/certain_work
    ``certain_mxu_flops``): the device timing's compute floor (engine/device_floor.py). None when it
    cannot be counted (no floor rather than a wrong one)."""
    from ..program.certain_work import certain_mxu_flops

    try:
        flops = certain_mxu_flops(jax.make_jaxpr(fn)(*args).jaxpr)
    except Exception:  # noqa: BLE001 - a trace that fails here fails the checks elsewhere, with its reason
        return None
    shapes = [[list(getattr(a, "shape", ())), str(getattr(a, "dtype", ""))] for a in jax.tree.leaves(args)]
    return {"mxu_flops": {d: int(f) for d, f in flops.items() if f}, "inputs": shapes}


# --------------------------------------------------------------------------- values


def snapshot(args: tuple[Any, ...]) -> list[np.ndarray]:
    return [np.array(a, copy=True) for a in jax.tree.leaves(args)]


def degenerate(expected: Any, tolerance: tuple[float, float]) -> dict[str, Any] | None:
    """A rejection when zeros, or one constant, would pass the comparison with ``expected``."""
    atol, rtol = tolerance
    for index, ref in enumerate(jax.tree.leaves(expected)):
        r = np.asarray(ref).astype(np.float64)
        finite = r[np.isfinite(r)]
        if finite.size == 0:
            return reject("degenerate_comparison", f"the reference's output {index} has no finite value: "
                          "nothing can be compared")
        bound = atol + rtol * np.abs(finite)
        if np.all(np.abs(finite) <= bound):
            return reject("degenerate_comparison", f"an all-zero output {index} would pass this comparison "
                          f"(reference max |value| {np.max(np.abs(finite)):.3g} within atol={atol:g}, rtol={rtol:g}): "
                          "passing proves nothing; change the task's inputs or tolerance")
        c = float(np.mean(finite))
        if np.all(np.abs(finite - c) <= bound):
            return reject("degenerate_comparison", f"a constant output {index} ({c:.3g} everywhere) would pass "
                          "this comparison: passing proves nothing; change the task's inputs or tolerance")
    return None


def compare_outputs(outputs: Any, expected: Any, tolerance: tuple[float, float]) -> dict[str, Any] | None:
    """A rejection for unwritten or wrong outputs (None when they pass)."""
    problems = compare(outputs, expected, tolerance)
    for p in problems:
        if p["kind"] == "structure":
            return reject("wrong_result", p["message"])
    for p in problems:
        if p["kind"] == "nan":
            mask = p["mask"]
            return reject("partial_write", f"output {p['index']}: {int(mask.sum())} of {mask.size} elements were never "
                          "written (the NaN fill of fresh memory came back): the kernel writes only part of its output",
                          unwritten=int(mask.sum()), size=int(mask.size))
    for p in problems:
        if p["kind"] == "mismatch":
            source = p.get("source")  # where the tolerance came from (interpret_compare.Tolerance)
            return reject("wrong_result", f"output {p['index']}: {p['count']} of {p['size']} elements outside "
                          f"atol={p['atol']:.3g}, rtol={p['rtol']:.3g}" + (f" ({source})" if source else "")
                          + f" of the reference (max abs error {p['max_abs']:.3g})",
                          mismatched=p["count"], size=p["size"], max_abs=p["max_abs"])
    return None


def matches(outputs: Any, expected: Any, tolerance: tuple[float, float]) -> bool:
    try:
        return not compare(outputs, expected, tolerance)
    except Exception:  # noqa: BLE001 - different structures do not match
        return False
