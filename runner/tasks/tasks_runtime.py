"""Reading tasks out of an imported kernel module (worker side: imports jax).

A task says which function to call and with which argument shapes. Three forms are read:

- native short form (docs/task-convention.md): ``example_inputs()`` plus the entry, which is
  ``PALLASITE_ENTRY`` or the single public module-level function that reaches ``pallas_call``;
  optional ``reference``, ``TOLERANCE``, ``TUNABLES``;
- native long form: every public function ``NAME`` with a ``NAME_inputs()`` is an entry, with
  optional ``NAME_reference``, ``NAME_tolerance``, ``NAME_tunables``;
- JAXBench task files as they are: a ``CONFIG`` dict, ``create_inputs(...)`` and
  ``workload(...)``. ``create_inputs`` is called with no argument, with ``CONFIG`` when it takes
  one positional parameter, or with the ``CONFIG`` keys its parameters name; ``workload`` is the
  entry, called with the inputs (a tuple or list is spread into positional arguments, anything
  else is passed as the one argument). The plain-JAX reference is ``workload`` of a sibling
  ``baseline.py`` when that file exists.

- MaxKernel task folders (``kernel_task.yaml`` beside the file) are read by ``runner/tasks/maxkernel.py``;
- KernelBench-style files (``class Model`` with ``forward``, ``get_inputs()``) by
  ``runner/tasks/tasks_kernelbench.py``; shapes inferred from the file's own calls when it states no
  task by ``runner/tasks/tasks_inferred.py``; from the pallas_calls the file made when it was imported
  (or when its ``__main__`` ran) by ``runner/tasks/tasks_recorded.py``.

Shapes always come from ``jax.eval_shape``: an inputs function that makes arrays is traced
abstractly, so checking never allocates the example inputs.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import sys
import types
from typing import Any, Callable, Sequence

import jax

from ...analysis.types import reaching as functions_reaching
from .task_types import RuntimeTask, TaskError, _def_line, _name  # noqa: F401  (re-exported)


def discover(module: types.ModuleType, path: str, text: str | None = None,
             inferred: Any = None) -> list[RuntimeTask]:
    """Every task the module states, in source order; [] when it states none.

    ``text`` is the checked source when it differs from the file on disk (an unsaved buffer).
    ``inferred``: tasks the client read from the file's own calls (analysis/inferred_inputs.py),
    used only when the module states none (``runner/tasks/tasks_inferred.py``).
    """
    from . import maxkernel  # MaxKernel task folders: kernel_task.yaml beside the file

    if maxkernel.is_task_dir(os.path.dirname(os.path.abspath(path))):
        found = maxkernel.discover(module, path)
        if found is not None:  # None: not the folder's candidate kernel file
            return found
    ns = vars(module)
    if callable(ns.get("workload")) and callable(ns.get("create_inputs")):
        return [_jaxbench_task(module, path)]
    from .tasks_kernelbench import is_kernelbench, kernelbench_task  # class Model + get_inputs()

    if is_kernelbench(module):
        return [kernelbench_task(module)]
    long_form = _long_form(module, path)
    if long_form:
        return long_form
    if callable(ns.get("example_inputs")):
        return [_short_form(module, path, text)]
    if callable(ns.get("workload")):  # a JAXBench candidate that exports only workload(*inputs)
        paired = _with_baseline_inputs(module, path)
        if paired:
            return paired
    if inferred:
        from .tasks_inferred import inferred_tasks

        return inferred_tasks(module, inferred)
    return []


# --------------------------------------------------------------------------- native forms


def checked_tasks(module: types.ModuleType, path: str, text: str | None = None) -> list[RuntimeTask]:
    """What ``check`` and its locate step run: the tasks the module states, then the backward pass of
    each whose entry reaches a hand-written custom VJP (``runner/tasks/tasks_backward.py``)."""
    from .tasks_backward import backward_tasks

    tasks = discover(module, path, text)
    return tasks + backward_tasks(tasks, _source(path, text)) if tasks else tasks


def _own_functions(module: types.ModuleType, path: str) -> dict[str, Callable[..., Any]]:
    """Public module-level functions defined in the checked file itself, in source order."""
    found = []
    for name, value in vars(module).items():
        if name.startswith("_") or not callable(value):
            continue
        # A jitted entry (``@functools.partial(jax.jit, ...)``) is a wrapper: its source is the
        # function it wraps, and the wrapper itself is what the file's callers use.
        inner = inspect.unwrap(value) if not inspect.isclass(value) else None
        if inspect.isfunction(inner) and _same_file(inner.__code__, path):
            found.append((inner.__code__.co_firstlineno, name, value))
    return {name: value for _, name, value in sorted(found, key=lambda item: item[0])}


def _same_file(code: Any, path: str) -> bool:
    if code is None:
        return False
    try:
        return os.path.samefile(code.co_filename, path)
    except OSError:
        return os.path.abspath(code.co_filename) == os.path.abspath(path)


def _long_form(module: types.ModuleType, path: str) -> list[RuntimeTask]:
    ns = vars(module)
    tasks = []
    for name, fn in _own_functions(module, path).items():
        if name.endswith("_inputs") or name.endswith("_reference") or name == "example_inputs":
            continue
        inputs = ns.get(f"{name}_inputs")
        if not callable(inputs):
            continue
        tasks.append(
            RuntimeTask(
                name=name,
                entry=fn,
                inputs=inputs,
                reference=_callable_or_none(ns.get(f"{name}_reference")),
                tolerance=_tolerance(ns.get(f"{name}_tolerance"), f"{name}_tolerance"),
                tolerance_source=f"the task's {name}_tolerance in {os.path.basename(path)}",
                tunables=_tunables(fn, ns.get(f"{name}_tunables"), f"{name}_tunables", ns),
                line=_def_line(fn),
            )
        )
    return tasks


def _short_form(module: types.ModuleType, path: str, text: str | None) -> RuntimeTask:
    ns = vars(module)
    inputs = ns["example_inputs"]
    named = ns.get("PALLASITE_ENTRY")
    if named is not None:
        fn = ns.get(named) if isinstance(named, str) else None
        if not callable(fn):
            raise TaskError(
                f"PALLASITE_ENTRY = {named!r} does not name a function of this file; "
                "set it to the name of the function that calls pallas_call",
                _assign_line(_source(path, text), "PALLASITE_ENTRY"),
            )
        name = named
    else:
        candidates = _pallas_callers(module, path, _source(path, text))
        if not candidates:
            raise TaskError(
                "example_inputs() is defined but no public function of this file calls pallas_call; "
                "set PALLASITE_ENTRY = \"name\" to the function the inputs are for",
                _def_line(inputs),
            )
        if len(candidates) > 1:
            raise TaskError(
                f"example_inputs() is ambiguous: {', '.join(candidates)} all call pallas_call; "
                "set PALLASITE_ENTRY = \"name\" to choose one, or use NAME_inputs() per entry",
                _def_line(inputs),
            )
        name = candidates[0]
        fn = ns[name]
    return RuntimeTask(
        name=name,
        entry=fn,
        inputs=inputs,
        reference=_callable_or_none(ns.get("reference")),
        tolerance=_tolerance(ns.get("TOLERANCE"), "TOLERANCE"),
        tolerance_source=f"the task's TOLERANCE in {os.path.basename(path)}",
        tunables=_tunables(fn, ns.get("TUNABLES"), "TUNABLES", ns),
        line=_def_line(fn) if _same_file(getattr(inspect.unwrap(fn), "__code__", None), path) else None,
    )


def _pallas_callers(module: types.ModuleType, path: str, source: str | None) -> list[str]:
    """Public functions of the file that call pallas_call directly or via other functions of it."""
    try:
        tree = ast.parse(source or "")
    except (SyntaxError, ValueError):
        return []
    calls: dict[str, set[str]] = {}
    direct: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = set()  # bare names only: ``jnp.exp`` must not look like a call of ``exp``
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name):
                    names.add(sub.id)
                    if sub.id == "pallas_call":
                        direct.add(node.name)
                elif isinstance(sub, ast.Attribute) and sub.attr == "pallas_call":
                    direct.add(node.name)
            calls[node.name] = names
    reaching = functions_reaching(direct, calls)
    own = _own_functions(module, path)
    skip = {"example_inputs", "reference"}
    return [n for n in own if n in reaching and n not in skip and not n.endswith("_kernel")
            and not _only_called_by_others(n, calls, reaching)]


def _only_called_by_others(name: str, calls: dict[str, set[str]], reaching: set[str]) -> bool:
    """A helper that another pallas-reaching function calls is not an entry of its own."""
    return any(name in names for other, names in calls.items() if other != name and other in reaching)


# --------------------------------------------------------------------------- JAXBench


def _jaxbench_task(module: types.ModuleType, path: str) -> RuntimeTask:
    ns = vars(module)
    config = ns.get("CONFIG")
    if config is not None and not isinstance(config, dict):
        raise TaskError("CONFIG must be a dict of the workload's settings", _assign_line(_source(path, None), "CONFIG"))
    create = ns["create_inputs"]
    workload = ns["workload"]

    def inputs() -> Any:
        return _call_with_config(create, config or {})

    baseline = _load_baseline(path)
    reference = getattr(baseline, "workload", None) if baseline is not None else None
    tolerance, source = stated_tolerance(baseline or module, "baseline.py" if baseline else os.path.basename(path))
    return RuntimeTask(
        name="workload",
        entry=workload,
        inputs=inputs,
        format="jaxbench",
        reference=reference if callable(reference) else None,
        tolerance=tolerance,
        tolerance_source=source,
        config=dict(config or {}),
        line=_def_line(workload),
    )


def stated_tolerance(task_module: Any, label: str) -> tuple[dict[str, float] | None, str | None]:
    """A JAXBench task's own tolerance, ``TOLERANCE = {"atol": ..., "rtol": ...}`` as native files state it, from
    its task file (baseline.py beside a candidate, never the candidate's: it could loosen its own test).
    ``atol``/``rtol`` in ``CONFIG`` are not read: JAXBench's harness never reads them (it compares every task at
    1e-2), and its files state there what no bfloat16 output can meet (8p_GEMM: atol 1e-3).
    (tolerance, where it was stated) or (None, None)."""
    value = vars(task_module).get("TOLERANCE")
    if value is None:
        return None, None
    return _tolerance(value, f"TOLERANCE in {label}"), f"the task's TOLERANCE in {label}"


def _with_baseline_inputs(module: types.ModuleType, path: str) -> list[RuntimeTask]:
    """A file that exports only ``workload(*inputs)`` beside a ``baseline.py`` with ``create_inputs``:
    JAXBench's own convention for a candidate ("inputs are generated from the baseline's
    create_inputs()"): its workload on the baseline's inputs (at the file's CONFIG, else the
    baseline's), the baseline's workload as the reference."""
    baseline = _load_baseline(path)
    if baseline is None or not callable(getattr(baseline, "create_inputs", None)):
        return []
    ns, ref_ns = vars(module), vars(baseline)
    config = dict(ns.get("CONFIG") or ref_ns.get("CONFIG") or {})
    create, workload = ref_ns["create_inputs"], ns["workload"]
    reference = ref_ns.get("workload")
    tolerance, source = stated_tolerance(baseline, "baseline.py")
    return [RuntimeTask(name="workload", entry=workload, inputs=lambda: _call_with_config(create, config),
                        format="jaxbench", reference=reference if callable(reference) else None, config=config,
                        tolerance=tolerance, tolerance_source=source, line=_def_line(workload))]


def _call_with_config(fn: Callable[..., Any], config: dict[str, Any]) -> Any:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn()
    required = [p for p in params.values() if p.default is inspect.Parameter.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if not params:
        return fn()
    if all(name in config for name in params if params[name].default is inspect.Parameter.empty):
        return fn(**{k: v for k, v in config.items() if k in params})
    if len(required) == 1:
        return fn(config)
    return fn()


def _load_baseline(path: str) -> types.ModuleType | None:
    sibling = os.path.join(os.path.dirname(os.path.abspath(path)), "baseline.py")
    if not os.path.isfile(sibling) or (os.path.exists(path) and os.path.samefile(sibling, path)):
        return None
    spec = importlib.util.spec_from_file_location("_pallasite_baseline", sibling)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - a broken baseline should not hide the kernel check
        print(f"pallasite: {sibling} could not be imported ({type(exc).__name__}: {exc})", file=sys.stderr)
        return None
    return module


# --------------------------------------------------------------------------- small readers


def _callable_or_none(value: Any) -> Callable[..., Any] | None:
    return value if callable(value) else None


def _tolerance(value: Any, label: str) -> dict[str, float] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not set(value) <= {"atol", "rtol"}:
        raise TaskError(f"{label} must be a dict with keys 'atol' and/or 'rtol', got {value!r}")
    try:
        return {k: float(v) for k, v in value.items()}
    except (TypeError, ValueError) as exc:
        raise TaskError(f"{label} values must be numbers: {exc}") from exc


def _tunables(fn: Callable[..., Any], table: Any, label: str, ns: dict[str, Any]) -> dict[str, list[int]]:
    """The entry's keyword-only int parameters, with candidates from ``table`` when given. The table
    may also name what the tuner sets on the module (analysis/tunables.py): a module int constant, a
    ``TUNED_PARAMS`` entry, or an element ``name[i]`` of a list entry; those are no entry parameters."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    out = {p.name: [p.default] for p in params.values()
           if p.kind == p.KEYWORD_ONLY and isinstance(p.default, int) and not isinstance(p.default, bool)}
    if table is None:
        return out
    if not isinstance(table, dict):
        raise TaskError(f"{label} must map tunable names to lists of ints, got {type(table).__name__}")
    tuned = ns.get("TUNED_PARAMS") if isinstance(ns.get("TUNED_PARAMS"), dict) else {}
    for name, values in table.items():
        if name not in out and (name.partition("[")[0] in tuned or isinstance(ns.get(name), int)
                                or _passed_to_a_call(ns, name)):
            continue  # set on the module by the tuner, or a keyword it changes in a call, not passed to the entry
        if name not in out:
            raise TaskError(f"{label} names {name!r}, which is not a keyword-only int parameter of {fn.__name__}")
        out[name] = [int(v) for v in values]
    return out


