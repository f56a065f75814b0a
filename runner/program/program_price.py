"""A program priced the one way pallasite prices programs: exported for the TPU, its module read (worker side).

There is one cost model (issue 56): the judge prices a candidate from the module it exported
(runner/program/module_cost.price_exported), and everything else that prices a program - the ``estimate`` op
(``pallasite estimate``, hovers, ``tune`` of the user's own file, ``time --backend estimate``), the
reference's fallback when libtpu is missing, the benchmarks - exports it the same way and prices that
module. ``price_program(fn, args, chip)``:

1. exports ``fn`` at ``args``' shapes for the chip's TPU only (runner/program/program_export.export_program with
   ``platforms=("tpu",)``: every pallas_call lowered by Mosaic for the chip's device kind), inside
   runner/target_chip.target_chip, so a file that asks the hardware (``pltpu.get_tpu_info()``,
   ``jax.devices()``, ``jax.default_backend()``) while it is traced gets the target chip's answers, as
   the judge's candidate process gives them;
2. prices the module with ``price_exported`` at that signature, with the concrete values among ``args``
   (integer inputs the task made for real: page tables, lengths, group sizes) as the judge's values.

A program that does not export is "no estimate: the program does not lower for the TPU: <why>" (the
``CostEstimate`` of ``price_exported``'s failures), never an exception.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ...analysis.types import ChipSpec, CostEstimate


def flat_entry(fn: Callable[..., Any], args: Sequence[Any]) -> tuple[Callable[..., Any], list[Any]]:
    """(``fn`` over the flat leaves of ``args``, those leaves): the form a module is exported in."""
    import jax

    leaves, tree = jax.tree.flatten(tuple(args))

    def flat(*xs: Any) -> Any:
        return fn(*jax.tree.unflatten(tree, list(xs)))

    return flat, leaves


def export_for_chip(fn: Callable[..., Any], args: Sequence[Any], chip: ChipSpec) -> tuple[Any, list[list[Any]], list[Any]]:
    """(the ``jax.export.Exported`` of ``fn`` at ``args`` for ``chip``'s TPU, its signature, the concrete
    leaves' values or None). Raises what the export raises."""
    import jax
    import numpy as np

    from .program_export import export_program
    from ..target_chip import target_chip

    flat, leaves = flat_entry(fn, args)
    signature = [[[int(d) for d in a.shape], jax.numpy.dtype(a.dtype).name] for a in leaves]
    values = [None if isinstance(a, jax.ShapeDtypeStruct) or not hasattr(a, "shape") else np.asarray(a)
              for a in leaves]
    with target_chip(chip.name):
        exported = export_program(flat, signature, chip.device_kind, platforms=("tpu",))
    return exported, signature, values


def price_program(fn: Callable[..., Any], args: Sequence[Any], chip: ChipSpec,
                  config: tuple[tuple[str, Any], ...] = (), *, device: Any = None, factors: Any = None,
                  parts: list[Any] | None = None) -> CostEstimate:
    """``fn(*args)`` exported for ``chip``'s TPU and its module priced (see the module docstring).
    ``args`` mix arrays (their values are the judge's values: scalar-prefetch tables, dynamic grids) and
    ShapeDtypeStructs. ``device``: a deviceless libtpu device of the chip (the XLA ops at XLA's cycles);
    ``parts``: receives (the counted kernels, the XLA ops), as ``price_exported``'s does."""
    from .roofline import ASSUMPTIONS, FACTORS, MODEL
    from .module_cost import FROM_MODULE, price_exported

    try:
        exported, signature, values = export_for_chip(fn, args, chip)
    except Exception as exc:  # noqa: BLE001 - the program's failure is the estimate's reason
        why = f"the program does not lower for the TPU ({chip.name}): {type(exc).__name__}: {exc}"
        return CostEstimate(chip=chip.name, config=config, status="trace_error", error=f"no estimate: {why}"[:2000],
                            assumptions=ASSUMPTIONS + (FROM_MODULE,), model=MODEL)
    return price_exported(exported, chip, signature, device=device, factors=factors or FACTORS, config=config,
                          values=values, parts=parts)
