"""A kernel's scalar values at one grid step, as far as they can be known (worker side).

``runner/kernel_counts.py`` walks a kernel body once per grid step to count the DMAs it issues;
which ``pl.when`` branch runs and how many times a ``fori_loop`` with a dynamic bound turns depend on
scalars: program ids, scalar-prefetch refs (SMEM tables with concrete values from the task's
inputs), and small ops on them. ``Scalars`` holds what is known: it evaluates an equation when its
inputs are known and small (common integer ops with numpy, the rest through ``bind``), reads the
tracked refs, follows stores into them (a store it cannot follow makes the ref unknown), and
follows refs into nested bodies by aliasing their variables to the kernel's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_UNFLATTENED: dict[int, tuple[Any, Any]] = {}  # id(eqn) -> (eqn, its unflattened operands): static per equation


def unflatten(eqn: Any, leaves: Any) -> Any:
    """``tree_unflatten`` of a dma/get/swap equation's operands, once per equation (it is most of
    the walk's time otherwise); the equation is kept so its id is not reused while cached."""
    import jax

    hit = _UNFLATTENED.get(id(eqn))
    if hit is not None and hit[0] is eqn:
        return hit[1]
    value = jax.tree_util.tree_unflatten(eqn.params["tree"], leaves)
    if len(_UNFLATTENED) > 100_000:
        _UNFLATTENED.clear()
    _UNFLATTENED[id(eqn)] = (eqn, value)
    return value


SMALL = 4096  # scalar work is evaluated when every value involved has at most this many elements


def _div(a: Any, b: Any) -> Any:
    if np.issubdtype(np.asarray(a).dtype, np.integer):  # lax.div rounds toward zero
        q = np.abs(a) // np.maximum(np.abs(b), 1)
        return np.where((np.sign(a) * np.sign(b)) < 0, -q, q)
    return np.true_divide(a, b)


# scalar ops evaluated with numpy (jax's eager dispatch costs ~50 us an op; a paged kernel's
# index arithmetic runs thousands of them per grid step); anything else goes through bind
_NUMPY: dict[str, Any] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": _div,
    "rem": lambda a, b: np.fmod(a, b), "max": lambda a, b: np.maximum(a, b), "min": lambda a, b: np.minimum(a, b),
    "neg": lambda a: -a, "abs": np.abs, "sign": np.sign,
    "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "and": lambda a, b: a & b, "or": lambda a, b: a | b, "not": lambda a: ~a if a.dtype != bool else np.logical_not(a),
    "select_n": lambda which, *cases: np.choose(np.asarray(which).astype(np.int64), cases),
    "convert_element_type": lambda a, **_: a, "squeeze": lambda a, dimensions: np.squeeze(a, tuple(dimensions)),
    "clamp": lambda lo, x, hi: np.clip(x, lo, hi),
}


