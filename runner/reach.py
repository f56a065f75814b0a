"""Which pallas_calls a task's entry reaches (worker side: imports jax).

A file may hold more kernels than its task runs (a forward-only workload next to backward
kernels). Their tiers 1-3 never ran, so they must not read ``ok``: the entry is traced once more,
abstractly (``jax.eval_shape``, nothing runs on a device), with ``pallas_call`` intercepted, and
every call made from the checked file is recorded with the lines of that file on its call stack
(the ``pallas_call(...)`` expression, the wrapper that forwards to it, the function that called the
wrapper) and the kernel's ``def`` line. The client (``engine/reach.py``) marks the file's other
pallas_call sites "not reached by the task".
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

import jax

from .intercept import intercept_pallas_calls


def reached_calls(fn: Callable[..., Any], args: tuple[Any, ...], path: str, modules: tuple[Any, ...] = ()) -> list[dict[str, Any]] | None:
    """``[{"lines": [1-based lines of path on the stack], "kernel_line": int | None, "kernel": str}]``
    for every pallas_call ``fn(*args)`` makes; None when the trace failed (what it reached is unknown)."""
    target = os.path.realpath(path)
    stacks: list[list[int]] = []

    def on_call(kwargs: dict[str, Any]) -> dict[str, Any]:
        lines = []
        frame = sys._getframe(1)
        while frame is not None:
            if os.path.realpath(frame.f_code.co_filename) == target:
                lines.append(frame.f_lineno)
            frame = frame.f_back
        stacks.append(lines)
        return kwargs

    try:
        calls = traced_calls(fn, args, modules, rewrite=on_call, user_files=(path,), before_retry=stacks.clear)
    except Exception:  # noqa: BLE001 - the tiers report the failure; what was reached stays unknown
        return None
    out = []
    for call, lines in zip(calls, stacks):
        kernel_file = call.kernel_file
        same = kernel_file is not None and os.path.realpath(kernel_file) == target
        out.append({"lines": lines, "kernel_line": call.kernel_line if same else None, "kernel": call.kernel_name})
    return out


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
                 before_retry: Callable[[], Any] | None = None) -> list[Any]:
    """The pallas_calls ``fn(*args)`` makes, traced abstractly with ``jax.eval_shape``.

    A jitted function traced before with the same shapes comes from jax's trace cache without
    calling ``pallas_call`` again (a warm worker, a second request): when nothing was recorded,
    jax's caches are cleared and the trace is made once more.
    """
    with intercept_pallas_calls(rewrite=rewrite, user_files=user_files, modules=modules) as calls:
        jax.eval_shape(fn, *args)
    if calls:
        return list(calls)
    jax.clear_caches()
    if before_retry is not None:
        before_retry()
    with intercept_pallas_calls(rewrite=rewrite, user_files=user_files, modules=modules) as calls:
        jax.eval_shape(fn, *args)
    return list(calls)
