"""Client side of `time` and `profile`: which files, the request, the backend, the measurements.

Used by the CLI (``server/commands/cmd_time.py``), the language server's "Time on"/"Profile on" lenses and
the agents (the autotuner times measured configs through ``time_request`` + ``run_timing``).

- ``task_files(target)``: a kernel file, or a task folder as it is: JAXBench (``optimized.py``
  timed against ``baseline.py``), MaxKernel (``kernel_task.yaml``: its kernel file; the folder's
  ``reference.py`` is read by the worker), or a folder with one kernel file.
- ``time_request(files, op, ...)``: the op's typed params (``TimeParams``/``ProfileParams``), with
  the files' text and their local modules (a remote worker needs nothing but
  pallasite installed; paths name the user's files in messages).
- ``run_timing(settings, params)``: start the backend's worker, run, close; returns a
  ``TimingRun`` with the reply, where it ran, the worker's handshake and version warnings.
- ``measurements(result)``: the candidate's and the reference's ``Measurement``s;
  ``record(run, path)`` puts them in the workspace's results store (``.pallasite/``), keyed by
  the file's source hash, entry, inputs, config, device kind, versions and backend;
  ``Engine.stored_measurements(path)`` reads the newest ones back for hovers.

No JAX here; the worker side is ``runner/measure/timing.py``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..analysis.types import Measurement, from_json, to_json

from .workers import launcher
from .workers.backend import Reply
from .workers.client import WorkerConfig
from .workers.remote import BackendSettings, open_remote, where

OPS = ("time", "profile")
TIME_LIMIT_S = 600.0  # a whole time or profile (the kernel and its reference, judged, then timed) by default


def timing_worker(memory_mb: int, time_limit_s: float | None = None, *, request_limit_s: float = 0.0,
                  python: str | None = None, platforms: str | None = None) -> WorkerConfig:
    """The one worker a ``time``, ``profile`` or estimate pair runs in, from the CLI and the editor alike: the
    whole command's limit (``--time-limit``; by default ``TIME_LIMIT_S``, never below the project's limit of
    one request, ``check.timeLimitS``) and the project's memory limit (``--memory-mb`` over ``check.memoryMb``)."""
    limit = time_limit_s if time_limit_s is not None else max(TIME_LIMIT_S, request_limit_s)
    return WorkerConfig(python=python or WorkerConfig.python, timeout_s=limit, platforms=platforms, memory_mb=memory_mb)


@dataclass(frozen=True)
class TaskFiles:
    path: str  # the candidate kernel file
    reference_path: str | None = None  # a separate reference file (JAXBench baseline.py)
    layout: str = "file"  # "file", "jaxbench", "maxkernel", "folder"


def task_files(target: str, task: str | None = None) -> TaskFiles:
    """The files to time for a FILE or TASK_DIR argument; ValueError says what is missing. ``task``:
    a JAXBench task folder (or its baseline.py) whose reference and inputs a stand-alone kernel
    FILE is scored against (``pallasite time TASK_DIR --kernel FILE``)."""
    if task is not None:
        return _against_task(target, task)
    target = os.path.abspath(target)
    if os.path.isfile(target):
        sibling = os.path.join(os.path.dirname(target), "baseline.py")
        if os.path.basename(target) != "baseline.py" and os.path.isfile(sibling):
            return TaskFiles(target, sibling, "jaxbench")
        return TaskFiles(target)
    if not os.path.isdir(target):
        raise ValueError(f"{target}: no such file or folder")
    optimized, baseline = os.path.join(target, "optimized.py"), os.path.join(target, "baseline.py")
    if os.path.isfile(optimized) and os.path.isfile(baseline):
        return TaskFiles(optimized, baseline, "jaxbench")
    if os.path.isfile(os.path.join(target, "kernel_task.yaml")):
        kernels = [f for f in sorted(os.listdir(target)) if f.endswith(".py") and f != "reference.py"]
        if len(kernels) == 1:
            return TaskFiles(os.path.join(target, kernels[0]), None, "maxkernel")
        raise ValueError(f"{target}: a MaxKernel task folder needs exactly one kernel file beside reference.py "
                         f"(found: {', '.join(kernels) or 'none'}); pass the file itself")
    kernels = [f for f in sorted(os.listdir(target)) if f.endswith(".py") and not f.startswith("_")]
    if len(kernels) == 1:
        return TaskFiles(os.path.join(target, kernels[0]), None, "folder")
    raise ValueError(f"{target}: not a task folder (JAXBench: optimized.py + baseline.py; MaxKernel: "
                     f"kernel_task.yaml) and not one kernel file (found: {', '.join(kernels) or 'none'})")


