"""The judge's work on the candidate's exported modules: asking for them, verifying them out of harm's way,
and every check, comparison and clock run on them (runner/judging/judge.py calls ``export_all`` and
``judge_modules``).

Worker side: imports jax.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import statistics
from typing import Any, Callable

from .channel import receive, send_frame
from .program import Program

STANDIN_ENV = "PALLASITE_STANDIN_DEVICE"  # "1": this worker plays an accelerator (engine/workers/standin.py)
NOT_EXPORTABLE = "not_exportable"


def plays_device() -> bool:
    """Whether this worker stands in for an accelerator (its JAX still runs on the CPU)."""
    return os.environ.get(STANDIN_ENV, "") not in ("", "0")


def on_accelerator() -> bool:
    """Whether this worker's JAX would hold a chip (JAX_PLATFORMS not cpu), or it plays one."""
    return os.environ.get("JAX_PLATFORMS", "").split(",")[0] != "cpu" or plays_device()


def refused_profile(params: dict[str, Any]) -> dict[str, Any]:
    """The ``profile`` op for model-written code on a device: refused (it would run the candidate's Python
    in the process that holds the chip); ``time`` judges it from its exported program."""
    from ..measure import timing

    result = timing._failed(params, "not profiled: model-written code is not run in the process that holds the "
                                    "device; time it instead (the judge runs its exported program)")
    result["judged_by"] = ""
    return result


# --------------------------------------------------------------------------- asking for modules


def _ask(sock: Any, signature: list[list[Any]], config: dict[str, int] | None, device_kind: str) -> tuple[bytes | None, str]:
    send_frame(sock, {"op": "export", "signature": signature, "config": config, "device_kind": device_kind})
    header, blobs = receive(sock)
    if header.get("op") == "exported" and blobs:
        return bytes(blobs[0].tobytes()), ""
    return None, str(header.get("why") or header.get("error") or header.get("op"))[:2000]


def export_all(sock: Any, sizes: Any, prep: Any, want_full: bool) -> dict[str, Any]:
    """{"main" | "extra" | "full": (bytes or None, signature, config, why, concrete)}: one symbolic module for
    all of them where the program exports so, else one module per size, each for the TPU at the judge's
    signature."""
    from ..measure import timing_inputs as inputs_mod
    from .sizes import symbolic

    kind = _tpu_kind(prep)
    wanted = {"main": (sizes.main, sizes.main_config)}
    if sizes.extra is not None:
        wanted["extra"] = (sizes.extra, sizes.extra_config)
    if want_full and sizes.reduced:
        wanted["full"] = (sizes.full, None)
    out: dict[str, Any] = {"symbolic": False, "why_not": None}
    tried = symbolic(sizes, full="full" in wanted)
    whys = []
    n = sizes.takes  # the task's first n inputs, where the judge maps a prefix onto the candidate's entry
    for sym, covered in tried:
        sym = sym[:n] if n else sym
        blob, why = _ask(sock, sym, None, kind)
        if blob is None:
            whys.append(why)
            continue
        out.update(symbolic=True, sizes=covered)
        shapes_of = {"main": covered.main, "extra": covered.extra, "full": covered.full}
        for name in wanted:
            out[name] = (blob, sym, None, "", inputs_mod.signature(shapes_of[name])[:n or None])
        return out
    out["why_not"] = (f"the program does not export with symbolic dimensions: {whys[0]}" if whys else
                      "the sizes differ in CONFIG values or layout (read as Python ints when traced)")
    for name, (shapes, config) in wanted.items():
        signature = inputs_mod.signature(shapes)[:n or None]
        blob, why = _ask(sock, signature, config, kind)
        out[name] = (blob, signature, config, why, signature)
    return out


def _tpu_kind(prep: Any) -> str:
    """The TPU device kind the candidate's kernels are lowered for: this device's, else v6e's."""
    kind = str(prep.device_kind or "")
    return kind if kind.upper().startswith("TPU") else "TPU v6 lite"


# --------------------------------------------------------------------------- verifying and running


def _program(verifier: Any, entry: tuple[Any, ...], on_tpu: bool, cache: dict[bytes, Any]) -> Program | dict[str, Any]:
    """The module of one size, verified in the throwaway process, then deserialized here; or a rejection."""
    import jax

    from ..measure import timing_guards as guards

    blob, signature, _, why, concrete = entry
    if blob is None:
        return guards.reject(NOT_EXPORTABLE, f"the candidate's program does not export at the judge's size "
                                             f"{concrete}: {why}")
    key = (blob, repr(concrete))  # one module's facts are read at each size it runs at
    if key not in cache:
        checked = verifier.check(blob, signature, concrete)
        if checked.facts is None:
            cache[key] = guards.reject(NOT_EXPORTABLE if checked.refused else "module_crashed",
                                       f"the judge cannot run the candidate's program: {checked.refused or checked.crashed}")
        else:
            cache[key] = Program(jax.export.deserialize(bytearray(blob)), checked.facts, signature, on_tpu,
                                 hashlib.sha256(blob).hexdigest())
    return cache[key]


