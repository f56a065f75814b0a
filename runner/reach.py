"""Which pallas_calls a task's entry reaches (worker side: imports jax).

A file may hold more kernels than its task runs (a forward-only workload next to backward
kernels). Their tiers 1-3 never ran, so they must not read ``ok``: the entry is traced once more,
abstractly (``jax.eval_shape``, nothing runs on a device), with ``pallas_call`` intercepted, and
every call made from the checked file is recorded with the lines of that file on its call stack
(the ``pallas_call(...)`` expression, the wrapper that forwards to it, the function that called the
wrapper) and the kernel's ``def`` line. The client (``engine/findings/reach.py``) marks the file's other
pallas_call sites "not reached" (the task never calls them).
"""

from __future__ import annotations

import os
from typing import Any, Callable

import jax

from .block_reach import blocks_past_end
from .intercept import intercept_pallas_calls, stack_lines, struct_place
from .origin_values import value_origins


def call_path(path: str, call: Any) -> str:
    """The checked file's path as its code objects name it (the literals' places use that name)."""
    for name in (call.file, call.kernel_file):
        if name and os.path.realpath(name) == os.path.realpath(path):
            return name
    return path


def reached_calls(fn: Callable[..., Any], args: tuple[Any, ...], path: str, modules: tuple[Any, ...] = (),
                  raised: list[BaseException] | None = None) -> list[dict[str, Any]] | None:
    """``[{"lines": [1-based lines of path on the stack], "kernel_line": int | None, "kernel": str,
    "kernel_module": str, "site": [file, line] (a call made outside ``path``: ``elsewhere``), "buffers": [...],
    "scalar_prefetch": int, "vmem_bytes": int, "origins": {"in_specs[1][0]": [[line, col, end_col]], ...}}]``
    for every pallas_call ``fn(*args)`` makes (``origins``: where in ``path`` the literals that made its
    grid, block, scratch and out_shape dims were written, ``runner/origin_values.py``); None when the
    trace failed (what it reached is unknown; ``raised``, when given, gets the exception)."""
    target = os.path.realpath(path)
    stacks: list[list[int]] = []

    def on_call(kwargs: dict[str, Any]) -> dict[str, Any]:
        stacks.append(list(stack_lines({target})))
        return kwargs

    made: list[Any] = []
    partial = False
    try:
        calls = traced_calls(fn, args, modules, rewrite=on_call, user_files=(path,), before_retry=stacks.clear,
                             sink=made)
    except Exception as exc:  # noqa: BLE001 - the tiers report the failure; what was reached stays unknown
        if raised is not None:
            raised.append(exc)
        if not made:
            return None
        # the calls made before the trace failed: what they were built from (their places) is known,
        # what else the entry reaches is not ("partial": the client marks nothing "not reached")
        calls, partial = made, True
    out = []
    for call, lines in zip(calls, stacks):
        kernel_file = call.kernel_file
        same = kernel_file is not None and os.path.realpath(kernel_file) == target
        buffers = block_buffers(call)
        out.append({"lines": lines, "kernel_line": call.kernel_line if same else None, "kernel": call.kernel_name,
                    **elsewhere(call, path), "buffers": buffers, "past_end": blocks_past_end(call),
                    "scalar_prefetch": scalar_prefetch(call), "vmem_bytes": vmem_bytes(buffers), **traced_grid(call),
                    "origins": value_origins(call.kwargs, call.out_shape, call_path(path, call), struct_place),
                    **({"partial": True} if partial else {})})
    return out


def elsewhere(call: Any, path: str) -> dict[str, Any]:
    """What a call made outside the checked file says of where: ``kernel_module`` (the module defining a
    kernel that is not the file's) and ``site`` ([file, line] of a ``pallas_call(...)`` that is not in it)."""
    target = os.path.realpath(path)
    out: dict[str, Any] = {}
    if call.kernel_file is None or os.path.realpath(call.kernel_file) != target:
        out["kernel_module"] = call.kernel_module
    if call.site is not None and os.path.realpath(call.site[0]) != target:
        out["site"] = list(call.site)
    return out


