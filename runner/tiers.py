"""Tiers 1 and 2 for one callable, and what every check op shares: the chip table the worker
knows (``CHIPS``), the TPU lowering (tier 1) and the deviceless libtpu compile (tier 2), the
installed versions, the watch that names the line a hang is at, error records and progress.

Used by the ``check`` op (``runner/checks.py``), by ``check --script`` (``runner/script_mode.py``)
and by the tune op; it imports neither of those, so they import no circle.
Worker side: imports jax.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import threading
import time
from typing import Any, Callable, Mapping, Sequence

from ..analysis.types import CHIP_TARGETS, DEFAULT_CHIP, code_hash, installed_versions

from . import errors as errors_mod
from .memory_guard import watching
from ..wire.messages import Stage

# Target name -> (device_kind as jax reports it, TensorCores per device, deviceless topology name),
# from the chip names of analysis/types.py.
CHIPS: dict[str, tuple[str, int, str]] = {t.name: (t.device_kind, t.device_cores, t.topology) for t in CHIP_TARGETS}

LIBTPU_HINT = ("libtpu is not installed; install jax's tpu extra at the installed jax version: "
               "pip install \"jax[tpu]==$(python -c 'import jax; print(jax.__version__)')\"")

_topology_devices: dict[str, Any] = {}  # target -> tier-2 device (a warm worker reuses it)
# Set to a dict by a judged check (runner/judging/judge.py): each entry's tier-1 module, serialized, by entry name,
# so that tier 2 compiles it in a process that never ran the candidate.
LOWERED: dict[str, bytes] | None = None




def compiler_tiers(entry: dict[str, Any], fn: Callable[..., Any], args: tuple[Any, ...], target: str,
                   tiers: Sequence[int], unavailable: Mapping[str, str], say: Callable[[str], None], label: str,
                   record: Callable[[BaseException, int], dict[str, Any]], *, detail: str = "",
                   tier2_known: str | None = None, vmem: Any = None) -> None:
    """Tiers 1 and 2 for one callable, written into ``entry``: states, error records (made by
    ``record(exc, tier)``), timings, the lowered module's hash and the compiler's memory figures.
    Tier 2 runs only after tier 1 passed (or was not asked for), and not when its verdict is
    ``tier2_known`` (reused by the client)."""
    failed = False
    lowered = None  # tier 1's module lowered for the target's topology device: what tier 2 compiles
    timings = entry.setdefault("timings_s", {})
    if 1 in tiers:
        say(f"tier 1: {label} (Pallas TPU lowering for {target})", stage=Stage.TIER, tier=1, entry=label)
        started = time.perf_counter()
        try:
            if LOWERED is None and tier2_unavailable(target) is None:
                lowered = lower_for_topology(fn, args, target)
                text = module_text(lowered)
            else:  # no libtpu here, or a judged check: the exported module (tier 2 compiles it elsewhere)
                exported = lower_for_tpu(fn, args, target)
                if LOWERED is not None:
                    LOWERED[label] = bytes(exported.serialize())
                text = module_text(exported)
            entry["tiers"]["1"] = "ok"
            entry["mosaic_calls"] = text.count("tpu_custom_call") if text is not None else None
            entry["lowered_hash"] = code_hash("lowered", text) if text is not None else None
        except Exception as exc:  # noqa: BLE001 - the lowering's verdict
            entry["tiers"]["1"] = "error"
            entry["errors"].append(record(exc, 1))
            failed = True
        timings["1"] = round(time.perf_counter() - started, 4)
    if tier2_known is not None:
        entry["tiers"]["2"] = tier2_known
    elif 2 in tiers:
        if "2" in unavailable:
            entry["tiers"]["2"] = "skipped: " + unavailable["2"].split(";")[0]
        elif failed:
            entry["tiers"]["2"] = "skipped: tier 1 failed"
        else:
            say(f"tier 2: {label} (libtpu compile for {target}{detail})", stage=Stage.TIER, tier=2, entry=label,
                **({"vmem": vmem} if vmem is not None else {}))
            started = time.perf_counter()
            try:  # tier 1's lowering when it ran here: the kernel is not traced and lowered a second time
                entry["memory"] = (compile_lowered(lowered, target) if lowered is not None
                                   else compile_for_tpu(fn, args, target))
                entry["tiers"]["2"] = "ok"
            except Exception as exc:  # noqa: BLE001 - the compiler's verdict
                entry["tiers"]["2"] = "error"
                entry["errors"].append(record(exc, 2))
                if lowered is not None:  # a few percent over: the limit that fits (runner/vmem_fit.py)
                    from .vmem_fit import near_limit

                    near_limit(entry["errors"][-1], lowered, target, compile_with_vmem_limit)
            timings["2"] = round(time.perf_counter() - started, 4)


def lower_for_tpu(fn: Callable[..., Any], args: tuple[Any, ...], target: str) -> Any:
    """Tier 1: export ``fn`` for TPU on this (CPU) host; raises the lowering's error."""
    import jax
    from jax.sharding import AbstractDevice, AbstractMesh, use_abstract_mesh

    kind, cores, _ = CHIPS[target]
    mesh = AbstractMesh((1,), ("x",), abstract_device=AbstractDevice(device_kind=kind, num_cores=cores, platform="tpu"))
    with use_abstract_mesh(mesh):
        return jax.export.export(jax.jit(fn), platforms=("tpu",))(*args)


