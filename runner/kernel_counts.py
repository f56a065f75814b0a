"""What a kernel body does at each grid step, from the values the task's inputs give (worker side):
the DMAs it issues itself and the work its data-dependent branches and loops really do.

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

The same walk counts the body's arithmetic (``StepCounts.compute``: body_counts.count_leaf per
equation) under the same decisions, so a block-sparse kernel whose ``pl.when`` skips the masked
blocks (splash attention's ``block_mask`` in SMEM) is priced for the blocks it computes, and a
``fori_loop`` up to a prefetched length for the trips it turns. Where the known values do not
decide a branch, its largest branch is counted (``compute_upper``); an undecided while body once
(``compute_lower``): both said in the notes.

The known scalars (program ids, scalar-prefetch values, small ops on them, stores into tracked
refs) live in runner/kernel_scalars.py. ``count_over_grid`` walks the body once per grid step (up
to MAX_STEPS; a larger grid is sampled by ``grid_sample`` — whole runs of the inner axes at a
stratified sample of the outer positions — and scaled: an even stride over the flat grid aliased
with the inner axes and priced a causal mask's 3 of 4 blocks as 2 of 3).

``StepCounts.exact`` is True only when no DMA was bounded. Copies between VMEM buffers and remote
copies (``device_id``) move no HBM bytes of this chip and are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .body_counts import BodyCounts, count_leaf
from .kernel_scalars import Scalars, unflatten

_HBM = ("any", "hbm")


@dataclass
class StepCounts:
    """Per execution of a kernel body (or summed over grid steps): its own HBM copies and its work."""

    copies: int = 0
    bytes: int = 0
    notes: set[str] = field(default_factory=set)
    upper_bound: bool = False  # DMAs: a cond branch counted on every execution
    lower_bound: bool = False  # DMAs: a while body counted once
    compute: BodyCounts = field(default_factory=BodyCounts)
    compute_upper: bool = False  # work: an undecided cond counted at its largest branch
    compute_lower: bool = False  # work: an undecided while body counted once

    @property
    def exact(self) -> bool:
        return not (self.upper_bound or self.lower_bound)

    @property
    def kind(self) -> str:
        """What the byte count is: "exact", "upper bound", "lower bound" or "bounded both ways"."""
        return _kind(self.upper_bound, self.lower_bound)

    @property
    def compute_kind(self) -> str:
        """What the work count is, in the same words."""
        return _kind(self.compute_upper, self.compute_lower)

    @property
    def data_dependent(self) -> bool:
        """Whether values decide anything here: DMAs to count, or work a branch or loop may skip."""
        return bool(self.copies) or self.compute_upper or self.compute_lower

    def add(self, other: "StepCounts", times: int = 1) -> None:
        self.copies += other.copies * times
        self.bytes += other.bytes * times
        self.notes |= other.notes
        self.upper_bound |= other.upper_bound
        self.lower_bound |= other.lower_bound
        self.compute.add(other.compute, times)
        self.compute_upper |= other.compute_upper
        self.compute_lower |= other.compute_lower


def _kind(upper: bool, lower: bool) -> str:
    if upper and lower:
        return "bounded both ways"
    return "upper bound" if upper else "lower bound" if lower else "exact"


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


def count_step(jaxpr: Any, scalars: Scalars | None = None, mxu: int = 128) -> StepCounts:
    """The HBM copies one execution of ``jaxpr`` (a kernel body) starts, and the work it does. With
    ``scalars`` (one grid step's known values), ``pl.when`` branches and ``while`` trip counts that
    those values decide are taken exactly; otherwise they are bounded (see the module docstring)."""
    from .body_counts import sub_jaxprs

    env = scalars or Scalars((), (), {})
    out = StepCounts()
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "dma_start":
            moved, counted = _dma(eqn)
            if counted:
                out.copies += 1
                out.bytes += moved
            _forget_dst(eqn, env)
        elif name == "pallas_call":
            continue
        elif count_leaf(eqn, out.compute, mxu):
            env.step(eqn)  # scalar arithmetic (an index, a length) may decide a branch below
        elif name == "scan":  # the same count every iteration: only its constants are known inside
            body = eqn.params["jaxpr"]
            n = int(eqn.params["num_consts"])
            inner = env.child(zip(body.jaxpr.invars[:n], [env.get(v) for v in eqn.invars[:n]]),
                              links=zip(body.jaxpr.invars[:n], eqn.invars[:n]))
            out.add(count_step(body.jaxpr, inner, mxu), int(eqn.params["length"]))
        elif name == "while":
            out.add(_while(eqn, env, mxu))
        elif name == "cond":
            out.add(_cond(eqn, env, mxu))
        elif name in ("pjit", "jit", "closed_call", "run_scoped") and len(list(sub_jaxprs(eqn.params))) == 1:
            (sub,) = sub_jaxprs(eqn.params)
            inner = env.child(zip(sub.invars, [env.get(v) for v in eqn.invars]), links=zip(sub.invars, eqn.invars))
            out.add(count_step(sub, inner, mxu))
            for ov, iv in zip(eqn.outvars, sub.outvars):
                got = inner.get(iv)
                if got is not None:
                    env.values[ov] = got
        else:
            subs = list(sub_jaxprs(eqn.params))
            for sub in subs:
                out.add(count_step(sub, env.child(()), mxu))
            if not subs:
                env.step(eqn)
    return out


def _cond(eqn: Any, env: Scalars, mxu: int) -> StepCounts:
    """A ``pl.when``/``cond``: the branch the known values select; else each branch counted on a
    private copy of the ref tables and the largest taken (DMA bytes and work bounded separately)."""
    branches = eqn.params["branches"]
    index = env.get(eqn.invars[0])
    operands = [env.get(v) for v in eqn.invars[1:]]
    if index is not None and np.size(index) == 1:
        taken = int(np.clip(int(np.asarray(index).reshape(-1)[0]), 0, len(branches) - 1))
        b = branches[taken]
        inner = env.child(zip(b.jaxpr.invars, operands), links=zip(b.jaxpr.invars, eqn.invars[1:]))
        counted = count_step(b.jaxpr, inner, mxu)
        for ov, iv in zip(eqn.outvars, b.jaxpr.outvars):  # what the branch returns (a next index) is known too
            got = inner.get(iv)
            if got is not None:
                env.values[ov] = got
        return counted
    scopes = [env.child(zip(b.jaxpr.invars, operands), refs=dict(env.refs),
                        links=zip(b.jaxpr.invars, eqn.invars[1:])) for b in branches]
    counted = [count_step(b.jaxpr, scope, mxu) for b, scope in zip(branches, scopes)]
    for ref in list(env.refs):  # a ref some branch may have changed is unknown after the cond
        if any(scope.refs.get(ref) is not env.refs[ref] for scope in scopes):
            del env.refs[ref]
    return largest_branch(counted)


def largest_branch(counted: list[StepCounts]) -> StepCounts:
    """Undecided branches: the one moving the most bytes, with the most work of any (each bounded
    and said so where the branches differ). Shared with runner/mosaic_counts.py."""
    dmas_differ = len({(c.copies, c.bytes) for c in counted}) > 1
    work_differs = len({(c.compute.flops, c.compute.transcendentals) for c in counted}) > 1
    out = max(counted, key=lambda c: c.bytes)
    work = max(counted, key=lambda c: (c.compute.flops, c.compute.transcendentals))
    out.compute, out.compute_upper, out.compute_lower = work.compute, work.compute_upper, work.compute_lower
    out.notes |= work.notes
    if dmas_differ:
        out.upper_bound = True
        out.notes.add("DMAs under pl.when/cond counted on every execution (the largest branch): an upper bound")
    if work_differs:
        out.compute_upper = True
        out.notes.add("a pl.when/cond body whose condition the known values do not decide: its largest branch "
                      "counted on every grid step (an upper bound)")
    return out


def _while(eqn: Any, env: Scalars, mxu: int = 128) -> StepCounts:
    """A while loop's DMAs and work: simulated trip by trip while its condition is known, else its
    body once (a lower bound)."""
    p = eqn.params
    cond, body = p["cond_jaxpr"].jaxpr, p["body_jaxpr"].jaxpr
    nc, nb = int(p["cond_nconsts"]), int(p["body_nconsts"])
    values = [env.get(v) for v in eqn.invars]
    cconsts, bconsts, carry = values[:nc], values[nc:nc + nb], values[nc + nb:]
    out = StepCounts()
    for _ in range(MAX_TRIPS):
        c = env.child(zip(cond.invars, cconsts + carry), links=zip(cond.invars[:nc], eqn.invars[:nc]))
        for e in cond.eqns:
            c.step(e)
        go = c.get(cond.outvars[0])
        if go is None:
            break
        if not bool(np.asarray(go).reshape(-1)[0]):
            for ov, value in zip(eqn.outvars, carry):  # the loop's results, where known
                if value is not None:
                    env.values[ov] = value
            return out  # exact
        b = env.child(zip(body.invars, bconsts + carry), links=zip(body.invars[:nb], eqn.invars[nc:nc + nb]))
        out.add(count_step(body, b, mxu))
        carry = [b.get(v) for v in body.outvars]
    scope = env.child(zip(body.invars, bconsts + [None] * len(carry)), refs=dict(env.refs),
                      links=zip(body.invars[:nb], eqn.invars[nc:nc + nb]))
    once = count_step(body, scope, mxu)
    for ref in list(env.refs):  # the loop may run any number of times: what it stores is unknown
        if scope.refs.get(ref) is not env.refs[ref]:
            del env.refs[ref]
    out.add(counted_once(once))
    return out


def counted_once(once: StepCounts) -> StepCounts:
    """A loop body counted once because the known values do not give its trip count: marked a lower
    bound where it copies or works. Shared with runner/mosaic_counts.py."""
    if once.copies:
        once.lower_bound = True
        once.notes.add("DMAs in a while loop whose trip count the known values do not decide: counted once "
                       "(a lower bound)")
    if once.compute.flops or once.compute.transcendentals:
        once.compute_lower = True
        once.notes.add("a while loop whose trip count the known values do not decide: its work counted once "
                       "(a lower bound)")
    return once


MAX_STEPS = 256  # grid steps walked one by one (0.1 ms to 0.2 s each: a paged kernel simulates its page loop); a larger grid is sampled and scaled


def grid_sample(grid: tuple[int, ...], limit: int = MAX_STEPS) -> np.ndarray:
    """The flat grid steps walked: all of them up to ``limit``. Else whole runs of the innermost axes
    (where masks and page tables vary: a query block's K/V blocks, a sequence's pages) at a sample
    of the outer positions, one drawn at random (a fixed seed) from each equal stretch of them, so
    a kernel whose work depends only on its inner axes is counted exactly; where even the last axis
    alone is over ``limit``, one step from each of ``limit`` equal stretches of the grid."""
    steps = int(np.prod(grid, dtype=np.int64)) if grid else 1
    if steps <= limit:
        return np.arange(steps, dtype=np.int64)
    inner = 1
    for size in reversed(grid):
        if inner * size > limit:
            break
        inner *= size
    outer_steps = steps // inner
    picks = _stratified(outer_steps, max(limit // inner, 1)) if inner > 1 else _stratified(steps, limit)
    if inner == 1:
        return picks
    return (picks[:, None] * inner + np.arange(inner, dtype=np.int64)[None, :]).reshape(-1)


def _stratified(n: int, k: int) -> np.ndarray:
    """``k`` of ``range(n)``: one drawn at random (seed 0) from each of k equal stretches."""
    if n <= k:
        return np.arange(n, dtype=np.int64)
    edges = np.linspace(0, n, k + 1)
    draw = np.random.default_rng(0).random(k)
    return np.minimum((edges[:-1] + draw * np.diff(edges)).astype(np.int64), n - 1)


def count_over_grid(body: Any, grid: tuple[int, ...], prefetch: list[np.ndarray | None],
                    mxu: int = 128, vmapped: tuple[int, ...] = ()) -> tuple[StepCounts | None, str | None]:
    """The kernel's own DMAs and its work over the whole grid: the body walked at each grid step with
    that step's program ids and the scalar-prefetch values, so branches and loop trip counts those
    decide are exact. None when nothing in the body depends on values (no DMAs of its own, no branch
    or loop whose work differs): then every step does the same work (body_counts.count_body). Also
    returns a note when the grid was sampled. ``vmapped``: grid axes ``jax.vmap`` added in front of
    the kernel's own (``GridMapping.vmapped_dims``); the body's ``pl.program_id(k)`` counts only
    the others, so each step's program ids leave those out."""
    if not count_step(body, mxu=mxu).data_dependent:
        return None, None
    total = StepCounts()
    steps = int(np.prod(grid, dtype=np.int64)) if grid else 1
    refs = {var: value for var, value in zip(body.invars, prefetch) if value is not None}
    picks = grid_sample(tuple(grid))
    own = [d for d in range(len(grid)) if d not in set(vmapped)]
    kernel_grid = tuple(grid[d] for d in own)
    for flat in picks:
        point = tuple(int(i) for i in np.unravel_index(int(flat), grid)) if grid else ()
        total.add(count_step(body, Scalars(kernel_grid, tuple(point[d] for d in own), refs), mxu))
    return total, scaled(total, steps, len(picks))


def scaled(total: StepCounts, steps: int, walked: int) -> str | None:
    """Scale counts summed over ``walked`` of ``steps`` grid steps to the whole grid (in place); the
    note that says so, or None when every step was walked. Shared with runner/mosaic_counts.py."""
    if steps <= walked:
        return None
    scale = steps / walked
    total.copies, total.bytes = round(total.copies * scale), round(total.bytes * scale)
    work = total.compute
    work.flops, work.mxu_flops = round(work.flops * scale), round(work.mxu_flops * scale)
    work.transcendentals = round(work.transcendentals * scale)
    work.dots = [(f * scale, d, e) for f, d, e in work.dots]
    return (f"the kernel body walked at {walked} of {steps} grid steps (whole runs of the inner grid axes at "
            "a stratified sample of the outer ones), scaled")
