"""Refs viewed through a reshape or a bitcast, in jax's TPU interpreter (worker side).

jax 0.10's interpreter turns a ref's transforms into one range of its buffer, and knows only indexers: a
kernel that views a ref through ``ref.reshape(...)`` or ``ref.bitcast(...)`` (ragged paged attention's kv
pages, the deepseek v4 kernels, gmm v2) stops with ``'ReshapeTransform' object has no attribute 'indices'``
and tier 3 could not check it at all (PLS306). ``install`` wraps the interpreter's ``get``, ``store`` and
``swap`` (the kernel's loads and stores, and every DMA's read and write): the indexers before the first
view are the range read from the buffer as before (out-of-bounds reads and races are checked there), the
view and what follows it are applied to those values with numpy, and a write goes back through the same
steps undone (a read-modify-write of that range). A bitcast packs along the second-minor dim as Mosaic's
does (``pltpu.bitcast``). A masked store (``pltpu.store(ref, val, mask=...)``) in bounds is made the same way:
jax's own marks every row past the mask's second dim out of bounds (it clears ``mask[n:]`` on the first axis
for each dim's extent ``n``), so a (16, 2, 128) masked store failed as "Out-of-bounds masked swap".
Every access first asks ``interpret_deadlock.tick`` whether the run is past its time limit.
Idempotent; a jax without these functions is left alone.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .interpret_deadlock import tick

_VIEWS = ("ReshapeTransform", "BitcastTransform")
VIEWED: set[str] = set()  # buffers (as the race reports write their keys) accessed through a view this run


def unviewed_races(reports: list[str]) -> tuple[list[str], int]:
    """The race reports about buffers no view touched, and how many were left out: the interpreter
    records an access as one box, and a view's elements (a strided slot, a packed row) are not one, so a
    race on a viewed buffer may be two boxes meeting where no element does."""
    kept = [r for r in reports if not any(key in r for key in VIEWED)]
    return kept, len(reports) - len(kept)


def install() -> bool:
    """Wrap the interpreter's get/store/swap once; False when this jax has no such functions."""
    try:
        from jax._src.pallas.mosaic.interpret import interpret_pallas_call as ipc
    except ImportError:
        return False
    if getattr(ipc, "_pallasite_views", False):
        return True
    if not all(hasattr(getattr(ipc, n, None), "__wrapped__") for n in ("get", "store", "swap")) \
            or not hasattr(ipc, "fail_on_exception"):
        return False
    get0, store0, swap0 = ipc.get.__wrapped__, ipc.store.__wrapped__, ipc.swap.__wrapped__

    @functools.wraps(get0)
    def get(token, device_id, local_core_id, memory_space, buffer_id, transforms, *args, **kwargs):
        tick()
        cut = _first_view(transforms)
        whole = None if cut is None else _peek(ipc, device_id, local_core_id, memory_space, buffer_id, transforms[:cut])
        if whole is None:  # no view, or the range itself is past the end: jax's own read and verdict
            return get0(token, device_id, local_core_id, memory_space, buffer_id, transforms, *args, **kwargs)
        rest = _concrete(transforms[cut:])
        box = _box(whole, rest)
        token, part = get0(token, device_id, local_core_id, memory_space, buffer_id, _boxed(transforms[:cut], whole, box),
                           *args, **kwargs)
        whole[box] = part
        return token, _through(whole, rest)

    @functools.wraps(store0)
    def store(token, device_id, local_core_id, memory_space, buffer_id, transforms, val, *args, **kwargs):
        tick()
        cut = _first_view(transforms)
        whole = None if cut is None else _peek(ipc, device_id, local_core_id, memory_space, buffer_id, transforms[:cut])
        if whole is None:
            return store0(token, device_id, local_core_id, memory_space, buffer_id, transforms, val, *args, **kwargs)
        rest = _concrete(transforms[cut:])
        box = _box(whole, rest)
        whole = _written(whole, rest, np.asarray(val))
        return store0(token, device_id, local_core_id, memory_space, buffer_id, _boxed(transforms[:cut], whole, box),
                      whole[box], *args, **kwargs)

    @functools.wraps(swap0)
    def swap(token, device_id, local_core_id, memory_space, buffer_id, transforms, val, mask, *, source_info=None):
        tick()
        cut = _first_view(transforms)
        prefix = transforms if cut is None else transforms[:cut]
        whole = None if cut is None and mask is None else _peek(ipc, device_id, local_core_id, memory_space,
                                                                 buffer_id, prefix)
        if whole is None:
            return swap0(token, device_id, local_core_id, memory_space, buffer_id, transforms, val, mask,
                         source_info=source_info)
        rest = [] if cut is None else _concrete(transforms[cut:])
        box = _box(whole, rest)
        old = _through(whole, rest)
        new = np.asarray(val) if mask is None else np.where(np.asarray(mask), np.asarray(val), old)
        whole = _written(whole, rest, new.astype(old.dtype))
        token, _ = swap0(token, device_id, local_core_id, memory_space, buffer_id, _boxed(prefix, whole, box),
                         whole[box], None, source_info=source_info)
        return token, old

    ipc.get, ipc.store, ipc.swap = (ipc.fail_on_exception(f) for f in (get, store, swap))
    ipc._pallasite_views = True
    return True


