"""The judge of a ``time`` request from the candidate's exported program: on a device the process that
holds the chip never runs the candidate's Python.

The judge (the request's sandboxed process) forks the candidate's process first, loads the task and
its reference from the user's own file, starts its backend (on an accelerator: takes the chip), and
names the shapes: the trusted task's inputs, and a second shape when that file allows one. The
candidate's process, which never starts anything but the CPU backend, imports the candidate, runs
the program checks on its own trace (a pallas_call reaching the outputs, the reference not called),
and exports its entry at exactly those shapes for the judge's backend: lowered for the TPU by Mosaic
on a TPU judge, with every pallas_call in the plain HLO interpreter on a CPU judge (no host
callbacks: TPU interpret mode would need them). It sends each module serialized (``jax.export``
bytes) and is ended before anything is run or timed, so nothing of it is alive while the judge
compares or clocks. The judge checks the bytes itself (``runner/judge_export_check.py``: a module
that needs host callbacks is refused with why), compiles them, draws the inputs from its own seed,
compares with the reference it computed (two input sets, a second shape, degenerate comparisons,
precomputed answers, and the outputs of the timed program once more after timing), and times the
program against the reference by its own clock, interleaved, the profiler's device plane on an
accelerator (``runner/timing.py``'s ``time_pair``). A candidate that patches numpy, the comparison,
the clock, the estimator or the reply patches a process that is gone; a program that behaves one way
when tested and another when timed cannot exist: one module is tested and timed.

Taken for model-written code on an accelerator, on a worker that plays one
(``PALLASITE_STANDIN_DEVICE=1``: the stand-in device, engine/standin.py), or when the request asks
(``TimeParams.judge == "export"``). Without a file of the user's to judge against, on a device the
request is refused: the candidate's process never judges itself there. Worker side: imports jax.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
import sys
import time
from typing import Any, Callable

from .judge_channel import CandidateGone, end, fork, receive, recv_frame, send_frame
from .judge_trusted import trusted

STANDIN_ENV = "PALLASITE_STANDIN_DEVICE"  # "1": this worker plays an accelerator (engine/standin.py)
TRICK = "not_exportable"


def plays_device() -> bool:
    """Whether this worker stands in for an accelerator (its JAX still runs on the CPU)."""
    return os.environ.get(STANDIN_ENV, "") not in ("", "0")


def on_accelerator() -> bool:
    """Whether this worker's JAX would hold a chip (JAX_PLATFORMS not cpu), or it plays one."""
    return os.environ.get("JAX_PLATFORMS", "").split(",")[0] != "cpu" or plays_device()


def wanted(params: dict[str, Any]) -> bool:
    """The exported-program path for this request: on a device always, else when asked."""
    return on_accelerator() or params.get("judge") == "export"


def refused_profile(params: dict[str, Any]) -> dict[str, Any]:
    """The ``profile`` op for model-written code on a device: refused (it would run the candidate's
    Python in the process that holds the chip); ``time`` judges it from its exported program."""
    from . import timing

    result = timing._failed(params, "not profiled: model-written code is not run in the process that holds the "
                                    "device; time it instead (the judge runs its exported program)")
    result["judged_by"] = "not judged: profile runs the candidate's own Python, which never runs on the device"
    return result


# --------------------------------------------------------------------------- the candidate's side


