"""The backward pass as a task of its own: a file's hand-written VJP is checked too (worker side: imports jax).

A kernel file that defines a ``jax.custom_vjp`` (flash attention's dq/dkv kernels, megablox's ``tgmm``)
has kernels only ``jax.grad`` runs; a task that calls the forward never reaches them, so no tier
lowered, compiled or ran them. For each task whose entry reaches such a VJP with ``pallas_call``s
in it, ``backward_tasks`` adds ``NAME (backward)``: the entry's VJP with respect to its floating
inputs (integer inputs, such as group sizes or page tables, are held), applied to a fixed
cotangent, and, when the task has a reference, the reference's VJP at the same cotangent as its
reference. Every tier then treats it as any other entry: its kernels are lowered and compiled for
the target, run in TPU interpret mode against the reference's gradients, and located.

Only files whose own source says ``custom_vjp`` are looked at (a library's backward is its own
business), and only when the entry's jaxpr holds a ``custom_vjp`` call and the backward adds
``pallas_call``s: a kernel without a hand-written VJP is never differentiated through Pallas's own
rules here. The cotangent is a smooth, non-symmetric pattern of the output's shape (the same for
the kernel and the reference), not ones: a swapped axis in the backward changes the gradients.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import replace
from typing import Any, Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import ClosedJaxpr, Jaxpr

from ...wire import messages
from .task_types import RuntimeTask

SUFFIX = messages.BACKWARD_SUFFIX


def backward_tasks(tasks: list[RuntimeTask], source: str | None) -> list[RuntimeTask]:
    """The backward tasks of ``tasks`` (see the module doc); [] when the file writes no custom VJP."""
    if not source or "custom_vjp" not in source:
        return []
    out = []
    for task in tasks:
        if task.call is not None or task.name.endswith(SUFFIX):
            continue
        try:
            forward_kernels = _forward_kernels(task.entry, task.abstract_args())
        except Exception:  # noqa: BLE001 - the forward task says what fails; no backward is added
            continue
        if forward_kernels is not None:
            out.append(backward_task(task, forward_kernels))
    return out


def backward_task(task: RuntimeTask, forward_kernels: frozenset[str] = frozenset()) -> RuntimeTask:
    """``task``'s backward pass as a task, unchecked (``backward_tasks`` says when one is worth it).
    ``forward_kernels``: the kernels its forward calls, which the forward's task checks (tier 3 reads the
    backward's calls; by name, as a call jax serves from its trace cache is not recorded)."""
    reference = vjp_of(task.reference) if task.reference is not None else None
    entry = vjp_of(task.entry)
    entry.forward_kernels = forward_kernels
    return replace(task, name=task.name + SUFFIX, entry=entry, reference=reference, tunables={})


def named(tasks: list[RuntimeTask], like: RuntimeTask) -> RuntimeTask | None:
    """The task named as ``like`` among ``tasks`` and their backward passes (built only for that name,
    as ``like`` was: the locate step asks once per edit, and ``backward_tasks``'s checks were made)."""
    found = next((t for t in tasks if t.name == like.name), None)
    if found is None and like.name.endswith(SUFFIX):
        forward = next((t for t in tasks if t.name == like.name[: -len(SUFFIX)]), None)
        if forward is not None and forward.call is None:
            found = backward_task(forward, getattr(like.entry, "forward_kernels", frozenset()))
    return found


def in_backward(records: list[dict[str, Any]], name: str) -> None:
    """Say in each record of a backward entry that it is about the backward pass."""
    lead = f"in the backward pass of {name[: -len(SUFFIX)]} (its custom VJP, which jax.grad runs): "
    for rec in records:
        for key in ("sentence", "message"):
            if isinstance(rec.get(key), str) and not rec[key].startswith(lead):
                rec[key] = lead + rec[key]


