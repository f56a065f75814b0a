"""The worker's ``check`` op: tiers 1-3 for every task of one kernel file.

``handle_check`` loads the user's file (``runner/loader.py``), finds its
tasks (``runner/tasks_runtime.py``) and, for each entry:

- tier 1: ``jax.export.export(jax.jit(entry), platforms=("tpu",))(*shapes)`` — the real Pallas to
  Mosaic lowering on CPU jaxlib — inside an abstract mesh whose device is the target chip, with
  ``jax_pallas_verbose_errors`` on so errors name the user's lines;
- tier 2: the real Mosaic/XLA compiler from libtpu, deviceless: the target topology's first
  device, arguments placed on it, ``jax.jit(entry).trace(...).lower().compile()``; its
  ``memory_analysis()`` figures are returned. Without libtpu, tier 2 is reported unavailable once;
- tier 3: a TPU interpret-mode run on CPU (``runner/interpret.py``, ``tier3_entry``).

``params.script`` hands the whole request to ``runner/script_mode.py`` (`check --script`).

``handle_check(CheckParams, progress) -> CheckResult`` (runner/messages.py; docs/worker-protocol.md
describes both). The tiers build a plain dict step by step (``entry["tiers"]["2"] = "skipped: tier 1
failed"``; interpret.py and script_mode.py write into it too), turned into the typed result once at
the end (``messages.check_result_from_plain``). ``params.inferred`` (tasks the client read from the
file's own calls when it states none) reaches ``runner/tasks_inferred.py``. The lowered module's text includes its source
locations, so equal hashes mean the same kernel at the same lines: a verdict stored under it (with
its spans) stays valid.

Progress is structured (``Stage.TIER`` with ``tier`` and ``entry``; ``line`` near the time limit) so
a client can say which step ran out of time without reading the words.
Worker side: imports jax, the loader and the task reader; nothing else of pallasite.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import linecache
import os
import sys
import threading
import time
from typing import Any, Callable, Mapping, Sequence

from pallasite.analysis.types import CHIP_TARGETS, code_hash, installed_versions, to_json

from . import errors as errors_mod
from . import messages, tasks_runtime
from .messages import Stage

# Target name -> (device_kind as jax reports it, TensorCores per device, deviceless topology name),
# from the chip names of analysis/types.py.
CHIPS: dict[str, tuple[str, int, str]] = {t.name: (t.device_kind, t.device_cores, t.topology) for t in CHIP_TARGETS}

LIBTPU_HINT = "libtpu is not installed; pip install 'pallasite[tpu]' (jax[tpu] of the same jax version)"

_topology_devices: dict[str, Any] = {}  # target -> tier-2 device (a warm worker reuses it)


def handle_check(params: messages.CheckParams, progress: Callable[..., Any] | None = None) -> messages.CheckResult:
    """Run the requested compiler tiers on every task of the sent file (typed in, typed out)."""
    plain = {"path": params.source.path, "text": params.source.text, "target": params.target,
             "tiers": list(params.tiers), "time_limit_s": params.time_limit_s,
             "entries": list(params.entries) if params.entries is not None else None,
             "tier2_known": dict(params.tier2_known),
             "inferred": [to_json(call) for call in params.inferred]}  # runner/tasks_inferred.py reads these
    if params.script:  # `pallasite check --script`: runner/script_mode.py
        from .script_mode import handle_script_check

        scripted = functools.partial(progress, stage=Stage.SCRIPT) if progress is not None else None
        return typed_result(handle_script_check(plain, scripted), plain["tiers"])
    return typed_result(_handle_check(plain, params.source, progress), plain["tiers"])


def _handle_check(params: dict[str, Any], source: messages.Sources | None, progress: Callable[..., Any] | None) -> dict[str, Any]:
    import jax

    started = time.monotonic()
    say = _say(progress)
    path = os.path.abspath(str(params["path"]))
    text = params.get("text")
    target = str(params.get("target") or "v6e")
    tiers = sorted({int(t) for t in params.get("tiers") or (1, 2)})
    result: dict[str, Any] = {"target": target, "tiers": tiers, "tasks_found": 0, "errors": [], "unavailable": {},
                              "entries": [], "versions": versions()}
    only = params.get("entries")
    only = {str(n) for n in only} if isinstance(only, (list, tuple)) else None
    known = {str(k): str(v) for k, v in (params.get("tier2_known") or {}).items()}
    if target not in CHIPS:
        result["errors"].append(_plain_error("task", f"unknown target {target!r}; use one of {', '.join(CHIPS)}"))
        return result

    jax.config.update("jax_pallas_verbose_errors", True)
    if 2 in tiers:
        why = tier2_unavailable(target)
        if why:
            result["unavailable"]["2"] = why

    from .import_failures import blame_import, import_failure_records, unbound_names
    from .loader import StopLoading, sent_modules, user_module
    from .memory_guard import stop_near_limit
    from .recording import recording
    from .script_mode import script_budget, statement_deadlines
    from .target_chip import target_chip
    from .tasks_recorded import zero_config_tasks

    say(f"importing {os.path.basename(path)} (its pallas_calls recorded, not run)", stage=Stage.IMPORT)
    modules = sent_modules(source)
    package = source.package if source is not None else None
    notes: list[str] = []
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(_line_watch(path, params.get("time_limit_s"), say))  # a hang the deadline cannot stop
            stack.enter_context(_restored_config())
            stack.enter_context(target_chip(target))  # the file's questions about its chip answer as the target's
            limit = params.get("time_limit_s")
            with recording(path) as run, stop_near_limit():
                guard = statement_deadlines(script_budget(limit, time.monotonic() - started))
                module = stack.enter_context(user_module(path, text, modules, package, failures=run.failures,
                                                         guard=guard))
            records, said = import_failure_records(run, path, limit)
            unbound = unbound_names(text if text is not None else "".join(linecache.getlines(path)), run)
            result["errors"].extend(records)
            notes.extend(said)
            try:
                tasks = tasks_runtime.discover(module, path, text)
                if not tasks:  # the zero-configuration path: the shapes the file's own code uses
                    zero = zero_config_tasks(module, path, text, run, params.get("inferred"), target,
                                             params.get("time_limit_s"), time.monotonic() - started)
                    tasks = zero.tasks
                    result["errors"].extend(zero.errors)
                    notes = ([zero.note] if zero.note else []) + notes + zero.notes
            except tasks_runtime.TaskError as exc:
                result["errors"].append(_task_error(exc, path))
                return result
            result["tasks_found"] = len(tasks)
            for task in tasks:
                if only is not None and task.name not in only:
                    continue
                checked = _check_task(task, path, target, tiers, result["unavailable"], say, known.get(task.name))
                blame_import(checked, unbound)
                result["entries"].append(checked)
    except tasks_runtime.TaskError as exc:
        result["errors"].append(_task_error(exc, path))
    except (Exception, SystemExit, StopLoading) as exc:  # noqa: BLE001 - the user's module failed to import
        rec = errors_mod.record(exc, path, stage="import")
        result["errors"].append(rec)
    if result["entries"] and notes:
        result["entries"][0]["notes"] = notes + list(result["entries"][0].get("notes") or ())
    return result


def _check_task(task, path, target, tiers, unavailable, say, tier2_known=None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": task.name,
        "line": task.line,
        "format": task.format,
        "has_reference": task.reference is not None,
        "tolerance": task.tolerance,
        "tunables": task.tunables,
        "tiers": {},
        "errors": [],
        "memory": None,
        "mosaic_calls": None,  # tier 1: Mosaic kernels in the exported module
        "lowered_hash": None,  # tier 1: hash of the exported module's text (results-cache key)
        "inputs": [],
        "timings_s": {},
    }
    try:
        args = task.abstract_args()
    except tasks_runtime.TaskError as exc:
        entry["errors"].append(_task_error(exc, path))
        for t in tiers:
            entry["tiers"][str(t)] = "skipped: the example inputs failed"
        return entry
    entry["inputs"] = input_signature(args)
    record = lambda exc, tier: _tier_record(exc, path, tier)  # noqa: E731
    if task.call is not None:  # a recorded call (runner/tasks_recorded.py): it says what it reached
        from .recording import call_record, reach_record

        entry["reached"] = [reach_record(task.call, path)]
        record = lambda exc, tier: call_record(exc, path, tier, task.call)  # noqa: E731
    elif any(t in tiers for t in (1, 2, 3)):  # which of the file's pallas_calls this entry reaches (runner/reach.py)
        from .reach import entry_namespaces, reached_calls

        entry["reached"] = reached_calls(task.entry, args, path, entry_namespaces(task.entry))
    from .reach import chip_vmem_bytes, vmem_detail, vmem_excess

    # said with tier 2's progress: a compile that then runs past its time limit is explained by it
    capacity = chip_vmem_bytes(target) if 2 in tiers else None
    excess = vmem_excess(entry.get("reached"), capacity)
    compiler_tiers(entry, task.entry, args, target, tiers, unavailable, say, task.name, record, tier2_known=tier2_known,
                   detail=vmem_detail(entry.get("reached"), capacity),
                   vmem=messages.VmemExcess(**excess) if excess else None)
    skipped = None
    if task.call is not None:
        from .recording import outside_its_axes

        skipped = outside_its_axes(entry, task.call)
    if 3 in tiers and skipped:
        entry["tiers"]["3"] = skipped
    elif 3 in tiers:  # TPU interpret-mode run: runner/interpret.py
        from .interpret import tier3_entry

        say(f"tier 3: {task.name}", stage=Stage.TIER, tier=3, entry=task.name)
        tier3_entry(entry, task, path, say, target)
    return entry


# --------------------------------------------------------------------------- the two tiers


def compiler_tiers(entry: dict[str, Any], fn: Callable[..., Any], args: tuple[Any, ...], target: str,
                   tiers: Sequence[int], unavailable: Mapping[str, str], say: Callable[[str], None], label: str,
                   record: Callable[[BaseException, int], dict[str, Any]], *, detail: str = "",
                   tier2_known: str | None = None, vmem: Any = None) -> None:
    """Tiers 1 and 2 for one callable, written into ``entry``: states, error records (made by
    ``record(exc, tier)``), timings, the lowered module's hash and the compiler's memory figures.
    Tier 2 runs only after tier 1 passed (or was not asked for), and not when its verdict is
    ``tier2_known`` (reused by the client)."""
    failed = False
    timings = entry.setdefault("timings_s", {})
    if 1 in tiers:
        say(f"tier 1: {label} (Pallas TPU lowering for {target})", stage=Stage.TIER, tier=1, entry=label)
        started = time.perf_counter()
        try:
            exported = lower_for_tpu(fn, args, target)
            entry["tiers"]["1"] = "ok"
            entry["mosaic_calls"] = mosaic_call_count(exported)
            entry["lowered_hash"] = module_hash(exported)
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
            try:
                entry["memory"] = compile_for_tpu(fn, args, target)
                entry["tiers"]["2"] = "ok"
            except Exception as exc:  # noqa: BLE001 - the compiler's verdict
                entry["tiers"]["2"] = "error"
                entry["errors"].append(record(exc, 2))
            timings["2"] = round(time.perf_counter() - started, 4)


def lower_for_tpu(fn: Callable[..., Any], args: tuple[Any, ...], target: str) -> Any:
    """Tier 1: export ``fn`` for TPU on this (CPU) host; raises the lowering's error."""
    import jax
    from jax.sharding import AbstractDevice, AbstractMesh, use_abstract_mesh

    kind, cores, _ = CHIPS[target]
    mesh = AbstractMesh((1,), ("x",), abstract_device=AbstractDevice(device_kind=kind, num_cores=cores, platform="tpu"))
    with use_abstract_mesh(mesh):
        return jax.export.export(jax.jit(fn), platforms=("tpu",))(*args)


