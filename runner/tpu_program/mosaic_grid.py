"""One ``tpu_custom_call`` run as a TPU runs it: the grid and the pipeline around the kernel body (worker side).

``run_call`` is the seam the XLA-op executor calls. The kernel is decoded once per backend config
(runner/program/mosaic_ir.decode_kernel, with op locations) and compiled once (mosaic_plan); both are cached,
an Unsupported op included. Then, as Mosaic's pipeline does:

- the grid runs row-major, last axis fastest; a dynamic bound comes from the call's leading operands;
  the program ids are the body's leading i32 arguments, then the scalar-prefetch operands as SMEM refs;
- each pipelined operand's index map (a function of the module, run by the same interpreter on the
  program ids and the SMEM refs) gives its block at each step: block indices x block shape, or element
  offsets for an element window (less its low padding). An input block is copied HBM -> VMEM at the
  first step and whenever its index changes; an output block's VMEM buffer lives while its index stays
  and is written back when it changes and after the last step; a fresh output buffer is not read from
  HBM (NaN-filled for floats, a bit pattern for ints), so a kernel that reads or leaves unwritten part
  of it shows it. A block past the array's edge reads fill beyond it and its writes there are dropped;
  a block wholly outside the array (or at a negative index) is a KernelFault;
- squeezed block dims (bound 1, absent from the kernel's memref) are a reshape of the block buffer;
  an operand without a window (HBM/ANY) is the HBM array itself, for the kernel's DMAs;
- scratch operands are fresh VMEM/SMEM arrays (filled the same way) and semaphores at zero;
- outputs not aliased start filled in HBM, so blocks no step writes show; an aliased output is the
  same HBM buffer as its input (what the kernel writes there, later blocks of the input read).

Megacore splits (``core_parallel``) and SparseCore kernels are Unsupported; ``parallel`` axes run in
order on the one core. Integer outputs come back in the requested dtype (same bits).
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..program.mosaic_ir import DYNAMIC, Kernel, KernelError, Window, decode_kernel
from .faults import KernelFault, Unsupported
from .mosaic_arith import HANDLERS as ARITH
from .mosaic_memory import HANDLERS as MEMORY
from .mosaic_memory import Buffer, Ref, finish
from .mosaic_plan import CONTROL, LIMITS, BlockPlan, Compiler, State, call, compile_block, compile_func
from .mosaic_values import SEMAPHORE, dtype_of, fill_value, garbage
from .mosaic_vector import HANDLERS as VECTOR

OP_TABLE = {**ARITH, **VECTOR, **MEMORY, **CONTROL}  # the op table: every op the interpreter runs
_CACHE_SIZE = 32


@dataclass(eq=False)
class Program:
    """A decoded, compiled kernel: its body and index maps as plans, the env template with the
    module's constants, or the Unsupported it raised (cached like a success)."""

    kernel: Kernel | None
    compiler: Compiler | None
    body: BlockPlan | None
    maps: list[BlockPlan | None]
    template: list[Any]
    error: Exception | None = None


_programs: OrderedDict[tuple[str, str], Program] = OrderedDict()


def program(backend_config: str, kernel_name: str) -> Program:
    """The compiled kernel of a backend config (decoded and compiled once, the last 32 kept)."""
    key = (kernel_name, backend_config)
    got = _programs.get(key)
    if got is None:
        got = _compile(backend_config, kernel_name)
        _programs[key] = got
        while len(_programs) > _CACHE_SIZE:
            _programs.popitem(last=False)
    else:
        _programs.move_to_end(key)
    if got.error is not None:
        raise got.error
    return got


def _compile(backend_config: str, kernel_name: str) -> Program:
    try:
        k = decode_kernel(backend_config, kernel_name, locations=True)
    except KernelError as exc:
        return Program(None, None, None, [], [], Unsupported("tpu_custom_call", f"kernel '{kernel_name}'", str(exc)))
    try:
        _check_kernel(k)
        c = Compiler(k.tree, k.name, OP_TABLE)
        body = compile_block(k.body.regions[0][0], c)
        maps = [compile_func(w.transform, c) if w.bounds is not None and w.transform else None
                for w in (k.windows or ())]
    except (Unsupported, KernelFault) as exc:
        return Program(k, None, None, [], [], exc)
    except Exception as exc:  # noqa: BLE001 - an op the table has, in a form it cannot read: not verified
        return Program(k, None, None, [], [], _internal(exc, k.name))
    template: list[Any] = [None] * (max(k.tree.types, default=-1) + 1)
    for value, const in c.presets.items():
        template[value] = const
    return Program(k, c, body, maps, template)


