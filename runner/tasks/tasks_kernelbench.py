"""KernelBench-style task files, read as they are (worker side).

KernelBench (and the JAX ports of it, e.g. JAXBench's generated Pallas files) states a task as a
``class Model`` whose ``forward(*inputs)`` runs the kernel, ``get_inputs()`` making the inputs and
``get_init_inputs()`` the constructor's arguments. The entry is ``forward`` of a ``Model`` built
from ``get_init_inputs()`` inside the traced function (so weights it makes are traced, never
allocated); the inputs' shapes come from ``jax.eval_shape(get_inputs)``, as for every task.
"""

from __future__ import annotations

import inspect
import types
from typing import Any

from .task_types import RuntimeTask, TaskError


def is_kernelbench(module: types.ModuleType) -> bool:
    ns = vars(module)
    model = ns.get("Model")
    return inspect.isclass(model) and callable(getattr(model, "forward", None)) and callable(ns.get("get_inputs"))


def kernelbench_task(module: types.ModuleType) -> RuntimeTask:
    ns = vars(module)
    model = ns["Model"]
    make_init = ns.get("get_init_inputs")
    try:
        init = list(make_init()) if callable(make_init) else []
    except Exception as exc:  # noqa: BLE001 - the user's function failed
        raise TaskError(f"get_init_inputs() failed: {type(exc).__name__}: {exc}",
                        _line(make_init)) from exc

    def forward(*inputs: Any) -> Any:
        return model(*init).forward(*inputs)

    forward.__name__ = "forward"
    forward.__qualname__ = "Model.forward"
    return RuntimeTask(name="forward", entry=forward, inputs=ns["get_inputs"], format="kernelbench",
                       line=_line(model.forward))


def _line(fn: Any) -> int | None:
    code = getattr(inspect.unwrap(fn), "__code__", None) if fn is not None else None
    return code.co_firstlineno if code is not None else None