def _against_task(kernel: str, task: str) -> TaskFiles:
    kernel, task = os.path.abspath(kernel), os.path.abspath(task)
    if not os.path.isfile(kernel):
        raise ValueError(f"{kernel}: no such kernel file (with --task, give the kernel FILE to score)")
    baseline = task if os.path.isfile(task) else os.path.join(task, "baseline.py")
    if not os.path.isfile(baseline):
        raise ValueError(f"{task}: not a JAXBench task (no baseline.py): --task names the task whose reference "
                         "and inputs the kernel is scored against")
    return TaskFiles(kernel, baseline, "jaxbench")


def time_request(files: TaskFiles, op: str = "time", *, entry: str | None = None,
                 config: dict[str, Any] | None = None, runs: int | None = None, warmup: int | None = None,
                 seed: int | None = None, max_speedup: float | None = None, extra_shape: bool | None = None,
                 trace_dir: str | None = None, chip: str | None = None, text: str | None = None,
                 trusted: tuple[str, str] | None = None) -> Any:
    """The typed ``TimeParams``/``ProfileParams`` (wire/messages.py) for these files: the texts of
    the candidate, its local modules and the reference file travel with it; options not given keep
    the op's defaults. ``trusted``: (path, text) of the user's own file, for model-written ``text``: the
    judge loads the task and the reference from it, in a process that never runs the candidate
    (runner/judging/judge.py); it travels under a name of its own beside ``files.path``."""
    from ..wire.messages import ProfileParams, TimeParams

    from .sources import sources_for, trusted_sources

    if op not in OPS:
        raise ValueError(f"unknown timing op {op!r}; ops: {', '.join(OPS)}")
    options: dict[str, Any] = {"entry": entry, "config": dict(config) if config else None, "runs": runs,
                               "warmup": warmup, "seed": seed, "max_speedup": max_speedup, "extra_shape": extra_shape}
    if op == "profile":
        options.update(trace_dir=trace_dir, chip=chip)
    cls = ProfileParams if op == "profile" else TimeParams
    reference = sources_for(files.reference_path) if files.reference_path else None
    if trusted is not None and op == "time":
        options["trusted"] = trusted_sources(*trusted)
    return cls(source=sources_for(files.path, text), reference=reference,
               **{k: v for k, v in options.items() if v is not None})


@dataclass
class TimingRun:
    """One `time`/`profile` request and what answered it."""

    op: str
    reply: Reply
    where: str
    handshake: Any = None
    warnings: list[str] = field(default_factory=list)

    @property
    def result(self) -> dict[str, Any] | None:
        """The worker's ``TimeResult`` as plain JSON (what the formats and the store read)."""
        if not self.reply.ok or self.reply.result is None:
            return None
        return to_json(self.reply.result)

    def describe_worker(self) -> str:
        return launcher.describe(self.handshake, self.where) if self.handshake is not None else f"worker on {self.where}"


async def trusted_floors(files: TaskFiles, *, entry: str | None = None, base: WorkerConfig | None = None,
                         timeout_s: float | None = None) -> dict[str, Any] | None:
    """The physical floors' figures (outputs, certain matmul FLOPs) of the user's own file, traced by a local
    CPU worker of this machine: what a device's reply is held to, whatever that worker says; None when the
    file could not be traced (then the reply's own floors apply, said by no figure of ours)."""
    import dataclasses

    from ..wire.messages import EstimateParams

    from .sources import sources_for

    local = dataclasses.replace(base or WorkerConfig(), platforms="cpu", confine=False, command=())
    backend = open_remote(BackendSettings(kind="local"), local)
    try:
        reply = await backend.request(EstimateParams(source=sources_for(files.path), entry=entry, probe=False,
                                                     floors=True, reference_source=sources_for(files.reference_path)
                                                     if files.reference_path else None),
                                      purpose="job", timeout_s=timeout_s)
    finally:
        await backend.close()
    return reply.result.floors if reply.ok and reply.result is not None else None


