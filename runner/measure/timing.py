"""What the ``time`` and ``profile`` ops share: loading a task (``prepared``), the one timing loop
(``time_pair``), measurements and their spread.

The ``time`` op itself is the judge's (runner/judging/judge.py):
the candidate's exported program checked against the trusted reference and timed by the judge's clock.
``prepared(params)`` loads a file's task and its reference (native ``reference``, JAXBench ``baseline.py``'s
``workload``, MaxKernel ``computation``, or ``params["reference_path"]``'s); the judge uses it for the trusted
side and the candidate's process for the candidate's.

Timing (``time_pair``): ``warmup`` calls each, then ``runs`` rounds with the reference and the candidate
interleaved (their order alternating), each call on fresh copies of the inputs (made outside the timed
region). On an accelerator the time of each call is the device time of its XLA module from the
profiler's device plane (host dispatch and compilation excluded); on CPU it is wall clock around the call
and ``block_until_ready``, labelled ``interpret``: it says nothing about TPU time.

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

from ...analysis.types import Measurement, Provenance

from . import profiling
from ..tasks import tasks_runtime
from . import timing_inputs as inputs_mod

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

    from ..loader import sent_modules

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
    from ..loader import user_module

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
    tolerance, source = tasks_runtime.stated_tolerance(ref_module, os.path.basename(getattr(ref_module, "__file__", "")
                                                                                     or "baseline.py"))
    return [tasks_runtime.RuntimeTask(name="workload", entry=entry, format="jaxbench", config=config,
                                      tolerance=tolerance, tolerance_source=source,
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
        from ..tier3.nan_prefill import nan_prefilled

        return nan_prefilled(modules=(prep.module,), on_tpu=prep.platform == "tpu")
    return contextlib.nullcontext()


# --------------------------------------------------------------------------- the judge's helpers


def _config_size(prep: Prepared, shapes: tuple[Any, ...]) -> Any:
    """(size, own): the task at a reduced CONFIG size (runner/measure/timing_ladder.py) when it states one and
    is too big to interpret whole (None when it states none or fits; a string when it could not be
    reduced); ``own``: why the reference does not take the candidate's inputs (then no size: the judge
    compares a candidate only on the task's own inputs), else None."""
    from . import timing_ladder
    from ..tier3.interpret import _namespaces, probe_calls

    config = prep.task.config or {}
    if prep.task.format not in ("jaxbench", "maxkernel") or not any(timing_ladder._is_int(v) for v in config.values()):
        return None, None
    own = timing_ladder.takes_candidate_inputs(prep, shapes)
    if own is not None:  # the judge maps a prefix of the task's inputs where that is how they fit, else refuses
        prefixed = timing_ladder.task_prefix(prep)
        if prefixed is None:
            return None, own
        prep, shapes = prefixed
    try:
        fn = prep.probe()
        calls = probe_calls(fn, shapes, _namespaces(fn))
    except Exception as exc:  # noqa: BLE001 - the program checks report the candidate's own failure
        return f"the candidate does not trace at the task's size ({type(exc).__name__})", None
    if not calls:
        return None, None
    return timing_ladder.config_ladder(prep, shapes, calls), None


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
    from ..tiers import versions

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


def _failed(params: dict[str, Any], message: str) -> dict[str, Any]:
    return {"entry": params.get("entry"), "path": params.get("path"), "verdict": "error", "error": message,
            "rejections": [], "flags": [], "candidate": None, "reference": None, "speedup": None}
