"""An exported module compiled for a TPU with no TPU present, read op by op (worker side, imports jax).

``compiled_ops(module, device)`` compiles the exported program (``Exported.call`` at the refined
shapes) for ``device``, a deviceless libtpu topology device (runner/tiers.topology_device), and
returns the compiled module's ops as runner/program/compiled_ops.hlo_ops reads them: its fusions, copies and
custom calls in order, each with XLA's own estimated cycles for the chip. The Mosaic custom calls
among them carry no cycles (XLA does not know what a kernel does); runner/program/module_cost.py prices
those by its kernel pricer instead.

The compile runs libtpu's XLA and Mosaic compilers on the candidate's module (never its Python);
like the rest of the judge's reading of a module, it belongs in a throwaway process.
"""

from __future__ import annotations

from typing import Any


def compiled_ops(module: Any, device: Any) -> tuple[list[Any], set[str]]:
    """(the compiled module's ops, notes) for ``module`` (runner/program/module_read.Module) on ``device``."""
    import jax

    from .compiled_ops import hlo_ops

    exported = module.exported
    sharding = jax.sharding.SingleDeviceSharding(device)
    args = [jax.ShapeDtypeStruct(shape, aval.dtype, sharding=sharding)
            for shape, aval in zip(module.shapes, exported.in_avals)]
    with jax.default_device(device):
        compiled = jax.jit(exported.call).trace(*args).lower().compile()
    return hlo_ops(compiled.as_text())
