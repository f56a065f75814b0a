"""The cost-model estimate of an exported program, computed from its bytes (worker side, imports jax lazily):
the one cost model (issue 56). The judge prices a candidate's exported module here; the ``estimate`` op,
``tune``, hovers and the reference's fallback export their program the same way (runner/program/program_price.py)
and price it here too, so every figure divides with every other as one method. The counts become seconds
by runner/program/roofline.py (``roofline``; the model's name ``MODEL``).

What is read from the module (runner/program/module_read.py refines its symbolic dims at the judge's
signature and finds the TPU program: every platform case at the TPU's branch):

- per Mosaic kernel (``tpu_custom_call``; runner/program/mosaic_ir.py, runner/program/mosaic_counts.py,
  runner/program/kernel_cost.py): its grid, windows and index maps evaluated at every grid step, memory
  spaces, buffers, scratch, semantics, its own DMAs and the work its body does at each step;
- the plain XLA ops around the kernels (runner/program/module_xla.py): FLOPs and fused-op bytes; or, with
  ``device`` (a deviceless libtpu topology device), XLA's own cycles per op of the module compiled
  for the chip (``compiled_ops.hlo_ops`` + ``cost_model.price_hlo``), the Mosaic custom calls priced by
  the kernel pricer instead of XLA's "bytes plus a launch".

Values the module does not fix (scalar-prefetch tables, grid sizes computed from inputs) come from
``values`` (the judge's inputs) through the ops that compute them (runner/program/module_values.py); where
unknown, zeros are assumed for index maps (noted) and a dynamic grid gives no estimate.
``price_exported`` never raises: a module it cannot price is ``status="trace_error"`` with
``error="no estimate: <why>"``. runner/program/module_facts.py reads what the judge checks besides the price.
"""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

from ...analysis.types import CallCost, ChipSpec, CostEstimate

from .body_counts import BodyCounts
from .checked_classes import rests_on
from .roofline import ASSUMPTIONS, FACTORS, MODEL, Factors, NoEstimate, roofline

FROM_MODULE = ("priced from the exported module: each Mosaic kernel's grid, windows, index maps and body read from "
               "its MLIR; the XLA ops around them from the module's StableHLO (runner/program/module_cost.py)")


def _kernel_calls(module: Any, values: Any, mxu: int, chip: str = "",
                  used: list[str] | None = None) -> list[tuple[CallCost, BodyCounts]]:
    """Each kernel counted; ``used`` receives what the inputs' values decided (a grid's size, the
    scalar-prefetch tables) that the module alone does not."""
    from .kernel_cost import kernel_cost, sparsecore_why
    from .module_values import operand_values
    from .mosaic_ir import decode_call

    types = module.tree.types
    out = []
    for site in module.kernels:
        k = decode_call(site.call)
        if k.core_type.startswith("sc"):
            raise NoEstimate(sparsecore_why(k, chip))
        scalars = site.call.operands[:k.n_dynamic + k.n_prefetch]
        known = operand_values(module, scalars, values)
        if used is not None and values is not None and any(v is not None for v in known):
            alone = operand_values(module, scalars, None)
            from_inputs = [i for i, (a, b) in enumerate(zip(alone, known)) if a is None and b is not None]
            if any(i < k.n_dynamic for i in from_inputs):
                used.append(f"{k.name}'s grid size")
            if any(i >= k.n_dynamic for i in from_inputs):
                used.append(f"{k.name}'s scalar-prefetch tables (lengths, page tables, group metadata: what its "
                            "blocks, copies and loops follow)")
        operands = [types[v] for v in site.call.operands[k.n_dynamic:]]
        out.append(kernel_cost(k, operands, [types[v] for v in site.call.results], known[:k.n_dynamic],
                               known[k.n_dynamic:], mxu))
    return out


