"""The cost-model estimate of a candidate, made by the judge from the candidate's exported module (the
candidate never prices itself), and of the trusted reference, by the same model.

``estimate(params, prep, sizes, modules, verifier)`` prices the module the candidate exported at the
task's full size (runner/program/module_cost.price_exported: the TPU program's Mosaic kernels from their own
Mosaic IR - grid, blocks, index maps, body - and its plain XLA ops), with the task's own integer
inputs at that size as the values (scalar-prefetch index maps, dynamic grids and data-dependent loops
read them; the floats are never made), and, when asked, the
reference (runner/program/cost_model.estimate_reference: XLA's compiled module for the chip). Returns the
``estimate`` field of the ``time`` result: {"candidate": CostEstimate (JSON), "reference": dict|None,
"chip": ChipSpec (JSON)}; a side that cannot be priced says why.

Worker side: imports jax.
"""

from __future__ import annotations

from typing import Any


def _chip(name: str) -> Any:
    from ..tune_ops import chip_spec

    return chip_spec(name, probe=False)


def _reference(prep: Any, sizes: Any, chip: Any) -> dict[str, Any]:
    from .. import tune_ops

    try:
        return tune_ops.reference_priced(prep.reference, tune_ops._inputs(prep.task), chip)
    except Exception as exc:  # noqa: BLE001 - the trusted side's failure, said as such
        return {"error": f"the reference could not be estimated: {type(exc).__name__}: {str(exc)[:300]}"}


def _price(blob: bytes | None, signature: Any, concrete: Any, chip: Any, why: str,
           values: Any = None) -> dict[str, Any]:
    from ...analysis.types import CostEstimate, to_json
    from ..program.cost_model import ASSUMPTIONS, MODEL

    def no(reason: str) -> dict[str, Any]:
        return to_json(CostEstimate(chip=chip.name, config=(), status="trace_error", error=f"no estimate: {reason}",
                                    assumptions=ASSUMPTIONS, model=MODEL))

    if blob is None:
        return no(f"the candidate's program does not export at the task's size: {why}")
    try:
        from ..program.module_cost import price_exported
    except ImportError:
        return no("this worker has no pricer of exported programs (runner/program/module_cost.py)")
    try:
        return to_json(price_exported(blob, chip, concrete, values=values))
    except Exception as exc:  # noqa: BLE001 - the pricer's failure is data (it should return one)
        return no(f"pricing the module failed: {type(exc).__name__}: {str(exc)[:300]}")


def estimate(params: dict[str, Any], prep: Any, sizes: Any, modules: dict[str, Any]) -> dict[str, Any]:
    """The ``estimate`` field (see the module docstring)."""
    from ...analysis.types import to_json

    from .instance import integers_of

    chip = _chip(str(params["chip"]))
    entry = modules.get("full") or modules.get("main")
    blob, signature, _, why, concrete = entry
    # the task's own integers at its size (page tables, lengths, group sizes: what index maps, dynamic grids
    # and data-dependent loops read), the floats left out; the estimate says it was priced for these values
    values = integers_of(prep.task.inputs) if "full" in modules or not sizes.reduced else None
    values = values[:len(signature)] if values is not None else None  # a candidate given the first inputs
    out: dict[str, Any] = {"chip": to_json(chip), "candidate": _price(blob, signature, concrete, chip, why, values),
                           "reference": None}
    if params.get("reference_estimate"):
        out["reference"] = _reference(prep, sizes, chip)
    return out
