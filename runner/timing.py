"""The worker's ``time`` and ``profile`` ops: correctness first, then honest numbers.

Both load the candidate (``params["path"]``, optional ``text``) and its reference from the
request, never from anything the candidate prints. The reference is the task's own (native
``reference``, JAXBench ``baseline.py``'s ``workload``, MaxKernel ``computation``) or
``params["reference_path"]``'s (optional ``reference_text``) ``reference``/``workload``/``computation``
(``reference_entry`` names another).

Correctness (``runner/timing_guards.py`` names each trick it catches): the traced program must
launch a pallas_call whose result reaches an output, without entering the reference's code; then
on two sets of fresh random inputs (``runner/timing_inputs.py``) and, when the task allows, a
second shape: outputs NaN-filled where unwritten (interpret mode ``uninitialized_memory="nan"``;
on a device ``runner/nan_prefill.py``), compared with the task's tolerance, inputs unchanged, and
the comparison itself not one that zeros or a constant would pass.

Timing: ``warmup`` calls each, then ``runs`` rounds with the reference and the candidate
interleaved (their order alternating), each call on fresh copies of the inputs (made outside the
timed region). On an accelerator the time of each call is the device time of its XLA module from
the profiler's device plane (host dispatch and compilation excluded); on CPU it is wall clock
around the call and ``block_until_ready``, in TPU interpret mode, labelled ``interpret``: it says
nothing about TPU time. The speedup is the reference's median over the candidate's, both compiled
by XLA on the same device; above ``max_speedup`` (20) it is flagged for a second look.

Result shapes are written down in docs/worker-protocol.md (``time``/``profile``).
Worker side: imports jax; uses only runner modules and analysis types.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import jax
import numpy as np

from ..analysis.types import Measurement, Provenance, to_json

from . import profiling, tasks_runtime
from . import timing_guards as guards
from . import timing_inputs as inputs_mod
from .interpret_compare import tolerance_for

MAX_SPEEDUP = 20.0
CANDIDATE = "pallasite_candidate"
REFERENCE = "pallasite_reference"


class TimingError(Exception):
    """The request cannot be timed at all (no task, no reference, ...): the message says why."""


@dataclass
class Prepared:
    task: Any
    module: Any
    path: str
    reference: Callable[..., Any]
    reference_file: str | None
    config: dict[str, Any]
    platform: str
    device_kind: str
    probe_loader: Callable[[], Callable[..., Any]] | None = None  # a fresh instance's entry: see ``probe``
    notes: list[str] = field(default_factory=list)
    _template: Any = field(default=None, repr=False)
    _template_made: bool = field(default=False, repr=False)

    def template(self) -> tuple[Any, ...] | None:
        """The task's own example inputs as arrays, made once per request (``inputs()`` may build
        full-size arrays; the checks, the timing and the profile all start from them)."""
        if not self._template_made:
            self._template, self._template_made = inputs_mod.concrete_template(self.task.inputs), True
        return self._template

    @property
    def on_device(self) -> bool:
        return self.platform != "cpu"

    @property
    def provenance(self) -> Provenance:
        return Provenance.DEVICE if self.on_device else Provenance.INTERPRET

    def candidate(self, *args: Any) -> Any:
        return self.task.entry(*args, **self.config)

    def probe(self) -> Callable[..., Any]:
        """The candidate for ONE of pallasite's own traces (program checks, shape probes): the entry
        of a fresh instance of the file, so nothing a trace leaves in module state (a candidate
        caching its result would keep a tracer) reaches the instance that is run, or the next trace."""
        entry = self.probe_loader() if self.probe_loader is not None else self.task.entry
        return functools.partial(entry, **self.config) if self.config else entry


# --------------------------------------------------------------------------- loading


def plain_params(params: Any) -> dict[str, Any]:
    """A typed ``TimeParams``/``ProfileParams`` (wire/messages.py) in this module's working form."""
    import dataclasses

    from .loader import sent_modules

    plain = {f.name: getattr(params, f.name) for f in dataclasses.fields(params)
             if f.name not in ("source", "reference", "trusted")}
    source, reference = params.source, params.reference
    trusted = getattr(params, "trusted", None)
    if trusted is not None:
        plain.update(trusted_path=trusted.path, trusted_text=trusted.text, trusted_modules=sent_modules(trusted))
    plain.update(path=source.path, text=source.text, package=source.package,
                 modules=sent_modules(source))
    if reference is not None:
        plain.update(reference_path=reference.path, reference_text=reference.text,
                     reference_modules=sent_modules(reference))
    plain["config"] = dict(plain.get("config") or {})
    return {k: v for k, v in plain.items() if v is not None}


