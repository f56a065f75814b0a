"""Tasks from shapes the client read out of the file (worker side; see analysis/inferred_inputs.py).

When a file states no task, the client may send ``inferred``: a list of
``{"entry": NAME, "line": N, "args": [ARG, ...], "kwargs": {KEY: ARG}}`` where each ARG is
``{"shape": [...], "dtype": "float32"}`` (an array) or ``{"value": literal}`` (an int, float, bool,
str or None passed as it is). Each becomes a ``RuntimeTask`` whose entry takes only the arrays (as
``ShapeDtypeStruct``s) and passes the literals itself, so ``jax.jit`` never traces a Python int
meant to be static. The shapes are the file's own; nothing in the file's ``__main__`` runs. A
``pallas_call(..., interpret=True)`` (files written to run on a laptop) is checked without
``interpret``: the TPU lowering and compiler are what the tiers are for.
"""

from __future__ import annotations

import inspect
import types
from typing import Any, Callable, Mapping, Sequence

import jax

from ..intercept import intercept_pallas_calls
from .task_types import RuntimeTask, TaskError


def inferred_tasks(module: types.ModuleType, specs: Sequence[Mapping[str, Any]]) -> list[RuntimeTask]:
    """One task per spec whose entry the module defines (a missing one is an invalid task)."""
    tasks = []
    for spec in specs:
        name = str(spec.get("entry"))
        fn = getattr(module, name, None)
        if not callable(fn):
            raise TaskError(f"shapes were inferred for {name!r} (line {spec.get('line')}), but the module "
                            "defines no such function when imported", spec.get("line"))
        tasks.append(_task(name, fn, spec, module))
    return tasks


def _task(name: str, fn: Callable[..., Any], spec: Mapping[str, Any], module: types.ModuleType) -> RuntimeTask:
    args = [_arg(a, name) for a in spec.get("args") or ()]
    kwargs = {str(k): _arg(a, name) for k, a in (spec.get("kwargs") or {}).items()}
    arrays = [a for a in args if isinstance(a, jax.ShapeDtypeStruct)]
    arrays += [a for a in kwargs.values() if isinstance(a, jax.ShapeDtypeStruct)]

    def entry(*values: Any) -> Any:
        it = iter(values)
        call_args = [next(it) if isinstance(a, jax.ShapeDtypeStruct) else a for a in args]
        call_kwargs = {k: next(it) if isinstance(a, jax.ShapeDtypeStruct) else a for k, a in kwargs.items()}
        # a file that runs its kernels with interpret=True on a laptop: check the TPU lowering instead
        with intercept_pallas_calls(rewrite=_without_interpret, modules=(module,)):
            return fn(*call_args, **call_kwargs)

    entry.__name__ = name
    entry.__qualname__ = name

    def inputs() -> tuple[Any, ...]:
        return tuple(arrays)

    code = getattr(inspect.unwrap(fn), "__code__", None)
    return RuntimeTask(name=name, entry=entry, inputs=inputs, format="inferred",
                       line=code.co_firstlineno if code is not None else None)


def _without_interpret(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if k not in ("interpret", "debug")}


def _arg(arg: Mapping[str, Any], name: str) -> Any:
    if arg.get("shape") is not None:
        try:
            return jax.ShapeDtypeStruct(tuple(int(d) for d in arg["shape"]), jax.numpy.dtype(str(arg["dtype"])))
        except (TypeError, ValueError) as exc:
            raise TaskError(f"an inferred input of {name} is not a valid array ({arg!r}: {exc})") from exc
    return arg.get("value")
