"""The DMAs a kernel issues itself, counted from its traced body (worker side).

A pallas_call operand left in HBM (``memory_space=pl.ANY``) is copied by the kernel's own
``pltpu.make_async_copy(...).start()`` / ``pltpu.async_copy``: each is a ``dma_start`` equation in
the kernel's jaxpr. Per grid step this counts every ``dma_start`` whose source or destination is
in HBM (``any``/``hbm`` memory space: reads into VMEM/SMEM and write-backs), its bytes the
transformed (sliced) ref's shape x its dtype, multiplied by:

- ``scan`` lengths (``fori_loop``/``emit_pipeline`` with static bounds lower to scans);
- a ``while`` loop (dynamic bounds, e.g. a ``fori_loop`` up to a length read from a
  scalar-prefetch ref): simulated trip by trip at each grid step from the known scalars (program
  ids, scalar-prefetch values, small ops on them), so its trip count is exact; when those do not
  decide it, its body is counted once and the count is marked a lower bound;
- ``cond`` (``pl.when``, ``lax.cond``): the branch the known scalars select; when they do not
  decide it, the branch moving the most bytes, and the count is marked an upper bound.

The known scalars (program ids, scalar-prefetch values, small ops on them, stores into tracked
refs) live in runner/kernel_scalars.py. ``count_over_grid`` walks the body once per grid step (up to MAX_STEPS, else an even sample scaled
to the grid).

``DmaCounts.exact`` is True only when neither happened. Copies between VMEM buffers and remote
copies (``device_id``) move no HBM bytes of this chip and are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .kernel_scalars import Scalars, unflatten

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


_DMA_SIZES: dict[int, tuple[Any, int, bool]] = {}


def _dma(eqn: Any) -> tuple[int, bool]:
    """(bytes, counted) of one dma_start (static per equation: computed once)."""
    hit = _DMA_SIZES.get(id(eqn))
    if hit is not None and hit[0] is eqn:
        return hit[1], hit[2]
    moved, counted = _dma_size(eqn)
    _DMA_SIZES[id(eqn)] = (eqn, moved, counted)
    return moved, counted


def _dma_size(eqn: Any) -> tuple[int, bool]:
    args = unflatten(eqn, eqn.invars)
    src, dst = args[0], args[1]
    device_id = args[4] if len(args) > 4 else None  # (src, dst, dst_sem, src_sem, device_id)
    if device_id is not None:
        return 0, False
    if not (any(h in _space(src) for h in _HBM) or any(h in _space(dst) for h in _HBM)):
        return 0, False
    return _nbytes(dst) or _nbytes(src), True


MAX_TRIPS = 1 << 16  # a while loop simulated for more trips than this is counted as a bound


def _forget_dst(eqn: Any, env: Scalars) -> None:
    env.forget([unflatten(eqn, eqn.invars)[1]])


def count_dmas(jaxpr: Any, scalars: Scalars | None = None) -> DmaCounts:
    """The HBM copies one execution of ``jaxpr`` (a kernel body) starts. With ``scalars`` (one
    grid step's known values), ``pl.when`` branches and ``while`` trip counts that those values
    decide are taken exactly; otherwise they are bounded (see the module docstring)."""
    from .body_counts import sub_jaxprs

    env = scalars or Scalars((), (), {})
    out = DmaCounts()
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "dma_start":
            moved, counted = _dma(eqn)
            if counted:
                out.copies += 1
                out.bytes += moved
            _forget_dst(eqn, env)
        elif name == "scan":  # the same count every iteration: only its constants are known inside
            body = eqn.params["jaxpr"]
            n = int(eqn.params["num_consts"])
            inner = env.child(zip(body.jaxpr.invars[:n], [env.get(v) for v in eqn.invars[:n]]),
                              links=zip(body.jaxpr.invars[:n], eqn.invars[:n]))
            out.add(count_dmas(body.jaxpr, inner), int(eqn.params["length"]))
        elif name == "while":
            out.add(_while(eqn, env))
        elif name == "cond":
            branches = eqn.params["branches"]
            index = env.get(eqn.invars[0])
            operands = [env.get(v) for v in eqn.invars[1:]]
            if index is not None and np.size(index) == 1:
                taken = int(np.clip(int(np.asarray(index).reshape(-1)[0]), 0, len(branches) - 1))
                b = branches[taken]
                out.add(count_dmas(b.jaxpr, env.child(zip(b.jaxpr.invars, operands),
                                                      links=zip(b.jaxpr.invars, eqn.invars[1:]))))
                continue
            scopes = [env.child(zip(b.jaxpr.invars, operands), refs=dict(env.refs),
                                links=zip(b.jaxpr.invars, eqn.invars[1:])) for b in branches]
            counted = [count_dmas(b.jaxpr, scope) for b, scope in zip(branches, scopes)]
            for ref in list(env.refs):  # a ref some branch may have changed is unknown after the cond
                if any(scope.refs.get(ref) is not env.refs[ref] for scope in scopes):
                    del env.refs[ref]
            most = max(counted, key=lambda c: c.bytes)
            if len({(c.copies, c.bytes) for c in counted}) > 1:
                most.upper_bound = True
                most.notes.add("DMAs under pl.when/cond counted on every execution (the largest branch): an upper bound")
            out.add(most)
        elif name in ("pjit", "jit", "closed_call", "run_scoped") and len(list(sub_jaxprs(eqn.params))) == 1:
            (sub,) = sub_jaxprs(eqn.params)
            inner = env.child(zip(sub.invars, [env.get(v) for v in eqn.invars]), links=zip(sub.invars, eqn.invars))
            out.add(count_dmas(sub, inner))
            for ov, iv in zip(eqn.outvars, sub.outvars):
                got = inner.get(iv)
                if got is not None:
                    env.values[ov] = got
        else:
            subs = list(sub_jaxprs(eqn.params))
            for sub in subs:
                out.add(count_dmas(sub, env.child(())))
            if not subs:
                env.step(eqn)
    return out


def _while(eqn: Any, env: Scalars) -> DmaCounts:
    """A while loop's DMAs: simulated trip by trip while its condition is known, else once (a bound)."""
    p = eqn.params
    cond, body = p["cond_jaxpr"].jaxpr, p["body_jaxpr"].jaxpr
    nc, nb = int(p["cond_nconsts"]), int(p["body_nconsts"])
    values = [env.get(v) for v in eqn.invars]
    cconsts, bconsts, carry = values[:nc], values[nc:nc + nb], values[nc + nb:]
    out = DmaCounts()
    for _ in range(MAX_TRIPS):
        c = env.child(zip(cond.invars, cconsts + carry), links=zip(cond.invars[:nc], eqn.invars[:nc]))
        for e in cond.eqns:
            c.step(e)
        go = c.get(cond.outvars[0])
        if go is None:
            break
        if not bool(np.asarray(go).reshape(-1)[0]):
            return out  # exact
        b = env.child(zip(body.invars, bconsts + carry), links=zip(body.invars[:nb], eqn.invars[nc:nc + nb]))
        out.add(count_dmas(body, b))
        carry = [b.get(v) for v in body.outvars]
    scope = env.child(zip(body.invars, bconsts + [None] * len(carry)), refs=dict(env.refs),
                      links=zip(body.invars[:nb], eqn.invars[nc:nc + nb]))
    once = count_dmas(body, scope)
    for ref in list(env.refs):  # the loop may run any number of times: what it stores is unknown
        if scope.refs.get(ref) is not env.refs[ref]:
            del env.refs[ref]
    if once.copies:
        once.lower_bound = True
        once.notes.add("DMAs in a while loop whose trip count the known values do not decide: counted once "
                       "(a lower bound)")
    out.add(once)
    return out


MAX_STEPS = 256  # grid steps evaluated one by one; a larger grid is sampled evenly and scaled


def count_over_grid(body: Any, grid: tuple[int, ...], prefetch: list[np.ndarray | None]) -> tuple[DmaCounts, str | None]:
    """The kernel's own DMAs over the whole grid: the body walked at each grid step with that step's
    program ids and the scalar-prefetch values, so branches and loop trip counts those decide are
    exact. Returns the totals and a note when the grid was sampled."""
    total = DmaCounts()
    if not count_dmas(body).copies:
        return total, None
    steps = int(np.prod(grid, dtype=np.int64)) if grid else 1
    refs = {var: value for var, value in zip(body.invars, prefetch) if value is not None}
    picks = range(steps) if steps <= MAX_STEPS else np.linspace(0, steps - 1, MAX_STEPS).astype(np.int64)
    for flat in picks:
        point = tuple(int(i) for i in np.unravel_index(int(flat), grid)) if grid else ()
        total.add(count_dmas(body, Scalars(grid, point, refs)))
    if steps > MAX_STEPS:
        scale = steps / MAX_STEPS
        total.copies, total.bytes = int(total.copies * scale), int(total.bytes * scale)
        return total, f"the kernel's own DMAs: {MAX_STEPS} of {steps} grid steps evaluated, scaled"
    return total, None