def _check_kernel(k: Kernel) -> None:
    core = str(k.body.attrs.get("tpu.core_type", ""))
    if core and "<tc>" not in core:
        raise Unsupported(f"a SparseCore kernel ({core})", f"kernel '{k.name}'")
    for s in k.semantics:
        if s not in ("parallel", "arbitrary"):
            raise Unsupported(f"dimension semantics {s} (a split across cores)", f"kernel '{k.name}'")


def run_call(backend_config: str, kernel_name: str, operands: list[np.ndarray],
             results: list[tuple[tuple[int, ...], np.dtype]],
             aliases: dict[int, int]) -> list[np.ndarray]:
    """Run one tpu_custom_call as a TPU would: operands in the custom call's order (dynamic grid bounds
    first, then scalar prefetch, then the pallas_call's inputs), results' shapes/dtypes, aliases
    {output index: operand index} (input_output_aliases / output_operand_aliases). Returns the outputs."""
    prog = program(backend_config, kernel_name)
    try:
        with np.errstate(all="ignore"):
            return _Run(prog, operands, results, aliases).run()
    except (Unsupported, KernelFault):
        raise
    except Exception as exc:  # noqa: BLE001 - the seam raises its two kinds only: never a pass
        raise _internal(exc, prog.kernel.name) from exc


def _internal(exc: BaseException, kernel: str) -> Unsupported:
    """An error inside the interpreter itself (a form of an op it did not expect, memory): the program is
    not verified, and the message says what failed."""
    return Unsupported("an op in a form the interpreter cannot run", f"kernel '{kernel}'",
                       f"{type(exc).__name__}: {str(exc)[:300]}")


# --------------------------------------------------------------------------- one run


class _Pipe:
    """One pipelined operand: its HBM buffer, its VMEM block, the block it holds now."""

    __slots__ = ("hbm", "block", "ref", "window", "output", "current", "label", "fill")

    def __init__(self, hbm: Buffer, window: Window, kernel_shape: tuple[int, ...], output: bool, label: str) -> None:
        self.hbm, self.window, self.output, self.label = hbm, window, output, label
        dtype = hbm.data.dtype
        if math.prod(window.bounds) * dtype.itemsize > LIMITS.max_alloc_bytes:
            raise KernelFault(f"{label}: a block of {tuple(window.bounds)} {dtype} is larger than any TPU's VMEM")
        self.block = garbage(tuple(window.bounds), dtype)
        if int(np.prod(kernel_shape)) != self.block.size:
            raise KernelFault(f"{label}: the kernel's ref of shape {kernel_shape} does not hold its window "
                              f"{tuple(window.bounds)}")
        self.ref = Ref(self.block.reshape(kernel_shape), Buffer(self.block, f"the VMEM block of {label}", "vmem", output))
        self.current: tuple[int, ...] | None = None
        self.fill = fill_value(dtype)

    def starts(self, index: tuple[int, ...]) -> tuple[int, ...]:
        if self.window.element:
            low = self.window.padding[0] if self.window.padding else (0,) * len(index)
            return tuple(i - p for i, p in zip(index, low))
        return tuple(i * b for i, b in zip(index, self.window.bounds))

    def boxes(self, starts: tuple[int, ...], step: Any) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
        """(the HBM part the block covers, where it lies in the block); a block wholly outside faults."""
        shape = self.hbm.data.shape
        outer, inner = [], []
        for axis, (s, b, n) in enumerate(zip(starts, self.window.bounds, shape)):
            lo, hi = max(s, 0), min(s + b, n)
            if hi <= lo or (s < 0 and not self.window.element):
                raise KernelFault(f"the index map of {self.label} places its block at element {s} of axis {axis} "
                                  f"at grid step {step}: outside the array of shape {tuple(shape)} (a TPU's DMA "
                                  "would fault)")
            outer.append(slice(lo, hi))
            inner.append(slice(lo - s, hi - s))
        return tuple(outer), tuple(inner)

    def enter(self, index: tuple[int, ...], step: Any) -> None:
        """Before a grid step: the block for ``index`` in place (written back / fetched as it changes)."""
        if index == self.current:
            return
        self._settled(step)
        starts = self.starts(index)
        outer, inner = self.boxes(starts, step)
        if self.output:
            self.flush()
            self.block[...] = self.fill
        else:
            if any(sl.stop - sl.start != b for sl, b in zip(outer, self.window.bounds)):
                self.block[...] = self.fill
            self.block[inner] = self.hbm.data[outer]
        self.current = index

    def _settled(self, step: Any) -> None:
        """A KernelFault if a DMA the kernel started into or out of this block is still in flight while the
        pipeline moves the block (what the block then holds, or what the DMA copies, is not defined)."""
        if self.ref.buf.inflight:
            raise KernelFault(f"a DMA into or out of the VMEM block of {self.label} is still in flight when the "
                              f"pipeline moves that block (at grid step {step}): wait for it in the step that started it")

    def flush(self) -> None:
        """Write the output block back to HBM (its part inside the array)."""
        if self.current is None or not self.output:
            return
        self._settled("end")
        outer, inner = self.boxes(self.starts(self.current), "end")
        self.hbm.data[outer] = self.block[inner]


