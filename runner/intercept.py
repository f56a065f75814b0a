"""Intercepting ``pallas_call`` while user code runs (worker side: imports jax).

``intercept_pallas_calls(rewrite=...)`` is a context manager: for its duration every
``pallas_call`` the user's code makes — through ``pl.pallas_call``, ``jax.experimental.pallas
.pallas_call``, or a name imported from either — goes through a wrapper that

- records the call: the kernel function, grid, BlockSpecs, scratch shapes, compiler params, the
  file and line of the ``pallas_call(...)`` expression, and (when the returned function is called)
  the operands' shapes and dtypes, as a ``RecordedCall``;
- lets a ``rewrite(kwargs) -> kwargs`` hook change the keyword arguments before the real
  ``pallas_call`` sees them (tier 3 uses it to replace ``dimension_semantics``; script mode with
  tier 3 asked for, to run calls that ask for no interpreter in CPU interpret mode);
- with a ``stand_in(kwargs) -> bool`` hook, calls it accepts are recorded and not run: the returned
  function answers zeros of the ``out_shape`` (``stand_in_outputs``), so code written for a TPU goes
  on past its kernel calls on a CPU; the compiler tiers then check the recorded call. A stand-in
  applied to operands sharded over several devices outside ``shard_map`` raises what the TPU
  would: Mosaic kernels cannot be partitioned automatically (``UnpartitionedKernel``).

Patched for the duration only: the jax module attributes, and module globals of the given user
modules that are bound to the original function. Nothing of the user's file is edited.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import os
import re
import sys
import threading
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import jax
from jax._src.pallas import pallas_call as _pallas_call_module
from jax.experimental import pallas as _pl


@dataclass
class RecordedCall:
    """One ``pallas_call`` as the user's code made it, with the operands it was applied to."""

    kernel: Callable[..., Any]
    out_shape: Any
    kwargs: dict[str, Any]
    file: str | None  # where the pallas_call(...) expression is
    line: int | None  # 1-based
    function: str | None = None  # the function containing that line
    operands: tuple[Any, ...] | None = None  # ShapeDtypeStructs, set when the call is applied
    applied: int = 0  # how many times the returned function was called
    stack_lines: tuple[int, ...] = ()  # 1-based lines of the user files on the stack, innermost first
    stand_in: bool = False  # recorded, not run: its function answered zeros (``stand_in`` hook)
    axes: dict[str, int] = field(default_factory=dict)  # named axes it was applied under (shard_map, vmap)
    site: tuple[str, int] | None = None  # (file, 1-based line) of the code that called pallas_call itself
    caller: tuple[str, int, str] | None = None  # (file, line, function): innermost frame in ``caller_files``

    @property
    def kernel_name(self) -> str:
        kernel = _unwrap(self.kernel)  # a functools.partial of the kernel is named for the kernel
        return getattr(kernel, "__name__", None) or type(kernel).__name__

    @property
    def kernel_module(self) -> str | None:
        """The module that defines the kernel (``jax.experimental.pallas.ops.tpu.flash_attention``)."""
        return getattr(_unwrap(self.kernel), "__module__", None)

    @property
    def kernel_line(self) -> int | None:
        code = getattr(_unwrap(self.kernel), "__code__", None)
        return code.co_firstlineno if code is not None else None

    @property
    def kernel_file(self) -> str | None:
        code = getattr(_unwrap(self.kernel), "__code__", None)
        return code.co_filename if code is not None else None

    def key(self) -> tuple[Any, ...]:
        """Identity for de-duplication: kernel code, operand shapes, and the call's parameters."""
        kernel = _unwrap(self.kernel)
        code = getattr(kernel, "__code__", None)
        kernel_id = (code.co_filename, code.co_firstlineno, code.co_name) if code else repr(kernel)
        operands = (jax.tree.structure(self.operands or ()), tuple((tuple(o.shape), str(o.dtype)) for o in _arrays(self.operands)))
        params = tuple(
            (k, _stable_repr(v)) for k, v in sorted(self.kwargs.items()) if k not in ("interpret", "debug")
        )
        return (kernel_id, self.file, self.line, operands, _stable_repr(self.out_shape), params)

    def describe(self) -> str:
        shapes = ", ".join(f"{o.dtype}{list(o.shape)}" for o in _arrays(self.operands))
        grid = self.kwargs.get("grid")
        return f"{self.kernel_name}({shapes})" + (f" grid={tuple(grid) if isinstance(grid, (list, tuple)) else grid}" if grid else "")

    def call_without_interpret(self) -> Callable[..., Any]:
        """A function applying the same pallas_call, minus ``interpret``, for the compiler tiers
        (through ``pallas_call`` as bound when it runs, so tier 3's interception sees it)."""
        kwargs = {k: v for k, v in self.kwargs.items() if k not in ("interpret", "debug")}
        kernel, out_shape = self.kernel, self.out_shape

        def apply(*operands: Any) -> Any:
            return _pallas_call_module.pallas_call(kernel, out_shape, **kwargs)(*operands)

        apply.__name__ = self.kernel_name
        return apply


