"""The TPU program of an exported module, run on the CPU: its XLA ops by the judge's own op table, its
Mosaic kernels by the judge's interpreter of Mosaic kernels (worker side, imports jax).

A module exported for the TPU (alone, or with other platforms) holds the program a TPU would run: XLA
ops around ``stablehlo.custom_call @tpu_custom_call``s, one per pallas_call, each carrying the kernel's
Mosaic module. ``tpu_program(exported, signature)`` prepares that program once per module and size:

1. the sizes are checked against the module's symbolic shapes (jax's own check, the text of the
   module's shape assertions), then the module is refined to them (runner/program/module_read.py: jax's shape
   refinement; every dimension static, private functions inlined, shape arithmetic folded);
2. the TPU program is planned (runner/tpu_program/hlo_plan.py): each op of ``main`` becomes the
   ``jax.lax`` primitive with its semantics (hlo_ops.py, hlo_regions.py, hlo_calls.py); a case on the
   platform index is resolved to its TPU branch and nothing of another platform's branch is read. Every
   op is recorded with where it comes from (``ops_used``); every op, attribute or type the table does not
   cover is an ``Unsupported`` (``unsupported``), found here, before anything runs;
3. the plan is traced and compiled once by ``jax.jit`` for the CPU (64-bit types on: a module's i64
   stays i64), each ``tpu_custom_call`` a ``jax.pure_callback`` into ``run_call`` (an unordered
   ``io_callback`` for a call marked ``has_side_effect``, which XLA keeps even when nothing reads it).

``TpuProgram(*arrays, run_call=...)`` runs it and returns the outputs as numpy arrays. ``run_call`` is
the seam to the interpreter of Mosaic kernels::

    run_call(backend_config: str, kernel_name: str, operands: list[np.ndarray],
             results: list[tuple[tuple[int, ...], np.dtype]], aliases: dict[int, int]) -> list[np.ndarray]

(operands in the custom call's order, leading grid sizes and scalar-prefetch operands included, as
read-only numpy arrays: copy one before writing to it; ``results`` each result's shape and dtype, which
the returned arrays must match exactly; ``aliases`` {output index: operand index} from
``output_operand_aliases``: the output starts as that operand's contents on a TPU). An exception it raises
reaches the caller as itself (kept aside by the callback, raised again after XLA gives up). Nothing of
the module's bytes is executed but through the op table: XLA compiles the table's translation, never
the module.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Sequence

import numpy as np

from ..program.mlir_tree import Op
from . import hlo_attrs as attrs
from .hlo_calls import ShapeAssertion
from .hlo_plan import Compiled, Entry, OpUse, Planner, Refuse, Unsupported

__all__ = ["KernelResultError", "OpUse", "RunCall", "ShapeAssertion", "TpuProgram", "Unsupported", "op_table",
           "tpu_program"]

RunCall = Callable[[str, str, list, list, dict], list]
CACHE_SIZE = 16
COMPILER_OPTIONS: dict[str, Any] = {}
_cache: "OrderedDict[tuple, TpuProgram]" = OrderedDict()
_cache_lock = threading.Lock()


class _KeptAside(logging.Filter):
    """Drops jax's log record of a callback failure that the program raises again to its caller itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not getattr(exc, "pallasite_kept_aside", False)


logging.getLogger("jax._src.callback").addFilter(_KeptAside())


class KernelResultError(ValueError):
    """``run_call`` returned outputs that are not the kernel call's result types."""


def op_table() -> dict[str, Entry]:
    """Every op the executor translates (name -> Entry)."""
    from . import hlo_calls, hlo_ops, hlo_regions

    return {**hlo_ops.table(), **hlo_regions.table(), **hlo_calls.table()}