def _candidate_main(sock: Any, params: dict[str, Any]) -> None:
    """The candidate's process: CPU only; import, check, export at the shapes named; then it ends."""
    import jax

    jax.config.update("jax_platforms", "cpu")  # before any backend: this process never holds the chip
    header, _ = recv_frame(sock)
    if header.get("op") != "export":
        return
    from . import interpret_guard, timing
    from . import timing_guards as guards
    from .judge_export_check import refusal_for

    try:
        with timing.prepared(params) as prep:
            treedef = jax.tree.structure(prep.task.abstract_args())
            named = {key: _structs(header[key]) for key in ("shapes", "extra") if header.get(key) is not None}
            for key, structs in named.items():
                if len(structs) != treedef.num_leaves:
                    raise timing.TimingError(f"the judge named {len(structs)} inputs; the candidate's task takes "
                                             f"{treedef.num_leaves}")
            args = jax.tree.unflatten(treedef, named["shapes"])
            rejections, counted = guards.program_checks(prep.probe, args, prep.reference, prep.reference_file, prep.path)
            blobs, costs = [], {}
            from . import timing_inputs as inputs_mod

            for key, structs in named.items():
                started = time.perf_counter()
                scaled = header.get("extra_config") if key == "extra" else None
                try:  # a JAXBench second shape: the candidate's module reads its CONFIG at that size while traced
                    with inputs_mod.config_scaled((prep.task.entry,), scaled or None):
                        exported = _export(prep, treedef, structs, str(header["platform"]), header.get("device_kind"))
                    blob = exported.serialize()
                except Exception as exc:  # noqa: BLE001 - the program's failure is data
                    why = refusal_for(exc)
                    if why is None:
                        raise
                    send_frame(sock, {"op": "refused", "why": why, "interpret": interpret_guard.recorded()})
                    return
                costs[key] = {"trace_serialize_s": round(time.perf_counter() - started, 4), "bytes": len(blob)}
                blobs.append(blob)
        import numpy as np

        send_frame(sock, {"op": "exported", "names": list(named), "rejections": rejections, "counted": counted,
                          "costs": costs, "entry": prep.task.name, "format": prep.task.format, "config": prep.config,
                          "interpret": interpret_guard.recorded()},
                   [np.frombuffer(b, dtype=np.uint8) for b in blobs])
    except Exception as exc:  # noqa: BLE001 - the candidate's failure is data
        send_frame(sock, {"op": "failed", "error": f"{type(exc).__name__}: {exc}"[:4000]})


def _structs(signature: list[Any]) -> list[Any]:
    import jax
    import jax.numpy as jnp

    return [jax.ShapeDtypeStruct(tuple(int(d) for d in shape), jnp.dtype(str(dtype))) for shape, dtype in signature]