@contextlib.contextmanager
def prepared(params: dict[str, Any]):
    """Load candidate and reference for the duration of one op."""
    from .loader import user_module

    path = os.path.abspath(str(params["path"]))
    with contextlib.ExitStack() as stack:
        def load() -> Any:
            return stack.enter_context(user_module(path, params.get("text"), params.get("modules") or (),
                                                   params.get("package")))

        module = load()
        ref_path = params.get("reference_path")
        ref_module = (stack.enter_context(user_module(os.path.abspath(ref_path), params.get("reference_text"),
                                                      params.get("reference_modules") or ()))
                      if ref_path else None)

        def tasks_of(mod: Any) -> list[Any]:
            found = tasks_runtime.discover(mod, path, params.get("text"))
            return found or (_pair_task(mod, ref_module, path) if ref_module is not None else [])

        tasks = tasks_of(module)
        want = params.get("entry")
        chosen = [t for t in tasks if want is None or t.name == want]
        if not chosen:
            names = ", ".join(t.name for t in tasks) or "none"
            raise TimingError(f"{path}: no task {'named ' + repr(want) + ' ' if want else ''}to time (tasks found: {names}); "
                              "see docs/task-convention.md (a kernel for a JAXBench task: pallasite time TASK_DIR --kernel FILE)")
        if want is None and len(chosen) > 1:
            raise TimingError(f"{path} has several tasks ({', '.join(t.name for t in chosen)}): name one with 'entry'")
        task = chosen[0]
        reference, reference_file = task.reference, _reference_file(task, path)
        if ref_module is not None:
            reference = _reference_in(ref_module, params.get("reference_entry"))
            reference_file = os.path.abspath(ref_path)
        if reference is None:
            raise TimingError(f"{path}: task {task.name!r} has no reference to compare with and time against; "
                              "define reference() (native), put it beside a baseline.py (JAXBench), or score it "
                              "against a task: pallasite time TASK_DIR --kernel FILE (eval too)")
        config = {str(k): v for k, v in (params.get("config") or {}).items()}
        unknown = sorted(set(config) - set(task.tunables))
        if unknown:
            raise TimingError(f"config names {', '.join(unknown)}, which are not tunables of {task.name} "
                              f"(tunables: {', '.join(sorted(task.tunables)) or 'none'})")
        def fresh_entry() -> Callable[..., Any]:
            return next((t.entry for t in tasks_of(load()) if t.name == task.name), task.entry)

        device = jax.devices()[0]
        yield Prepared(task, module, path, reference, reference_file, config, jax.default_backend(),
                       device.device_kind, probe_loader=fresh_entry)


def _pair_task(module: Any, ref_module: Any, path: str) -> list[Any]:
    """optimized.py without inputs of its own: its ``workload`` with baseline.py's inputs."""
    ns, ref_ns = vars(module), vars(ref_module)
    entry = ns.get("workload")
    if not callable(entry) or not callable(ref_ns.get("create_inputs")):
        return []
    config = dict(ns.get("CONFIG") or ref_ns.get("CONFIG") or {})
    create = ref_ns["create_inputs"]
    return [tasks_runtime.RuntimeTask(name="workload", entry=entry, format="jaxbench", config=config,
                                      inputs=lambda: tasks_runtime._call_with_config(create, config),
                                      line=getattr(entry, "__code__", None) and entry.__code__.co_firstlineno)]


def _reference_in(module: Any, name: str | None) -> Callable[..., Any] | None:
    ns = vars(module)
    for candidate in ([name] if name else ["reference", "workload", "computation"]):
        if callable(ns.get(candidate)):
            return ns[candidate]
    return None


