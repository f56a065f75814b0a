"""A program as the judge receives it: one ``jax.export`` module lowered for the TPU and for the CPU.

``export_program(fn, signature, device_kind)`` traces ``fn`` once and lowers it for both platforms
in one module (``jax.export`` with ``platforms=("tpu", "cpu")``): each ``pallas_call`` lowers by
Mosaic for the TPU (a ``tpu_custom_call`` carrying the kernel's Mosaic module, for the chip named by
``device_kind``) and by jax's HLO interpreter for the CPU (plain HLO: a loop over the grid, blocks
sliced in and out, fresh memory NaN-filled). jax lowers a pallas_call for the CPU only in interpret
mode, so this module registers that lowering for the "cpu" platform (``cpu_lowering``); it is the one
jax's own ``interpret=True`` uses. One trace serves both platforms: what runs on a CPU judge and
what a TPU judge compiles and the cost model prices come from the same program.

``signature`` is the judge's: ``[[dims, dtype], ...]`` per flat input, each dim an int or a symbolic
expression (``"256*b"``, jax.export.symbolic_shape's syntax, one scope for all inputs), so one module
can be run at every size the judge picks and the program cannot tell which.

Worker side: imports jax lazily.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

PLATFORMS = ("tpu", "cpu")
_registered = False


def cpu_lowering() -> None:
    """Register the HLO interpreter as the pallas_call lowering for the "cpu" platform (idempotent); a call in
    interpret mode keeps jax's own lowering (a process that exported a program and then runs tier 3 got the
    judge's NaN-filled interpreter for it, whatever memory its InterpretParams asked for)."""
    global _registered
    if _registered:
        return
    from functools import partial

    from jax._src.interpreters import mlir
    from jax._src.pallas import hlo_interpreter
    from jax._src.pallas.pallas_call import pallas_call_p

    entry = mlir._platform_specific_lowerings.get("cpu", {}).get(pallas_call_p) or mlir._lowerings.get(pallas_call_p)
    default = getattr(entry, "rule", entry)  # jax's own lowering: it runs an interpret-mode call as jax does

    def rule(ctx: Any, *in_nodes: Any, interpret: Any, **params: Any) -> Any:
        if interpret and default is not None:  # a call in interpret mode (tier 3's) is not the judge's to lower
            return default(ctx, *in_nodes, interpret=interpret, **params)
        impl = partial(hlo_interpreter.pallas_call_hlo_interpret, **params)
        return mlir.lower_fun(impl, multiple_results=True)(ctx, *in_nodes)

    mlir.register_lowering(pallas_call_p, rule, platform="cpu")
    _literal_indices()
    _registered = True


def _literal_indices() -> None:
    """jax's discharge of a masked load or store (pallas's ``load_p``/``swap_p``: ``pltpu.store(ref, v,
    mask=...)``, ``pl.load(..., mask=...)``) reads ``.shape`` of every index, and an index that is a Python
    int (``ref.at[h]``) reaches it as a jaxpr literal, a ``TypedInt``, which has none: the HLO interpreter's
    lowering then fails (JAXBench 7p's ragged paged attention stores its per-head softmax state so). Its
    rules are given such literals as 0-d arrays of their dtype (idempotent; nothing else changes)."""
    import numpy as np
    from jax._src.pallas import primitives
    from jax._src.state import discharge

    typed = getattr(__import__("jax._src.literals", fromlist=["TypedInt"]), "TypedInt", None)
    if typed is None:
        return
    for prim in (primitives.load_p, primitives.swap_p):
        rule = discharge._discharge_rules.get(prim)
        if rule is None or getattr(rule, "pallasite_literals", False):
            continue

        def as_arrays(in_avals: Any, out_avals: Any, *args: Any, _rule: Any = rule, **params: Any) -> Any:
            args = tuple(np.asarray(a, a.dtype) if isinstance(a, typed) else a for a in args)
            return _rule(in_avals, out_avals, *args, **params)

        as_arrays.pallasite_literals = True  # type: ignore[attr-defined]
        discharge._discharge_rules[prim] = as_arrays


def structs(signature: Sequence[Sequence[Any]]) -> list[Any]:
    """``jax.ShapeDtypeStruct``s for a judge's signature, symbolic dims in one shared scope."""
    import jax
    import jax.numpy as jnp

    scope = jax.export.SymbolicScope()
    out = []
    for dims, dtype in signature:
        if any(isinstance(d, str) for d in dims):
            shape = jax.export.symbolic_shape(", ".join(str(d) for d in dims), scope=scope) if dims else ()
        else:
            shape = tuple(int(d) for d in dims)
        out.append(jax.ShapeDtypeStruct(shape, jnp.dtype(str(dtype))))
    return out


def symbolic(signature: Sequence[Sequence[Any]]) -> bool:
    return any(isinstance(d, str) for dims, _ in signature for d in dims)


def export_program(fn: Callable[..., Any], signature: Sequence[Sequence[Any]], device_kind: str,
                   platforms: Sequence[str] = PLATFORMS) -> Any:
    """``fn`` (taking the flat inputs) exported for ``platforms`` at ``signature``; Mosaic lowers its
    kernels for the chip ``device_kind`` (e.g. "TPU v6 lite"). Returns the ``jax.export.Exported``."""
    import jax
    from jax.sharding import AbstractDevice, AbstractMesh, use_abstract_mesh

    cpu_lowering()
    args = structs(signature)
    mesh = AbstractMesh((1,), ("x",), abstract_device=AbstractDevice(device_kind=str(device_kind), num_cores=1,
                                                                     platform="tpu"))
    with use_abstract_mesh(mesh):
        return jax.export.export(jax.jit(lambda *a: fn(*a)), platforms=tuple(platforms))(*args)