def _unwrap(fn: Any) -> Any:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__wrapped__", fn)


def _stable_repr(value: Any) -> str:
    """A repr without memory addresses (functions by file:line:name), so equal calls compare equal."""
    if callable(value) and hasattr(value, "__code__"):
        c = value.__code__
        return f"<fn {c.co_filename}:{c.co_firstlineno}:{c.co_name}>"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_stable_repr(v) for v in value) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_stable_repr(v)}" for k, v in sorted(value.items(), key=lambda kv: repr(kv[0]))) + "}"
    if hasattr(value, "__dataclass_fields__"):
        return type(value).__name__ + "(" + ", ".join(
            f"{n}={_stable_repr(getattr(value, n, None))}" for n in value.__dataclass_fields__) + ")"
    text = repr(value)
    return re.sub(r" at 0x[0-9a-f]+", "", text)


# --------------------------------------------------------------------------- patching

_ORIGINAL = _pallas_call_module.pallas_call
_lock = threading.Lock()


@contextlib.contextmanager
def intercept_pallas_calls(
    *,
    rewrite: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    user_files: tuple[str, ...] = (),
    modules: tuple[types.ModuleType | dict[str, Any], ...] = (),
    stand_in: Callable[[dict[str, Any]], bool] | None = None,
    wrap_kernel: Callable[[Callable[..., Any], Any, dict[str, Any]], Callable[..., Any]] | None = None,
    caller_files: tuple[str, ...] = (),
) -> Iterator[list[RecordedCall]]:
    """Record (and optionally rewrite) every pallas_call made inside the block.

    ``user_files``: the call's location is the innermost frame in one of these files (else the
    direct caller). ``modules``: user modules (or their globals dicts) whose names bound to
    ``pallas_call`` (``from jax.experimental.pallas import pallas_call``) are patched too.
    ``stand_in``: calls (by their keyword arguments) to record without running (see the module
    docstring). ``wrap_kernel(kernel, out_shape, kwargs) -> kernel``: the kernel the real ``pallas_call``
    runs (tier 3 refills output blocks before each step); the record keeps the user's kernel. Yields
    the list the records are appended to, in call order.
    ``caller_files``: each record's ``caller`` is its innermost frame in one of these files (a test of
    the workspace that called into the checked file).

    What the block's code keeps — ``pallas_call`` bound by a ``from ... import`` or a module-level
    ``functools.partial`` made while it ran, a function a pallas_call returned — behaves after the
    block as the ``pallas_call`` bound then: it records into no list and stands in for nothing.
    """
    records: list[RecordedCall] = []
    real_path.cache_clear()  # a link changed since the last block is read again
    targets = {real_path(f) for f in user_files}
    callers = {real_path(f) for f in caller_files}
    active = [True]

    def pallas_call(kernel: Callable[..., Any], out_shape: Any = None, **kwargs: Any) -> Callable[..., Any]:
        if not active[0]:
            return _current(pallas_call)(kernel, out_shape, **kwargs)
        file, line, function = _call_site(targets)
        rec = RecordedCall(kernel=kernel, out_shape=out_shape, kwargs=dict(kwargs), file=file, line=line,
                           function=function, stack_lines=stack_lines(targets), site=_direct_caller(),
                           caller=_innermost_in(callers) if callers else None,
                           stand_in=stand_in is not None and stand_in(dict(kwargs)))
        records.append(rec)
        real_kwargs = rewrite(dict(kwargs)) if rewrite is not None else kwargs
        runs = wrap_kernel(kernel, out_shape, real_kwargs) if wrap_kernel is not None else kernel
        inner = None if rec.stand_in else _ORIGINAL(runs, out_shape, **real_kwargs)

        def apply(*operands: Any) -> Any:
            if not active[0]:
                return _current(pallas_call)(kernel, out_shape, **kwargs)(*operands)
            rec.operands = _abstract(operands)
            rec.axes = _named_axes()  # inside shard_map the function is applied there, wherever it was made
            rec.applied += 1
            try:
                if inner is None:
                    refuse_unpartitioned(operands)
                    return stand_in_outputs(out_shape)
                return inner(*operands)
            except Exception as exc:
                mark_kernel_error(exc)  # raised by the kernel (tracing, lowering, its run), not host code
                raise

        return apply

    try:
        with replacing_pallas_call(pallas_call, modules):
            yield records
    finally:
        active[0] = False