def _reference_file(task: Any, path: str) -> str | None:
    if task.format == "jaxbench":
        return os.path.join(os.path.dirname(path), "baseline.py")
    if task.format == "maxkernel":
        return os.path.join(os.path.dirname(path), "reference.py")
    return None  # native: the reference lives in the same file (caught by its code object)


def _execution(prep: Prepared, check: bool):
    """Interpret mode (NaN-filled fresh memory) on CPU; on a device, NaN pre-fill when checking."""
    if not prep.on_device:
        from jax.experimental.pallas import tpu as pltpu

        return pltpu.force_tpu_interpret_mode(pltpu.InterpretParams(uninitialized_memory="nan"))
    if check:
        from .nan_prefill import nan_prefilled

        return nan_prefilled(modules=(prep.module,), on_tpu=prep.platform == "tpu")
    return contextlib.nullcontext()


# --------------------------------------------------------------------------- correctness


def correctness(prep: Prepared, seed: int, say: Callable[[str], None], extra: bool = True,
                shrink: bool = False) -> dict[str, Any]:
    """Every rejection the candidate earns before timing, and what was checked. ``shrink`` (no
    device only): the checks run at reduced shapes (runner/timing_shrink.py); ``_shapes`` is what ran."""
    shapes = prep.task.abstract_args()
    small = None
    if shrink and not prep.on_device:
        sized, own = _config_size(prep, shapes)
        if own is not None and isinstance(sized, str):
            raise TimingError(f"not checked in interpret mode: the reference takes other arguments than the candidate, "
                              f"so both run on their own inputs, and the task could not be reduced to fit: {sized}")
        if own is not None or (not isinstance(sized, str) and sized is not None):
            return _correctness_at(prep, sized, seed, say, extra, shapes, own)
        if sized is not None:
            prep.notes.append(f"not reduced through CONFIG: {sized}")
    if shrink and not prep.on_device:
        from . import timing_shrink

        small = timing_shrink.reduced(prep, shapes)
        if isinstance(small, str):
            too_big = timing_shrink.too_big(shapes)
            if too_big:  # a clear reason now rather than a worker killed at its memory or time limit
                raise TimingError(f"not checked in interpret mode: {too_big}, and the inputs cannot be reduced "
                                  f"({small}); check it on a device backend, or give the file smaller example inputs")
            prep.notes.append(f"inputs not reduced: {small}")
            small = None
    template = None if small is not None else prep.template()
    out: dict[str, Any] = {"seed": seed, "inputs": inputs_mod.signature(shapes), "rejections": [], "extra_shape": None}
    if small is not None:
        out["full_inputs"], out["reduced"] = out["inputs"], small.note
        shapes = small.shapes
        out["inputs"] = inputs_mod.signature(shapes)
        prep.notes.append(small.note)
    out["_shapes"] = shapes
    say("checking the traced program (pallas_call launched and used, reference not called)")
    rejections, counted = guards.program_checks(prep.probe, shapes, prep.reference, prep.reference_file, prep.path)
    out.update(counted)
    out["rejections"] += rejections
    if rejections:
        return out
    say("comparing with the reference on fresh random inputs")
    first = _one_set(prep, shapes, seed, template)
    if first.get("rejection"):
        rejection = first["rejection"]
        if template is not None and rejection["trick"] == "wrong_result" and first.get("outputs") is not None:
            expected_example = prep.reference(*template)
            if guards.matches(first["outputs"], expected_example, first["tolerance"]):
                rejection = guards.reject("precomputed_result", "on fresh random inputs the candidate returned the "
                                          "reference's answer for the task's own example inputs: a result precomputed "
                                          "ahead of the call, not computed from its inputs")
        out["rejections"].append(rejection)
        return out
    out["outputs"] = inputs_mod.signature(first.get("expected"))  # the device timing's floor (engine/device_floor.py)
    second = _one_set(prep, shapes, seed + 1, template)
    if second.get("rejection"):
        rejection = second["rejection"]
        if second.get("outputs") is not None and guards.matches(second["outputs"], first["expected"], first["tolerance"]):
            rejection = guards.reject("cached_result", "on a second set of fresh inputs the candidate returned the "
                                      "reference's answer for the first set: a cached result from an earlier call")
        out["rejections"].append(rejection)
        return out
    if extra:
        try:
            extra_shapes, how, scaled = ((small.extra, small.extra_how, None) if small is not None
                                         else inputs_mod.extra_shapes(prep.task, prep.module))
        except Exception as exc:  # noqa: BLE001 - the task's own function failed at the other size
            extra_shapes, how, scaled = None, f"making the second shape failed: {type(exc).__name__}: {exc}", None
        if extra_shapes is None:
            out["extra_shape"] = {"checked": False, "why": how}
        else:
            say(f"checking a second shape ({how})")
            with inputs_mod.config_scaled((prep.task.entry, prep.reference), scaled):
                third = _one_set(prep, extra_shapes, seed + 2, None)
            _second_shape(out, third, how, extra_shapes, "the example shape",
                          " (the candidate specialises to the example shape)")
    return out