@dataclass(eq=False)
class TpuProgram:
    """The TPU program of one module at one concrete signature (see the module docstring)."""

    signature: tuple[tuple[tuple[int, ...], str], ...]
    platforms: tuple[str, ...]
    ops_used: tuple[OpUse, ...] = ()
    unsupported: list[Unsupported] = field(default_factory=list)
    kernels: int = 0
    plan_s: float = 0.0
    compile_s: float = 0.0
    _kept: tuple[int, ...] = ()
    _compiled: Any = None
    _run_call: Any = None
    _failure: BaseException | None = None
    _lock: Any = field(default_factory=threading.Lock)

    @property
    def op_names(self) -> list[str]:
        return sorted({u.op for u in self.ops_used})

    def __call__(self, *arrays: Any, run_call: RunCall | None = None) -> list[np.ndarray]:
        if self.unsupported:
            raise self.unsupported[0]
        if self.kernels and run_call is None:
            raise ValueError(f"the TPU program has {self.kernels} Mosaic kernel call(s): give run_call, the "
                             "interpreter of Mosaic kernels")
        kept = [np.asarray(arrays[i]) for i in self._check(arrays)]
        import jax

        from jax._src import config

        with self._lock:
            self._run_call, self._failure = run_call, None
            try:
                with config.enable_x64(True):
                    outs = self._compiled(*kept)
                    return [np.asarray(jax.device_get(o)) for o in outs]
            except Exception:
                failure = self._failure
                if failure is not None:
                    raise failure from None
                raise
            finally:
                self._run_call, self._failure = None, None

    def _check(self, arrays: Sequence[Any]) -> tuple[int, ...]:
        if len(arrays) != len(self.signature):
            raise ValueError(f"the TPU program takes {len(self.signature)} inputs, {len(arrays)} were given")
        for i, (a, (shape, dtype)) in enumerate(zip(arrays, self.signature)):
            got = (tuple(np.shape(a)), np.dtype(getattr(a, "dtype", np.asarray(a).dtype)).name)
            if got != (shape, dtype):
                raise ValueError(f"input {i} is {got[1]}{list(got[0])}, the program was prepared for "
                                 f"{dtype}{list(shape)}")
        return self._kept

    # -- the Mosaic kernel calls (the planner's hook)
    def kernel_step(self, op: Op, plan: Planner) -> Callable[..., Any]:
        import jax

        if "backend_config" not in op.attrs:
            raise Refuse("a Mosaic kernel call without a backend_config")
        config = attrs.string(op.attrs["backend_config"])
        name = attrs.string(op.attrs["kernel_name"]) if "kernel_name" in op.attrs else ""
        results = [(plan.shape(r), plan.dtype(r)) for r in op.results]
        aliases = attrs.output_aliases(op.attrs["output_operand_aliases"]) if "output_operand_aliases" in op.attrs \
            else {}
        _row_major(op, plan)
        structs = [jax.ShapeDtypeStruct(s, d) for s, d in results]
        invoke = partial(self._invoke, config, name, results, aliases)
        self.kernels += 1
        if "has_side_effect" in op.attrs and attrs.boolean(op.attrs["has_side_effect"]):
            from jax.experimental import io_callback  # a call XLA keeps even when its results are unused

            return lambda env, *operands: tuple(io_callback(invoke, structs, *operands, ordered=False))
        return lambda env, *operands: tuple(jax.pure_callback(invoke, structs, *operands))

    def _invoke(self, config: str, name: str, results: list, aliases: dict, *operands: Any) -> list[np.ndarray]:
        try:
            run = self._run_call
            if run is None:
                raise RuntimeError("the TPU program reached a Mosaic kernel with no run_call to run it")
            outs = run(config, name, [np.asarray(o) for o in operands], list(results), dict(aliases))
            return _checked(name, outs, results)
        except BaseException as exc:
            if self._failure is None:
                self._failure = exc
                try:
                    exc.pallasite_kept_aside = True  # type: ignore[attr-defined]
                except AttributeError:
                    pass
            raise


def _row_major(op: Op, plan: Planner) -> None:
    """Refuse a kernel call whose operands or results XLA would lay out other than row-major: the interpreter
    reads arrays in their logical order."""
    for key, values in (("operand_layouts", op.operands), ("result_layouts", op.results)):
        if key not in op.attrs:
            continue
        from jaxlib.mlir import ir

        arr = ir.ArrayAttr(op.attrs[key])
        for i in range(len(arr)):
            layout = attrs.ints(arr[i])
            rank = len(plan.shape(values[i])) if i < len(values) else len(layout)
            if layout != list(range(rank - 1, -1, -1)):
                raise Refuse(f"{key}[{i}] = {layout}: not row-major")