def _current(stale: Callable[..., Any]) -> Callable[..., Any]:
    """jax's ``pallas_call`` as bound now (another interception's, or the original)."""
    now = _pallas_call_module.pallas_call
    return _ORIGINAL if now is stale else now


@contextlib.contextmanager
def replacing_pallas_call(replacement: Callable[..., Any], modules: tuple[Any, ...] = ()) -> Iterator[None]:
    """Every binding of jax's ``pallas_call`` (in ``pl``, jax's own module and ``modules``: module
    objects or namespace dicts) points to ``replacement`` for the duration, then back."""
    replacement.__wrapped__ = _ORIGINAL  # type: ignore[attr-defined]
    patched: list[tuple[dict[str, Any], str, Any]] = []
    with _lock:
        for holder in (_pl, _pallas_call_module, *modules):
            namespace = holder if isinstance(holder, dict) else vars(holder)
            for name, value in list(namespace.items()):
                if value is _ORIGINAL:
                    patched.append((namespace, name, value))
                    namespace[name] = replacement
    try:
        yield
    finally:
        with _lock:
            for namespace, name, value in patched:
                namespace[name] = value


WRITTEN_SHAPE = "_pallasite_written_shape"


@contextlib.contextmanager
def keeping_written_shapes() -> Iterator[None]:
    """For the duration, a TPU memory space called on a shape (``pltpu.VMEM((n, 128), dtype)``) keeps
    the shape as written on the ``MemoryRef`` it makes (``WRITTEN_SHAPE``): jax's ``ShapedArray``
    turns each dim into a plain int, dropping the places carried values hold
    (``runner/origin_values.py``); and each ``jax.ShapeDtypeStruct`` made is remembered with the
    place of the expression that made it (``struct_place``: where an ``out_shape``'s dtype was
    written). Nothing else of the calls changes."""
    try:
        from jax._src.pallas.mosaic import core as tpu_core
    except ImportError:  # another jax layout: the places of scratch dims are not read
        yield
        return
    space = tpu_core.MemorySpace
    original = space.__dict__.get("__call__")
    if original is None:
        yield
        return

    def call(self: Any, shape: Any, dtype: Any) -> Any:
        ref = original(self, shape, dtype)
        with contextlib.suppress(Exception):
            object.__setattr__(ref, WRITTEN_SHAPE, tuple(shape))
        return ref

    struct = jax.ShapeDtypeStruct
    struct_init = struct.__dict__.get("__init__")

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        struct_init(self, *args, **kwargs)
        with contextlib.suppress(Exception):
            STRUCTS_MADE[id(self)] = (self, _expression_place(sys._getframe(1)))

    with _lock:
        space.__call__ = call
        if struct_init is not None:
            struct.__init__ = init
    try:
        yield
    finally:
        with _lock:
            space.__call__ = original
            if struct_init is not None:
                struct.__init__ = struct_init
        STRUCTS_MADE.clear()


# id -> (the ShapeDtypeStruct, (file, 1-based line, column, end line, end column) of the expression that
# made it), while ``keeping_written_shapes`` holds: where an out_shape was written, however it travelled
STRUCTS_MADE: dict[int, tuple[Any, tuple[str, int, int, int, int]]] = {}


def struct_place(value: Any) -> tuple[str, int, int, int, int] | None:
    """Where the ``jax.ShapeDtypeStruct(...)`` expression that made ``value`` is (None: not known)."""
    made = STRUCTS_MADE.get(id(value))
    return made[1] if made is not None and made[0] is value else None