def module_hash(module: Any) -> str:
    """A hash of the refined module without locations: the same hash, the same program (timed once)."""
    text = module.keep[1].operation.get_asm(enable_debug_info=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def price_exported(blob: Any, chip: ChipSpec, signature: Sequence[Sequence[Any]] | None = None, *,
                   device: Any = None, factors: Factors = FACTORS, config: tuple[tuple[str, Any], ...] = (),
                   values: Sequence[Any] | None = None, parts: list[Any] | None = None) -> CostEstimate:
    """Price the exported program ``blob`` (bytes, a ``jax.export.Exported`` or a module_read.Module
    already read, shared with module_facts) on ``chip`` at
    ``signature`` (``[[dims, dtype], ...]`` per flat input; needed when the module has symbolic dims).
    ``values``: the judge's concrete inputs where it has them (None elsewhere), for scalar-prefetch
    tables and data-dependent grids. ``device``: a deviceless libtpu device of the chip, to price the
    XLA ops by XLA's own cycles. ``parts``: a list that receives (the counted kernels, the XLA ops).
    The estimate's ``rests_on`` says each kernel's class, whether its rules were checked against published
    TPU times (runner/program/checked_classes.py), and what the inputs' values decided. See the module docstring."""
    from .kernel_cost import KernelError
    from .module_read import Module, ModuleError, read_module
    from .module_xla import count_module_xla

    def failed(why: str) -> CostEstimate:
        return CostEstimate(chip=chip.name, config=config, status="trace_error", error=f"no estimate: {why}"[:2000],
                            assumptions=ASSUMPTIONS + (FROM_MODULE,), model=MODEL)

    try:
        module = blob if isinstance(blob, Module) else read_module(blob, signature)
        if "tpu" not in module.platforms:
            return failed(f"the module was lowered for {', '.join(module.platforms)}, not for the TPU")
        used: list[str] = []
        counted = _kernel_calls(module, values, chip.mxu_size, chip.name, used)
        xla = count_module_xla(module, chip.mxu_size)
        if parts is not None:
            parts.append((counted, xla))
        if device is not None:
            roof = _priced_on_chip(module, counted, xla, chip, device, factors, signature)
        else:
            roof = roofline(counted, chip, xla, factors)
        digest = module_hash(module)
    except (ModuleError, KernelError, NoEstimate) as exc:
        return failed(str(exc))
    except Exception as exc:  # noqa: BLE001 - a module the pricer cannot read: said, never raised
        return failed(f"cost model: {type(exc).__name__}: {exc}")
    calls = tuple(c for c, _ in counted)
    return CostEstimate(chip=chip.name, config=config, status="ok", calls=calls, program_hash=digest,
                        assumptions=ASSUMPTIONS + (FROM_MODULE,), model=MODEL, xla_bytes=xla.hbm_bytes,
                        xla_flops=xla.flops, rests_on=rests_on(calls, used), **roof)


def _priced_on_chip(module: Any, counted: list[tuple[CallCost, BodyCounts]], xla: Any, chip: ChipSpec, device: Any,
                    factors: Factors, signature: Any) -> dict[str, Any]:
    """The kernels by the roofline, the other ops by XLA's own cycles in the module compiled for the chip."""
    from .compile_module import compiled_ops
    from .roofline import peak_compute_s, price_hlo

    try:
        ops, notes = compiled_ops(module, device)
    except Exception as exc:  # noqa: BLE001 - said as the reason there is no estimate
        raise NoEstimate(f"the module does not compile for {chip.name} (deviceless libtpu): "
                         f"{type(exc).__name__}: {str(exc)[:500]}") from exc
    rest = [o for o in ops if not (o.opcode == "custom-call" and o.kind == "tpu_custom_call")]
    kernels = roofline(counted, chip, None, factors)
    other = price_hlo(rest, chip, factors, floor_s=peak_compute_s(xla, chip))
    terms = {t: kernels[t] + other[t] for t in ("compute_s", "memory_s", "overhead_s")}
    bound = max((("compute", terms["compute_s"]), ("memory", terms["memory_s"]), ("overhead", terms["overhead_s"])),
                key=lambda kv: kv[1])[0]
    xla.hbm_bytes = sum(o.hbm_bytes * o.times for o in rest)
    xla.notes |= set(notes)
    return {"seconds": kernels["seconds"] + other["seconds"], **terms, "bound": bound, "factors": kernels["factors"]}