def _passed_to_a_call(ns: dict[str, Any], name: str) -> bool:
    """Whether the file passes ``name`` (``block_q``, ``BlockSizes.block_q``, ``tiling[1]``) as a keyword
    with an int literal (or a tuple of them) in a call: a tunable the tuner changes in that call."""
    import linecache
    import re

    keyword = name.rpartition(".")[2].partition("[")[0]
    file = ns.get("__file__")
    text = "".join(linecache.getlines(file)) if isinstance(file, str) else ""
    return bool(keyword) and re.search(rf"\b{re.escape(keyword)}\s*=\s*[(\d]", text) is not None


def _source(path: str, text: str | None) -> str | None:
    if text is not None:
        return text
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def _assign_line(source: str | None, name: str) -> int | None:
    try:
        tree = ast.parse(source or "")
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node.lineno
    return None


def own_task(reference: Callable[..., Any] | None) -> tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]] | None:
    """The reference's own task, for a reference that takes other arguments than the candidate
    (paged attention's layout, megablox's static group size): ``(workload, make)`` of its module,
    where ``make()`` is its ``create_inputs()`` at the module's CONFIG as it reads when called (a
    reduced size inside ``config_scaled``), a tuple, and ``workload`` the module's ``workload``
    (the function ``create_inputs`` makes the inputs for, JAXBench's contract), else the reference
    itself. None when the module makes no inputs of its own. The one place the timing ladder, the
    judge and the cost model get it from (a task's own contract, so it lives with the tasks)."""
    space = getattr(inspect.unwrap(reference), "__globals__", None) if reference is not None else None
    if not isinstance(space, dict) or not callable(space.get("create_inputs")):
        return None

    def make() -> tuple[Any, ...]:
        made = _call_with_config(space["create_inputs"], space.get("CONFIG") or {})
        return tuple(made) if isinstance(made, (tuple, list)) else (made,)

    return (space["workload"] if callable(space.get("workload")) else reference), make