class _Run:
    def __init__(self, prog: Program, operands: list[np.ndarray], results: list[tuple[tuple[int, ...], np.dtype]],
                 aliases: dict[int, int]) -> None:
        self.prog, self.k = prog, prog.kernel
        self.operands, self.results, self.aliases = [np.asarray(o) for o in operands], results, aliases

    def run(self) -> list[np.ndarray]:
        k = self.k
        grid = self._grid()
        st = State(k.name, grid, LIMITS)
        lead = k.n_dynamic + k.n_prefetch
        prefetch = [self._smem(self.operands[k.n_dynamic + i], i) for i in range(k.n_prefetch)]
        inputs, outputs = self._hbm(lead)
        pipes, refs = self._operands(inputs, outputs)
        scratch = [self._scratch(t, i) for i, t in enumerate(k.scratch_types())]
        if len(grid) + len(prefetch) + len(refs) + len(scratch) != len(self.prog.body.args):
            raise KernelFault(f"kernel '{k.name}' takes {len(self.prog.body.args)} arguments; its grid, scalar "
                              f"prefetch, operands and scratch make {len(grid) + len(prefetch) + len(refs) + len(scratch)}")
        env = list(self.prog.template)
        maps = self.prog.maps
        windowed = [(p, maps[i] if i < len(maps) else None) for i, p in enumerate(pipes) if p is not None]
        for step, point in enumerate(itertools.product(*[range(g) for g in grid])):
            ids = [np.int32(i) for i in point]
            for pipe, plan in windowed:
                index = call(plan, ids + prefetch, env, st) if plan is not None else [0] * len(pipe.window.bounds)
                pipe.enter(tuple(int(i) for i in index), point)
            call(self.prog.body, ids + prefetch + refs + scratch, env, st)
        for pipe, _ in windowed:
            pipe.flush()
        finish(st, self.prog.compiler)
        return [self._result(buf, shape, dtype) for buf, (shape, dtype) in zip(outputs, self.results)]

    def _grid(self) -> tuple[int, ...]:
        dynamic = iter(self.operands[:self.k.n_dynamic])
        grid = tuple(int(np.asarray(next(dynamic)).reshape(-1)[0]) if g == DYNAMIC else int(g) for g in self.k.grid)
        if any(g < 0 for g in grid):
            raise KernelFault(f"kernel '{self.k.name}' has a grid of {grid}")
        return grid

    def _smem(self, value: np.ndarray, i: int) -> Ref:
        t = self.k.arg_types[self.k.n_grid + i]
        data = _as_dtype(value, dtype_of(t)).reshape(tuple(int(d or 0) for d in t.shape) or value.shape)
        return Ref(data, Buffer(data, f"scalar-prefetch operand {i} (SMEM)", "smem"))

    def _hbm(self, lead: int) -> tuple[list[Buffer], list[Buffer]]:
        types = self.k.operand_types()
        n_in = len(self.operands) - lead
        if len(types) != n_in + len(self.results):
            raise KernelFault(f"kernel '{self.k.name}' takes {len(types)} operands; the call passes {n_in} inputs "
                              f"and {len(self.results)} outputs")
        inputs = [Buffer(_as_dtype(self.operands[lead + i], dtype_of(types[i])), f"input {i} (HBM)", "hbm", True)
                  for i in range(n_in)]
        outputs = []
        for j, (shape, _) in enumerate(self.results):
            dtype = dtype_of(types[n_in + j])
            source = self.aliases.get(j)
            if source is not None and source >= lead:
                outputs.append(inputs[source - lead])  # one HBM buffer: the input is the output
            elif source is not None:
                outputs.append(Buffer(_as_dtype(self.operands[source], dtype).reshape(shape), f"output {j} (HBM)",
                                      "hbm", True))
            else:
                outputs.append(Buffer(garbage(tuple(shape), dtype), f"output {j} (HBM)", "hbm", True))
        return inputs, outputs

    def _operands(self, inputs: list[Buffer], outputs: list[Buffer]) -> tuple[list[_Pipe | None], list[Ref]]:
        types = self.k.operand_types()
        pipes: list[_Pipe | None] = []
        refs = []
        for i, buf in enumerate(inputs + outputs):
            t, output = types[i], i >= len(inputs)
            label = f"output {i - len(inputs)}" if output else f"input {i}"
            window = self.k.windows[i] if self.k.windows is not None else None
            if window is None and t.space in ("vmem", "smem"):  # no grid spec: the whole array in VMEM
                window = Window(tuple(buf.data.shape), None, None, False)
            if window is None or window.bounds is None:
                pipes.append(None)
                refs.append(Ref(buf.data.reshape(tuple(int(d or 0) for d in t.shape)), buf))
                continue
            pipe = _Pipe(buf, window, tuple(int(d or 0) for d in t.shape), output, label)
            pipes.append(pipe)
            refs.append(pipe.ref)
        return pipes, refs

    def _scratch(self, t: Any, i: int) -> Ref:
        shape = tuple(int(d or 0) for d in t.shape)
        if "semaphore" in t.text:
            data = np.zeros(shape, SEMAPHORE)
            return Ref(data, Buffer(data, f"semaphore scratch {i}", "semaphore_mem"))
        dtype = dtype_of(t)
        if dtype is None:
            raise Unsupported(f"a scratch operand of type {t.text}", f"kernel '{self.k.name}'")
        if int(np.prod(shape)) * dtype.itemsize > LIMITS.max_alloc_bytes:
            raise KernelFault(f"kernel '{self.k.name}': scratch operand {i} ({t.text}) is larger than any TPU's VMEM")
        data = garbage(shape, dtype)
        return Ref(data, Buffer(data, f"scratch operand {i} ({t.space.upper()})", t.space))

    def _result(self, buf: Buffer, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return _from_dtype(buf.data, np.dtype(dtype)).reshape(tuple(shape))


def _as_dtype(value: np.ndarray, dtype: np.dtype | None) -> np.ndarray:
    """A copy of an operand in the kernel's element dtype (same bits where the width matches)."""
    value = np.asarray(value)
    if dtype is None or value.dtype == dtype:
        return np.array(value, copy=True)
    if value.dtype.itemsize == dtype.itemsize and value.dtype.kind in "iub" and dtype.kind in "iu":
        return np.array(value.view(dtype), copy=True)
    return value.astype(dtype)


def _from_dtype(data: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if data.dtype == dtype:
        return np.array(data, copy=True)
    if dtype.kind == "b":
        return data != 0
    if data.dtype.itemsize == dtype.itemsize and data.dtype.kind in "iu" and dtype.kind in "iu":
        return np.array(data.view(dtype), copy=True)
    return data.astype(dtype)
