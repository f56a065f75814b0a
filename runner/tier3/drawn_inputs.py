"""Fresh input values drawn like the task's own (worker side: imports jax): the judge's timing and
correctness inputs (``runner/measure/timing_inputs.py`` re-exports ``fresh_inputs``) and the locate step's
fresh sets (``runner/tier3/locate_step.py``) draw them here.

``fresh_inputs(shapes, seed, template)``: concrete arrays with the task's shapes and dtypes; floating leaves
get N(0, 1) samples from ``seed``, scaled to the mean and spread of the task's own values when its inputs
function makes arrays (``template``); integer and boolean leaves keep the task's own values beside floats,
are permuted when integers are all it takes, else small random integers in [0, 8).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def fresh_inputs(shapes: tuple[Any, ...], seed: int, template: tuple[Any, ...] | None = None) -> tuple[Any, ...]:
    """Concrete arrays shaped like ``shapes``, floats drawn fresh from ``seed``. With the task's own inputs
    (``template``), its integers are kept where it has float inputs too (lengths, page tables, offsets and
    group sizes hold relations between them - a sequence's query tokens within its kv length - that a
    kernel may rely on, and the fresh floats already make every answer fresh: JAXBench 7p's ragged paged
    attention left rows unwritten on permuted lengths), and permuted when integers are all it takes (then
    they are the data: a kernel returning the example's answer would pass on them)."""
    rng = np.random.default_rng(seed)
    leaves, treedef = jax.tree.flatten(shapes)
    kept = jax.tree.leaves(template) if template is not None else None
    if kept is not None and [tuple(k.shape) for k in kept] != [tuple(s.shape) for s in leaves]:
        kept = None
    floats = any(jnp.issubdtype(jnp.dtype(leaf.dtype), jnp.inexact) for leaf in leaves)
    out = []
    for i, leaf in enumerate(leaves):
        dtype = jnp.dtype(leaf.dtype)
        shape = tuple(leaf.shape)
        if jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.complexfloating):
            draw = rng.standard_normal(shape, dtype=np.float32)
            if kept is not None:  # fresh values at the scale the task's own inputs have
                mean, std = _scale_of(kept[i])
                draw = mean + std * draw
            value = jnp.asarray(draw).astype(dtype)
        elif kept is not None:
            own = np.asarray(kept[i])
            value = jnp.asarray(own if floats else _permuted(own, rng)).astype(dtype)
        elif dtype == jnp.bool_:
            value = jnp.asarray(rng.integers(0, 2, shape).astype(bool))
        else:
            value = jnp.asarray(rng.integers(0, 8, shape)).astype(dtype)
        out.append(value)
    return tuple(jax.tree.unflatten(treedef, out))


def _permuted(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The task's own integers, fresh: its values in another order (their sum, range and multiset kept: group
    sizes still sum to the rows, page indices stay pages). Sorted arrays (offsets, cumulative lengths) and
    scalars are kept as they are: their order is what they mean."""
    flat = values.reshape(-1)
    if flat.size < 2 or np.all(flat[1:] >= flat[:-1]) or np.all(flat[1:] <= flat[:-1]):
        return values
    return rng.permutation(flat).reshape(values.shape)


def _scale_of(leaf: Any) -> tuple[float, float]:
    """(mean, standard deviation) of one of the task's own float inputs; (0, 1) when it is constant.
    JAXBench's attention tasks draw q at head_dim**-0.5 and k, v at 0.02: at N(0, 1) the logits of a
    bfloat16 reference are rounded to a quarter and the reference itself is off by 0.3."""
    values = np.asarray(jnp.asarray(leaf).astype(jnp.float32), dtype=np.float64)
    if values.size == 0:
        return 0.0, 1.0
    std = float(values.std())
    if not np.isfinite(std) or std == 0.0:
        return 0.0, 1.0
    return float(values.mean()), std