def own_inputs(reference: Callable[..., Any], args: Sequence[Any]) -> tuple[Callable[..., Any], tuple[Any, ...], bool]:
    """(reference, args, False) when the reference takes the kernel's arguments; else its module's
    ``workload`` over the module's own ``create_inputs()`` (``own_task``, as the
    correctness checks run it) made abstractly (nothing allocated), its Python values (a static group
    size) kept static: (call, array args, True)."""
    try:
        jax.eval_shape(reference, *args)
        return reference, tuple(args), False
    except Exception:  # noqa: BLE001 - another signature or layout: its own task's inputs, if it has one
        pass
    own = own_task(reference)
    if own is None:
        return reference, tuple(args), False
    workload, make = own
    statics: dict[int, Any] = {}

    def arrays_only() -> tuple[Any, ...]:
        made = make()
        statics.clear()
        statics.update({i: m for i, m in enumerate(made) if not hasattr(m, "shape")})
        return tuple(m for i, m in enumerate(made) if i not in statics)

    shapes = jax.eval_shape(arrays_only)
    count = len(shapes) + len(statics)

    def call(*arrays: Any) -> Any:
        it = iter(arrays)
        return workload(*(statics[i] if i in statics else next(it) for i in range(count)))

    return call, tuple(shapes), True