def _second_shape(out: dict[str, Any], third: dict[str, Any], how: str, inputs: Any, right_at: str,
                  note: str = "") -> None:
    """The check at a second shape into ``out``: checked, or why not (the reference fails there), and a
    candidate right at ``right_at`` but wrong at ``how`` rejected as shape-specialised."""
    out["extra_shape"] = {"checked": True, "how": how, "inputs": inputs_mod.signature(inputs)}
    if third.get("reference_failed"):
        out["extra_shape"] = {"checked": False, "why": f"the reference fails at {how}: {third['reference_failed']}"}
    elif third.get("rejection"):
        out["rejections"].append(guards.reject(
            "shape_specialised", f"right at {right_at} but not at {how}: {third['rejection']['message']}{note}",
            at=inputs_mod.signature(inputs)))


def _config_size(prep: Prepared, shapes: tuple[Any, ...]) -> Any:
    """(size, own): the task at a reduced CONFIG size (runner/timing_ladder.py) when it states one and
    is too big to interpret whole (None when it states none or fits; a string when it could not be
    reduced); ``own``: the reference through its own inputs when it takes other arguments."""
    from . import timing_ladder
    from .interpret import _namespaces, probe_calls

    config = prep.task.config or {}
    if prep.task.format not in ("jaxbench", "maxkernel") or not any(timing_ladder._is_int(v) for v in config.values()):
        return None, None
    own = None
    if timing_ladder.takes_candidate_inputs(prep, shapes) is not None:
        own = timing_ladder.own_reference(prep)
    try:
        fn = prep.probe()
        calls = probe_calls(fn, shapes, _namespaces(fn))
    except Exception as exc:  # noqa: BLE001 - the program checks report the candidate's own failure
        return f"the candidate does not trace at the task's size ({type(exc).__name__})", None
    if not calls:
        return None, None
    if own is None:
        return timing_ladder.config_ladder(prep, shapes, calls), None
    allowed = timing_ladder.shared_keys(prep) or set()
    aliases = timing_ladder.paired_keys(prep, own, shapes)
    rows = timing_ladder.output_keys(prep, own, allowed, aliases)
    if rows:  # first through output dims alone: a difference there is a verdict (ConfigSize.output_dims)
        sized = timing_ladder.config_ladder(prep, shapes, calls, own=own, allowed=rows & allowed,
                                            aliases={k: v for k, v in aliases.items() if k in rows})
        if isinstance(sized, timing_ladder.ConfigSize):
            return dataclasses.replace(sized, output_dims=True), own
    return timing_ladder.config_ladder(prep, shapes, calls, own=own, allowed=allowed, aliases=aliases), own


