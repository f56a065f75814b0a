"""Memory of a Mosaic kernel as numpy: buffers, refs, loads and stores, DMAs and semaphores (worker side).

A ``Buffer`` is one allocation (an HBM operand, a VMEM block, a scratch array, a semaphore array); a
``Ref`` a memref value, a numpy view into a buffer (``tpu.memref_slice``/``squeeze``/``reshape`` and
same-width ``memref_bitcast`` are views, so a store through any of them lands in the buffer). A
width-changing ``memref_bitcast`` is a ``PackedRef``: rows of the second-minor dim packed into wider
words (first row in the low bits), read and written through its narrow source.

Every access is bounds-checked (a slice, load or store past a ref's edge is a KernelFault at the op:
VMEM has no bounds checks and a DMA past HBM faults); an access's index is planned at compile time
(``index_plan``: the ref's shape is its type's, constant starts checked once). DMAs are modelled as strictly asynchronous:
``tpu.enqueue_dma`` snapshots the source and the target is written only by the ``tpu.wait_dma2``
that consumes its semaphore (FIFO per semaphore, counted in bytes); reading or writing a DMA's
target, or writing its source, while it is in flight is a KernelFault, as is a wait no DMA in flight
can satisfy (the TPU would hang) and a DMA into memory the caller sees (an operand in HBM, an output's
block) left unwaited at the kernel's end (one into scratch lands unseen); a remote DMA's device or
core id is Unsupported (one chip is interpreted). Regular semaphores count; a ``tpu.sem_wait`` for
more than was signalled is a hang, a KernelFault (one core runs: nothing else would signal it).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..program.mlir_tree import Op, int_list, source_line
from .faults import describe, unsupported
from .mosaic_plan import LIMITS, Compiler, State, Step
from .mosaic_values import BOOL, SEMAPHORE, dtype_of, flag, garbage, ints
from .mosaic_vector import pack_rows

Builder = Callable[[Op, Compiler], Step]


class Buffer:
    """One allocation: its array (the memref's shape and element dtype), what it is, its memory space,
    whether the caller sees it (``observable``: an operand in HBM, an output's VMEM block), the DMAs in
    flight into it and out of it (``inflight``: how many, the fast test of every access)."""

    __slots__ = ("data", "label", "space", "observable", "inflight", "incoming", "outgoing")

    def __init__(self, data: np.ndarray, label: str, space: str, observable: bool = False) -> None:
        self.data = data
        self.label = label
        self.space = space
        self.observable = observable
        self.inflight = 0
        self.incoming: list[Dma] = []
        self.outgoing: list[Dma] = []


class Ref:
    """A memref value: a view into a buffer."""

    __slots__ = ("arr", "buf")

    def __init__(self, arr: np.ndarray, buf: Buffer) -> None:
        self.arr = arr
        self.buf = buf

    @property
    def shape(self) -> tuple[int, ...]:
        return self.arr.shape

    @property
    def dtype(self) -> np.dtype:
        return self.arr.dtype

    @property
    def nbytes(self) -> int:
        return int(self.arr.size) * self.arr.dtype.itemsize

    def memory(self, index: tuple[Any, ...] = ()) -> np.ndarray:
        """The buffer memory ``index`` covers (for the checks of DMAs in flight)."""
        return self.arr[index] if index else self.arr

    def read(self, index: tuple[Any, ...]) -> np.ndarray:
        return np.array(self.arr[index], copy=True)

    def write(self, index: tuple[Any, ...], value: Any) -> None:
        self.arr[index] = value

    def sliced(self, index: tuple[slice, ...]) -> "Ref":
        return Ref(self.arr[index], self.buf)

    def reshaped(self, shape: tuple[int, ...]) -> "Ref":
        view = self.arr.view()
        view.shape = shape  # raises when the view cannot be reshaped without a copy
        return Ref(view, self.buf)

    def bitcast(self, dtype: np.dtype, shape: tuple[int, ...]) -> "Ref":
        if dtype.itemsize == self.arr.dtype.itemsize:
            return Ref(self.arr.view(dtype).reshape(shape), self.buf)
        if dtype.itemsize > self.arr.dtype.itemsize and len(shape) >= 2:
            return PackedRef(self, dtype, shape)
        raise TypeError(f"a bitcast of {describe(self.arr)} to narrower {dtype}")


class PackedRef(Ref):
    """A narrow ref seen as wider words: ``ratio`` rows of its second-minor dim per row."""

    __slots__ = ("src", "ratio", "_dtype", "_shape")

    def __init__(self, src: Ref, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        super().__init__(src.arr, src.buf)
        self.src, self._dtype, self._shape = src, dtype, shape
        self.ratio = dtype.itemsize // src.dtype.itemsize

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def nbytes(self) -> int:
        return int(np.prod(self._shape)) * self._dtype.itemsize

    def _source(self, index: tuple[Any, ...]) -> tuple[Any, ...]:
        full = list(index) + [slice(None)] * (len(self._shape) - len(index))
        rows = np.arange(self._shape[-2])[full[-2]]
        full[-2] = (rows[:, None] * self.ratio + np.arange(self.ratio)).reshape(-1)
        return tuple(full)

    def memory(self, index: tuple[Any, ...] = ()) -> np.ndarray:
        return self.src.arr

    def read(self, index: tuple[Any, ...]) -> np.ndarray:
        narrow = self.src.arr[self._source(index)]
        return pack_rows(narrow, self._dtype)

    def write(self, index: tuple[Any, ...], value: Any) -> None:
        target = self._source(index)
        shape = self.src.arr[target].shape
        wide = np.broadcast_to(np.asarray(value, self._dtype), shape[:-2] + (shape[-2] // self.ratio, shape[-1]))
        self.src.arr[target] = pack_rows(wide, self.src.dtype)

    def sliced(self, index: tuple[slice, ...]) -> "Ref":
        full = list(index) + [slice(None)] * (len(self._shape) - len(index))
        rows = full[-2]
        if rows.step not in (None, 1):
            raise TypeError("a strided slice of a bitcast ref")
        start = (rows.start or 0) * self.ratio
        full[-2] = slice(start, start + (rows.stop - (rows.start or 0)) * self.ratio)
        src = self.src.sliced(tuple(full))
        return PackedRef(src, self._dtype, tuple(len(range(*s.indices(n))) for s, n in zip(index, self._shape))
                         + self._shape[len(index):])

    def reshaped(self, shape: tuple[int, ...]) -> "Ref":
        raise TypeError("a reshape of a bitcast ref")

    def bitcast(self, dtype: np.dtype, shape: tuple[int, ...]) -> "Ref":
        return self.src.bitcast(dtype, shape) if dtype == self.src.dtype else PackedRef(self.src, dtype, shape)


def region(ref: Ref, starts: list[int], sizes: tuple[int, ...], strides: list[int] | None, op: Op,
           c: Compiler) -> tuple[slice, ...]:
    """The index of a box of ``sizes`` at ``starts`` (every ``strides``) of ``ref``; a KernelFault at
    ``op`` if any part of it lies outside the ref (VMEM has no bounds checks; a DMA past HBM faults)."""
    shape = ref.shape
    if len(starts) != len(shape):
        raise c.fault(op, f"{len(starts)} indices for a ref of rank {len(shape)}")
    if strides:
        return _strided_region(shape, starts, sizes, strides, op, c)
    for s, n, dim in zip(starts, sizes, shape):
        if (s < 0 or s + n > dim) and n:
            axis = next(i for i, (a, b, d) in enumerate(zip(starts, sizes, shape)) if a < 0 or a + b > d)
            raise c.fault(op, f"out-of-bounds access: elements {starts[axis]}..{starts[axis] + sizes[axis] - 1} of "
                              f"axis {axis} of a ref of shape {tuple(shape)}")
    return tuple(slice(s, s + n) for s, n in zip(starts, sizes))


def _strided_region(shape: tuple[int, ...], starts: list[int], sizes: tuple[int, ...], strides: list[int], op: Op,
                    c: Compiler) -> tuple[slice, ...]:
    out = []
    for axis, (s, n, step, dim) in enumerate(zip(starts, sizes, strides, shape)):
        last = s + (n - 1) * step
        if n and (s < 0 or last >= dim or step <= 0):
            raise c.fault(op, f"out-of-bounds access: elements {s}..{last} (every {step}) of axis {axis} of a ref of "
                              f"shape {tuple(shape)}")
        out.append(slice(s, s + n * step, step))
    return tuple(out)


# --------------------------------------------------------------------------- DMAs in flight


class Dma:
    """One DMA in flight: the source's snapshot, the target ref, the semaphore it signals (its cell's
    address), the byte bounds of both sides (the fast overlap test) and the op that started it."""

    __slots__ = ("data", "dst", "key", "nbytes", "op", "src_buf", "src_memory", "dst_memory", "src_bounds",
                 "dst_bounds")

    def __init__(self, data: np.ndarray, dst: Ref, key: int, op: Op, src: Ref) -> None:
        self.data, self.dst, self.key, self.op = data, dst, key, op
        self.nbytes = dst.nbytes
        self.src_buf, self.src_memory, self.dst_memory = src.buf, src.memory(), dst.memory()
        self.src_bounds, self.dst_bounds = _bounds(self.src_memory), _bounds(self.dst_memory)


def _bounds(a: np.ndarray) -> tuple[int, int]:
    """The byte range a view spans, [lo, hi)."""
    lo = hi = int(a.__array_interface__["data"][0])
    if a.flags.c_contiguous:
        return lo, lo + a.nbytes
    for n, stride in zip(a.shape, a.strides):
        if n == 0:
            return lo, lo
        if stride < 0:
            lo += stride * (n - 1)
        else:
            hi += stride * (n - 1)
    return lo, hi + a.itemsize


def _overlap(a: np.ndarray, bounds: tuple[int, int], b: np.ndarray, other: tuple[int, int]) -> bool:
    if bounds[1] <= other[0] or other[1] <= bounds[0]:
        return False
    try:
        return bool(np.shares_memory(a, b, max_work=200_000))
    except np.exceptions.TooHardError:
        return True


def check_access(ref: Ref, index: tuple[Any, ...], st: State, c: Compiler, op: Op, writing: bool) -> None:
    """A KernelFault if the access touches a DMA's target (or, writing, its source) while it is in flight."""
    buf = ref.buf
    memory = ref.memory(index)
    bounds = _bounds(memory)
    lo, hi = bounds
    for d in buf.incoming:
        other = d.dst_bounds
        if lo < other[1] and other[0] < hi and _overlap(memory, bounds, d.dst_memory, other):
            what = "writes" if writing else "reads"
            raise c.fault(op, f"{what} {buf.label} while a DMA into it is in flight (started at "
                              f"{_at(d.op)}, not yet waited): on a TPU the data is not there yet")
    if writing:
        for d in buf.outgoing:
            if _overlap(memory, bounds, d.src_memory, d.src_bounds):
                raise c.fault(op, f"writes {buf.label} while a DMA out of it is in flight (started at "
                                  f"{_at(d.op)}): a TPU may copy either value")


def _at(op: Op) -> str:
    return source_line(op) or f"op {op.name}"


def _key(sem: Ref) -> int:
    return int(sem.arr.__array_interface__["data"][0])


def start(d: Dma, st: State) -> None:
    st.dmas.setdefault(d.key, []).append(d)
    st.inflight += 1
    d.dst.buf.incoming.append(d)
    d.dst.buf.inflight += 1
    d.src_buf.outgoing.append(d)
    d.src_buf.inflight += 1


def complete(d: Dma, st: State) -> None:
    """The DMA lands: its target written, its records dropped."""
    st.dmas[d.key].remove(d)
    st.inflight -= 1
    d.dst.buf.incoming.remove(d)
    d.dst.buf.inflight -= 1
    d.src_buf.outgoing.remove(d)
    d.src_buf.inflight -= 1
    d.dst.write((), d.data.reshape(d.dst.shape))


def finish(st: State, c: Compiler) -> None:
    """The kernel's end: a DMA still in flight into memory the caller sees (an operand in HBM, an output's
    block) is a fault (when it lands is undefined); one into scratch lands unseen (a prefetch for a step
    that never came: jax's ragged paged attention leaves those when the last query blocks are empty)."""
    for d in [d for waiting in st.dmas.values() for d in waiting]:
        if d.dst.buf.observable:
            raise c.fault(d.op, f"a DMA into {d.dst.buf.label} is never waited by the kernel's end: when it lands "
                                "is not defined (wait for it before the kernel returns)")
        complete(d, st)


# --------------------------------------------------------------------------- building steps


def _segments(op: Op, default: list[int]) -> list[tuple[int, ...]]:
    """The operand groups of an op with optional/variadic operands (``operandSegmentSizes``)."""
    sizes = int_list(op.attrs["operandSegmentSizes"]) if "operandSegmentSizes" in op.attrs else default
    out, at = [], 0
    for n in sizes:
        out.append(op.operands[at:at + n])
        at += n
    return out


def index_plan(ref_id: int, starts: tuple[int, ...], sizes: tuple[int, ...], strides: list[int] | None, op: Op,
               c: Compiler) -> Callable[[list], tuple[slice, ...]]:
    """``env -> the index`` of a box of ``sizes`` at ``starts`` of the ref ``ref_id``, decided as far as
    it can be at compile time: the ref's shape is its memref type's, a constant start is checked once;
    only the dynamic starts are read and checked at run time (a KernelFault past the edge)."""
    shape = c.type(ref_id).shape
    if None in shape or len(starts) != len(shape):
        return lambda env: region(env[ref_id], [int(env[v]) for v in starts], sizes, strides, op, c)
    steps = strides or [1] * len(shape)
    axes: list[Any] = []
    dynamic = []
    for axis, (v, n, dim, step) in enumerate(zip(starts, sizes, shape, steps)):
        const = c.presets.get(v)
        if const is None:
            dynamic.append((axis, v, n, dim, step))
            axes.append(None)
            continue
        s0 = int(const)
        if n and (s0 < 0 or s0 + (n - 1) * step >= dim or step <= 0):
            return lambda env: region(env[ref_id], [int(env[v]) for v in starts], sizes, strides, op, c)
        axes.append(slice(s0, s0 + n * step, step if step != 1 else None))
    if not dynamic:
        fixed = tuple(axes)
        return lambda env: fixed

    def index(env: list) -> tuple[slice, ...]:
        out = list(axes)
        for axis, v, n, dim, step in dynamic:
            s0 = int(env[v])
            if n and (s0 < 0 or s0 + (n - 1) * step >= dim):
                region(env[ref_id], [int(env[u]) for u in starts], sizes, strides, op, c)  # raises, saying where
            out[axis] = slice(s0, s0 + n * step, step if step != 1 else None)
        return tuple(out)

    return index


def _vector_load(op: Op, c: Compiler) -> Step:
    if op.name == "tpu.vector_load":
        base, idx, mask = _segments(op, [1, len(op.operands) - 1, 0])
        strides = ints(op.attrs["strides"]) if "strides" in op.attrs else []
        if mask:
            raise unsupported(op, c.kernel, "a masked load")
        (ref_id,) = base
    else:
        ref_id, idx, strides = op.operands[0], op.operands[1:], []
    shape = tuple(int(d or 0) for d in c.type(op.results[0]).shape)
    rank = len(c.type(ref_id).shape)
    full = (1,) * (rank - len(shape)) + shape
    r = op.results[0]
    where = index_plan(ref_id, tuple(idx), full, strides or None, op, c)

    def run(env: list, st: State) -> None:
        ref = env[ref_id]
        index = where(env)
        if ref.buf.inflight:
            check_access(ref, index, st, c, op, False)
        env[r] = ref.read(index).reshape(shape)

    return run


def _strided_load(op: Op, c: Compiler) -> Step:
    ref_id, idx = op.operands[0], op.operands[1:]
    strides = ints(op.attrs["strides"])
    shape = tuple(int(d or 0) for d in c.type(op.results[0]).shape)
    r = op.results[0]
    where = index_plan(ref_id, tuple(idx), shape, strides, op, c)

    def run(env: list, st: State) -> None:
        ref = env[ref_id]
        index = where(env)
        if ref.buf.inflight:
            check_access(ref, index, st, c, op, False)
        env[r] = ref.read(index)

    return run


def _store_parts(op: Op) -> tuple[int, int, tuple[int, ...], int | None, list[int], bool]:
    """(value, ref, indices, mask or None, strides, add) of a vector.store / tpu.vector_store / strided_store."""
    if op.name == "tpu.vector_store":
        value, base, idx, mask = _segments(op, [1, 1, len(op.operands) - 2, 0])
        strides = ints(op.attrs["strides"]) if "strides" in op.attrs else []
        return value[0], base[0], idx, (mask[0] if mask else None), strides, flag(op.attrs, "add")
    strides = ints(op.attrs["strides"]) if op.name == "tpu.strided_store" else []
    return op.operands[0], op.operands[1], op.operands[2:], None, strides, False


def _vector_store(op: Op, c: Compiler) -> Step:
    value_id, ref_id, idx, mask_id, strides, add = _store_parts(op)
    shape = tuple(int(d or 0) for d in c.type(value_id).shape)
    rank = len(c.type(ref_id).shape)
    full = (1,) * (rank - len(shape)) + shape
    where = index_plan(ref_id, tuple(idx), full, strides or None, op, c)

    def run(env: list, st: State) -> None:
        ref = env[ref_id]
        index = where(env)
        if ref.buf.inflight:
            check_access(ref, index, st, c, op, True)
        value = np.reshape(env[value_id], full)
        if add or mask_id is not None:
            old = ref.read(index)
            value = (old + value).astype(old.dtype) if add else value
            if mask_id is not None:
                value = np.where(np.reshape(env[mask_id], full), value, old)
        ref.write(index, value)

    return run


def _element(ref: Ref, point: tuple[int, ...], op: Op, c: Compiler) -> tuple[int, ...]:
    """``point`` if it lies inside ``ref`` (an SMEM scalar's place), else a KernelFault at ``op``."""
    shape = ref.shape
    if len(point) != len(shape):
        raise c.fault(op, f"{len(point)} indices for a ref of rank {len(shape)}")
    for axis, (i, n) in enumerate(zip(point, shape)):
        if not 0 <= i < n:
            raise c.fault(op, f"out-of-bounds access: index {i} of axis {axis} of a ref of shape {tuple(shape)}")
    return point


def _scalar_load(op: Op, c: Compiler) -> Step:
    ref_id, idx, r = op.operands[0], op.operands[1:], op.results[0]
    as_bool = dtype_of(c.type(r)) == BOOL

    def run(env: list, st: State) -> None:
        ref = env[ref_id]
        point = _element(ref, tuple(int(env[v]) for v in idx), op, c)
        if ref.buf.inflight:
            check_access(ref, tuple(slice(i, i + 1) for i in point), st, c, op, False)
        value = ref.arr[point] if type(ref) is Ref else ref.read(point)[()]
        env[r] = np.bool_(value) if as_bool else value

    return run


def _scalar_store(op: Op, c: Compiler) -> Step:
    value_id, ref_id, idx = op.operands[0], op.operands[1], op.operands[2:]

    def run(env: list, st: State) -> None:
        ref = env[ref_id]
        point = _element(ref, tuple(int(env[v]) for v in idx), op, c)
        if ref.buf.inflight:
            check_access(ref, tuple(slice(i, i + 1) for i in point), st, c, op, True)
        ref.write(point, env[value_id])

    return run


# --------------------------------------------------------------------------- ref transforms


def _memref_slice(op: Op, c: Compiler) -> Step:
    base, starts, dynamic = _segments(op, [1, len(c.type(op.operands[0]).shape), 0])
    static = c.type(op.results[0]).shape
    fixed = tuple(static) if None not in static else None
    r, ref_id = op.results[0], base[0]
    where = index_plan(ref_id, tuple(starts), fixed, None, op, c) if fixed is not None else None

    def run(env: list, st: State) -> None:
        ref = env[ref_id]
        if where is not None:
            index = where(env)
        else:
            dyn = iter(dynamic)
            sizes = tuple(int(env[next(dyn)]) if d is None else d for d in static)
            index = region(ref, [int(env[v]) for v in starts], sizes, None, op, c)
        try:
            env[r] = ref.sliced(index)
        except TypeError as exc:
            raise unsupported(op, c.kernel, str(exc)) from None

    return run


def _reshape(op: Op, c: Compiler) -> Step:
    shape = tuple(int(d or 0) for d in c.type(op.results[0]).shape)
    a, r = op.operands[0], op.results[0]

    def run(env: list, st: State) -> None:
        try:
            env[r] = env[a].reshaped(shape)
        except (TypeError, AttributeError, ValueError) as exc:
            raise unsupported(op, c.kernel, f"a reshape of a ref it cannot view as {shape} ({exc})") from None

    return run


def _memref_bitcast(op: Op, c: Compiler) -> Step:
    t = c.type(op.results[0])
    shape, dtype = tuple(int(d or 0) for d in t.shape), dtype_of(t)
    a, r = op.operands[0], op.results[0]

    def run(env: list, st: State) -> None:
        try:
            env[r] = env[a].bitcast(dtype, shape)
        except (TypeError, ValueError) as exc:
            raise unsupported(op, c.kernel, str(exc)) from None

    return run


def _alloca(op: Op, c: Compiler) -> Step:
    t = c.type(op.results[0])
    shape, dtype = tuple(int(d or 0) for d in t.shape), dtype_of(t)
    semaphore = "semaphore" in t.text
    label = f"a run_scoped {'semaphore' if semaphore else t.space.upper() + ' buffer'}"
    nbytes = int(np.prod(shape)) * (8 if semaphore else dtype.itemsize)
    if nbytes > LIMITS.max_alloc_bytes:
        raise c.fault(op, f"allocates {nbytes:,} bytes, more than any TPU's VMEM")
    r = op.results[0]

    def run(env: list, st: State) -> None:
        data = np.zeros(shape, SEMAPHORE) if semaphore else garbage(shape, dtype)
        env[r] = Ref(data, Buffer(data, label, t.space))

    return run


# --------------------------------------------------------------------------- DMAs and semaphores


def _enqueue_dma(op: Op, c: Compiler) -> Step:
    src, src_sem, dst, dst_sem, *remote = _segments(op, [1, 0, 1, 1, 0, 0, 0])
    if src_sem or any(remote):
        raise unsupported(op, c.kernel, "a DMA to another device or core (one chip is interpreted)")
    if not dst_sem:
        raise unsupported(op, c.kernel, "a DMA without a target semaphore")
    (s,), (d,), (sem,) = src, dst, dst_sem

    def run(env: list, st: State) -> None:
        source, target = env[s], env[d]
        if source.dtype != target.dtype or math.prod(source.shape) != math.prod(target.shape):
            raise c.fault(op, f"a DMA from {source.dtype}{list(source.shape)} to {target.dtype}{list(target.shape)}")
        if source.buf.inflight:
            check_access(source, (), st, c, op, False)
        if target.buf.inflight:
            check_access(target, (), st, c, op, True)
        start(Dma(source.read(()), target, _key(env[sem]), op, source), st)

    return run


def _wait_dma(op: Op, c: Compiler) -> Step:
    if op.name == "tpu.wait_dma2":
        sem_g, _, dst_g, *remote = _segments(op, [1, 1, 1, 0, 0])
    else:
        raise unsupported(op, c.kernel, "the old form of a DMA wait")
    if any(remote):
        raise unsupported(op, c.kernel, "a wait for a DMA from another device or core")
    (sem,), (dst,) = sem_g, dst_g

    def run(env: list, st: State) -> None:
        semaphore, need = env[sem], env[dst].nbytes
        key = _key(semaphore)
        cell = semaphore.arr.reshape(-1)
        while cell[0] < need:
            waiting = st.dmas.get(key)
            pending = waiting[0] if waiting else None
            if pending is None:
                raise c.fault(op, f"waits for a {need:,}-byte DMA on a semaphore that no DMA in flight signals "
                                  f"(it holds {int(cell[0]):,} bytes): a TPU would hang here")
            complete(pending, st)
            cell[0] += pending.nbytes
        cell[0] -= need

    return run


def _sem_signal(op: Op, c: Compiler) -> Step:
    sem_g, amount_g, *remote = _segments(op, [1, 1, 0, 0, 0])
    if any(remote):
        raise unsupported(op, c.kernel, "a signal to another device or core (one chip is interpreted)")
    (sem,), (amount,) = sem_g, amount_g

    def run(env: list, st: State) -> None:
        cell = env[sem].arr.reshape(-1)
        cell[0] += int(env[amount])

    return run


def _sem_wait(op: Op, c: Compiler) -> Step:
    sem, amount = op.operands[0], op.operands[1]

    def run(env: list, st: State) -> None:
        cell, need = env[sem].arr.reshape(-1), int(env[amount])
        if cell[0] < need:
            raise c.fault(op, f"waits for {need} on a semaphore holding {int(cell[0])}: one core runs, nothing "
                              "else would signal it (a TPU would hang here)")
        cell[0] -= need

    return run


def _sem_read(op: Op, c: Compiler) -> Step:
    sem, r = op.operands[0], op.results[0]

    def run(env: list, st: State) -> None:
        env[r] = np.int32(env[sem].arr.reshape(-1)[0])

    return run


def _sem_alloc(op: Op, c: Compiler) -> Step:
    t, r = c.type(op.results[0]), op.results[0]
    shape = tuple(int(d or 0) for d in t.shape)

    def run(env: list, st: State) -> None:
        data = np.zeros(shape, SEMAPHORE)
        env[r] = Ref(data, Buffer(data, "a run_scoped semaphore", "semaphore_mem"))

    return run


HANDLERS: dict[str, Builder] = {
    "vector.load": _vector_load, "tpu.vector_load": _vector_load, "tpu.strided_load": _strided_load,
    "vector.store": _vector_store, "tpu.vector_store": _vector_store, "tpu.strided_store": _vector_store,
    "memref.load": _scalar_load, "memref.store": _scalar_store, "tpu.memref_slice": _memref_slice,
    "tpu.memref_squeeze": _reshape, "tpu.memref_reshape": _reshape, "tpu.memref_bitcast": _memref_bitcast,
    "memref.alloca": _alloca, "memref.alloc": _alloca, "tpu.sem_alloc": _sem_alloc,
    "tpu.enqueue_dma": _enqueue_dma, "tpu.wait_dma2": _wait_dma, "tpu.wait_dma": _wait_dma,
    "tpu.sem_signal": _sem_signal, "tpu.sem_wait": _sem_wait, "tpu.sem_read": _sem_read,
}
