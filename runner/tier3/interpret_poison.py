"""Inputs the reference never reads, poisoned: a kernel whose result changes reads what it should not
(worker side: imports jax).

A mask or bound off by one (``<=`` for ``<`` against a sequence length, a tail mask one row long) lets one
more key, row or page into a result. With random inputs of one scale that element changes the output by
a fraction of the tolerance (a paged attention whose mask admits one key past the length: 0.0067 against
2e-2), and tier 3 said nothing. Here the reference says which float input elements it does not depend on:
those whose gradient of the reference's float outputs (against a random cotangent) is exactly zero, and
that, set to a large value (``SCALE`` times the input's largest magnitude), leave the reference's outputs
exactly as they were (a max or a top-k has zero gradients on elements it still reads: checked, never
assumed). The kernel is then run on the poisoned inputs: its outputs must still match the reference. A
kernel that reads one of them - one key past the length - now moves its output by a large amount, and tier
3 says so (PLS304, ``interpret_records.result_record``'s "poisoned" cause); the locate step runs from the
poisoned inputs too.

Only float inputs are poisoned; integer tables and lengths are kept. A reference that cannot be
differentiated (integer outputs only, a callback), or that no input element is dead to, is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from ..memory_guard import MemoryStop, stop_near_limit

SCALE = 8.0  # the poison: this many times the input's largest magnitude (finite: 0 * poison stays 0)
MIN_DEAD = 1  # elements that must be dead before a run is spent on them


@dataclass(frozen=True)
class Poison:
    """Which float input leaves are poisoned where (``masks``: leaf index -> bool array), with what."""

    masks: dict[int, np.ndarray]
    values: dict[int, float]
    said: str  # "412 elements of input 1 and 64 of input 2 set to 3.1e+01"

    def apply(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        """``inputs`` (same structure as the ones this was made from) with the dead elements poisoned."""
        leaves, tree = jax.tree.flatten(inputs)
        for i, mask in self.masks.items():
            leaf = np.asarray(leaves[i])
            leaves[i] = jnp.asarray(np.where(mask, np.asarray(self.values[i], leaf.dtype), leaf), dtype=leaf.dtype)
        return jax.tree.unflatten(tree, leaves)


def poison_for(reference: Callable[..., Any] | None, inputs: tuple[Any, ...], expected: Any = None) -> Poison | None:
    """The poison for ``inputs``, or None when the reference depends on every float element (or cannot say).
    ``expected``: the reference's outputs on ``inputs`` when the caller has them (else computed here)."""
    if reference is None:
        return None
    try:
        with stop_near_limit():  # the reference's gradient: near the worker's memory limit, nothing is poisoned
            masks = _dead(reference, inputs)
    except (Exception, MemoryStop):  # noqa: BLE001 - a reference jax cannot differentiate: nothing to poison
        return None
    if not masks or sum(int(m.sum()) for m in masks.values()) < MIN_DEAD:
        return None
    leaves = jax.tree.leaves(inputs)
    values = {i: SCALE * _largest(leaves[i]) for i in masks}
    said = " and ".join(f"{int(m.sum())} element(s) of input {i}" for i, m in masks.items())
    poison = Poison(masks, values, f"{said} (never read by the reference) set to {max(values.values()):.3g}")
    try:
        with stop_near_limit():
            same = _same(reference(*inputs) if expected is None else expected, reference(*poison.apply(inputs)))
    except (Exception, MemoryStop):  # noqa: BLE001 - the reference fails on the poisoned inputs: not poisoned
        return None
    return poison if same else None


def _largest(leaf: Any) -> float:
    """The input's largest finite magnitude, at least 1 (an input holding inf must not poison with inf)."""
    values = np.abs(np.asarray(leaf, np.float32))
    finite = values[np.isfinite(values)]
    return max(1.0, float(finite.max())) if finite.size else 1.0


def _dead(reference: Callable[..., Any], inputs: tuple[Any, ...]) -> dict[int, np.ndarray]:
    """Leaf index -> the elements of that float input whose gradient is exactly zero."""
    leaves, tree = jax.tree.flatten(inputs)
    floats = [i for i, a in enumerate(leaves) if hasattr(a, "dtype") and jnp.issubdtype(a.dtype, jnp.floating)
              and getattr(a, "size", 0) > 0]
    if not floats:
        return {}

    def outputs_of(*chosen: Any) -> list[Any]:
        full = list(leaves)
        for i, value in zip(floats, chosen):
            full[i] = value
        out = jax.tree.leaves(reference(*jax.tree.unflatten(tree, full)))
        return [o.astype(jnp.float32) for o in out if jnp.issubdtype(o.dtype, jnp.floating)]

    primals = [jnp.asarray(leaves[i]) for i in floats]
    out, pullback = jax.vjp(outputs_of, *primals)
    if not out:
        return {}
    key = jax.random.key(57)
    cotangent = [jax.random.normal(jax.random.fold_in(key, n), o.shape, jnp.float32) for n, o in enumerate(out)]
    grads = pullback(cotangent)
    dead = {i: np.asarray(g) == 0 for i, g in zip(floats, grads)}
    return {i: m for i, m in dead.items() if m.any() and not m.all()}


def _same(a: Any, b: Any) -> bool:
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(la) == len(lb) and all(np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True) for x, y in zip(la, lb))
