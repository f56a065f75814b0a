"""Input functions that need concrete values while they run (worker side: imports jax).

Input shapes are read with ``jax.eval_shape``, which traces the inputs function abstractly: nothing
is allocated. A function that turns a computed value into a Python number while it runs —
MaxKernel's example task computes ``softmax_scale = float(1.0 / jnp.sqrt(head_dim))`` in
``get_inputs()`` — fails under tracing with a concretization error. Such a function is run once
concretely instead, on the CPU device, and what it returned is kept as ``ShapeDtypeStruct``s (the
arrays themselves are dropped at once); its Python values (static arguments) are real.

    needs_concrete_values(exc) -> bool     # the eval_shape failure was a concretization error
    concrete_shapes(fn) -> pytree          # fn() run on CPU, arrays as ShapeDtypeStructs
    ShapesOnly(fn, shapes)                 # an inputs function whose shapes are already known
"""

from __future__ import annotations

from typing import Any, Callable

import jax

_CONCRETE_ERRORS = tuple(getattr(jax.errors, name) for name in (
    "ConcretizationTypeError", "TracerIntegerConversionError", "TracerBoolConversionError",
    "TracerArrayConversionError") if hasattr(jax.errors, name))


def needs_concrete_values(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) says a traced value was used as a concrete one."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, _CONCRETE_ERRORS):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def concrete_shapes(fn: Callable[[], Any]) -> Any:
    """Run ``fn()`` for real on the CPU device; its arrays as ShapeDtypeStructs, other leaves as they are."""
    cpu = jax.devices("cpu")[0]
    with jax.default_device(cpu):
        made = fn()
    return jax.tree.map(_abstract, made, is_leaf=lambda a: hasattr(a, "shape") and hasattr(a, "dtype"))


def _abstract(value: Any) -> Any:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return jax.ShapeDtypeStruct(tuple(value.shape), value.dtype)
    return value


class ShapesOnly:
    """An inputs function whose argument shapes were computed concretely once (``shapes``).

    Calling it returns the ShapeDtypeStructs (tier 3 then makes random arrays of those shapes);
    ``RuntimeTask.abstract_args`` reads ``shapes`` instead of tracing the function again.
    """

    def __init__(self, fn: Callable[..., Any], shapes: Any):
        self.fn = fn
        self.shapes = shapes
        self.__name__ = getattr(fn, "__name__", "get_inputs")

    def __call__(self) -> Any:
        return self.shapes
