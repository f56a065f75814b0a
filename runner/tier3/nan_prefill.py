"""Outputs pre-filled with NaN on a device, so an element no grid step writes cannot look right.

On a real TPU or GPU a pallas_call's output buffer holds whatever memory it was given; a kernel
that skips some output blocks can pass a comparison by luck (stale zeros). Inside
``nan_prefilled()`` every pallas_call of the simple form (``in_specs``/``out_specs``/``grid``
keywords, no ``grid_spec``, no aliases of its own) gets one extra input per output, filled with
NaN (integers: their max value) and aliased to that output (``input_output_aliases``), placed in
``memory_space=ANY`` on TPU so nothing is copied into VMEM; the kernel is wrapped so it never
sees the extra refs. Calls of other forms run unchanged and are listed in ``skipped`` (say so).

Interpret mode does the same job with ``uninitialized_memory="nan"``; this module is for device
runs, and it is tested in interpret mode with zero-filled memory (tests/test_timing_profile.py).
Worker side: imports jax.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from ..intercept import _ORIGINAL, replacing_pallas_call


def fill_value(dtype: Any) -> Any:
    dtype = jnp.dtype(dtype)
    if jnp.issubdtype(dtype, jnp.floating):
        return jnp.nan
    if jnp.issubdtype(dtype, jnp.integer):
        return jnp.iinfo(dtype).max
    return False


@contextlib.contextmanager
def nan_prefilled(modules: tuple[Any, ...] = (), on_tpu: bool = True) -> Iterator[list[str]]:
    """Patch pallas_call (jax's names and the given user modules') for the block's duration."""
    skipped: list[str] = []

    def pallas_call(kernel: Callable[..., Any], out_shape: Any = None, **kwargs: Any) -> Callable[..., Any]:
        reason = _unsupported(kwargs)
        if reason:
            skipped.append(f"{getattr(kernel, '__name__', 'kernel')}: {reason}")
            return _ORIGINAL(kernel, out_shape, **kwargs)

        def apply(*operands: Any) -> Any:
            outs, treedef = jax.tree.flatten(out_shape)
            n_in, n_out = len(operands), len(outs)
            in_specs = kwargs.get("in_specs")
            out_specs = kwargs.get("out_specs")
            if in_specs is None:
                in_specs = [pl.BlockSpec()] * n_in
            in_specs = list(in_specs) if isinstance(in_specs, (list, tuple)) else [in_specs]
            if len(in_specs) != n_in:
                skipped.append(f"{getattr(kernel, '__name__', 'kernel')}: in_specs is not one spec per operand")
                return _ORIGINAL(kernel, out_shape, **kwargs)(*operands)
            if on_tpu:
                extra = [pl.BlockSpec(memory_space=pl.ANY)] * n_out
            else:
                specs = out_specs if isinstance(out_specs, (list, tuple)) else [out_specs] * n_out
                extra = [s if s is not None else pl.BlockSpec() for s in specs]
            fills = [jnp.full(o.shape, fill_value(o.dtype), o.dtype) for o in outs]
            new = dict(kwargs, in_specs=[*in_specs, *extra],
                       input_output_aliases={n_in + i: i for i in range(n_out)})

            @functools.wraps(kernel)
            def without_fills(*refs: Any, **kw: Any) -> Any:
                return kernel(*refs[:n_in], *refs[n_in + n_out:], **kw)

            return _ORIGINAL(without_fills, jax.tree.unflatten(treedef, outs), **new)(*operands, *fills)

        return apply

    with replacing_pallas_call(pallas_call, modules):
        yield skipped


def _unsupported(kwargs: dict[str, Any]) -> str | None:
    if kwargs.get("grid_spec") is not None:
        return "uses grid_spec (scalar prefetch): outputs not pre-filled"
    if kwargs.get("input_output_aliases"):
        return "has input_output_aliases of its own: outputs not pre-filled"
    return None
