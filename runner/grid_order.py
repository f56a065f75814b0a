"""Run chosen grid axes of every pallas_call backward, without the interpreter's help (worker side).

jax's TPU interpreter runs "parallel" grid axes in a shuffled order and on two simulated cores,
which shows a reduction axis wrongly marked parallel; but it cannot run ``dimension_semantics``
under ``jax.vmap`` (tier 3 then drops them and runs every axis in order), and without a reference
a wrong result has nothing to be compared with. ``ReversedAxes`` runs the chosen axes backward
while the steps still run in order: each ``index_map`` is handed ``n - 1 - i`` for such an axis
and the kernel's ``pl.program_id(axis)`` answers ``n - 1 - i`` too, so step ``i`` does what step
``n - 1 - i`` did. A kernel whose steps along that axis are independent gives the same outputs; one
that carries state along it (an accumulator zeroed on step 0) does not. Comparing the two runs
needs no reference and works under vmap (the remapping is inside the kernel and its index_maps,
which vmap's batching keeps). Used as the ``rewrite`` and ``wrap_kernel`` hooks of
``intercept_pallas_calls``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Any, Callable, Iterator

from .intercept import dimension_semantics

Choose = Callable[[tuple[str, ...] | None, tuple[int, ...]], tuple[int, ...]]


def parallel_axes(sem: tuple[str, ...] | None, grid: tuple[int, ...]) -> tuple[int, ...]:
    """The axes marked "parallel" that have two steps or more."""
    if not sem or len(sem) != len(grid):
        return ()
    return tuple(k for k, (s, n) in enumerate(zip(sem, grid)) if s == "parallel" and n >= 2)


def call_grid(kwargs: dict[str, Any]) -> tuple[int, ...] | None:
    grid_spec = kwargs.get("grid_spec")
    grid = getattr(grid_spec, "grid", None) if grid_spec is not None else kwargs.get("grid")
    grid = (grid,) if isinstance(grid, int) else tuple(grid or ())
    return grid if grid and all(isinstance(n, int) for n in grid) else None


@dataclasses.dataclass
class ReversedAxes:
    """The hooks; ``choose(semantics, grid)`` names the axes to run backward for each call (read from
    the call as the user made it, before any other rewrite). ``reversed`` lists what was done."""

    choose: Choose
    reversed: list[tuple[int, ...]] = dataclasses.field(default_factory=list)
    _pending: tuple[tuple[int, ...], tuple[int, ...]] | None = None

    def rewrite(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        self._pending = None
        grid = call_grid(kwargs)
        axes = self.choose(dimension_semantics(kwargs.get("compiler_params")), grid) if grid else ()
        if not axes:
            return kwargs
        flip = functools.partial(_flipped_indices, axes=axes, grid=grid)
        grid_spec = kwargs.get("grid_spec")
        if grid_spec is not None:
            kwargs["grid_spec"] = dataclasses.replace(grid_spec, in_specs=_mapped(grid_spec.in_specs, flip),
                                                      out_specs=_mapped(grid_spec.out_specs, flip))
        else:
            for name in ("in_specs", "out_specs"):
                if kwargs.get(name) is not None:
                    kwargs[name] = _mapped(kwargs[name], flip)
        self._pending = (axes, grid)
        self.reversed.append(axes)
        return kwargs

    def wrap_kernel(self, kernel: Callable[..., Any], out_shape: Any, kwargs: dict[str, Any]) -> Callable[..., Any]:
        if self._pending is None:
            return kernel
        axes, grid = self._pending
        self._pending = None

        @functools.wraps(kernel)
        def backward(*refs: Any, **params: Any) -> Any:
            with _program_ids_reversed(axes, grid):
                return kernel(*refs, **params)

        return backward


def _flipped_indices(indices: tuple[Any, ...], *, axes: tuple[int, ...], grid: tuple[int, ...]) -> tuple[Any, ...]:
    return tuple(grid[k] - 1 - i if k < len(grid) and k in axes else i for k, i in enumerate(indices))


def _mapped(specs: Any, flip: Callable[[tuple[Any, ...]], tuple[Any, ...]]) -> Any:
    """``specs`` (a BlockSpec, or a list/tuple/dict of them) with each index_map fed flipped grid indices
    (scalar-prefetch refs, after the grid indices, pass through)."""
    if isinstance(specs, (list, tuple)):
        return type(specs)(_mapped(s, flip) for s in specs)
    if isinstance(specs, dict):
        return {k: _mapped(v, flip) for k, v in specs.items()}
    index_map = getattr(specs, "index_map", None)
    if index_map is None or not dataclasses.is_dataclass(specs):
        return specs

    @functools.wraps(index_map)
    def flipped(*args: Any) -> Any:
        return index_map(*flip(args))

    return dataclasses.replace(specs, index_map=flipped)


@contextlib.contextmanager
def _program_ids_reversed(axes: tuple[int, ...], grid: tuple[int, ...]) -> Iterator[None]:
    """``pl.program_id(k)`` answers ``n - 1 - i`` for the axes given, while the kernel is traced."""
    from jax.experimental import pallas as pl
    from jax._src.pallas import primitives

    original = primitives.program_id

    def program_id(axis: int) -> Any:
        i = original(axis)
        return grid[axis] - 1 - i if axis in axes and axis < len(grid) else i

    saved = (pl.program_id, primitives.program_id)
    pl.program_id = primitives.program_id = program_id
    try:
        yield
    finally:
        pl.program_id, primitives.program_id = saved
