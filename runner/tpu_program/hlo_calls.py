"""The op table of the TPU program's executor, for calls (worker side, imports jax lazily).

- ``func.call``: the module's private function, planned once and run inline;
- ``stablehlo.composite``: its decomposition function, the same way;
- Shardy's ``sdy.sharding_constraint`` (an identity on one device) and ``sdy.manual_computation`` (a
  ``shard_map`` body: on one device it runs on the whole operands); ``stablehlo.all_reduce`` over groups of
  one device (a ``psum`` there) is its operands;
- ``stablehlo.custom_call``: only the targets a judged module may hold (runner/judging/module_check.py's
  list). The sharding annotations (``Sharding``, ``SPMDFullToShardShape``, ``SPMDShardToFullShape``,
  ``annotate_device_placement``) are identities on one device (refused when a result's type is not its
  operand's); a ``shape_assertion`` is decided while planning (its condition is fixed once the shapes
  are: a false one raises ``ShapeAssertion`` with its message, one the module does not fix is refused);
  a ``tpu_custom_call`` (a pallas_call's Mosaic kernel) is built by the planner's ``kernel`` hook
  (runner/tpu_program/hlo_exec.py: a host callback into the judge's interpreter of Mosaic kernels).
  Every other target is refused.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..program.mlir_tree import Op
from ..program.module_read import target
from . import hlo_attrs as attrs
from .hlo_plan import Entry, Planner, Refuse

KERNEL = "tpu_custom_call"
IDENTITIES = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "annotate_device_placement"})
CUSTOM_CALL_ATTRS = frozenset({"call_target_name", "backend_config", "api_version", "has_side_effect",
                               "called_computations", "operand_layouts", "result_layouts", "output_operand_aliases",
                               "kernel_name", "error_message", "indices_of_shape_operands"})


class ShapeAssertion(ValueError):
    """A ``shape_assertion`` of the module is false at the sizes asked for (the message is the module's)."""


def _call(op: Op, plan: Planner) -> Callable[..., Any]:
    name = attrs.string(op.attrs["callee"])
    callee = plan.func(name)
    if callee is None:
        raise Refuse(f"@{name} calls itself")
    return lambda env, *args: tuple(callee(None, *args))


def _composite(op: Op, plan: Planner) -> Callable[..., Any]:
    name = attrs.string(op.attrs["decomposition"])
    callee = plan.func(name)
    if callee is None:
        raise Refuse(f"the decomposition @{name} calls itself")
    return lambda env, *args: tuple(callee(None, *args))


def _custom_call(op: Op, plan: Planner) -> Callable[..., Any]:
    name = target(op)
    if name in IDENTITIES:
        return _identity(op, plan)
    if name == "shape_assertion":
        return _shape_assertion(op, plan)
    if name == KERNEL:
        kernel = getattr(plan, "kernel", None)
        if kernel is None:
            raise Refuse("no runner for Mosaic kernels was given")
        for key in ("error_message", "indices_of_shape_operands"):
            if key in op.attrs:
                raise Refuse(f"attribute {key} on a Mosaic kernel call")
        return kernel(op, plan)
    raise Refuse("a custom call outside the ones a kernel's program needs")


def _identity(op: Op, plan: Planner) -> Callable[..., Any]:
    types = [plan.type(v).text for v in op.operands]
    if [plan.type(r).text for r in op.results] != types:
        raise Refuse(f"results of other types ({[plan.type(r).text for r in op.results]}) than its operands ({types})")
    for key in ("backend_config", "output_operand_aliases", "called_computations"):
        if key in op.attrs and str(op.attrs[key]) not in ('""', "[]", "{}"):
            raise Refuse(f"attribute {key} = {str(op.attrs[key])[:80]}")
    return lambda env, *args: tuple(args)


def _shape_assertion(op: Op, plan: Planner) -> Callable[..., Any]:
    if op.results:
        raise Refuse("a shape assertion with results")
    known = plan.static(op.operands[0]) if op.operands else None
    if known is None:
        raise Refuse("a shape assertion whose condition the module does not fix")
    if not bool(np.asarray(known).reshape(-1)[0]):
        message = attrs.string(op.attrs["error_message"]) if "error_message" in op.attrs else "(no message)"
        values = [plan.static(v) for v in op.operands[1:]]
        try:
            message = message.format(*[int(np.asarray(v).reshape(-1)[0]) if v is not None else "?" for v in values])
        except (IndexError, KeyError, ValueError):
            pass
        raise ShapeAssertion(f"the module's shape assertion failed ({plan.where(op)}): {message}")
    return lambda env, *args: ()


def _sharding_constraint(op: Op, plan: Planner) -> Callable[..., Any]:
    """Shardy's annotation: an identity on one device."""
    if [plan.type(r).text for r in op.results] != [plan.type(v).text for v in op.operands]:
        raise Refuse("a result of another type than its operand")
    return lambda env, x: (x,)


def _manual_computation(op: Op, plan: Planner) -> Callable[..., Any]:
    """Shardy's ``shard_map`` body: on one device every shard is the whole array, so the body runs on the operands
    as they are (refused when its arguments or results are not the operands' and results' types)."""
    if len(op.regions) != 1 or len(op.regions[0]) != 1:
        raise Refuse("a body that is not one block")
    block = op.regions[0][0]
    if [plan.type(a).text for a in block.args] != [plan.type(v).text for v in op.operands]:
        raise Refuse("a body whose arguments are not the whole operands (more than one device)")
    ret = block.ops[-1] if block.ops else None
    if ret is None or [plan.type(v).text for v in ret.operands] != [plan.type(r).text for r in op.results]:
        raise Refuse("a body whose results are not the whole results (more than one device)")
    body = plan.block(block)
    return lambda env, *args: tuple(body(env, *args))


def _all_reduce(op: Op, plan: Planner) -> Callable[..., Any]:
    """A reduction over replica groups of one device each (a ``psum`` in a one-device ``shard_map``): the operands."""
    from jaxlib.mlir import ir

    groups = op.attrs.get("replica_groups")
    shape = np.asarray(ir.DenseIntElementsAttr(groups)).shape if groups is not None else (0, 0)
    if len(shape) != 2 or shape[1] > 1:
        raise Refuse(f"replica groups of {shape[1] if len(shape) == 2 else '?'} devices")
    if [plan.type(r).text for r in op.results] != [plan.type(v).text for v in op.operands]:
        raise Refuse("results of other types than its operands")
    return lambda env, *args: tuple(args)


def table() -> dict[str, Entry]:
    return {
        "stablehlo.all_reduce": Entry(frozenset({"replica_groups", "channel_handle", "use_global_device_ids"}),
                                      _all_reduce),
        "sdy.sharding_constraint": Entry(frozenset({"sharding"}), _sharding_constraint),
        "sdy.manual_computation": Entry(frozenset({"in_shardings", "out_shardings", "manual_axes"}),
                                        _manual_computation),
        "func.call": Entry(frozenset({"callee"}), _call),
        "stablehlo.composite": Entry(frozenset({"name", "composite_attributes", "decomposition", "version"}),
                                     _composite),
        "stablehlo.custom_call": Entry(CUSTOM_CALL_ATTRS, _custom_call),
    }
