"""MaxKernel task directories, read as they are (worker side: imports jax).

A MaxKernel-style task is a folder::

    task_dir/
      kernel_task.yaml   task_id, description, input_gen_code, atol, rtol (optional: kernel_file, entry)
      reference.py       get_inputs() and computation(...): the plain-JAX reference
      kernel.py          the candidate Pallas kernel (any name; see below)

``input_gen_code`` is Python source defining ``get_inputs()``, run in the namespace MaxKernel's
harness (``evaluation/harness_code.py``) gives it: ``jax``, ``jnp``, ``np``, ``time``, ``json``, ``os``,
``importlib``, ``traceback`` are already bound (most shipped tasks use ``jnp`` without importing it);
without it, ``reference.py``'s ``get_inputs`` is used. ``get_inputs()`` returns ``(dynamic_args, static_args)`` or a list of such
pairs (one task per pair): ``dynamic_args`` a tuple/list of arrays passed positionally,
``static_args`` a dict of keyword arguments (or a tuple of extra positional Python values) passed
as they are. Input shapes come from ``jax.eval_shape``: nothing is allocated to check. When
``get_inputs()`` needs concrete values while it runs (``float(1.0 / jnp.sqrt(head_dim))`` for a
static argument), which ``eval_shape`` cannot give, it is run once concretely on CPU instead
(``runner/concrete_inputs.py``): its static values are then real, and its arrays' shapes are read.

The candidate file is the one being checked; its entry is ``entry:`` from the YAML, else a function
named ``computation`` in it, else its single public function that calls ``pallas_call``.

The YAML is read by a small parser for exactly these keys (``key: scalar`` and ``key: |`` blocks),
so no YAML package is needed; anything else in the file is ignored.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import types
from typing import Any, Callable

import jax

from .. import loader
from ..concrete_inputs import ShapesOnly, concrete_shapes, needs_concrete_values
from .task_types import RuntimeTask, TaskError

TASK_FILE = "kernel_task.yaml"
REFERENCE_FILE = "reference.py"


def is_task_dir(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, TASK_FILE))


# --------------------------------------------------------------------------- the YAML subset

_KEY = re.compile(r"^(?P<key>[A-Za-z_][\w-]*)\s*:\s*(?P<value>.*?)\s*$")


def parse_task_yaml(text: str) -> dict[str, Any]:
    """Top-level ``key: value`` pairs; ``|``/``>`` block scalars keep their (dedented) lines.

    Raises TaskError naming the line for anything this subset cannot read.
    """
    out: dict[str, Any] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        raw = lines[i]
        if not raw.strip() or raw.lstrip().startswith("#") or raw.strip() == "---":
            i += 1
            continue
        if raw[0].isspace():
            raise TaskError(f"{TASK_FILE} line {i + 1}: indented line outside a block (use 'key: |' for code)", i + 1)
        m = _KEY.match(raw)
        if not m:
            raise TaskError(f"{TASK_FILE} line {i + 1}: expected 'key: value', got {raw.strip()!r}", i + 1)
        key, value = m.group("key"), m.group("value")
        i += 1
        if value in ("|", "|-", "|+", ">", ">-"):
            block: list[str] = []
            while i < len(lines) and (not lines[i].strip() or lines[i][0].isspace()):
                block.append(lines[i])
                i += 1
            indent = min((len(b) - len(b.lstrip()) for b in block if b.strip()), default=0)
            body = [b[indent:] for b in block]
            while body and not body[-1].strip():
                body.pop()
            joined = "\n".join(body) if value.startswith("|") else " ".join(b.strip() for b in body)
            out[key] = joined + ("\n" if value.startswith("|") and body else "")
        else:
            out[key] = _scalar(value)
    return out


def _scalar(value: str) -> Any:
    value = re.sub(r"\s+#.*$", "", value) if not value.startswith(("'", '"')) else value
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    if value in ("", "~", "null"):
        return None
    if value in ("true", "false"):
        return value == "true"
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


# --------------------------------------------------------------------------- tasks


def discover(module: types.ModuleType, path: str) -> list[RuntimeTask] | None:
    """The tasks of the MaxKernel folder holding ``path``; None when ``path`` is not its candidate
    (``reference.py`` itself, or another file than the YAML's ``kernel_file``)."""
    folder = os.path.dirname(os.path.abspath(path))
    yaml_path = os.path.join(folder, TASK_FILE)
    try:
        with open(yaml_path, encoding="utf-8") as f:
            spec = parse_task_yaml(f.read())
    except OSError as exc:
        raise TaskError(f"cannot read {yaml_path}: {exc}") from None
    name = os.path.basename(path)
    if name == REFERENCE_FILE or (spec.get("kernel_file") and name != os.path.basename(str(spec["kernel_file"]))):
        return None
    task_id = str(spec.get("task_id") or os.path.basename(folder))
    reference_module = _load_reference(folder)
    get_inputs = _get_inputs(spec, reference_module, folder)
    computation = getattr(reference_module, "computation", None) if reference_module else None
    entry = _entry(module, path, spec)
    tolerance = {k: float(spec[k]) for k in ("atol", "rtol") if isinstance(spec.get(k), (int, float))} or None

    cases, statics = _abstract_cases(get_inputs)
    concrete = getattr(cases, "concrete", False)
    tasks = []
    for index, static in enumerate(statics):
        inputs: Any = functools.partial(_dynamic_of, get_inputs, index)
        if concrete:  # get_inputs() had to run concretely: do not run it again per case
            inputs = ShapesOnly(get_inputs, tuple(cases[index]))
        tasks.append(RuntimeTask(
            name=getattr(entry, "__name__", task_id),  # the function the editor shows verdicts on
            entry=_bind(entry, static),
            inputs=inputs,
            format="maxkernel",
            reference=_bind(computation, static) if callable(computation) else None,
            tolerance=tolerance,
            tolerance_source="the task's atol/rtol in kernel_task.yaml" if tolerance else None,
            line=entry.__code__.co_firstlineno if hasattr(entry, "__code__") else None,
        ))
    return tasks


def reference_tasks(folder: str) -> list[RuntimeTask]:
    """The task of a MaxKernel folder as its trusted side sees it: the reference's ``computation`` as both
    entry and reference, on the task's own inputs (the judge reads the candidate from nothing else)."""
    with open(os.path.join(folder, TASK_FILE), encoding="utf-8") as f:
        spec = parse_task_yaml(f.read())
    reference_module = _load_reference(folder)
    computation = getattr(reference_module, "computation", None) if reference_module else None
    if not callable(computation):
        raise TaskError(f"{REFERENCE_FILE} in {folder} defines no computation() to judge against")
    get_inputs = _get_inputs(spec, reference_module, folder)
    tolerance = {k: float(spec[k]) for k in ("atol", "rtol") if isinstance(spec.get(k), (int, float))} or None
    cases, statics = _abstract_cases(get_inputs)
    tasks = []
    for index, static in enumerate(statics):
        inputs: Any = functools.partial(_dynamic_of, get_inputs, index)
        if getattr(cases, "concrete", False):
            inputs = ShapesOnly(get_inputs, tuple(cases[index]))
        bound = _bind(computation, static)
        tasks.append(RuntimeTask(name=str(spec.get("task_id") or os.path.basename(folder)), entry=bound, inputs=inputs,
                                 format="maxkernel", reference=bound, tolerance=tolerance,
                                 tolerance_source="the task's atol/rtol in kernel_task.yaml" if tolerance else None))
    return tasks


def _load_reference(folder: str) -> types.ModuleType | None:
    ref_path = os.path.join(folder, REFERENCE_FILE)
    if not os.path.isfile(ref_path):
        return None
    try:
        return loader.load_user_module(ref_path, name=loader.unique_module_name(ref_path))
    except Exception as exc:  # noqa: BLE001 - the user's reference failed to import
        raise TaskError(f"{REFERENCE_FILE} failed to import: {type(exc).__name__}: {exc}") from exc


def _get_inputs(spec: dict[str, Any], reference: types.ModuleType | None, folder: str) -> Callable[[], Any]:
    code = spec.get("input_gen_code")
    if isinstance(code, str) and code.strip():
        ns: dict[str, Any] = harness_namespace()
        try:
            exec(compile(code, os.path.join(folder, TASK_FILE) + ":input_gen_code", "exec"), ns)
        except Exception as exc:  # noqa: BLE001 - the task's own code failed
            raise TaskError(f"{TASK_FILE}: input_gen_code failed: {type(exc).__name__}: {exc}") from exc
        if callable(ns.get("get_inputs")):
            return ns["get_inputs"]
        raise TaskError(f"{TASK_FILE}: input_gen_code must define get_inputs()")
    if reference is not None and callable(getattr(reference, "get_inputs", None)):
        return reference.get_inputs
    raise TaskError(f"no get_inputs(): give input_gen_code in {TASK_FILE} or define it in {REFERENCE_FILE}")


def harness_namespace() -> dict[str, Any]:
    """The globals MaxKernel's harness runs ``input_gen_code`` in (its module imports them first)."""
    import importlib
    import json
    import time
    import traceback

    import jax.numpy as jnp
    import numpy as np

    return {"__name__": "maxkernel_input_gen", "jax": jax, "jnp": jnp, "np": np, "time": time, "json": json,
            "os": os, "importlib": importlib, "traceback": traceback}


def _entry(module: types.ModuleType, path: str, spec: dict[str, Any]) -> Callable[..., Any]:
    ns = vars(module)
    name = spec.get("entry")
    if name:
        if not callable(ns.get(name)):
            raise TaskError(f"{TASK_FILE} names entry {name!r}, which {os.path.basename(path)} does not define")
        return ns[name]
    if callable(ns.get("computation")):
        return ns["computation"]
    own = [v for k, v in ns.items() if not k.startswith("_") and inspect.isfunction(v)
           and os.path.realpath(v.__code__.co_filename) == os.path.realpath(path)
           and "pallas_call" in (_source_of(v) or "")]
    if len(own) == 1:
        return own[0]
    raise TaskError(f"{os.path.basename(path)}: define computation(...) (the entry MaxKernel calls) or set "
                    f"'entry:' in {TASK_FILE}")


def _source_of(fn: Any) -> str | None:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return None


def _cases(value: Any) -> list[tuple[Any, Any]]:
    """get_inputs()'s answer as a list of (dynamic_args, static_args) pairs."""
    def is_pair(v: Any) -> bool:
        return isinstance(v, (tuple, list)) and len(v) == 2 and isinstance(v[0], (tuple, list)) and \
            isinstance(v[1], (dict, tuple, list, type(None)))

    if isinstance(value, list) and value and all(is_pair(v) for v in value):
        return [tuple(v) for v in value]  # checked first: a list of two pairs is also a "pair"
    if is_pair(value):
        return [tuple(value)]
    raise TaskError("get_inputs() must return (dynamic_args, static_args) or a list of such pairs")


def _abstract_cases(get_inputs: Callable[[], Any]) -> tuple[list[Any], list[Any]]:
    """Shapes of every case's dynamic args (abstractly) and the concrete static args."""
    statics: list[Any] = []

    def dynamic_only() -> Any:
        cases = _cases(get_inputs())
        statics[:] = [s for _, s in cases]  # Python values: concrete even while tracing
        return [tuple(d) for d, _ in cases]

    try:
        shapes = jax.eval_shape(dynamic_only)
    except TaskError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's get_inputs failed
        if not needs_concrete_values(exc):
            raise TaskError(f"get_inputs() failed while computing the input shapes: {type(exc).__name__}: {exc}") from exc
        try:  # a float(jnp.sqrt(...)) while tracing: run it for real, once, on CPU
            shapes = _Concrete(concrete_shapes(dynamic_only))
        except TaskError:
            raise
        except Exception as again:  # noqa: BLE001 - the user's get_inputs failed when run concretely too
            raise TaskError(f"get_inputs() needs concrete values ({type(exc).__name__}), and running it concretely "
                            f"failed: {type(again).__name__}: {again}") from again
    return shapes, statics


class _Concrete(list):
    """Case shapes read from a concrete run of get_inputs() (``concrete`` says so)."""

    concrete = True


def _dynamic_of(get_inputs: Callable[[], Any], index: int) -> tuple[Any, ...]:
    return tuple(_cases(get_inputs())[index][0])


def _bind(fn: Callable[..., Any], static: Any) -> Callable[..., Any]:
    if not static:
        return fn
    if isinstance(static, dict):
        bound = functools.partial(fn, **static)
    else:
        def bound(*dynamic: Any, _fn: Callable[..., Any] = fn, _static: tuple = tuple(static)) -> Any:
            return _fn(*dynamic, *_static)
    functools.update_wrapper(bound, fn)  # type: ignore[arg-type]
    return bound