def _peek(ipc: Any, device_id: Any, local_core_id: Any, memory_space: Any, buffer_id: Any,
          prefix: Any) -> np.ndarray | None:
    """The values at the indexers' range, read without a clock tick or a race record (the access itself is
    recorded, on the part of the range it touches); None when the range is not wholly in the buffer."""
    from jax._src.pallas.mosaic.interpret import utils

    space = ipc.TPU_MEMORY_SPACE_NAMES[int(memory_space)]
    device, core = int(device_id), int(local_core_id)
    memory = ipc._get_shared_memory()
    key = (space, int(buffer_id), device, ipc._local_core_id_or_zero_if_hbm(core, space))
    VIEWED.add(f"{key}[")
    rng = utils.to_range(_concrete(prefix))
    ret, (shape, _), _ = memory.get_buffer_content(key, rng, memory.get_global_core_id(device, core),
                                                   increment_clock=False)
    if ret is None or not _whole_range(rng, shape, ret.shape):
        return None
    return ret


def _whole_range(rng: tuple, shape: tuple, got: tuple) -> bool:
    """Whether reading ``rng`` of a buffer of ``shape`` gave every element it names (none past the end)."""
    want = [len(range(*r.indices(10**12))) if isinstance(r, slice) else None for r in rng]
    want = [w for w in want if w is not None] + list(shape[len(rng):])
    return tuple(want) == tuple(got)


def _box(whole: np.ndarray, rest: list[Any]) -> tuple[slice, ...]:
    """The smallest box of the range that the views and indexers after it touch: reads and writes are
    recorded on it, so a DMA into one slot of a viewed buffer does not race with the kernel using another."""
    if not whole.shape:
        return ()
    touched = _positions(whole, rest)
    if touched.size == 0:
        return tuple(slice(0, n) for n in whole.shape)
    coords = np.unravel_index(touched.ravel(), whole.shape)
    return tuple(slice(int(c.min()), int(c.max()) + 1) for c in coords)


def _positions(whole: np.ndarray, rest: list[Any]) -> np.ndarray:
    """For each element of the view, the flat positions in ``whole`` it is made of (a trailing axis: one
    position, or the several a bitcast packs into one element)."""
    pos, dtype = np.arange(whole.size).reshape(*whole.shape, 1), whole.dtype
    for t in rest:
        kind = type(t).__name__
        if kind == "ReshapeTransform":
            pos = pos.reshape(*tuple(t.shape), pos.shape[-1])
        elif kind == "BitcastTransform":
            src, dst = dtype.itemsize, np.dtype(t.dtype).itemsize
            *lead, m, n, g = pos.shape
            if src < dst:  # p rows of the source pack into one row of the view
                p = dst // src
                pos = pos.reshape(*lead, m // p, p, n, g).swapaxes(-3, -2).reshape(*lead, m // p, n, p * g)
            elif src > dst:  # one row of the source unpacks into p rows of the view
                pos = np.repeat(pos[..., :, None, :, :], src // dst, axis=-3).reshape(*lead, m * (src // dst), n, g)
            dtype = np.dtype(t.dtype)
        else:
            pos = _step(pos, t)[0]
    return pos


def _boxed(prefix: Any, whole: np.ndarray, box: tuple[slice, ...]) -> list[Any]:
    """The indexers ``prefix`` and one more naming ``box`` of the range they give."""
    from jax._src.state import indexing

    last = indexing.NDIndexer(indices=tuple(indexing.Slice(b.start, b.stop - b.start, 1) for b in box),
                              shape=whole.shape, int_indexer_shape=())
    return [*prefix, last]


def _first_view(transforms: Any) -> int | None:
    kinds = [type(t).__name__ for t in (transforms or ())]
    return next((i for i, k in enumerate(kinds) if k in _VIEWS), None)


def _concrete(transforms: Any) -> list[Any]:
    import jax

    return list(jax.tree.map(int, list(transforms)))


def _through(whole: np.ndarray, transforms: list[Any]) -> np.ndarray:
    """The values ``whole`` shows through ``transforms`` (views and indexers, in order)."""
    arr = whole
    for t in transforms:
        arr = _step(arr, t)[0]
    return arr


def _written(whole: np.ndarray, transforms: list[Any], value: np.ndarray) -> np.ndarray:
    """``whole`` with ``value`` written where ``transforms`` point (each step undone on the way back)."""
    steps = []
    arr = whole
    for t in transforms:
        arr, undo = _step(arr, t)
        steps.append(undo)
    arr = np.broadcast_to(value, arr.shape).astype(arr.dtype)
    for undo in reversed(steps):
        arr = undo(arr)
    return arr


def _step(arr: np.ndarray, t: Any):
    """(the view of ``arr`` one transform makes, a function putting a value of that view back into ``arr``)."""
    kind = type(t).__name__
    if kind == "ReshapeTransform":
        shape = arr.shape
        return arr.reshape(tuple(t.shape)), lambda v: np.asarray(v).reshape(shape)
    if kind == "BitcastTransform":
        dtype = arr.dtype
        return _bitcast(arr, np.dtype(t.dtype)), lambda v: _bitcast(np.asarray(v), dtype)
    from jax._src.pallas.mosaic.interpret import utils

    index = tuple(utils._transform_slice_or_index(i) for i in t.indices)

    def put(v: np.ndarray, parent: np.ndarray = arr) -> np.ndarray:
        out = parent.copy()
        out[index] = v
        return out
    return arr[index], put


def _bitcast(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Mosaic's ref bitcast: the second-minor dim packs or unpacks (``pltpu.bitcast``'s lowering)."""
    src, dst = x.dtype.itemsize, dtype.itemsize
    x = np.ascontiguousarray(x)
    if src == dst:
        return x.view(dtype)
    *lead, m, n = x.shape
    if src < dst:
        packing = dst // src
        y = np.ascontiguousarray(np.swapaxes(x.reshape(*lead, m // packing, packing, n), -1, -2))
        return y.view(dtype).reshape(*lead, m // packing, n)
    packing = src // dst
    y = x[..., None].view(dtype)  # (..., m, n, packing)
    return np.ascontiguousarray(np.swapaxes(y, -1, -2)).reshape(*lead, m * packing, n)