async def run_timing(settings: BackendSettings, params: Any, *, base: WorkerConfig | None = None,
                     timeout_s: float | None = None, floors: dict[str, Any] | None = None,
                     on_progress: Callable[[str, float | None], Any] | None = None) -> TimingRun:
    """Start the backend's worker, run one ``time``/``profile`` request, close it. Never raises for
    the worker's sake. ``floors``: the user's own file's figures (``trusted_floors``) the device timings are
    held to, instead of what the worker reports."""
    op = type(params).OP
    if op not in OPS:
        raise ValueError(f"unknown timing op {op!r}; ops: {', '.join(OPS)}")
    backend = open_remote(settings, base)
    run = TimingRun(op, Reply("not_started", message="not started"), where(settings))

    def progress(report: Any) -> Any:
        return on_progress(report.message, report.fraction) if on_progress is not None else None

    try:
        run.reply = await backend.request(params, purpose="device", timeout_s=timeout_s, on_progress=progress)
        if floors is not None:
            from .device_floor import floored

            run.reply = floored(run.reply, floors)
        run.handshake = getattr(backend, "handshake", None)
        if run.handshake is not None:
            run.warnings = launcher.version_warnings(run.handshake)
        if getattr(backend, "node", None):
            run.where = backend.where
    finally:
        await backend.close()
    return run


def as_job(jobs: Any, kind: str, path: str, work: Callable[[Callable[[str], None]], Any]) -> Any:
    """Run ``work(report)`` as a job of the engine's registry (engine/jobs.py); its string progress
    becomes the job's structured progress (stage ``measure``)."""
    from ..wire.messages import Progress, Stage

    def run(job_report: Callable[[Any], None]) -> Any:
        return work(lambda message: job_report(Progress(stage=Stage.MEASURE, message=message)))

    return jobs.submit(kind, path, run)


def run_timing_sync(settings: BackendSettings, params: Any, **kw: Any) -> TimingRun:
    return asyncio.run(run_timing(settings, params, **kw))


def device_measurement(result: Any, role: str = "candidate") -> tuple[Any, str | None]:
    """(the role's Measurement, None) when it is a device timing with a median, else (None, why)."""
    m = getattr(result, role, None) if result is not None else None
    if m is None:
        return None, f"the worker returned no {role} timing"
    prov = str(getattr(m.provenance, "value", m.provenance))
    if prov != "device":
        return None, (f"the {role} was timed as {prov!r} ({m.device_kind}), not on a device: CPU time never "
                      f"ranks a candidate; point --backend at a TPU host")
    if not m.median_ns or m.median_ns <= 0:
        return None, f"the {role}'s device timing has no median ({m.status}: {m.error or 'no samples'})"
    return m, None


def measurements(result: dict[str, Any]) -> list[tuple[str, Measurement]]:
    """(role, Measurement) for the candidate and the reference, as the worker reported them."""
    out = []
    for role in ("candidate", "reference"):
        data = result.get(role)
        if isinstance(data, dict):
            out.append((role, from_json(Measurement, data)))
    return out


def _key(result: dict[str, Any], role: str, m: Measurement, path: str, backend: str) -> Any:
    from ..knowledge.store import ResultKey, source_hash

    inputs = tuple((tuple(shape), dtype) for shape, dtype in (result.get("checks") or {}).get("inputs") or ())
    return ResultKey(code_hash=source_hash(path), kernel=f"{result.get('entry')}" + ("" if role == "candidate" else " (reference)"),
                     inputs=inputs, config=tuple(sorted((result.get("config") or {}).items())), chip=m.device_kind,
                     jax_version=m.jax_version, libtpu_version=m.libtpu_version, backend=backend)


def record(run: TimingRun, path: str, workspace: str | None = None) -> str | None:
    """Record a run's measurements with their provenance; a note instead of a failure when it cannot."""
    from ..knowledge.store import ResultsStore, StoreError

    result = run.result
    if result is None:
        return None
    try:
        store = ResultsStore.open(workspace or _workspace_for(path))
    except (StoreError, OSError) as exc:
        return f"results not stored: {exc}"
    try:
        for role, m in measurements(result):
            store.put_measurement(_key(result, role, m, path, run.where), m, path=os.path.abspath(path))
    except Exception as exc:  # noqa: BLE001 - a store problem never hides the measurement
        return f"results not stored: {type(exc).__name__}: {exc}"
    finally:
        store.close()
    return None


def _workspace_for(path: str) -> Any:
    """The workspace whose store holds ``path``'s results (the rule `pallasite check` uses, with the
    file's own folder as the last resort)."""
    from .store_cache import workspace_for

    return workspace_for([path], cwd=os.path.dirname(os.path.abspath(path)))