def vjp_of(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``'s gradients with respect to its floating inputs at ``cotangent(output)``: a tuple with one
    array per floating leaf of the arguments, in order."""

    @functools.wraps(fn)  # __wrapped__: the forward's module globals (its CONFIG, its pallas_call name)
    def backward(*args: Any) -> tuple[Any, ...]:
        leaves, tree = jax.tree.flatten(args)
        where = [i for i, leaf in enumerate(leaves) if _floating(leaf)]

        def of_floats(*floats: Any) -> Any:
            full = list(leaves)
            for i, value in zip(where, floats):
                full[i] = value
            return fn(*jax.tree.unflatten(tree, full))

        with live_tracebacks():
            out, pull = jax.vjp(of_floats, *[leaves[i] for i in where])
            return tuple(pull(jax.tree.map(cotangent, out)))

    backward.__name__ = getattr(fn, "__name__", "entry") + "_backward"
    return backward


@contextlib.contextmanager
def live_tracebacks() -> Iterator[None]:
    """Equations the backward pass traces keep their own source lines. jax's backward pass gives each
    transposed equation the traceback of the forward equation it comes from, so a custom VJP's
    kernels would be said at the entry's call of the forward, and a lowering error in them at no line
    of the file; here only the name stack is set (jax's private ``ad._name_stack_ctx``: where it is
    missing nothing changes but those places)."""
    from jax._src import source_info_util
    from jax._src.interpreters import ad

    original = getattr(ad, "_name_stack_ctx", None)
    if original is None:
        yield
        return

    def name_stack_only(src_info: Any) -> Any:
        return source_info_util.user_context(None, name_stack=source_info_util.current_name_stack()
                                             + src_info.name_stack)

    ad._name_stack_ctx = name_stack_only
    try:
        yield
    finally:
        ad._name_stack_ctx = original


def cotangent(out: Any) -> Any:
    """A fixed cotangent for one output leaf: ``cos(0.7 k + 0.3)`` over its flat index ``k`` (values
    in [-1, 1], no two neighbours equal), float0 zeros for an integer output."""
    if not _floating(out):
        return np.zeros(out.shape, dtype=jax.dtypes.float0)
    k = jnp.arange(int(np.prod(out.shape)), dtype=jnp.float32).reshape(out.shape)
    return jnp.cos(0.7 * k + 0.3).astype(out.dtype)


def _floating(leaf: Any) -> bool:
    return hasattr(leaf, "dtype") and jnp.issubdtype(leaf.dtype, jnp.inexact)


def _forward_kernels(entry: Callable[..., Any], args: tuple[Any, ...]) -> frozenset[str] | None:
    """The kernels ``entry``'s forward calls (by function name) when it calls a custom VJP whose backward adds
    pallas_calls; None when there is no such backward to check."""
    if not any(_floating(leaf) for leaf in jax.tree.leaves(args)):
        return None
    forward = jax.make_jaxpr(entry)(*args)
    if _count(forward.jaxpr, "custom_vjp") == 0:
        return None
    backward = jax.make_jaxpr(vjp_of(entry))(*args)
    if _count(backward.jaxpr, "pallas_call") <= _count(forward.jaxpr, "pallas_call"):
        return None
    return frozenset(_kernel_names(forward.jaxpr))


def _kernel_names(jaxpr: Any) -> list[str]:
    """The function names of the kernels of the pallas_calls in ``jaxpr`` and the jaxprs nested in it."""
    names = []
    for eqn in jaxpr.eqns:
        if "pallas_call" in eqn.primitive.name:
            info = getattr(eqn.params.get("jaxpr"), "debug_info", None)
            names.append(getattr(info, "func_name", "") or "")
        for value in eqn.params.values():
            for inner in _jaxprs(value):
                names += _kernel_names(inner)
    return names


def _count(jaxpr: Any, word: str) -> int:
    """Equations whose primitive's name holds ``word``, in ``jaxpr`` and every jaxpr nested in it."""
    total = 0
    for eqn in jaxpr.eqns:
        if word in eqn.primitive.name:
            total += 1
        for value in eqn.params.values():
            for inner in _jaxprs(value):
                total += _count(inner, word)
    return total


def _jaxprs(value: Any) -> list[Any]:
    if isinstance(value, ClosedJaxpr):
        return [value.jaxpr]
    if isinstance(value, Jaxpr):
        return [value]
    if isinstance(value, (tuple, list)):
        return [j for v in value for j in _jaxprs(v)]
    return []