WORK_SHARE = 0.1  # the kernels' share of the program's arithmetic below which the work is not a pallas_call's
MIN_OUTSIDE_FLOPS = 1 << 14  # (a few XLA ops around a kernel are no reason to refuse it)


def _module_rejections(program: Program) -> list[dict[str, Any]]:
    """What the TPU program itself says (runner/program/module_facts.py, read in the throwaway verifier): a Mosaic
    kernel in it, every output computed from a kernel's result, and the work done in the kernels."""
    from ..measure import timing_guards as guards

    facts = program.facts
    if not facts.get("kernels") or not program.kernels():
        return [guards.reject("no_pallas_call", "the exported program launches no Mosaic kernel (no tpu_custom_call "
                                                "in its TPU program): the work is not done by a pallas_call compiled for the TPU (no pallas_call at "
                                                "all, or one run in interpret mode, which lowers to plain XLA ops)")]
    if facts.get("facts_error"):
        return [guards.reject(NOT_EXPORTABLE, f"the judge cannot read the program's kernels: {facts['facts_error']}")]
    unused = [i for i, used in enumerate(facts.get("outputs_from_kernels") or ()) if not used]
    if unused:
        return [guards.reject("pallas_call_unused", f"output(s) {unused} of the program do not depend on any kernel's "
                              "result: they are computed around the pallas_call, not by it")]
    outside, inside = int(facts.get("xla_flops") or 0), int(facts.get("kernel_flops") or 0)
    known = facts.get("kernel_flops_known", True)  # a kernel the pricer could not count: its work is unknown
    if known and outside > MIN_OUTSIDE_FLOPS and inside < WORK_SHARE * (inside + outside):
        return [guards.reject("calls_reference", f"the program's XLA ops outside its kernels do {outside:,} of its "
                              f"{inside + outside:,} operations: the work is not done by a pallas_call")]
    return []


def judged_module(modules: dict[str, Any], programs: dict[str, Any], prep: Any, sizes: Any) -> dict[str, Any] | None:
    """The module priced at the task's size (the tested one where one module covers every size), with the
    task's concrete signature: what tier 2 of model-written code compiles, so the program that compiled is the
    program that was tested and priced."""
    import base64

    from ..measure import timing_inputs as inputs_mod

    name = "full" if isinstance(programs.get("full"), Program) else "main"
    program, entry = programs.get(name), modules.get(name)
    if not isinstance(program, Program) or entry is None or entry[0] is None:
        return None
    shapes = sizes.full if name == "full" else sizes.main
    return {"module": base64.b64encode(entry[0]).decode(),
            "signature": inputs_mod.signature(shapes)[:len(program.signature)],  # a mapped prefix: what it takes
            "entry": prep.task.name, "sha256": program.digest}


def donates(text: str | None) -> str | None:
    """Where the candidate's source donates its inputs (``donate_argnums``/``donate_argnames``), or None: an
    exported program never deletes the judge's arrays, but the candidate's entry would delete its caller's
    (read from the text the candidate sent, never run)."""
    import ast

    try:
        tree = ast.parse(text or "")
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in ("donate_argnums", "donate_argnames"):
            empty = isinstance(node.value, (ast.Tuple, ast.List)) and not node.value.elts
            if not empty:
                return f"line {node.value.lineno}: {node.arg}"
    return None


def judge_modules(result: dict[str, Any], params: dict[str, Any], say: Callable[[str], None], prep: Any,
                  sizes: Any, modules: dict[str, Any], verifier: Any) -> dict[str, Any]:
    """Verify, check, compare and (when asked) time the candidate's modules into ``result``."""
    from ..measure import timing_inputs as inputs_mod
    from .correct import NotVerified, correct

    cache: dict[tuple[bytes, str], Any] = {}
    programs = {}
    for name in ("main", "extra", "full"):
        if name in modules:
            programs[name] = _program(verifier, modules[name], prep.platform == "tpu" and not plays_device(), cache)
    main = programs["main"]
    checks = result["checks"]
    checks.update(inputs=inputs_mod.signature(sizes.main), extra_shape=None)
    if sizes.reduced:
        checks.update(full_inputs=inputs_mod.signature(sizes.full), reduced=sizes.note or sizes.verified_at)
        if sizes.main_config:
            checks.update(verified_at=sizes.verified_at, config_scaled=dict(sizes.main_config))
        result["notes"].append(sizes.note or f"checked at {sizes.verified_at}")
    result["notes"].extend(sizes.notes)
    if not isinstance(main, Program):
        result["rejections"] = [main]
        return result
    checks["module"] = {k: main.facts.get(k) for k in ("kernels", "custom_calls", "bytes", "platforms")}
    result["module"] = judged_module(modules, programs, prep, sizes)
    if params.get("chip"):  # priced by the judge from the module, whatever the tests say
        from .priced import estimate

        say("pricing the candidate's exported program by the cost model (in the judge)")
        result["estimate"] = estimate(params, prep, sizes, modules)
    result["rejections"] = _module_rejections(main)
    if not result["rejections"] and main.facts.get("unsupported"):
        return {**result, "verdict": "error", "error": "not verified: the TPU program uses "
                f"{'; '.join(main.facts['unsupported'][:3])}, which the judge's interpreter does not cover"}
    donated = donates(params.get("text"))
    if donated and not result["rejections"]:
        from ..measure import timing_guards as guards

        result["rejections"] = [guards.reject("input_mutation", f"the candidate's entry donates its inputs ({donated}): "
                                              "its caller's arrays would be deleted by the call")]
    if not params.get("checks", True):
        result["verdict"] = "error" if result["rejections"] else "ok"
        result["error"] = "not tested: only an estimate was asked for" if not result["rejections"] else None
        return result
    if not result["rejections"]:
        seed = int.from_bytes(os.urandom(4), "little")  # a local: nothing the candidate ever reaches
        try:
            result["rejections"] = correct(programs, prep, sizes, seed, checks, say)
        except NotVerified as exc:
            return {**result, "verdict": "error", "error": str(exc)}
        checks["seed"] = seed
    if result["rejections"] or params.get("shrink"):  # shrink: the caller asked for the checks alone
        result["verdict"] = "rejected" if result["rejections"] else "ok"
        return result
    # on a device the full size; on the CPU (the interpreter) the size the checks ran at, said in the notes
    timed_program = programs.get("full", main) if prep.on_device else main
    if not isinstance(timed_program, Program):
        result["rejections"] = [timed_program]
        return result
    if not prep.on_device and sizes.reduced:
        result["notes"].append("timed at the reduced size the checks ran at, the exported program in the CPU's "
                               "interpreter (this time says nothing about a TPU)")
    _timed(params, result, prep, sizes, timed_program, say)
    return result


