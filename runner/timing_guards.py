"""The checks a candidate passes before any time is taken (worker side: imports jax).

Each check returns plain records ``{"trick": NAME, "message": ...}`` whose message names what the
candidate did; `time` and `profile` refuse to time a candidate with a rejection. Tricks:

- ``no_pallas_call``: the traced program has no pallas_call; ``pallas_call_unused``: it has one
  but no output depends on it (the kernel's result is thrown away);
- ``calls_reference``: tracing the candidate entered the reference's code (its output is the
  reference's, whatever kernel it also launches);
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

import sys
from typing import Any, Callable

import jax
import numpy as np

from .certain_work import sub_jaxprs
from .interpret_compare import compare


def reject(trick: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"trick": trick, "message": message, **extra}


# --------------------------------------------------------------------------- the traced program


def pallas_calls(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[int, bool]:
    """(pallas_call sites in the program ``fn`` traces to, whether any output depends on one)."""
    closed = jax.make_jaxpr(fn)(*args)
    taint, count = _taint(closed.jaxpr, [False] * len(closed.jaxpr.invars))
    return count, any(taint)


def _taint(jaxpr: Any, in_taint: list[bool]) -> tuple[list[bool], int]:
    """Forward pass: which outputs depend on a pallas_call result, and how many calls there are."""
    from jax.extend import core as jcore

    tainted = {v for v, t in zip(jaxpr.invars, in_taint) if t}
    count = 0

    def is_tainted(v: Any) -> bool:
        return not isinstance(v, jcore.Literal) and v in tainted

    for eqn in jaxpr.eqns:
        ins = [is_tainted(v) for v in eqn.invars]
        if eqn.primitive.name == "pallas_call":
            count += 1
            outs = [True] * len(eqn.outvars)
        else:
            outs = [any(ins)] * len(eqn.outvars)
            for sub in sub_jaxprs(eqn.params):
                sub_in = ins if len(sub.invars) == len(ins) else [any(ins)] * len(sub.invars)
                sub_out, sub_count = _taint(sub, sub_in)
                count += sub_count
                if len(sub_out) == len(outs):
                    outs = [a or b for a, b in zip(outs, sub_out)]
                elif any(sub_out):
                    outs = [True] * len(outs)
        for v, t in zip(eqn.outvars, outs):
            if t:
                tainted.add(v)
    return [is_tainted(v) for v in jaxpr.outvars], count


def trace_entering(fn: Callable[..., Any], args: tuple[Any, ...], watched: Callable[[Any], bool]) -> list[str]:
    """Trace ``fn`` abstractly and return the code objects entered for which ``watched`` is true."""
    seen: dict[Any, None] = {}

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and watched(frame.f_code):
            seen.setdefault(frame.f_code, None)

    old = sys.getprofile()
    sys.setprofile(profile)
    try:
        jax.eval_shape(fn, *args)
    finally:
        sys.setprofile(old)
    return [f"{code.co_filename}:{code.co_firstlineno} {code.co_name}" for code in seen]


def program_checks(candidate: Callable[[], Callable[..., Any]], args: tuple[Any, ...],
                   reference: Callable[..., Any] | None, reference_file: str | None,
                   candidate_file: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rejections from the program the candidate traces to, and what was counted. ``candidate()``
    gives the candidate for one trace (each trace its own instance: timing.Prepared.probe)."""
    import inspect
    import os

    rejections: list[dict[str, Any]] = []
    ref_code = getattr(inspect.unwrap(reference), "__code__", None) if reference is not None else None
    other_file = (os.path.realpath(reference_file) if reference_file
                  and os.path.realpath(reference_file) != os.path.realpath(candidate_file) else None)

    # by place, not identity: the candidate is traced in its own instance of the file (timing.Prepared.probe)
    ref_place = (ref_code.co_filename, ref_code.co_firstlineno, ref_code.co_name) if ref_code is not None else None
    real: dict[str, str] = {}  # co_filename -> its real path: the profile hook sees every call of the trace

    def in_other_file(name: str) -> bool:
        if name not in real:
            real[name] = os.path.realpath(name)
        return real[name] == other_file

    def watched(code: Any) -> bool:
        return ((code.co_filename, code.co_firstlineno, code.co_name) == ref_place
                or (other_file is not None and in_other_file(code.co_filename)))

    entered = trace_entering(candidate(), args, watched) if (ref_code is not None or other_file) else []
    count, live = pallas_calls(candidate(), args)
    work = floor_work(candidate(), args)
    if entered:
        rejections.append(reject("calls_reference", "the candidate calls the reference "
                                 f"({entered[0]}): its output is the reference's, not a kernel's"))
    if count == 0:
        rejections.append(reject("no_pallas_call", "no pallas_call ran: the candidate is not a Pallas kernel "
                                 "(nothing to time against the XLA reference)"))
    elif not live:
        rejections.append(reject("pallas_call_unused", f"the candidate launches {count} pallas_call(s) but no "
                                 "output depends on them: the kernel's result is thrown away"))
    return rejections, {"pallas_calls": count, "pallas_output_used": live, "reference_entered": entered,
                        "floor_work": work}