def _correctness_at(prep: Prepared, sized: Any, seed: int, say: Callable[[str], None], extra: bool,
                    full: tuple[Any, ...], own: Callable[[], Any] | None = None) -> dict[str, Any]:
    """``correctness`` at a reduced CONFIG size (``sized``; None: the task's own size): the candidate,
    the reference and the inputs function all read CONFIG at that size (fresh probe instances too),
    the task's own inputs made there. ``own``: the reference takes other arguments, so each side
    runs on its own inputs (``workload(*create_inputs())``: the same seeded draws, its own layout)."""
    from . import timing_ladder

    if sized is None:
        sized = timing_ladder.ConfigSize({}, {}, full, 0, 0)
    scaled = sized.scaled
    scale_probes(prep, scaled)
    spaces = timing_ladder.spaces_of(prep)
    shapes = sized.shapes
    out: dict[str, Any] = {"seed": seed, "inputs": inputs_mod.signature(shapes), "rejections": [], "extra_shape": None,
                           "_config": dict(scaled) or None, "_shapes": shapes}
    if scaled:
        out.update(full_inputs=inputs_mod.signature(full), reduced=sized.note, verified_at=sized.verified_at,
                   config_scaled=dict(scaled))
        prep.notes.append(sized.note)
        say(f"checking at a reduced size through the task's CONFIG: {sized.verified_at}")
    if own is not None:
        out["own_inputs"] = ("the reference takes other arguments than the candidate: each ran on its own task "
                             "inputs (workload(*create_inputs()), the same seeded draws), not on fresh random ones")
        prep.notes.append(out["own_inputs"])
    with inputs_mod.config_scaled(spaces, scaled or None):
        template = timing_ladder.concrete_at(prep, scaled)
        prep._template, prep._template_made = template, True
        rejections, counted = guards.program_checks(prep.probe, shapes, prep.reference, prep.reference_file, prep.path)
        out.update(counted)
        out["rejections"] += rejections
        if rejections:
            return out
        for offset in ((0,) if own is not None else (0, 1)):
            one = _own_set(prep, template, own) if own is not None else _one_set(prep, shapes, seed + offset, template)
            if one.get("expected") is not None:
                out["outputs"] = inputs_mod.signature(one["expected"])
            if one.get("rejection"):
                if scaled and one["rejection"]["trick"] == "candidate_failed":
                    raise TimingError("not verified: the candidate raised at the reduced size " + sized.verified_at +
                                      " (it may not take a size it was not written for, or TPU interpret mode "
                                      "cannot run it; check it at full size on a device): "
                                      + one["rejection"]["message"][:600])
                if own is not None and scaled and not sized.output_dims and one["rejection"]["trick"] == "wrong_result":
                    raise TimingError("not verified: at the reduced size " + sized.verified_at + " the candidate differs "
                                      "from the reference run on its own inputs, and the two files' CONFIGs are paired "
                                      "by name only (a size one derives from another may not follow): "
                                      + one["rejection"]["message"][:600])
                out["rejections"].append(one["rejection"])
                return out
    if not extra or own is not None:
        return out
    if not sized.second:
        out["extra_shape"] = {"checked": False, "why": "no second reduced CONFIG size fits the check's memory"}
        return out
    how = f"CONFIG at {sized.second_at}"
    say(f"checking a second shape ({how})")
    with inputs_mod.config_scaled(spaces, sized.second):
        other = inputs_mod.shapes_of(timing_ladder.make_inputs(prep, sized.second))
        third = _one_set(prep, other, seed + 2, timing_ladder.concrete_at(prep, sized.second))
    _second_shape(out, third, how, other, sized.verified_at)
    return out


def scale_probes(prep: Prepared, scaled: dict[str, int] | None) -> None:
    """Fresh probe instances of the candidate read CONFIG at ``scaled`` from now on."""
    loader = prep.probe_loader
    if loader is None or not scaled:
        return

    def scaled_loader() -> Callable[..., Any]:
        entry = loader()
        space = getattr(getattr(entry, "__wrapped__", entry), "__globals__", None)
        if isinstance(space, dict) and isinstance(space.get("CONFIG"), dict):
            space["CONFIG"] = {**space["CONFIG"], **scaled}  # a throwaway instance
        return entry

    prep.probe_loader = scaled_loader