def _timed(params: dict[str, Any], result: dict[str, Any], prep: Any, sizes: Any, program: Program,
           say: Callable[[str], None]) -> None:
    """Interleaved rounds of the reference and the exported program at the full size, by this process's
    clock (the profiler's device plane on an accelerator); then the timed program's outputs compared."""
    import jax

    from ...analysis.types import to_json
    from ..measure import timing
    from ..measure import timing_guards as guards
    from ..measure import timing_inputs as inputs_mod
    from ..tier3.interpret_compare import tolerance_for

    from ..measure import timing_ladder
    from .correct import _template

    runs, warmup = max(1, int(params.get("runs", 20))), max(1, int(params.get("warmup", 2)))
    seed = int.from_bytes(os.urandom(4), "little")
    shapes, config = (sizes.full, None) if prep.on_device else (sizes.main, sizes.main_config)
    template = _template(prep, config, shapes)
    timed_prep = dataclasses.replace(prep, task=dataclasses.replace(prep.task, entry=program), config={},
                                     _template=template, _template_made=True)
    with inputs_mod.config_scaled(timing_ladder.spaces_of(prep), config):
        timed = timing.time_pair(timed_prep, shapes, seed, runs, warmup, say)
        base = inputs_mod.fresh_inputs(shapes, seed + 3, template)
        expected = [jax.numpy.asarray(x) for x in jax.tree.leaves(jax.jit(prep.reference)(*base))]
    outputs = [jax.numpy.asarray(x) for x in jax.tree.leaves(program(*base))]
    bad = guards.compare_outputs(outputs, expected, tolerance_for(prep.task, expected) or (0.0, 0.0))
    result["checks"]["timed_program_checked"] = bad is None
    if bad:
        result["verdict"], result["rejections"] = "rejected", [bad]
        return
    samples = timed["device_ns"] or timed["wall_ns"]
    cand, ref = samples[timing.CANDIDATE], samples[timing.REFERENCE]
    host_clock = bool(timed.get("host_clock"))
    method = timed["method"].replace("TPU interpret mode on CPU", "the exported TPU program (its XLA ops and Mosaic "
                                     "kernels) in the judge's interpreter on CPU")
    result["verdict"] = "ok"
    config = tuple(sorted((params.get("config") or {}).items()))  # the candidate's tunables, as its process applied them
    result["candidate"] = to_json(dataclasses.replace(timing.measurement(timed_prep, cand, method, host_clock=host_clock),
                                                      config=config))
    result["reference"] = to_json(timing.measurement(timed_prep, ref, timed["method"], reference=True,
                                                     host_clock=host_clock))
    result["spread"] = {"candidate": timing.spread(cand), "reference": timing.spread(ref)}
    result["trace"] = timed["trace"]
    speed = statistics.median(ref) / statistics.median(cand)
    baseline = f"the reference compiled by XLA on the same device ({prep.device_kind})"
    if not prep.on_device:
        baseline += "; the candidate ran as its exported program on CPU, so this ratio says nothing about a TPU"
    result["speedup"] = {"value": speed, "baseline": baseline,
                         "provenance": "host" if prep.on_device and host_clock else prep.provenance.value,
                         "inputs": inputs_mod.signature(shapes)}
    if speed > float(params.get("max_speedup", timing.MAX_SPEEDUP)):
        result["flags"].append(guards.reject("implausible_speedup", f"{speed:.1f}x faster than the reference is "
                                             "implausible: check the candidate by hand before believing it"))
