"""The matmul FLOPs a traced program certainly does (worker side: walks jax's jaxpr objects, imports no jax).

The floor a device timing is held to (engine/device_floor.py: these FLOPs at the chip's peak) comes
from the user's own traced program at the timed shapes (runner/measure/timing_guards.floor_work). This is not
the cost model: estimates are priced from the exported module (runner/program/module_cost.py); a floor only
needs work no run can skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np


def _size(aval: Any) -> int:
    shape = getattr(aval, "shape", ())
    return int(np.prod(shape, dtype=np.int64)) if shape else 1


def sub_jaxprs(params: dict[str, Any]) -> Iterator[Any]:
    """The jaxprs inside an equation's params (a ClosedJaxpr's ``.jaxpr``, or a Jaxpr itself)."""
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            inner = getattr(item, "jaxpr", item)
            if hasattr(inner, "eqns"):
                yield inner


def certain_mxu_flops(jaxpr: Any) -> dict[str, int]:
    """The matmul FLOPs a program certainly does, by operand dtype: ``dot_general``s that run on every
    execution — in the program and in each pallas_call's body (x its static grid steps), scans x
    their length — and none inside a ``cond``/``pl.when`` or ``while`` (values decide whether they
    run) or in a kernel with a dynamic grid. A lower bound of the work, so the compute floor it makes
    (engine/device_floor.py: these FLOPs at the chip's peak) is never too high. Worker side, no jax."""
    out: dict[str, int] = {}

    def walk(jx: Any, times: int) -> None:
        for eqn in jx.eqns:
            name = eqn.primitive.name
            if name == "dot_general":
                lhs = eqn.invars[0].aval
                (lc, _rc), _ = eqn.params["dimension_numbers"]
                contract = int(np.prod([lhs.shape[d] for d in lc], dtype=np.int64)) if lc else 1
                dtype = str(lhs.dtype)
                out[dtype] = out.get(dtype, 0) + 2 * _size(eqn.outvars[0].aval) * contract * times
            elif name == "pallas_call":
                grid = tuple(getattr(eqn.params["grid_mapping"], "grid", ()) or ())
                if all(isinstance(g, (int, np.integer)) for g in grid):
                    steps = int(np.prod(grid, dtype=np.int64)) if grid else 1
                    walk(getattr(eqn.params["jaxpr"], "jaxpr", eqn.params["jaxpr"]), times * steps)
            elif name == "scan":
                walk(eqn.params["jaxpr"].jaxpr, times * int(eqn.params["length"]))
            elif name in ("cond", "while"):
                continue
            else:
                for sub in sub_jaxprs(eqn.params):
                    walk(sub, times)

    walk(jaxpr, 1)
    return out