def _checked(name: str, outs: Any, results: list) -> list[np.ndarray]:
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    if len(outs) != len(results):
        raise KernelResultError(f"run_call returned {len(outs)} arrays for kernel {name!r}, which has "
                                f"{len(results)} results")
    checked = []
    for i, (out, (shape, dtype)) in enumerate(zip(outs, results)):
        out = np.asarray(out)
        if tuple(out.shape) != tuple(shape) or out.dtype != dtype:
            raise KernelResultError(f"run_call returned {out.dtype.name}{list(out.shape)} for result {i} of kernel "
                                    f"{name!r}, whose type is {np.dtype(dtype).name}{list(shape)}")
        checked.append(out)
    return checked


# --------------------------------------------------------------------------- preparing a program


def _signature(signature: Sequence[Sequence[Any]]) -> tuple[tuple[tuple[int, ...], str], ...]:
    import jax.numpy as jnp

    return tuple((tuple(int(d) for d in dims), np.dtype(jnp.dtype(str(dtype))).name) for dims, dtype in signature)


def tpu_program(exported: Any, concrete_signature: Sequence[Sequence[Any]]) -> TpuProgram:
    """The TPU program of ``exported`` (a ``jax.export.Exported`` lowered for "tpu", possibly among other
    platforms) at ``concrete_signature`` (``[[dims, dtype], ...]``, ints), planned and compiled once
    (cached per module and signature). Raises ``ShapeAssertion`` when the sizes do not fit the module's
    symbolic shapes, runner/program/module_read.ModuleError when it cannot be read or refined; ops it cannot run
    are listed in ``unsupported`` (calling it then raises the first)."""
    signature = _signature(concrete_signature)
    digest = hashlib.sha256(bytes(exported.mlir_module_serialized)).hexdigest()
    key = (digest, tuple(exported.platforms), signature)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    program = _prepare(exported, signature)
    with _cache_lock:
        _cache[key] = program
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return program


def _shapes_fit(exported: Any, signature: tuple) -> list[Any]:
    """The inputs as ``ShapeDtypeStruct``s, after jax's own check of the sizes against the module's symbolic
    shapes (the constraints its shape assertions encode)."""
    import jax

    if "tpu" not in exported.platforms:
        raise ValueError(f"the module was lowered for {', '.join(exported.platforms)}, not for the TPU")
    structs = [jax.ShapeDtypeStruct(shape, np.dtype(dtype)) for shape, dtype in signature]
    try:
        jax.eval_shape(exported.call, *structs)
    except ValueError as exc:
        raise ShapeAssertion(f"the sizes {[list(s) for s, _ in signature]} do not fit the module's shapes: "
                             f"{str(exc)[:600]}") from None
    return structs


def _prepare(exported: Any, signature: tuple) -> TpuProgram:
    import jax

    from jax._src import config

    from ..program.module_read import read_module

    start = time.perf_counter()
    structs = _shapes_fit(exported, signature)
    module = read_module(exported, [[list(s), d] for s, d in signature])
    program = TpuProgram(signature, tuple(exported.platforms), _kept=tuple(exported.module_kept_var_idx))
    planner = Planner(module, attrs.locations(module.keep[1]), op_table())
    planner.kernel = program.kernel_step  # type: ignore[attr-defined]
    main = planner.block(module.main_block)
    program.ops_used, program.unsupported = tuple(planner.uses), list(planner.unsupported)
    program.plan_s = time.perf_counter() - start
    if program.unsupported:
        return program
    kept_structs = [structs[i] for i in program._kept]
    start = time.perf_counter()
    try:
        lead = _lead(module, planner)
        with config.enable_x64(True):
            traced = jax.jit(partial(_run_main, main, lead)).trace(*kept_structs)
            program._compiled = traced.lower().compile(compiler_options=dict(COMPILER_OPTIONS))
    except Unsupported as exc:
        program.unsupported.append(exc)
    program.compile_s = time.perf_counter() - start
    return program


def _lead(module: Any, planner: Planner) -> list[Any]:
    """The values of main's leading arguments before the inputs: the platform index, fixed to the TPU's."""
    args = module.main_block.args
    lead = len(args) - len(module.exported.module_kept_var_idx)
    if lead == 0:
        return []
    if lead != 1 or module.platform_arg != args[0]:
        raise Unsupported("func.func @main", "main", f"{lead} leading arguments before the inputs")
    return [np.asarray(planner.tpu_index, planner.dtype(args[0]))]


def _run_main(main: Compiled, lead: list[Any], *inputs: Any) -> tuple[Any, ...]:
    return tuple(main(None, *lead, *inputs))
