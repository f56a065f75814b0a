"""Inputs for `time` and `profile`: fresh random values each call, and one shape beyond the example.

Worker side (imports jax). A candidate must never see the same input values twice across
requests, so a result cached or precomputed for the example inputs cannot pass:

- ``fresh_inputs(shapes, seed, template)`` (``runner/tier3/drawn_inputs.py``, where the locate step draws its
  fresh sets too): concrete arrays with the task's shapes and dtypes; floating leaves get N(0, 1) samples from
  ``seed``, scaled to the mean and spread of the task's own values when its inputs function makes arrays
  (``template``); integer and boolean leaves (often indices or masks with a valid range) keep the task's own
  values when its inputs function makes arrays (``template``), else small random integers in [0, 8).
- ``extra_shapes(task, module)``: abstract arguments at a second shape, when the task allows one:
  an explicit ``extra_inputs()`` / ``NAME_extra_inputs()`` in the file; else an inputs function
  whose int parameters have defaults (native) or whose parameters name int ``CONFIG`` values
  (JAXBench), called with those ints doubled (doubling keeps every multiple of a block a
  multiple); else, as JAXBench writes its tasks, a ``create_inputs`` that reads the global
  ``CONFIG``: the int CONFIG values that are sizes of the inputs are doubled in the modules'
  CONFIG (``config_scaled``) while the inputs are made and while the candidate and the reference
  run at that shape. Returns ``(shapes, how, scaled CONFIG values or None)``, or
  ``(None, why, None)`` when the task allows no other shape.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from typing import Any, Callable, Iterable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

from ..tier3.drawn_inputs import fresh_inputs  # noqa: F401  (the judge's draws; the locate step's too)


def abstract(tree: Any) -> tuple[Any, ...]:
    """The arguments as a tuple of ShapeDtypeStruct pytrees."""
    out = jax.tree.map(lambda a: jax.ShapeDtypeStruct(tuple(a.shape), a.dtype), tree)
    if isinstance(out, list):
        out = tuple(out)
    return out if isinstance(out, tuple) else (out,)


def static_leaves(inputs: Callable[[], Any] | None) -> dict[int, Any]:
    """The leaves of ``inputs()`` that are plain Python scalars, by flat index (a static size the reference reads
    as a Python value: JAXBench 11p's ``max_expert_size``), read by tracing it (nothing is computed) at the
    CONFIG of the moment; {} when there are none or it does not trace."""
    found: dict[int, Any] = {}

    def probe() -> int:
        for i, leaf in enumerate(jax.tree.leaves(inputs())):
            if isinstance(leaf, (bool, int, float)):
                found[i] = leaf
        return 0

    if inputs is None:
        return {}
    try:
        jax.eval_shape(probe)
    except Exception:  # noqa: BLE001 - an inputs function that does not trace: its own error is said elsewhere
        return {}
    return found


def with_static_inputs(reference: Callable[..., Any] | None, inputs: Callable[[], Any] | None) -> Any:
    """``reference`` given, at each call, the Python scalars its task's ``inputs()`` makes where its arguments
    hold them (a traced argument cannot be a static size), read at the CONFIG of that call (a reduced size
    changes them); ``reference`` itself when the task makes none. The judge draws and passes every other input."""
    if reference is None or not static_leaves(inputs):
        return reference

    @functools.wraps(reference)  # (its module's CONFIG is still the one a reduced size scales)
    def called(*args: Any) -> Any:
        static = static_leaves(inputs)
        leaves, tree = jax.tree.flatten(args)
        return reference(*jax.tree.unflatten(tree, [static.get(i, leaf) for i, leaf in enumerate(leaves)]))

    return called


def concrete_template(inputs: Callable[..., Any] | None) -> tuple[Any, ...] | None:
    """The task's own example inputs as arrays, when its inputs function makes arrays (else None)."""
    if inputs is None:
        return None
    try:
        values = inputs()
    except Exception:  # noqa: BLE001 - the shapes path reports the task's own error
        return None
    leaves, tree = jax.tree.flatten(values)
    if not leaves or any(isinstance(leaf, jax.ShapeDtypeStruct) for leaf in leaves):
        return None
    if any(not hasattr(leaf, "shape") for leaf in leaves):  # a Python scalar among arrays (a static size)
        if not all(hasattr(leaf, "shape") or isinstance(leaf, (bool, int, float)) for leaf in leaves):
            return None
        values = jax.tree.unflatten(tree, [leaf if hasattr(leaf, "shape") else np.asarray(leaf) for leaf in leaves])
    if isinstance(values, list):
        values = tuple(values)
    return values if isinstance(values, tuple) else (values,)


def copies(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """New buffers with the same values (so a cache keyed by buffer identity misses)."""
    out = jax.tree.map(lambda a: jnp.array(a, copy=True), args)
    return jax.block_until_ready(out)


def extra_shapes(task: Any, module: Any) -> tuple[tuple[Any, ...] | None, str, dict[str, int] | None]:
    """(abstract args at another shape, how they were made, the CONFIG values to scale while they
    run) or (None, why the task allows none, None)."""
    ns = vars(module) if module is not None else {}
    for name in (f"{task.name}_extra_inputs", "extra_inputs"):
        fn = ns.get(name)
        if callable(fn):
            return shapes_of(fn), f"{name}()", None
    if task.format == "jaxbench":
        create = ns.get("create_inputs")
        config = dict(task.config or {})
        if not callable(create):
            return None, "the task has no create_inputs to call at another size", None
        params = _parameters(create)
        doubled = {k: 2 * v for k, v in config.items() if k in params and _is_int(v)}
        if doubled:
            call_config = {**config, **doubled}
            return (shapes_of(lambda: create(**{k: v for k, v in call_config.items() if k in params})),
                    "create_inputs with " + ", ".join(f"{k}={v}" for k, v in sorted(doubled.items())), None)
        sizes = {d for leaf in jax.tree.leaves(task.abstract_args()) for d in getattr(leaf, "shape", ())}
        scaled = {k: 2 * v for k, v in config.items() if _is_int(v) and v in sizes}
        if not scaled:
            return None, "no int CONFIG value is a size of the inputs (nothing to scale)", None
        with config_scaled((create,), scaled):
            shapes = shapes_of(create)
        return shapes, "CONFIG with " + ", ".join(f"{k}={v}" for k, v in sorted(scaled.items())), scaled
    inputs = task.inputs
    if inputs is None or task.format != "native":
        return None, "the task's inputs take no size parameter", None
    params = _parameters(inputs)
    doubled = {k: 2 * p.default for k, p in params.items() if _is_int(p.default)}
    if not doubled:
        return None, ("the inputs function takes no int parameter with a default; "
                      "define extra_inputs() to time a second shape"), None
    return (shapes_of(lambda: inputs(**doubled)),
            f"{getattr(inputs, '__name__', 'inputs')}(" + ", ".join(f"{k}={v}" for k, v in sorted(doubled.items())) + ")",
            None)


@contextlib.contextmanager
def config_scaled(functions: Iterable[Callable[..., Any]], scaled: dict[str, int] | None) -> Iterator[None]:
    """The ``CONFIG`` dict of each function's module with ``scaled`` values, for the duration (a
    JAXBench module reads its global CONFIG when called); nothing when ``scaled`` is None."""
    spaces: dict[int, dict[str, Any]] = {}
    for fn in functions if scaled else ():
        while isinstance(fn, functools.partial):
            fn = fn.func
        space = getattr(inspect.unwrap(fn), "__globals__", None)
        if isinstance(space, dict) and isinstance(space.get("CONFIG"), dict):
            spaces[id(space)] = space
    saved = [(space, space["CONFIG"]) for space in spaces.values()]
    for space, config in saved:
        space["CONFIG"] = {**config, **(scaled or {})}
    try:
        yield
    finally:
        for space, config in saved:
            space["CONFIG"] = config


def shapes_of(fn: Callable[[], Any]) -> tuple[Any, ...]:
    shapes = jax.eval_shape(fn)
    if isinstance(shapes, list):
        shapes = tuple(shapes)
    return shapes if isinstance(shapes, tuple) else (shapes,)


def _parameters(fn: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return {}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def signature(args: Any) -> list[list[Any]]:
    """[[shape, dtype], ...] of the leaves, for results and store keys."""
    return [[list(a.shape), jnp.dtype(a.dtype).name] for a in jax.tree.leaves(args)]