def scalar_prefetch(call: Any) -> int:
    """How many operands of the recorded pallas_call its grid spec prefetches into SMEM (they come first)."""
    grid_spec = call.kwargs.get("grid_spec")
    return int(getattr(grid_spec, "num_scalar_prefetch", 0) or 0) if grid_spec is not None else 0


def block_buffers(call: Any) -> list[dict[str, Any]]:
    """The VMEM buffers one recorded pallas_call needs per grid step: each input and output block
    (pipelined, so double-buffered; with its array's shape) and each VMEM scratch buffer, with shape, dtype and bytes.
    Blocks of operands left in HBM/ANY memory, or whose shape is unknown, are not counted."""
    import math

    import numpy as np

    kwargs = call.kwargs
    grid_spec = kwargs.get("grid_spec")
    ins = kwargs.get("in_specs") if grid_spec is None else getattr(grid_spec, "in_specs", None)
    outs = kwargs.get("out_specs") if grid_spec is None else getattr(grid_spec, "out_specs", None)
    scratch = kwargs.get("scratch_shapes") if grid_spec is None else getattr(grid_spec, "scratch_shapes", None)
    prefetch = scalar_prefetch(call)
    # num_scalar_prefetch counts the call's own arguments, not their leaves (a tuple of tables is one, as megablox's)
    operands = [o for o in jax.tree.leaves(tuple(call.operands or ())[prefetch:]) if hasattr(o, "dtype")]
    results = [o for o in jax.tree.leaves(call.out_shape) if hasattr(o, "dtype")]
    out: list[dict[str, Any]] = []

    def add(role: str, index: int, spec: Any, array: Any) -> None:
        shape = getattr(spec, "block_shape", None)
        space = str(getattr(spec, "memory_space", "") or "").upper()
        if shape is None or array is None or "ANY" in space or "HBM" in space or "SMEM" in space:
            return
        dims = [d if isinstance(d, int) else 1 for d in shape]  # None / Squeezed dims hold one element
        itemsize = np.dtype(array.dtype).itemsize
        out.append({"role": role, "index": index, "shape": [d if isinstance(d, int) else None for d in shape],
                    "dtype": str(np.dtype(array.dtype)), "bytes": math.prod(dims) * itemsize, "buffers": 2,
                    "array": [int(d) for d in array.shape]})

    for role, specs, arrays in (("in_specs", ins, operands), ("out_specs", outs, results)):
        specs = specs if isinstance(specs, (list, tuple)) else ([specs] if specs is not None else [])
        for i, spec in enumerate(specs):
            add(role, i, spec, arrays[i] if i < len(arrays) else None)
    for i, buf in enumerate(scratch or ()):
        shape, dtype = getattr(buf, "shape", None), getattr(buf, "dtype", None)
        if shape is None or dtype is None or "VMEM" not in type(buf).__name__.upper() + str(getattr(buf, "memory_space", "")).upper():
            continue
        try:
            size = math.prod(int(d) for d in shape) * np.dtype(dtype).itemsize
        except (TypeError, ValueError):
            continue
        out.append({"role": "scratch_shapes", "index": i, "shape": [int(d) for d in shape], "dtype": str(np.dtype(dtype)),
                    "bytes": size, "buffers": 1})
    return out


def traced_grid(call: Any) -> dict[str, Any]:
    """``{"grid": [ints]}``: the grid the call was made with (its ``grid`` or ``grid_spec.grid``, an int
    read as one axis), when every axis is an int; else nothing (the field is optional)."""
    grid_spec = call.kwargs.get("grid_spec")
    grid = call.kwargs.get("grid") if grid_spec is None else getattr(grid_spec, "grid", None)
    if isinstance(grid, int) and not isinstance(grid, bool):
        grid = (grid,)
    if not isinstance(grid, (list, tuple)):
        return {}
    try:
        axes = [int(d) for d in grid]
    except (TypeError, ValueError):  # a traced value: not known here
        return {}
    return {"grid": axes}


def vmem_bytes(buffers: list[dict[str, Any]]) -> int:
    """Bytes of VMEM the buffers take together (pipelined blocks twice)."""
    return sum(b["bytes"] * b["buffers"] for b in buffers)