def module_text(module: Any) -> str | None:
    """The text of tier 1's module (a ``jax.stages.Lowered`` or a ``jax.export.Exported``), locations
    included (None: unknown; then the module's hash is unknown and tier 2 is simply not reused)."""
    try:
        return module.as_text(debug_info=True) if hasattr(module, "as_text") else module.mlir_module()
    except Exception:  # noqa: BLE001 - optional figures and keys
        return None


def input_signature(args: Any) -> list[list[Any]]:
    """``[[shape, dtype], ...]`` of the example inputs' leaves, in order."""
    import jax

    leaves = jax.tree.leaves(args, is_leaf=lambda a: hasattr(a, "shape") and hasattr(a, "dtype"))
    return [[list(a.shape), str(a.dtype)] for a in leaves if hasattr(a, "shape") and hasattr(a, "dtype")]


def versions() -> dict[str, str | None]:
    """The jax and libtpu versions the verdicts are valid for (libtpu None when absent)."""
    found = installed_versions()
    return {"jax": found["jax"], "libtpu": found["libtpu"]}


def compile_exported(serialized: bytes, target: str, signature: Any = None) -> dict[str, int] | None:
    """Tier 2 for a module lowered elsewhere (``LOWERED``, or the module the judge tested): deserialize it and
    compile it with libtpu for the target topology at its own input types, or at ``signature`` ([[dims, dtype],
    ...]: a module with symbolic sizes compiled at the task's); no Python of the file runs here. Returns
    memory_analysis bytes."""
    import jax

    exported = jax.export.deserialize(bytearray(serialized))
    if signature is not None:
        from .program.program_export import structs

        args, kwargs = tuple(structs(signature)), {}
    else:
        args, kwargs = jax.tree.unflatten(exported.in_tree, list(exported.in_avals))
    lowered = lower_for_topology(lambda a, k: exported.call(*a, **k), (args, kwargs), target)
    try:
        return compile_lowered(lowered, target)
    except Exception as exc:
        from .vmem_fit import annotate

        annotate(exc, lowered, target, compile_with_vmem_limit)  # a few percent over: the limit that fits
        raise