def floor_work(fn: Callable[..., Any], args: tuple[Any, ...]) -> dict[str, Any] | None:
    """The matmul FLOPs the program certainly does at these shapes, by dtype (runner/certain_work
    ``certain_mxu_flops``): the device timing's compute floor (engine/device_floor.py). None when it
    cannot be counted (no floor rather than a wrong one)."""
    from .certain_work import certain_mxu_flops

    try:
        flops = certain_mxu_flops(jax.make_jaxpr(fn)(*args).jaxpr)
    except Exception:  # noqa: BLE001 - a trace that fails here fails the checks elsewhere, with its reason
        return None
    shapes = [[list(getattr(a, "shape", ())), str(getattr(a, "dtype", ""))] for a in jax.tree.leaves(args)]
    return {"mxu_flops": {d: int(f) for d, f in flops.items() if f}, "inputs": shapes}


# --------------------------------------------------------------------------- values


def snapshot(args: tuple[Any, ...]) -> list[np.ndarray]:
    return [np.array(a, copy=True) for a in jax.tree.leaves(args)]


def inputs_changed(args: tuple[Any, ...], saved: list[np.ndarray]) -> dict[str, Any] | None:
    """A rejection when a call deleted (donated) or changed one of its inputs."""
    for index, (leaf, before) in enumerate(zip(jax.tree.leaves(args), saved)):
        if getattr(leaf, "is_deleted", lambda: False)():
            return reject("input_mutation", f"input {index} was donated to the candidate and deleted by the call: "
                          "a kernel may not consume or overwrite its inputs")
        after = np.asarray(leaf)
        if after.shape != before.shape or not np.array_equal(after, before, equal_nan=True):
            changed = int(np.sum(~((after == before) | (np.isnan(after.astype(np.float64)) & np.isnan(before.astype(np.float64))))))
            return reject("input_mutation", f"input {index} was modified by the call ({changed} of {before.size} "
                          "elements changed): a kernel may not write its inputs")
    return None


def at_output_scale(expected: Any, tolerance: tuple[float, float]) -> tuple[tuple[float, float], str | None]:
    """The tolerance for outputs the task's own inputs make smaller than its ``atol`` (JAXBench's
    paged attention: values of 0.005 against atol 0.01, where zeros would pass): ``atol`` taken
    relative to the largest output, so the comparison proves something. (tolerance, note or None)."""
    atol, rtol = tolerance
    if degenerate(expected, tolerance) is None:
        return tolerance, None
    top = max((float(np.max(np.abs(np.asarray(r, dtype=np.float64)[np.isfinite(np.asarray(r, dtype=np.float64))]),
                             initial=0.0)) for r in jax.tree.leaves(expected)), default=0.0)
    if top <= 0.0:
        return tolerance, None
    scaled = (atol * top, rtol)
    return scaled, (f"the task's own outputs are at most {top:.3g}, within its atol={atol:g}: compared with atol "
                    f"{scaled[0]:.3g} (its atol relative to the largest output), rtol={rtol:g}")


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
            return reject("wrong_result", f"output {p['index']}: {p['count']} of {p['size']} elements outside "
                          f"atol={p['atol']:g}, rtol={p['rtol']:g} of the reference (max abs error {p['max_abs']:.3g})",
                          mismatched=p["count"], size=p["size"], max_abs=p["max_abs"])
    return None


def matches(outputs: Any, expected: Any, tolerance: tuple[float, float]) -> bool:
    try:
        return not compare(outputs, expected, tolerance)
    except Exception:  # noqa: BLE001 - different structures do not match
        return False