def vmem_excess(reached: list[dict[str, Any]] | None, capacity: int | None) -> dict[str, Any] | None:
    """When one call's buffers need more VMEM than ``capacity``: ``{need_bytes, chip_bytes, role,
    index, block}`` of the worst call and its largest buffer (wire/messages.VmemExcess); else None."""
    if not reached or not capacity:
        return None
    worst = max(reached, key=lambda r: r.get("vmem_bytes") or 0)
    need = worst.get("vmem_bytes") or 0
    if need <= capacity or not worst.get("buffers"):
        return None
    big = max(worst["buffers"], key=lambda b: b["bytes"] * b["buffers"])
    shape = "(" + ", ".join("None" if d is None else str(d) for d in big["shape"]) + ")"
    return {"need_bytes": int(need), "chip_bytes": int(capacity), "role": big["role"], "index": int(big["index"]),
            "block": f"{shape} {big['dtype']}"}


def vmem_detail(reached: list[dict[str, Any]] | None, capacity: int | None) -> str:
    """A progress-message detail when one call's blocks need more VMEM than the chip has ("" if none).

    ``; its blocks need 256.0 MiB of VMEM (double-buffered), more than the chip's 128.0 MiB
    (largest: in_specs[0] (4096, 4096) bfloat16)`` — engine/findings/reply_failures.py reads it back when
    the compile then runs past its time limit.
    """
    if not reached or not capacity:
        return ""
    worst = max(reached, key=lambda r: r.get("vmem_bytes") or 0)
    need = worst.get("vmem_bytes") or 0
    if need <= capacity or not worst.get("buffers"):
        return ""
    big = max(worst["buffers"], key=lambda b: b["bytes"] * b["buffers"])
    shape = "(" + ", ".join("None" if d is None else str(d) for d in big["shape"]) + ")"
    return (f"; its blocks need {need / 2**20:.1f} MiB of VMEM (double-buffered), more than the chip's "
            f"{capacity / 2**20:.1f} MiB (largest: {big['role']}[{big['index']}] {shape} {big['dtype']})")


def chip_vmem_bytes(target: str) -> int | None:
    """The target chip's VMEM capacity from jax's own chip table (None when unknown)."""
    try:
        from ..analysis.types import chip_target

        from .chip_probe import spec_from_jax

        spec = spec_from_jax(chip_target(target))
    except Exception:  # noqa: BLE001 - an optional figure
        return None
    return spec.vmem_bytes if spec is not None else None


def entry_namespaces(fn: Any) -> tuple[dict[str, Any], ...]:
    """The entry's module globals, where ``from ... import pallas_call`` binds the name."""
    import functools

    while isinstance(fn, functools.partial):
        fn = fn.func
    fn = getattr(fn, "__wrapped__", fn)
    namespace = getattr(fn, "__globals__", None)
    return (namespace,) if isinstance(namespace, dict) else ()


def traced_calls(fn: Callable[..., Any], args: tuple[Any, ...], modules: tuple[Any, ...] = (), *,
                 rewrite: Callable[[dict[str, Any]], dict[str, Any]] | None = None, user_files: tuple[str, ...] = (),
                 before_retry: Callable[[], Any] | None = None, sink: list[Any] | None = None) -> list[Any]:
    """The pallas_calls ``fn(*args)`` makes, traced abstractly with ``jax.eval_shape`` (``sink``, when
    given, holds the calls recorded so far even when the trace raises).

    A jitted function traced before with the same shapes comes from jax's trace cache without
    calling ``pallas_call`` again (a warm worker, a second request): when nothing was recorded,
    jax's caches are cleared and the trace is made once more.
    """
    sink = [] if sink is None else sink
    with intercept_pallas_calls(rewrite=rewrite, user_files=user_files, modules=modules) as calls:
        try:
            jax.eval_shape(fn, *args)
        finally:
            sink[:] = calls  # what was recorded, even when the trace raised
    if calls:
        return list(calls)
    jax.clear_caches()
    if before_retry is not None:
        before_retry()
    with intercept_pallas_calls(rewrite=rewrite, user_files=user_files, modules=modules) as calls:
        try:
            jax.eval_shape(fn, *args)
        finally:
            sink[:] = calls
    return list(calls)