def _export(prep: Any, treedef: Any, structs: list[Any], platform: str, device_kind: Any) -> Any:
    """The candidate's entry exported for ``platform`` at ``structs`` (flat inputs)."""
    import jax

    def flat(*leaves: Any) -> Any:
        return prep.candidate(*jax.tree.unflatten(treedef, list(leaves)))

    fn = jax.jit(flat)
    if platform == "cpu":  # every pallas_call in the plain HLO interpreter: no host callbacks
        from jax._src import config

        previous = config.pallas_tpu_interpret_mode_context_manager.swap_local(True)
        try:
            return jax.export.export(fn, platforms=("cpu",))(*structs)
        finally:
            config.pallas_tpu_interpret_mode_context_manager.set_local(previous)
    if platform == "tpu":  # Mosaic's lowering on this CPU host, for the judge's chip
        from jax.sharding import AbstractDevice, AbstractMesh, use_abstract_mesh

        mesh = AbstractMesh((1,), ("x",), abstract_device=AbstractDevice(device_kind=str(device_kind), num_cores=1,
                                                                         platform="tpu"))
        with use_abstract_mesh(mesh):
            return jax.export.export(fn, platforms=("tpu",))(*structs)
    checks = [jax.export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")] if platform in ("cuda", "rocm") else []
    return jax.export.export(fn, platforms=(platform,), disabled_checks=checks)(*structs)


# --------------------------------------------------------------------------- the judge's side


def judged_time(params: dict[str, Any], progress: Callable[..., Any] | None = None) -> dict[str, Any]:
    """The ``time`` op judged from the candidate's exported program (see the module docstring).
    Call before this process starts a jax backend."""
    from . import timing

    say = timing._say(progress)
    sock, pid = fork(lambda s: _candidate_main(s, params))
    record: dict[str, Any] = {"how": "exported program", "judge_pid": os.getpid(), "candidate_pid": pid,
                              "candidate_imported": None, "platform": None}
    try:
        with contextlib.ExitStack() as stack:
            try:
                task, reference = trusted(params, stack)  # before the candidate's process runs anything
            except Exception as exc:  # noqa: BLE001 - nothing trusted: the candidate may not judge itself here
                return _with(timing._failed(params, f"not judged: {exc}; on a device the candidate's process never "
                                                    "judges itself (the judge needs the user's own file)"), record,
                             "not judged: no file of the user's to judge against")
            return _judge(sock, pid, params, say, task, reference, record)
    except CandidateGone as exc:
        return _with(timing._failed(params, f"the candidate process failed: {exc}"), record, None)
    finally:
        end(sock, pid)


def _with(result: dict[str, Any], record: dict[str, Any], judged_by: str | None) -> dict[str, Any]:
    record["candidate_imported"] = _candidate_imported(result.get("path"))
    result["judge"] = record
    result["judged_by"] = judged_by or (f"the judge (pid {record['judge_pid']}), which never ran the candidate: "
                                        f"no program from its process (pid {record['candidate_pid']}) to run")
    return result


def _end_the_rest() -> None:
    """In a PID namespace of this request's own (the sandbox): end every process but this one and
    its ancestors, so nothing the candidate's process left behind runs while the judge clocks."""
    try:
        with open("/proc/self/status") as status:
            nested = any(line.startswith("NSpid:") and len(line.split()) > 2 for line in status)
    except OSError:
        return
    from .sandbox import SCRATCH

    if not nested or not os.path.realpath(os.getcwd()).startswith(SCRATCH):  # only inside a request's own sandbox
        return
    keep, pid = set(), os.getpid()
    while pid > 0 and pid not in keep:
        keep.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as stat:
                pid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in keep:
            with contextlib.suppress(OSError):
                os.kill(int(name), 9)


def _candidate_imported(path: Any) -> bool:
    """Whether any module in this process was loaded from the candidate's file."""
    if not path:
        return False
    target = os.path.realpath(str(path))
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and os.path.realpath(file) == target:
            return True
    return False


def _judge(sock: Any, pid: int, params: dict[str, Any], say: Callable[[str], None], task: Any,
           reference: Callable[..., Any], record: dict[str, Any]) -> dict[str, Any]:
    import jax

    from . import timing
    from . import timing_inputs as inputs_mod
    from .judge_export_check import Refused, verified
    from .tiers import versions

    device = jax.devices()[0]  # the judge's backend: on an accelerator it now holds the chip
    platform = jax.default_backend()
    record["platform"] = platform
    shapes = task.abstract_args()
    module = sys.modules.get(getattr(task.entry, "__module__", None) or "")
    try:
        extra, how, scaled = inputs_mod.extra_shapes(task, module)
    except Exception as exc:  # noqa: BLE001
        extra, how, scaled = None, f"making the second shape failed: {type(exc).__name__}: {exc}", None
    if not params.get("extra_shape", True):
        extra, how = None, "not asked for"
    named = {"shapes": inputs_mod.signature(shapes), "extra": inputs_mod.signature(extra) if extra is not None else None}
    say("the candidate's process traces and exports its program for the judge's shapes")
    started = time.perf_counter()
    send_frame(sock, {"op": "export", **named, "extra_config": dict(scaled or {}) if extra is not None else None,
                      "platform": platform, "device_kind": device.device_kind})
    header, blobs = receive(sock)
    costs: dict[str, Any] = {"candidate_s": round(time.perf_counter() - started, 4)}
    for key, told in (header.get("costs") or {}).items() if isinstance(header.get("costs"), dict) else ():
        if key in named and isinstance(told, dict) and isinstance(told.get("trace_serialize_s"), (int, float)):
            costs[key] = {"trace_serialize_s": float(told["trace_serialize_s"])}  # (the candidate's word)
    end(sock, pid)  # the candidate's process is gone before anything is run or timed
    _end_the_rest()
    checks: dict[str, Any] = {"seed": timing._seed(params), "inputs": named["shapes"], "extra_shape": None,
                              "export": costs, **(header.get("counted") or {})}
    result = {"entry": header.get("entry") or task.name, "path": params.get("path"), "format": header.get("format"),
              "config": header.get("config") or {}, "verdict": "rejected", "rejections": [], "flags": [],
              "checks": checks, "device": {"platform": platform, "device_kind": device.device_kind},
              "provenance": "device" if platform != "cpu" else "interpret", "versions": versions(),
              "candidate": None, "reference": None, "speedup": None, "spread": None, "trace": None,
              "notes": ([f"a stand-in device ({os.environ.get(STANDIN_ENV)}): its JAX runs on the CPU"]
                        if plays_device() else [])}
    judged_by = (f"the judge, from the candidate's exported program (pid {record['judge_pid']} never ran the "
                 f"candidate; its process, pid {pid}, traced it and ended)")
    if header.get("op") == "refused":
        result["rejections"] = [{"trick": TRICK, "message": f"the judge cannot run the candidate's program: "
                                                            f"{header.get('why')}"}]
        return _with(result, record, judged_by)
    if header.get("op") != "exported":
        return _with(timing._failed(params, f"the candidate's process could not export its program: "
                                            f"{header.get('error') or header.get('op')}"), record, None)
    programs: dict[str, Any] = {}
    for key, blob in zip(header.get("names") or (), blobs):
        if key not in named or named[key] is None:
            continue
        started = time.perf_counter()
        try:
            exported, seen = verified(blob.tobytes(), named[key], platform)
        except Refused as exc:
            result["rejections"] = [{"trick": TRICK, "message": f"the judge cannot run the candidate's program: {exc}"}]
            return _with(result, record, judged_by)
        compiled = jax.jit(exported.call).lower(*_structs(named[key])).compile()
        costs.setdefault(key, {}).update(judge_deserialize_compile_s=round(time.perf_counter() - started, 4), **seen)
        programs[key] = compiled
        if key == "shapes":
            traceable = exported.call
    if "shapes" not in programs:
        return _with(timing._failed(params, "the candidate's process sent no program for the named shapes"), record, None)
    if platform == "tpu" and not costs["shapes"].get("kernels"):
        result["rejections"] = [{"trick": "no_pallas_call", "message": "the exported program launches no Mosaic "
                                 "kernel (no tpu_custom_call in the module the judge compiled)"}]
        return _with(result, record, judged_by)
    rejections = list(header.get("rejections") or ())
    if not rejections:
        rejections = _correct(programs, task, reference, shapes, (extra, how, scaled), checks, say)
    result["rejections"] = rejections
    if rejections or params.get("shrink"):
        result["verdict"] = "rejected" if rejections else "ok"
        return _with(result, record, judged_by)
    _timed(params, result, task, reference, shapes, programs["shapes"], traceable, checks["seed"], say)
    return _with(result, record, judged_by)


def _run(program: Any, args: Any) -> list[Any]:
    import jax
    import numpy as np

    return [np.asarray(x) for x in jax.tree.leaves(jax.block_until_ready(program(*jax.tree.leaves(args))))]


def _correct(programs: dict[str, Any], task: Any, reference: Callable[..., Any], shapes: Any, second: tuple[Any, ...],
             checks: dict[str, Any], say: Callable[[str], None]) -> list[dict[str, Any]]:
    """Rejections from the judge's own comparisons: two fresh sets, the example's answer, a second shape
    (``second``: its shapes, how they were made, the CONFIG values the reference reads there)."""
    import jax

    from . import timing
    from . import timing_guards as guards
    from . import timing_inputs as inputs_mod
    from .interpret_compare import tolerance_for

    seed = checks["seed"]
    extra, how, scaled = second
    template = inputs_mod.concrete_template(task.inputs)

    def one_set(program: Any, set_shapes: Any, set_seed: int, kept: Any, at: Any = None) -> dict[str, Any]:
        args = inputs_mod.fresh_inputs(set_shapes, set_seed, kept)
        try:
            with inputs_mod.config_scaled((reference,), at or None):  # the trusted file's CONFIG at that size
                expected = [jax.numpy.asarray(x) for x in jax.tree.leaves(jax.block_until_ready(jax.jit(reference)(*args)))]
        except Exception as exc:  # noqa: BLE001 - the trusted side's failure, said as such
            why = f"{type(exc).__name__}: {str(exc)[:500]}"
            return {"reference_failed": why,
                    "rejection": guards.reject("reference_failed", f"the reference failed on the task's inputs: {why}")}
        tolerance = tolerance_for(task, expected) or (0.0, 0.0)
        bad = guards.degenerate(expected, tolerance)
        if bad:
            return {"rejection": bad, "tolerance": tolerance}
        try:
            outputs = _run(program, args)
        except Exception as exc:  # noqa: BLE001
            return {"rejection": guards.reject("candidate_failed", f"the candidate's program raised "
                                               f"{type(exc).__name__}: {str(exc)[:500]}"), "tolerance": tolerance}
        bad = guards.compare_outputs(outputs, expected, tolerance)
        if bad and bad["trick"] == "wrong_result":
            returned = timing._returned_input(outputs, guards.snapshot(args))
            if returned is not None:
                bad = guards.reject("work_outside_timed_region", f"the candidate returns its input {returned} unchanged")
        return {"rejection": bad, "outputs": outputs, "expected": expected, "tolerance": tolerance}

    say("comparing the exported program with the reference on fresh random inputs (in the judge)")
    first = one_set(programs["shapes"], shapes, seed, template)
    if first.get("rejection"):
        rejection = first["rejection"]
        if template is not None and rejection["trick"] == "wrong_result" and first.get("outputs") is not None:
            example = [jax.numpy.asarray(x) for x in jax.tree.leaves(reference(*template))]
            if guards.matches(first["outputs"], example, first["tolerance"]):
                rejection = guards.reject("precomputed_result", "on fresh random inputs the candidate's program "
                                          "returned the reference's answer for the task's own example inputs")
        return [rejection]
    second = one_set(programs["shapes"], shapes, seed + 1, template)
    if second.get("rejection"):
        rejection = second["rejection"]
        if second.get("outputs") is not None and guards.matches(second["outputs"], first["expected"], first["tolerance"]):
            rejection = guards.reject("cached_result", "on a second set of fresh inputs the candidate's program "
                                      "returned the reference's answer for the first set")
        return [rejection]
    if extra is None or "extra" not in programs:
        checks["extra_shape"] = {"checked": False, "why": how}
        return []
    say(f"checking a second shape ({how})")
    third = one_set(programs["extra"], extra, seed + 2, None, scaled)
    checks["extra_shape"] = {"checked": True, "how": how, "inputs": inputs_mod.signature(extra)}
    if third.get("reference_failed"):
        checks["extra_shape"] = {"checked": False, "why": f"the reference fails at {how}: {third['reference_failed']}"}
    elif third.get("rejection"):
        r = third["rejection"]
        return [guards.reject("shape_specialised", f"right at the example shape but not at {how}: {r['message']}",
                              at=inputs_mod.signature(extra))]
    return []


def _timed(params: dict[str, Any], result: dict[str, Any], task: Any, reference: Callable[..., Any], shapes: Any,
           program: Any, traceable: Callable[..., Any], seed: int, say: Callable[[str], None]) -> None:
    """Interleaved rounds of the reference and the exported program, by this process's clock (the
    profiler's device plane on an accelerator); then the timed program's outputs compared again."""
    import jax

    from . import timing
    from . import timing_guards as guards
    from . import timing_inputs as inputs_mod
    from .interpret_compare import tolerance_for

    def run_program(*args: Any) -> Any:  # traced into the judge's own jit (named as the candidate)
        return traceable(*jax.tree.leaves(args))

    runs, warmup = max(1, int(params.get("runs", 20))), max(1, int(params.get("warmup", 2)))
    platform = result["device"]["platform"]
    prep = timing.Prepared(dataclasses.replace(task, entry=run_program), None, str(params.get("path")), reference,
                           None, {}, platform, result["device"]["device_kind"])
    timed = timing.time_pair(prep, shapes, seed, runs, warmup, say)
    base = inputs_mod.fresh_inputs(shapes, seed + 3, inputs_mod.concrete_template(task.inputs))
    expected = [jax.numpy.asarray(x) for x in jax.tree.leaves(jax.jit(reference)(*base))]
    bad = guards.compare_outputs(_run(program, base), expected, tolerance_for(task, expected) or (0.0, 0.0))
    result["checks"]["timed_program_checked"] = bad is None
    if bad:  # cannot differ from the tested program; checked all the same
        result["verdict"], result["rejections"] = "rejected", [bad]
        return
    samples = timed["device_ns"] or timed["wall_ns"]
    cand, ref = samples[timing.CANDIDATE], samples[timing.REFERENCE]
    host_clock = bool(timed.get("host_clock"))
    method = timed["method"].replace("TPU interpret mode on CPU", "the candidate's exported program (pallas_calls in "
                                     "the HLO interpreter) on CPU, run by the judge")
    from ..analysis.types import to_json

    result["verdict"] = "ok"
    result["candidate"] = to_json(timing.measurement(prep, cand, method, host_clock=host_clock))
    result["reference"] = to_json(timing.measurement(prep, ref, timed["method"], reference=True, host_clock=host_clock))
    result["spread"] = {"candidate": timing.spread(cand), "reference": timing.spread(ref)}
    result["trace"] = timed["trace"]
    speed = statistics.median(ref) / statistics.median(cand)
    baseline = f"the reference compiled by XLA on the same device ({prep.device_kind})"
    if platform == "cpu":
        baseline += "; the candidate ran as its exported program on CPU, so this ratio says nothing about a TPU"
    result["speedup"] = {"value": speed, "baseline": baseline,
                         "provenance": "host" if platform != "cpu" and host_clock else prep.provenance.value,
                         "inputs": result["checks"]["inputs"]}
    if speed > float(params.get("max_speedup", timing.MAX_SPEEDUP)):
        result["flags"].append(guards.reject("implausible_speedup", f"{speed:.1f}x faster than the reference is "
                                             "implausible: check the candidate by hand before believing it"))
