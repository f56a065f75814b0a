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

``count_over_grid`` walks the body once per grid step (up to MAX_STEPS, else an even sample scaled
to the grid).

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


_UNFLATTENED: dict[int, tuple[Any, Any]] = {}  # id(eqn) -> (eqn, its unflattened operands): static per equation


def _unflatten(eqn: Any, leaves: Any) -> Any:
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
    args = _unflatten(eqn, eqn.invars)
    src, dst = args[0], args[1]
    device_id = args[4] if len(args) > 4 else None  # (src, dst, dst_sem, src_sem, device_id)
    if device_id is not None:
        return 0, False
    if not (any(h in _space(src) for h in _HBM) or any(h in _space(dst) for h in _HBM)):
        return 0, False
    return _nbytes(dst) or _nbytes(src), True


SMALL = 4096  # scalar work is evaluated when every value involved has at most this many elements
MAX_TRIPS = 1 << 16  # a while loop simulated for more trips than this is counted as a bound


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
        transforms = _unflatten(eqn, eqn.invars[2:])
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
        transforms = _unflatten(eqn, eqn.invars[1:])
        index = self._index(transforms) if transforms else ()
        if index is None:
            return
        try:
            value = table[index] if index else table
        except (IndexError, TypeError):
            return
        self.values[eqn.outvars[0]] = np.asarray(value)


def _forget_dst(eqn: Any, env: Scalars) -> None:
    env.forget([_unflatten(eqn, eqn.invars)[1]])


def count_dmas(jaxpr: Any, scalars: Scalars | None = None) -> DmaCounts:
    """The HBM copies one execution of ``jaxpr`` (a kernel body) starts. With ``scalars`` (one
    grid step's known values), ``pl.when`` branches and ``while`` trip counts that those values
    decide are taken exactly; otherwise they are bounded (see the module docstring)."""
    from .cost_model import sub_jaxprs

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