def compile_with_vmem_limit(lowered: Any, target: str, limit: int) -> None:
    """Tier 2 of a lowered module with libtpu's scoped VMEM limit (``xla_tpu_scoped_vmem_limit_kib``, the
    default a kernel's ``vmem_limit_bytes`` replaces) at ``limit`` bytes; raises when it does not fit."""
    import jax

    with jax.default_device(topology_device(target)):
        lowered.compile(compiler_options={"xla_tpu_scoped_vmem_limit_kib": limit // 1024})


def lower_for_topology(fn: Callable[..., Any], args: tuple[Any, ...], target: str) -> Any:
    """Tier 1 where libtpu describes the target: ``fn`` traced and lowered for the target topology's
    device (the same Pallas TPU lowering as the export), kept for tier 2 to compile. Raises the
    lowering's error."""
    import jax

    dev = topology_device(target)
    sharding = jax.sharding.SingleDeviceSharding(dev)
    placed = jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding),
        args,
        is_leaf=lambda a: hasattr(a, "shape") and hasattr(a, "dtype"),
    )
    try:
        with jax.default_device(dev):  # the target's device: calls the run intercepts are not interpreted here
            return jax.jit(fn).trace(*placed).lower()
    except AttributeError as exc:
        # a value the wrapper computes eagerly while traced (``jax.ensure_compile_time_eval``: axlearn's decoding
        # kernel) ran on the topology device, which cannot execute: the inputs' sharding names the device instead
        named = any(isinstance(a, jax.ShapeDtypeStruct) for a in jax.tree.leaves(placed))
        if "local_devices" not in str(exc) or not named:
            raise
        return jax.jit(fn).trace(*placed).lower()


def compile_lowered(lowered: Any, target: str) -> dict[str, int] | None:
    """Tier 2: compile a module lowered for the target topology with libtpu; returns memory_analysis bytes,
    and, where libtpu wrote its VMEM report, ``vmem_scoped_bytes`` (the largest Mosaic kernel's scoped VMEM
    as the compiler allocated it) and ``vmem_kernels`` (how many kernels the report covers)."""
    import jax

    from . import vmem_report

    vmem_report.take()  # what an earlier compile left (another op's), not this one's
    with jax.default_device(topology_device(target)):
        compiled = lowered.compile()
    figures = memory_figures(compiled)
    kernels = vmem_report.take()  # libtpu's own VMEM allocation, per Mosaic kernel (runner/vmem_report.py)
    if kernels:
        figures = {**(figures or {}), "vmem_scoped_bytes": max(kernels), "vmem_kernels": len(kernels)}
    return figures


def compile_for_tpu(fn: Callable[..., Any], args: tuple[Any, ...], target: str) -> dict[str, int] | None:
    """Tier 2 on its own: lower ``fn`` for the target topology and compile it; returns memory_analysis bytes."""
    return compile_lowered(lower_for_topology(fn, args, target), target)


def topology_device(target: str) -> Any:
    if target not in _topology_devices:
        from jax.experimental import topologies

        name = CHIPS[target][2]
        _topology_devices[target] = topologies.get_topology_desc(topology_name=name, platform="tpu").devices[0]
    return _topology_devices[target]


def tier2_unavailable(target: str) -> str | None:
    """Why tier 2 cannot run here (None when it can): libtpu missing or the topology refused."""
    if importlib.util.find_spec("libtpu") is None:
        return LIBTPU_HINT
    try:
        topology_device(target)
    except Exception as exc:  # noqa: BLE001 - libtpu present but unusable
        return f"libtpu could not describe the {target} topology ({type(exc).__name__}: {exc})"
    return None


def memory_figures(compiled: Any) -> dict[str, int] | None:
    try:
        stats = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - optional figures
        return None
    if stats is None:
        return None
    out = {}
    for name in ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
                 "temp_size_in_bytes", "generated_code_size_in_bytes", "peak_memory_in_bytes"):
        value = getattr(stats, name, None)
        if isinstance(value, int):
            out[name] = value
    return out


def check_params(params: dict[str, Any]) -> tuple[str, str | None, str, list[int]]:
    """A ``check`` request's file (absolute), its text (None: read the file), chip and tiers (default 1-2)."""
    return (os.path.abspath(str(params["path"])), params.get("text"), str(params.get("chip") or DEFAULT_CHIP),
            sorted({int(t) for t in params.get("tiers") or (1, 2)}))