def mosaic_call_count(exported: Any) -> int | None:
    """How many Mosaic kernels (``tpu_custom_call``) the exported module holds (None: unknown)."""
    try:
        return exported.mlir_module().count("tpu_custom_call")
    except Exception:  # noqa: BLE001 - an optional figure
        return None


def module_hash(exported: Any) -> str | None:
    """``lowered:<sha256>`` of the exported module's text (None: unknown). Locations included."""
    try:
        return code_hash("lowered", exported.mlir_module())
    except Exception:  # noqa: BLE001 - an optional key: without it tier 2 is simply not reused
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


def compile_for_tpu(fn: Callable[..., Any], args: tuple[Any, ...], target: str) -> dict[str, int]:
    """Tier 2: compile ``fn`` with libtpu for the target topology; returns memory_analysis bytes."""
    import jax

    dev = topology_device(target)
    sharding = jax.sharding.SingleDeviceSharding(dev)
    placed = jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding),
        args,
        is_leaf=lambda a: hasattr(a, "shape") and hasattr(a, "dtype"),
    )
    with jax.default_device(dev):
        compiled = jax.jit(fn).trace(*placed).lower().compile()
    return memory_figures(compiled)


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

    thread = threading.Thread(target=watch, name="pallasite-line-watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()


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
    if jax.config.jax_enable_x64:  # ints become int64, which Mosaic rejects: engine/locate.py says why
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


def typed_result(result: dict[str, Any], tiers: Sequence[int]) -> messages.CheckResult:
    """The check's plain dict (built step by step by the tiers) as the protocol's ``CheckResult``."""
    result.setdefault("versions", versions())
    return messages.check_result_from_plain(result, tiers)