def _own_set(prep: Prepared, args: Any, own: Callable[[], Any]) -> dict[str, Any]:
    """The candidate on the task's own inputs against the reference on its own (``timing_ladder.own_reference``)."""
    if args is None:
        return {"rejection": guards.reject("reference_failed", "the task's inputs function made no arrays to run")}
    try:
        expected = jax.block_until_ready(jax.jit(own)())
    except Exception as exc:  # noqa: BLE001
        return {"reference_failed": f"{type(exc).__name__}: {exc}",
                "rejection": guards.reject("reference_failed", f"the reference failed: {type(exc).__name__}: {exc}")}
    tolerance, note = guards.at_output_scale(expected, tolerance_for(prep.task, expected) or (0.0, 0.0))
    if note:
        prep.notes.append(note)
    bad = guards.degenerate(expected, tolerance)
    if bad:
        return {"rejection": bad, "tolerance": tolerance}
    outputs, saved, failed = _run_candidate(prep, args, tolerance)
    if failed:
        return failed
    return {"rejection": guards.compare_outputs(outputs, expected, tolerance), "outputs": outputs,
            "expected": expected, "tolerance": tolerance}


def _one_set(prep: Prepared, shapes: tuple[Any, ...], seed: int, template: Any) -> dict[str, Any]:
    args = inputs_mod.fresh_inputs(shapes, seed, template)
    try:
        expected = jax.block_until_ready(jax.jit(prep.reference)(*args))
    except Exception as exc:  # noqa: BLE001
        return {"reference_failed": f"{type(exc).__name__}: {exc}",
                "rejection": guards.reject("reference_failed", f"the reference failed: {type(exc).__name__}: {exc}")}
    tolerance = tolerance_for(prep.task, expected) or (0.0, 0.0)
    bad = guards.degenerate(expected, tolerance)
    if bad:
        return {"rejection": bad, "tolerance": tolerance}
    outputs, saved, failed = _run_candidate(prep, args, tolerance)
    if failed:
        return failed
    bad = guards.compare_outputs(outputs, expected, tolerance)
    if bad and bad["trick"] == "wrong_result":
        returned = _returned_input(outputs, saved)
        if returned is not None:
            bad = guards.reject("work_outside_timed_region", f"the candidate returns its input {returned} unchanged: the "
                                "answer was computed before the call (by the inputs function), outside the timed region")
    return {"rejection": bad, "outputs": outputs, "expected": expected, "tolerance": tolerance}


def _run_candidate(prep: Prepared, args: Any, tolerance: Any) -> tuple[Any, Any, dict[str, Any] | None]:
    """(outputs, the inputs as they were, None), or a rejection when the candidate raised or changed
    its inputs: the part of a correctness set that both the drawn and the task's own inputs share."""
    saved = guards.snapshot(args)
    try:
        with _execution(prep, True):
            outputs = jax.block_until_ready(prep.candidate(*args))
        outputs = jax.tree.map(np.asarray, outputs)
    except Exception as exc:  # noqa: BLE001 - the candidate's failure is a verdict
        return None, saved, {"rejection": guards.reject("candidate_failed", f"the candidate raised "
                                                        f"{type(exc).__name__}: {str(exc)[:2000]}"),
                             "tolerance": tolerance}
    changed = guards.inputs_changed(args, saved)
    if changed:
        return None, saved, {"rejection": changed, "tolerance": tolerance}
    return outputs, saved, None


def _returned_input(outputs: Any, saved: list[np.ndarray]) -> int | None:
    for out in jax.tree.leaves(outputs):
        out = np.asarray(out)
        for index, arg in enumerate(saved):
            if arg.shape == out.shape and arg.dtype == out.dtype and np.array_equal(arg, out, equal_nan=True):
                return index
    return None


# --------------------------------------------------------------------------- timing