@contextlib.contextmanager
def _line_watch(path: str, limit_s: Any, say: Callable[[str], None]):
    """Near the time limit, keep saying which line of the user's file the check is on.

    The client kills a worker that runs past the limit, and a killed worker says nothing more: these
    progress reports (``line`` set, the stage kept) let it put a hang (e.g. at import) at its line.
    """
    if not isinstance(limit_s, (int, float)) or limit_s <= 0:
        yield
        return
    main = threading.get_ident()
    stop = threading.Event()
    target = os.path.realpath(path)

    def watch() -> None:
        wait = max(limit_s * 0.8, limit_s - 2.0)
        while not stop.wait(wait):
            line = _innermost_line(sys._current_frames().get(main), target)
            if line is not None:
                say(f"at line {line} of {os.path.basename(path)}", line=line)
            wait = 0.5

    with watching(watch, "pallasite-line-watch", stop):
        yield


def _innermost_line(frame: Any, target: str) -> int | None:
    while frame is not None:
        if os.path.realpath(frame.f_code.co_filename) == target:
            return frame.f_lineno
        frame = frame.f_back
    return None


# Global jax settings a kernel file may change at import (e.g. jax_enable_x64): a warm worker
# puts them back after each check so one file cannot change the verdict on the next.
_CONFIG_NAMES = ("jax_enable_x64", "jax_default_matmul_precision", "jax_numpy_rank_promotion",
                 "jax_numpy_dtype_promotion", "jax_pallas_verbose_errors", "jax_default_prng_impl")


@contextlib.contextmanager
def _restored_config():
    import jax

    saved = {}
    for name in _CONFIG_NAMES:
        with contextlib.suppress(AttributeError, KeyError):
            saved[name] = getattr(jax.config, name)
    try:
        yield
    finally:
        for name, value in saved.items():
            with contextlib.suppress(Exception):
                jax.config.update(name, value)


# --------------------------------------------------------------------------- records


def _tier_record(exc: BaseException, path: str, tier: int) -> dict[str, Any]:
    import jax

    rec = errors_mod.record(exc, path, stage=f"tier {tier}")
    rec["tier"] = tier
    from .vmem_fit import noted

    near = noted(exc)  # runner/vmem_fit.annotate: a compile a few percent over its VMEM limit
    if near and rec.get("vmem"):
        rec["vmem"]["near_limit"] = near
    if jax.config.jax_enable_x64:  # ints become int64, which Mosaic rejects: engine/findings/locate.py says why
        rec["x64"] = True
    return rec


def _task_error(exc: "tasks_runtime.TaskError", path: str) -> dict[str, Any]:
    rec = errors_mod.record(exc, path, stage="task")
    if exc.line is not None:
        rec["mentions"].insert(0, {"line": exc.line, "column": None})
    return rec


def _plain_error(stage: str, message: str) -> dict[str, Any]:
    return {"stage": stage, "type": "ValueError", "sentence": message, "message": message, "detail": None,
            "frames": [], "mentions": [], "refs": [], "vmem": None, "mosaic_codes": [], "syntax": None}


class _Say:
    """Progress for one request: ``say(message, stage=..., tier=..., entry=...)`` starts a step;
    ``say(message)`` reports within the current step (tier 3's sub-runs); ``say(message, line=N)``
    refines it with the user's line. Each call sends a structured ``Progress`` (never raises)."""

    def __init__(self, progress: Callable[..., Any] | None) -> None:
        self.progress = progress
        self.step: dict[str, Any] = {}

    def __call__(self, message: str, **fields: Any) -> None:
        if "stage" in fields:
            self.step = {k: v for k, v in fields.items() if k in ("stage", "tier", "entry", "vmem")}
        report = dict(self.step)
        if "line" in fields:
            report["line"] = fields["line"]
        if self.progress is not None:
            with contextlib.suppress(Exception):
                self.progress(str(message), **report)


def _say(progress: Callable[..., Any] | None) -> Callable[..., None]:
    return _Say(progress)


# --------------------------------------------------------------------------- the typed result