class Scalars:
    """The kernel's scalar values at one grid step, as far as they can be known: program ids,
    scalar-prefetch refs (their concrete values) and small ops computed from known values."""

    def __init__(self, grid: tuple[int, ...], point: tuple[int, ...], refs: dict[Any, np.ndarray]) -> None:
        self.grid, self.point, self.refs = grid, point, refs
        self.alias: dict[Any, Any] = {}  # a nested body's ref var -> the kernel's (the tables' key)
        self.values: dict[Any, np.ndarray] = {}

    def get(self, var: Any) -> Any:
        if hasattr(var, "val"):
            return np.asarray(var.val)
        try:
            return self.values.get(var)
        except TypeError:
            return None

    def child(self, pairs: Any, refs: dict[Any, np.ndarray] | None = None, links: Any = ()) -> "Scalars":
        """A nested body's scope: ``pairs`` binds its inputs to values, ``links`` its ref inputs to
        the refs passed in (inner var, outer var); ``refs`` a private copy of the ref tables (a
        branch that may not run must not change what later code reads)."""
        inner = Scalars(self.grid, self.point, self.refs if refs is None else refs)
        for iv, value in pairs:
            if value is not None:
                inner.values[iv] = value
        for iv, ov in links:
            if not hasattr(ov, "val"):
                inner.alias[iv] = self.root(ov)
        return inner

    def root(self, var: Any) -> Any:
        var = getattr(var, "ref", var)  # a TransformedRef's base
        try:
            return self.alias.get(var, var)
        except TypeError:
            return var

    def step(self, eqn: Any) -> None:
        """Evaluate one equation when its inputs are known and small."""
        name = eqn.primitive.name
        if name in ("program_id", "num_programs"):
            axis = int(eqn.params["axis"])
            source = self.point if name == "program_id" else self.grid
            if axis < len(source):  # no grid point given (the first, unevaluated pass): unknown
                self.values[eqn.outvars[0]] = np.int32(source[axis])
            return
        if name == "get":
            self._read(eqn)
            return
        if name in ("swap", "addupdate"):
            self._write(eqn)
            return
        known = [self.get(v) for v in eqn.invars]
        if any(k is None or np.size(k) > SMALL for k in known):
            return
        if any(int(np.prod(getattr(v.aval, "shape", ()) or (1,))) > SMALL for v in eqn.outvars):
            return
        fast = _NUMPY.get(name)
        try:
            if fast is not None:
                outs = [np.asarray(fast(*known, **eqn.params)).astype(eqn.outvars[0].aval.dtype)]
            else:
                outs = eqn.primitive.bind(*known, **eqn.params)
                outs = outs if eqn.primitive.multiple_results else [outs]
        except Exception:  # noqa: BLE001 - not evaluable here (effects, refs): stays unknown
            return
        for var, out in zip(eqn.outvars, outs):
            self.values[var] = np.asarray(out)

    def _index(self, transforms: Any) -> tuple[Any, ...] | None:
        """The numpy index of one NDIndexer transform chain (only one indexer supported), or None."""
        if len(transforms) != 1 or getattr(transforms[0], "indices", None) is None:
            return None
        index = []
        for i in transforms[0].indices:
            if hasattr(i, "size") and hasattr(i, "start") and not hasattr(i, "aval"):  # a Slice
                start = self.get(i.start) if hasattr(i.start, "aval") or hasattr(i.start, "val") else i.start
                if start is None:
                    return None
                stride = int(getattr(i, "stride", 1) or 1)
                index.append(slice(int(start), int(start) + int(i.size) * stride, stride))
            else:
                got = self.get(i)
                if got is None:
                    return None
                index.append(got)
        return tuple(index)

    def _write(self, eqn: Any) -> None:
        """A store into a ref the walk tracks: its table follows when the stored value and index
        are known, else the ref becomes unknown."""
        ref = self.root(eqn.invars[0])
        if ref not in self.refs:
            return
        value = self.get(eqn.invars[1])
        transforms = unflatten(eqn, eqn.invars[2:])
        index = self._index(transforms) if transforms else ()
        table = self.refs[ref]
        if value is None or index is None:
            del self.refs[ref]
            return
        old = table[index] if index else table
        if eqn.outvars:  # swap returns the old value; addupdate returns nothing
            self.values[eqn.outvars[0]] = np.asarray(old)
        updated = np.array(table, copy=True)
        if index:
            updated[index] = value if eqn.primitive.name == "swap" else updated[index] + value
        else:
            updated = np.broadcast_to(value if eqn.primitive.name == "swap" else updated + value, table.shape).copy()
        self.refs[ref] = updated

    def forget(self, refs: Any) -> None:
        """Refs a dst of a DMA or a store the walk could not follow: unknown from here on."""
        for ref in refs:
            self.refs.pop(self.root(ref), None)

    def _read(self, eqn: Any) -> None:
        table = self.refs.get(self.root(eqn.invars[0]))
        if table is None:
            return
        transforms = unflatten(eqn, eqn.invars[1:])
        index = self._index(transforms) if transforms else ()
        if index is None:
            return
        try:
            value = table[index] if index else table
        except (IndexError, TypeError):
            return
        self.values[eqn.outvars[0]] = np.asarray(value)
