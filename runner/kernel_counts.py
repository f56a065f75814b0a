"""The DMAs a kernel issues itself, counted from its traced body (worker side).

A pallas_call operand left in HBM (``memory_space=pl.ANY``) is copied by the kernel's own
``pltpu.make_async_copy(...).start()`` / ``pltpu.async_copy``: each is a ``dma_start`` equation in
the kernel's jaxpr. Per grid step this counts every ``dma_start`` whose source or destination is
in HBM (``any``/``hbm`` memory space: reads into VMEM/SMEM and write-backs), its bytes the
transformed (sliced) ref's shape x its dtype, multiplied by:

- ``scan`` lengths (``fori_loop``/``emit_pipeline`` with static bounds lower to scans);
- a ``while`` loop (dynamic bounds): its body counted once, and the count is marked a lower bound;
- ``cond`` (``pl.when``, ``lax.cond``): the branch moving the most bytes, on every execution,
  and the count is marked an upper bound.

``DmaCounts.exact`` is True only when neither happened. Copies between VMEM buffers and remote
copies (``device_id``) move no HBM bytes of this chip and are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

_HBM = ("any", "hbm")


@dataclass
class DmaCounts:
    """Per execution of a kernel body."""

    copies: int = 0
    bytes: int = 0
    notes: set[str] = field(default_factory=set)
    upper_bound: bool = False  # a cond branch counted on every execution
    lower_bound: bool = False  # a while body counted once

    @property
    def exact(self) -> bool:
        return not (self.upper_bound or self.lower_bound)

    @property
    def kind(self) -> str:
        """What the byte count is: "exact", "upper bound", "lower bound" or "bounded both ways"."""
        if self.upper_bound and self.lower_bound:
            return "bounded both ways"
        return "upper bound" if self.upper_bound else "lower bound" if self.lower_bound else "exact"

    def add(self, other: "DmaCounts", times: int = 1) -> None:
        self.copies += other.copies * times
        self.bytes += other.bytes * times
        self.notes |= other.notes
        self.upper_bound |= other.upper_bound
        self.lower_bound |= other.lower_bound


def _space(ref: Any) -> str:
    base = getattr(ref, "ref", ref)  # a TransformedRef's base ref, or the ref itself
    aval = getattr(base, "aval", None)
    return str(getattr(aval, "memory_space", "")).lower()


def _shape(ref: Any) -> tuple[int, ...]:
    """The copied shape: the base ref's, through each transform (indexers slice it)."""
    base = getattr(ref, "ref", ref)
    shape = tuple(getattr(getattr(base, "aval", None), "shape", ()))
    for t in getattr(ref, "transforms", ()):
        if hasattr(t, "get_indexer_shape"):
            shape = tuple(t.get_indexer_shape())
        elif hasattr(t, "transform_shape"):
            shape = tuple(t.transform_shape(shape))
    return tuple(int(d) for d in shape)


def _nbytes(ref: Any) -> int:
    base = getattr(ref, "ref", ref)
    aval = getattr(base, "aval", None)
    dtype = getattr(getattr(aval, "inner_aval", aval), "dtype", None)
    try:
        itemsize = np.dtype(dtype).itemsize
    except TypeError:
        return 0
    return int(np.prod(_shape(ref), dtype=np.int64)) * itemsize


def _dma(eqn: Any) -> tuple[int, bool]:
    """(bytes, counted) of one dma_start."""
    import jax

    args = jax.tree_util.tree_unflatten(eqn.params["tree"], eqn.invars)
    src, dst = args[0], args[1]
    device_id = args[4] if len(args) > 4 else None  # (src, dst, dst_sem, src_sem, device_id)
    if device_id is not None:
        return 0, False
    if not (any(h in _space(src) for h in _HBM) or any(h in _space(dst) for h in _HBM)):
        return 0, False
    return _nbytes(dst) or _nbytes(src), True


def count_dmas(jaxpr: Any) -> DmaCounts:
    """The HBM copies one execution of ``jaxpr`` (a kernel body) starts."""
    from .cost_model import sub_jaxprs

    out = DmaCounts()
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "dma_start":
            moved, counted = _dma(eqn)
            if counted:
                out.copies += 1
                out.bytes += moved
        elif name == "scan":
            out.add(count_dmas(eqn.params["jaxpr"].jaxpr), int(eqn.params["length"]))
        elif name == "while":
            body = count_dmas(eqn.params["body_jaxpr"].jaxpr)
            if body.copies:
                body.lower_bound = True
                body.notes.add("DMAs in a while loop (dynamic trip count) counted once: a lower bound")
            out.add(body)
        elif name == "cond":
            branches = [count_dmas(b.jaxpr) for b in eqn.params["branches"]]
            most = max(branches, key=lambda c: c.bytes)
            if len({(b.copies, b.bytes) for b in branches}) > 1:
                most.upper_bound = True
                most.notes.add("DMAs under pl.when/cond counted on every execution (the largest branch): an upper bound")
            out.add(most)
        else:
            for sub in sub_jaxprs(eqn.params):
                out.add(count_dmas(sub))
    return out
