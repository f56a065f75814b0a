"""The worker's ``estimate`` op: a task's entry under each configuration exported for the chip's TPU and its
module priced by the one cost model (runner/program/program_price.py: runner/program/module_cost.price_exported, the way the
judge prices a candidate), the reference by XLA's compiled module for the chip (runner/program/cost_model.
estimate_reference). Nothing runs on a device.

Params and result: ``messages.EstimateParams`` -> ``EstimateResult`` (the file travels as
``Sources``; ``entry`` names the task, else the file's first; ``kinds`` says how each tunable
reaches the code).

A configuration is applied for its trace only: keyword tunables as keyword arguments of the
entry; module constants and ``TUNED_PARAMS`` entries (``name[i]``: element i of a list entry) by
setting them on the loaded module (read when the entry runs; a constant already baked into a module-level BlockSpec is not changed: its
estimates then all share one program hash - the exported module's - which the report shows as duplicates).

Worker side: imports jax.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ..analysis.types import DEFAULT_CHIP, ChipSpec, chip_target, installed_versions

from ..wire import messages

from .tasks import tasks_runtime
from .chip_probe import probe_scoped_vmem, spec_from_jax
from .program.cost_model import estimate_reference
from .program.program_price import price_program

CONCRETE_INPUT_LIMIT = 64 << 20  # inputs() is called for real (scalar-prefetch values) below this many bytes


def _module(source: messages.Sources) -> Any:
    from .loader import sent_modules, user_module

    return user_module(os.path.abspath(source.path), source.text, sent_modules(source), source.package)


def _task(module: Any, source: messages.Sources, entry: str | None,
          ref_module: Any = None) -> tasks_runtime.RuntimeTask:
    path = os.path.abspath(source.path)
    tasks = tasks_runtime.discover(module, path, source.text)
    if not tasks and ref_module is not None:  # a stand-alone kernel: its workload on the task's inputs
        from .measure.timing import _pair_task

        tasks = _pair_task(module, ref_module, path)
    task = next((t for t in tasks if entry in (None, t.name)), None)
    if task is None:
        names = ", ".join(t.name for t in tasks) or "none"
        wanted = f"named {entry!r} " if entry is not None else ""
        raise tasks_runtime.TaskError(f"no task {wanted}in {os.path.basename(path)} (tasks: {names}): it needs "
                                      "example_inputs() and reference(), or a JAXBench/KernelBench form; see "
                                      "docs/task-convention.md")
    return task


def handle_estimate(params: messages.EstimateParams, progress: Callable[..., Any] | None = None) -> messages.EstimateResult:
    say = progress or (lambda *a, **k: None)
    chip = chip_spec(params.chip or DEFAULT_CHIP, probe=params.probe)
    configs = [dict(c) for c in params.configs] or [{}]
    kinds = dict(params.kinds)
    with contextlib.ExitStack() as stack:
        module = stack.enter_context(_module(params.source))
        ref_module = stack.enter_context(_module(params.reference_source)) if params.reference_source else None
        task = _task(module, params.source, params.entry, ref_module)
        args = _inputs(task)
        out = []
        for i, config in enumerate(configs):
            say(f"estimating {i + 1}/{len(configs)}: {config}", stage=messages.Stage.TUNE, entry=task.name,
                fraction=(i + 1) / len(configs))
            with _applied(module, task, config, kinds) as fn:
                out.append(price_program(fn, args, chip, tuple(sorted(config.items()))))
        reference = reference_estimate(task, ref_module, args, chip) if params.reference else None
        floors = _floors(task, args) if params.floors else None
    return estimate_result(task, chip, out, reference, args, floors)


def reference_estimate(task: tasks_runtime.RuntimeTask, ref_module: Any, args: tuple[Any, ...],
                       chip: ChipSpec) -> dict[str, Any] | None:
    """The task's reference by the same cost model (``cost_model.estimate_reference``); ``ref_module``: a
    reference file named beside the kernel (as the time op's), whose reference wins. None: no reference."""
    ref_fn = task.reference
    if ref_module is not None:
        from .measure.timing import _reference_in

        ref_fn = _reference_in(ref_module, None) or ref_fn
    return reference_priced(ref_fn, args, chip) if ref_fn is not None else None


def reference_priced(reference: Callable[..., Any], args: Sequence[Any], chip: ChipSpec) -> dict[str, Any]:
    """The reference by the cost model at the kernel's arguments, or on its own task's inputs where it takes
    other ones (``tasks_runtime.own_inputs``), priced for the chip's topology device when libtpu has one."""
    call, call_args, own = tasks_runtime.own_inputs(reference, args)
    return estimate_reference(call, call_args, chip, _topology_device(chip.name), own=own)


def estimate_result(task: tasks_runtime.RuntimeTask, chip: ChipSpec, estimates: Any, reference: dict[str, Any] | None,
                    args: tuple[Any, ...], floors: dict[str, Any] | None = None,
                    judged_by: str = "") -> messages.EstimateResult:
    """The ``estimate`` op's result: one estimate per configuration, in order, with the inputs they were made at."""
    found = installed_versions()
    return messages.EstimateResult(
        entry=task.name, spec=chip, estimates=tuple(estimates), reference=reference,
        inputs=tuple(messages.InputSig(tuple(int(d) for d in a.shape), str(a.dtype)) for a in args if hasattr(a, "shape")),
        jax=found.get("jax"), libtpu=found.get("libtpu"), floors=floors, judged_by=judged_by)


def _floors(task: tasks_runtime.RuntimeTask, args: tuple[Any, ...]) -> dict[str, Any]:
    """The physical floors' figures of the file's own program: its outputs and the matmul FLOPs it
    certainly does (runner/measure/timing_guards.floor_work), traced here from the user's own file."""
    import jax

    from .measure.timing_guards import floor_work

    try:
        outputs = [[list(o.shape), str(o.dtype)] for o in jax.tree.leaves(jax.eval_shape(task.entry, *args))]
    except Exception:  # noqa: BLE001 - no output floor rather than a wrong one
        outputs = []
    return {"outputs": outputs, "floor_work": floor_work(task.entry, args)}


def chip_spec(name: str, probe: bool = True) -> ChipSpec:
    """The chip's spec from jax's table; with ``probe``, its scoped-VMEM limit measured with libtpu
    (the client sends ``probe=False`` when its chip-table cache already has the limit)."""
    spec = spec_from_jax(chip_target(name))
    if spec is None:
        raise ValueError(f"the installed jax has no table row for {name}")
    if probe:
        try:
            limit, how = probe_scoped_vmem(spec)
            spec = dataclasses.replace(spec, scoped_vmem_limit_bytes=limit, scoped_vmem_source=how)
        except Exception as exc:  # noqa: BLE001 - no libtpu: the limit stays unknown, said so
            spec = dataclasses.replace(spec, scoped_vmem_source=f"not measured ({type(exc).__name__}: {str(exc)[:120]})")
    return spec


def _topology_device(chip: str) -> Any:
    """The chip's deviceless libtpu device, or None without libtpu (tier 2's, runner/checks.py)."""
    from .tiers import tier2_unavailable, topology_device

    return None if tier2_unavailable(chip) else topology_device(chip)


def _inputs(task: tasks_runtime.RuntimeTask) -> tuple[Any, ...]:
    """The entry's arguments: abstract, or the inputs function's own arrays when they are small
    (so scalar-prefetch index maps see real values)."""
    abstract = task.abstract_args()
    size = sum(int(np.prod(a.shape)) * np.dtype(a.dtype).itemsize for a in abstract if hasattr(a, "shape"))
    if task.inputs is None:
        return abstract
    if not any(np.issubdtype(np.dtype(a.dtype), np.integer) for a in abstract if hasattr(a, "shape")):
        return abstract
    if size > CONCRETE_INPUT_LIMIT:
        return _integer_inputs(task, abstract)
    made = task.inputs()
    made = tuple(made) if isinstance(made, (list, tuple)) else (made,)
    return tuple(m if hasattr(m, "shape") else a for m, a in zip(made, abstract)) if len(made) == len(abstract) else abstract


def _integer_inputs(task: tasks_runtime.RuntimeTask, abstract: tuple[Any, ...]) -> tuple[Any, ...]:
    """Large inputs: only the integer ones made for real (lengths, page tables, group sizes: what
    index maps and dynamic grids read), by jitting the inputs function with its float arrays
    dropped, so XLA never computes them. An inputs function that does not trace: all abstract."""
    import jax

    small = [i for i, a in enumerate(abstract) if hasattr(a, "shape") and np.issubdtype(np.dtype(a.dtype), np.integer)
             and int(np.prod(a.shape)) * np.dtype(a.dtype).itemsize <= CONCRETE_INPUT_LIMIT]

    def integers() -> tuple[Any, ...]:
        made = task.inputs()
        made = tuple(made) if isinstance(made, (list, tuple)) else (made,)
        return tuple(made[i] for i in small)

    try:
        got = jax.jit(integers)()
    except Exception:  # noqa: BLE001 - the inputs function is not traceable: estimate with shapes only
        return abstract
    out = list(abstract)
    for i, value in zip(small, got):
        if tuple(value.shape) == tuple(abstract[i].shape):
            out[i] = np.asarray(value)
    return tuple(out)


def _set_tuned(tuned: dict[str, Any], name: str, value: Any) -> None:
    """``TUNED_PARAMS[name] = value``; ``"block_shape[1]"`` sets element 1 of a list or tuple entry,
    keeping its type (analysis/tunables.py names list elements so)."""
    base, _, index = name.partition("[")
    if index.endswith("]") and index[:-1].isdigit() and isinstance(tuned.get(base), (list, tuple)):
        items = list(tuned[base])
        items[int(index[:-1])] = value
        tuned[base] = type(tuned[base])(items)
    else:
        tuned[name] = value


@contextlib.contextmanager
def _applied(module: Any, task: tasks_runtime.RuntimeTask, config: dict[str, Any], kinds: dict[str, str]) -> Iterator[Callable[..., Any]]:
    saved: dict[str, Any] = {}
    keywords = {}
    tuned = None
    calls: dict[str, dict[str, Any]] = {}
    for name, value in config.items():
        kind = kinds.get(name, "keyword")
        if kind.startswith("call:"):  # a keyword of a library's callable (analysis/tunables.py, item 4)
            calls.setdefault(kind[len("call:"):], {})[name] = value
        elif kind == "constant":
            saved.setdefault(name, getattr(module, name, None))
            setattr(module, name, value)
        elif kind == "tuned_params":
            if tuned is None:
                saved["TUNED_PARAMS"] = getattr(module, "TUNED_PARAMS", None)
                tuned = dict(saved["TUNED_PARAMS"] or {})
            _set_tuned(tuned, name, value)
        else:
            keywords[name] = value
    if tuned is not None:
        module.TUNED_PARAMS = tuned
    for callee, values in calls.items():
        for name, value in call_patches(module, callee, values).items():
            saved.setdefault(name, getattr(module, name, None))
            setattr(module, name, value)
    try:
        yield functools.partial(task.entry, **keywords) if keywords else task.entry
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def call_patches(module: Any, callee: str, values: dict[str, Any]) -> dict[str, Any]:
    """Module globals that make ``callee(...)`` (an imported callable, ``BlockSizes``) take ``values`` (tunable
    name -> value: ``block_q``, ``BlockSizes.block_q``, ``tiling[1]``) for its keywords: the name bound to a
    proxy that changes them in every call, and each instance the module built at import from it (a dataclass
    or NamedTuple) copied with the fields changed."""
    changes = [_keyword_of(name, callee) + (value,) for name, value in values.items()]
    original = getattr(module, callee, None)
    if original is None:
        return {}
    out: dict[str, Any] = {callee: _Calling(original, changes)}
    for name, value in vars(module).items():
        if isinstance(original, type) and type(value) is original:
            fields = _changed_fields(value, changes)
            if dataclasses.is_dataclass(value):
                out[name] = dataclasses.replace(value, **fields)
            elif hasattr(value, "_replace"):
                out[name] = value._replace(**fields)
    return out


def _keyword_of(name: str, callee: str) -> tuple[str, int | None]:
    """``BlockSizes.block_q`` -> ("block_q", None); ``tiling[1]`` -> ("tiling", 1)."""
    name = name.removeprefix(f"{callee}.")
    base, _, index = name.partition("[")
    return (base, int(index[:-1])) if index.endswith("]") and index[:-1].isdigit() else (name, None)


def _with_change(current: Any, index: int | None, value: Any) -> Any:
    if index is None:
        return value
    items = list(current)
    items[index] = value
    return type(current)(items) if isinstance(current, tuple) else items


def _changed_fields(instance: Any, changes: list[tuple[str, int | None, Any]]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for keyword, index, value in changes:
        if hasattr(instance, keyword):
            fields[keyword] = _with_change(fields.get(keyword, getattr(instance, keyword)), index, value)
    return fields


class _Calling:
    """``original`` called with some keywords changed; every other attribute is the original's."""

    def __init__(self, original: Any, changes: list[tuple[str, int | None, Any]]) -> None:
        self._original, self._changes = original, changes

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for keyword, index, value in self._changes:
            if index is None or keyword in kwargs:
                kwargs[keyword] = _with_change(kwargs.get(keyword), index, value)
        return self._original(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._original, name)
