"""The worker's ``profile`` op: a trace of the candidate, per-kernel device time, the roofline.

The candidate passes the same checks as for ``time`` (the judge: runner/judging/judge.py), is
compiled outside the trace, then runs ``runs`` times under ``jax.profiler.trace``
(``runner/measure/profiling.py``: one trace per process) and as many times untraced (the difference is
the profiler's overhead). Per-kernel time comes from the device plane's "XLA Ops" events inside
the candidate's module runs. Work: FLOPs from XLA's cost analysis of the reference (a pallas_call
reports none), bytes as inputs plus outputs once (the least traffic the kernel can have). Peaks
from the chip table (jax's own, ``runner/chip_probe.py``) for the device's chip, or for ``target`` when there is
no TPU (then only the bound is given, as an estimate: CPU interpret time says nothing about a chip),
or ``peak_flops``/``peak_bytes_per_s`` from the request (a GPU's). The trace file stays on the
worker's host; its path is returned for XProf / TensorBoard.

Worker side: imports jax.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from typing import Any, Callable

import jax
import numpy as np

from ..measure import profiling
from ..tasks import tasks_runtime
from ..measure import timing_inputs as inputs_mod
from ..measure.timing import CANDIDATE, Prepared, TimingError, _execution, _failed, _named, _say, _seed, prepared



def handle_profile(params: dict[str, Any], progress: Callable[..., Any] | None = None) -> dict[str, Any]:
    """The ``profile`` op: a trace of the candidate, per-kernel device time, the roofline."""
    from .judge import judged_time

    say = _say(progress)
    runs = max(1, int(params.get("runs", 5)))
    seed = _seed(params)
    judged = judged_time({**params, "shrink": True, "extra_shape": False}, progress)  # the checks `time` runs
    if judged.get("verdict") != "ok":
        return judged
    try:
        with prepared(params) as prep:
            result = {**judged, "device": {"platform": prep.platform, "device_kind": prep.device_kind}}
            checked = judged.get("checks") or {}
            if checked.get("reduced") and "full_inputs" in checked and prep.task.format in ("jaxbench", "maxkernel"):
                raise TimingError("not profiled here: the task is checked at a reduced CONFIG size on the CPU; profile "
                                  "it on a device backend (--backend local|ssh|ray on a TPU host)")
            shapes = _abstract(checked.get("inputs")) if not prep.on_device else prep.task.abstract_args()
            args = inputs_mod.fresh_inputs(shapes, seed + 3, prep.template())
            cand = _named(prep.candidate, CANDIDATE)
            trace_dir = str(params.get("trace_dir") or tempfile.mkdtemp(prefix="pallasite-profile-"))
            with _execution(prep, False):
                jax.block_until_ready(cand(*inputs_mod.copies(args)))  # compile outside the trace
                say(f"tracing {runs} run(s)")
                started = time.perf_counter_ns()
                with profiling.capture(trace_dir) as trace:
                    for _ in range(runs):
                        jax.block_until_ready(cand(*args))
                traced_wall = (time.perf_counter_ns() - started) / runs
                untraced = []
                for _ in range(runs):
                    start = time.perf_counter_ns()
                    jax.block_until_ready(cand(*args))
                    untraced.append(time.perf_counter_ns() - start)
            profile = profiling.load(trace.path) if trace.path else None
            module_ns = profiling.module_times(profile, f"jit_{CANDIDATE}") if profile is not None else []
            kernels = profiling.kernel_times(profile, f"jit_{CANDIDATE}") if profile is not None else {}
            wall_ns = statistics.median(untraced)
            device_ns = statistics.median(module_ns) if module_ns else None
            flops, nbytes, sources = _work(prep, prep.task.abstract_args())  # the task's work, at full size
            peak_flops, peak_bw, chip = _peaks(prep, params)
            seconds = (device_ns or wall_ns) / 1e9
            result["trace"] = trace.path
            result["profile"] = {
                "runs": runs,
                "device_ns": device_ns,
                "wall_ns": wall_ns,
                "traced_wall_ns": traced_wall,
                "profiler_overhead": (traced_wall / wall_ns - 1.0) if wall_ns else None,
                "kernels": [{"name": k, "device_ns_per_run": v["total_ns"] / runs, "events": v["count"]}
                            for k, v in sorted(kernels.items(), key=lambda kv: -kv[1]["total_ns"])],
                "work": sources,
                "roofline": profiling.roofline(flops, nbytes, seconds if device_ns is not None else None, peak_flops, peak_bw),
                "chip": chip,
                "time_source": ("device events of /device planes" if device_ns is not None else
                                "host wall clock: the trace held no device events for the kernel (not device time)"
                                if prep.on_device else "wall clock: no device plane (CPU interpret mode; not TPU time)"),
            }
            if not prep.on_device:
                result["notes"].append("no accelerator: achieved FLOP/s and bytes/s are not computed from CPU "
                                       f"interpret time; the bound shown is the {chip}'s roofline for this work (an estimate)")
            return result
    except (TimingError, tasks_runtime.TaskError, profiling.TraceBusy) as exc:
        return _failed(params, str(exc))


def _abstract(signature: Any) -> tuple[Any, ...]:
    return tuple(jax.ShapeDtypeStruct(tuple(int(d) for d in shape), np.dtype(dtype)) for shape, dtype in signature or ())


def _work(prep: Prepared, args: tuple[Any, ...]) -> tuple[float | None, float | None, dict[str, str]]:
    """FLOPs (from XLA's cost analysis of the reference: a pallas_call reports none) and bytes
    (inputs plus outputs once: the least memory traffic the kernel can have)."""
    flops = None
    try:
        cost = jax.jit(prep.reference).lower(*args).compile().cost_analysis()
        cost = cost[0] if isinstance(cost, (list, tuple)) else cost
        flops = float(cost.get("flops")) if cost and cost.get("flops") is not None else None
    except Exception:  # noqa: BLE001 - unknown work is reported as unknown
        flops = None
    outs = jax.eval_shape(prep.reference, *args)
    nbytes = float(sum(np.prod(a.shape) * np.dtype(a.dtype).itemsize for a in jax.tree.leaves((args, outs))))
    return flops, nbytes, {"flops": "XLA cost analysis of the reference (same math)",
                           "bytes": "inputs + outputs, each once (the least memory traffic)"}


def _peaks(prep: Prepared, params: dict[str, Any]) -> tuple[float | None, float | None, str]:
    if params.get("peak_flops") or params.get("peak_bytes_per_s"):
        return params.get("peak_flops"), params.get("peak_bytes_per_s"), "given in the request"
    from ...analysis.types import DEFAULT_CHIP, chip_target

    from ..chip_probe import spec_from_jax

    name = prep.device_kind if prep.platform == "tpu" else str(params.get("chip") or DEFAULT_CHIP)
    try:
        spec = spec_from_jax(chip_target(name))
    except ValueError:
        return None, None, f"{prep.device_kind} (no roofline: not in the chip table)"
    if spec is None:
        return None, None, f"{name} (no roofline: the installed jax has no table row)"
    return spec.bf16_flops * spec.device_cores, spec.hbm_bytes_per_s * spec.device_cores, spec.name