def _named(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        return fn(*args)

    call.__name__ = call.__qualname__ = name
    return jax.jit(call)


def spread(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def q(p: float) -> float:
        return float(np.percentile(ordered, p))

    median = statistics.median(ordered)
    return {"median_ns": median, "min_ns": ordered[0], "max_ns": ordered[-1], "p10_ns": q(10), "p90_ns": q(90),
            "iqr_ns": q(75) - q(25), "cv": (statistics.pstdev(ordered) / statistics.mean(ordered)) if len(ordered) > 1 else 0.0}


def time_pair(prep: Prepared, shapes: tuple[Any, ...], seed: int, runs: int, warmup: int,
              say: Callable[[str], None]) -> dict[str, Any]:
    """Interleaved timing of reference and candidate; device time from the profiler on a device."""
    cand, ref = _named(prep.candidate, CANDIDATE), _named(prep.reference, REFERENCE)
    base = inputs_mod.fresh_inputs(shapes, seed + 3, prep.template())
    wall: dict[str, list[float]] = {CANDIDATE: [], REFERENCE: []}
    say(f"warming up ({warmup} call(s) each: compilation is not timed)")
    with _execution(prep, False):
        for _ in range(max(1, warmup)):
            jax.block_until_ready(cand(*base))
            jax.block_until_ready(ref(*base))
        trace_dir = tempfile.mkdtemp(prefix="pallasite-time-") if prep.on_device else None
        tracing = profiling.capture(trace_dir) if trace_dir else contextlib.nullcontext()
        with tracing as trace:
            for i in range(runs):
                order = ((CANDIDATE, cand), (REFERENCE, ref)) if i % 2 == 0 else ((REFERENCE, ref), (CANDIDATE, cand))
                for name, fn in order:
                    args = inputs_mod.copies(base)  # fresh buffers, outside the timed region
                    start = time.perf_counter_ns()
                    jax.block_until_ready(fn(*args))
                    wall[name].append(float(time.perf_counter_ns() - start))
                if i % max(1, runs // 5) == 0:
                    say(f"timing: round {i + 1} of {runs}")
    result: dict[str, Any] = {"wall_ns": wall, "device_ns": None, "trace": None, "method": None, "host_clock": True}
    if prep.on_device:
        result["trace"] = trace.path if trace is not None else None
        device = {name: profiling.module_times(profiling.load(trace.path), f"jit_{name}") if trace and trace.path else []
                  for name in (CANDIDATE, REFERENCE)}
        if all(len(device[n]) == runs for n in device):
            result["device_ns"], result["host_clock"] = device, False
            result["method"] = (f"device time of each call's XLA module from the profiler's {prep.platform.upper()} "
                                "device plane (jax.profiler.trace + ProfileData); interleaved, fresh input copies")
        else:
            prep.notes.append(f"the trace held {len(device[CANDIDATE])}/{len(device[REFERENCE])} module runs for "
                              f"{runs} calls each: wall clock used instead (host dispatch included)")
    if result["method"] is None:
        kind = "TPU interpret mode on CPU" if not prep.on_device else f"on {prep.device_kind}"
        result["method"] = (f"wall clock (perf_counter_ns around the call and block_until_ready), {kind}; "
                            "interleaved, fresh input copies")
    return result


def measurement(prep: Prepared, samples: list[float] | None, method: str, status: str = "ok",
                error: str | None = None, reference: bool = False, host_clock: bool = False) -> Measurement:
    """``host_clock``: the samples are host wall clock around a device run (the profiler's trace fell
    short): provenance "host", never "device"."""
    from .tiers import versions

    vers = versions()
    provenance = Provenance.HOST if (reference and not prep.on_device) or (host_clock and prep.on_device) \
        else prep.provenance
    if reference and not prep.on_device:
        method = method.replace("TPU interpret mode on CPU", "XLA on the host CPU")
    return Measurement(status=status, provenance=provenance, device_kind=prep.device_kind, method=method,
                       samples_ns=tuple(samples or ()), median_ns=statistics.median(samples) if samples else None,
                       config=tuple(sorted(prep.config.items())), jax_version=vers.get("jax"),
                       libtpu_version=vers.get("libtpu"), error=error)


def _say(progress: Callable[..., Any] | None) -> Callable[[str], None]:
    def say(message: str) -> None:
        if progress is not None:
            progress(message)

    return say


def _seed(params: dict[str, Any]) -> int:
    seed = params.get("seed")
    return int(seed) if isinstance(seed, int) else int.from_bytes(os.urandom(4), "little")


def handle_time(params: dict[str, Any], progress: Callable[..., Any] | None = None) -> dict[str, Any]:
    """The ``time`` op (see the module docstring and docs/worker-protocol.md)."""
    say = _say(progress)
    runs = max(1, int(params.get("runs", 20)))
    warmup = max(1, int(params.get("warmup", 2)))
    max_speedup = float(params.get("max_speedup", MAX_SPEEDUP))
    seed = _seed(params)
    try:
        with prepared(params) as prep:
            say(f"loaded {prep.task.name} ({prep.task.format}); device: {prep.device_kind} ({prep.platform})")
            # without a device every run is TPU interpret mode on CPU: big inputs are reduced by the
            # rule the optimize loop uses (runner/timing_shrink.py), or refused at once with why
            checked = correctness(prep, seed, say, extra=bool(params.get("extra_shape", True)),
                                  shrink=bool(params.get("shrink", False)) or not prep.on_device)
            shapes = checked.pop("_shapes")
            reduced_config = checked.pop("_config", None)
            result = _base_result(prep, checked)
            if checked["rejections"]:
                why = "; ".join(r["message"] for r in checked["rejections"])
                result["candidate"] = to_json(measurement(prep, None, "not timed: rejected", "wrong_result", why))
                return result
            if params.get("shrink") and not prep.on_device:  # correctness only: CPU time at any shape ranks nothing
                result["notes"] = prep.notes + ["not timed: shrink asks for the correctness checks only (interpret mode "
                                                "on CPU; its wall clock says nothing about a TPU)"]
                return result
            if "reduced" in checked:
                shown = ", ".join(f"{dtype}{list(shape)}" for shape, dtype in checked["inputs"])
                prep.notes.append(f"timed at the reduced shapes {shown} in TPU interpret mode on CPU (interpret "
                                  "mode at full size runs for hours; this time says nothing about a TPU)")
            from . import timing_ladder

            with inputs_mod.config_scaled(timing_ladder.spaces_of(prep), reduced_config):
                timed = time_pair(prep, shapes, seed, runs, warmup, say)
            samples = timed["device_ns"] or timed["wall_ns"]
            cand, ref = samples[CANDIDATE], samples[REFERENCE]
            result["verdict"] = "ok"
            host_clock = bool(timed.get("host_clock"))
            result["candidate"] = to_json(measurement(prep, cand, timed["method"], host_clock=host_clock))
            result["reference"] = to_json(measurement(prep, ref, timed["method"], reference=True, host_clock=host_clock))
            result["spread"] = {"candidate": spread(cand), "reference": spread(ref)}
            result["trace"] = timed["trace"]
            speed = statistics.median(ref) / statistics.median(cand)
            baseline = f"the reference compiled by XLA on the same device ({prep.device_kind})"
            if not prep.on_device:
                baseline += "; the candidate ran in TPU interpret mode on CPU, so this ratio says nothing about a TPU"
            if prep.on_device and host_clock:
                baseline += "; both sides are host wall clock (the profiler's trace fell short), not device time"
            result["speedup"] = {"value": speed, "baseline": baseline,
                                 "provenance": "host" if prep.on_device and host_clock else prep.provenance.value,
                                 "inputs": checked["inputs"]}
            if speed > max_speedup:
                result["flags"].append(guards.reject("implausible_speedup", f"{speed:.1f}x faster than the reference is "
                                                     f"implausible (above {max_speedup:g}x): check the candidate by hand "
                                                     "before believing it"))
            result["notes"] = prep.notes
            return result
    except (TimingError, tasks_runtime.TaskError, profiling.TraceBusy) as exc:
        return _failed(params, str(exc))


def _base_result(prep: Prepared, checked: dict[str, Any]) -> dict[str, Any]:
    from .tiers import versions

    return {"entry": prep.task.name, "path": prep.path, "format": prep.task.format, "config": prep.config,
            "verdict": "rejected" if checked["rejections"] else "ok", "rejections": checked["rejections"],
            "flags": [], "checks": {k: v for k, v in checked.items() if k != "rejections"},
            "device": {"platform": prep.platform, "device_kind": prep.device_kind},
            "provenance": prep.provenance.value, "versions": versions(), "candidate": None, "reference": None,
            "speedup": None, "spread": None, "trace": None, "notes": prep.notes}


def _failed(params: dict[str, Any], message: str) -> dict[str, Any]:
    return {"entry": params.get("entry"), "path": params.get("path"), "verdict": "error", "error": message,
            "rejections": [], "flags": [], "candidate": None, "reference": None, "speedup": None}