def _expression_place(frame: Any) -> tuple[str, int, int, int, int]:
    code = frame.f_code
    try:
        line, end_line, col, end_col = next(itertools.islice(code.co_positions(), frame.f_lasti // 2, None))
    except (StopIteration, ValueError, AttributeError):
        line, end_line, col, end_col = frame.f_lineno, frame.f_lineno, 0, 0
    return code.co_filename, int(line or frame.f_lineno), int(col or 0), int(end_line or line or 0), int(end_col or 0)


KERNEL_ERROR = "_pallasite_in_kernel"


def mark_kernel_error(exc: BaseException) -> None:
    with contextlib.suppress(Exception):
        setattr(exc, KERNEL_ERROR, True)


def is_kernel_error(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or an exception in its cause/context chain) came out of a pallas_call."""
    seen = 0
    while exc is not None and seen < 16:
        if getattr(exc, KERNEL_ERROR, False):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


@functools.lru_cache(maxsize=4096)
def real_path(name: str) -> str:
    """``os.path.realpath`` of a code object's file name, kept while a block records (each call's stack
    is walked frame by frame: the same few dozen names, ~250 ``lstat`` calls a check otherwise)."""
    return os.path.realpath(name)


def _call_site(targets: set[str]) -> tuple[str | None, int | None, str | None]:
    frame = sys._getframe(2)
    first = None
    while frame is not None:
        code = frame.f_code
        if first is None:
            first = (code.co_filename, frame.f_lineno, code.co_name)
        if targets and real_path(code.co_filename) in targets:
            return code.co_filename, frame.f_lineno, code.co_name
        frame = frame.f_back
    return first if first else (None, None, None)


def _innermost_in(files: set[str]) -> tuple[str, int, str] | None:
    """(file, line, function) of the innermost frame on the stack in one of ``files``, or None."""
    frame = sys._getframe(2)
    while frame is not None:
        if real_path(frame.f_code.co_filename) in files:
            return frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name
        frame = frame.f_back
    return None


def _direct_caller() -> tuple[str, int] | None:
    """(file, line) of the frame that called ``pallas_call`` (a library's own site, when it is not the
    user's file), from inside the interception's wrapper."""
    frame = sys._getframe(2)
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else None


def _named_axes() -> dict[str, int]:
    """The named axes in scope (inside ``shard_map`` or a named ``vmap``): {name: size}."""
    try:
        from jax._src import core

        return {str(k): int(v) for k, v in core.get_axis_env().axis_sizes.items()}
    except Exception:  # noqa: BLE001 - another jax layout: unknown, as if none
        return {}


def stack_lines(targets: set[str]) -> tuple[int, ...]:
    """The lines of the user files on the stack (innermost first) from the caller's caller: the call,
    its wrappers' calls."""
    lines = []
    frame = sys._getframe(2)
    while frame is not None:
        if real_path(frame.f_code.co_filename) in targets:
            lines.append(frame.f_lineno)
        frame = frame.f_back
    return tuple(lines)


def stand_in_outputs(out_shape: Any) -> Any:
    """Zeros shaped like a pallas_call's ``out_shape`` (one array, or the same tree of them)."""
    import jax.numpy as jnp

    return jax.tree.map(lambda a: jnp.zeros(tuple(a.shape), a.dtype), out_shape,
                        is_leaf=lambda a: hasattr(a, "shape") and hasattr(a, "dtype"))


class UnpartitionedKernel(ValueError):
    """A kernel applied to operands sharded over several devices outside ``shard_map`` (jax's words
    for it on a TPU: "Mosaic kernels cannot be automatically partitioned")."""


def refuse_unpartitioned(operands: tuple[Any, ...]) -> None:
    """Raise ``UnpartitionedKernel`` when an operand is split over several devices by a mesh axis the
    call is not inside (``shard_map`` makes its axes manual: each kernel then sees its own shard)."""
    for index, leaf in enumerate(jax.tree.leaves(operands)):
        axes = _split_axes(leaf)
        if axes:
            shape = "x".join(str(d) for d in getattr(leaf, "shape", ()))
            raise UnpartitionedKernel(
                f"Mosaic kernels cannot be automatically partitioned: operand {index} ({shape}) is sharded over "
                f"mesh axis {', '.join(repr(a) for a in axes)}. Please wrap the call in a shard_map.")


def _split_axes(leaf: Any) -> list[str]:
    """The mesh axes (of size > 1, not manual) that split ``leaf``; [] when it is whole on each device."""
    try:
        sharding = getattr(jax.typeof(leaf), "sharding", None)
    except Exception:  # noqa: BLE001 - not an array: nothing is split
        return []
    spec, mesh = getattr(sharding, "spec", None), getattr(sharding, "mesh", None)
    concrete = getattr(leaf, "sharding", None) if isinstance(leaf, jax.Array) and not isinstance(leaf, jax.core.Tracer) else None
    if (not spec or not any(spec)) and concrete is not None and not concrete.is_fully_replicated:
        spec, mesh = getattr(concrete, "spec", None), getattr(concrete, "mesh", None)
    if mesh is None:
        return []
    manual = set(getattr(mesh, "manual_axes", ()) or ())
    sizes = dict(getattr(mesh, "shape", {}) or {})
    named = [n for entry in spec or () if entry is not None for n in (entry if isinstance(entry, tuple) else (entry,))]
    split = [n for n in named if n not in manual and sizes.get(n, 1) > 1]
    if split or not isinstance(leaf, jax.core.Tracer):
        return split
    # traced under jit over an Auto mesh: the type carries the mesh but no spec (how it is split is left
    # to the partitioner), and jax's TPU lowering refuses a Mosaic kernel in any multi-device context
    # whose axes are not all manual (tpu_custom_call: "cannot be automatically partitioned")
    return [n for n, size in sizes.items() if n not in manual and size > 1 and _auto(mesh, n)]


def _auto(mesh: Any, axis: str) -> bool:
    """Whether ``axis`` of an abstract mesh is an Auto axis (the partitioner decides the layout)."""
    names, types = tuple(getattr(mesh, "axis_names", ()) or ()), tuple(getattr(mesh, "axis_types", ()) or ())
    kind = types[names.index(axis)] if axis in names and len(types) == len(names) else None
    return "auto" in str(kind).lower()


def _abstract(operands: tuple[Any, ...]) -> tuple[Any, ...]:
    """The operands with every array (or tracer) as a ShapeDtypeStruct; other leaves (None, Python
    scalars) kept as they are. Recording never breaks the user's call."""
    def leaf(value: Any) -> Any:
        shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
        if shape is None or dtype is None:
            return value
        return jax.ShapeDtypeStruct(tuple(shape), dtype)

    try:
        return tuple(jax.tree.map(leaf, operands))
    except Exception:  # noqa: BLE001 - an odd pytree: keep what can be described
        return tuple(leaf(o) for o in operands)


def _arrays(tree: Any) -> list[Any]:
    return [a for a in jax.tree.leaves(tree) if isinstance(a, jax.ShapeDtypeStruct)]


@dataclass
class BlockInfo:
    """One operand's block shape (None entries for squeezed dims), from its BlockSpec."""

    block_shape: tuple[int | None, ...] | None
    memory_space: str | None = None


def block_shapes(specs: Any) -> list[BlockInfo]:
    """The BlockSpecs of ``in_specs``/``out_specs`` (a spec, list or tuple), flattened in order."""
    if specs is None:
        return []
    leaves = specs if isinstance(specs, (list, tuple)) else [specs]
    out = []
    for spec in leaves:
        shape = getattr(spec, "block_shape", None)
        dims: tuple[int | None, ...] | None = None
        if shape is not None:
            dims = tuple(d if isinstance(d, int) else None for d in shape)
        space = getattr(spec, "memory_space", None)
        out.append(BlockInfo(dims, str(space) if space is not None else None))
    return out


def dimension_semantics(compiler_params: Any) -> tuple[str, ...] | None:
    sem = getattr(compiler_params, "dimension_semantics", None)
    if sem is None:
        return None
    return tuple(str(getattr(s, "value", s)).lower().split(".")[-1] for s in sem)


@dataclass
class SemanticsOverride:
    """A rewrite hook that replaces ``dimension_semantics`` (None: leave the call alone)."""

    semantics: Callable[[tuple[str, ...]], tuple[str, ...]] | None = None
    applied: list[tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=list)

    def __call__(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        params = kwargs.get("compiler_params")
        sem = dimension_semantics(params)
        if self.semantics is None or sem is None:
            return kwargs
        new = self.semantics(sem)
        if new == sem:
            return kwargs
        try:
            kwargs["compiler_params"] = dataclasses.replace(params, dimension_semantics=new)
        except (TypeError, ValueError):
            return kwargs
        self.applied.append((sem, new))
        return kwargs
