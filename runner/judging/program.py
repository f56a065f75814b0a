"""A candidate's exported program as the judge runs it: the TPU program the module carries, and nothing else.

The module's bytes hold the program a TPU would run: XLA ops around one ``tpu_custom_call`` per pallas_call,
each carrying its Mosaic kernel. On a TPU the judge runs the module itself. Anywhere else (a laptop's CPU, a
stand-in device) the judge runs those same bytes with its own interpreters (runner/tpu_program/): the XLA
ops by its op table, each Mosaic kernel by its interpreter of Mosaic kernels. A CPU branch the candidate's
process may have lowered beside it is never run, trusted or compared, so the program that is tested is the
program that is priced and that a chip would run.

An op neither interpreter covers makes the program ``NotRunnable`` (the judge says "not verified: the TPU
program uses <op> (<where>)", never a pass); a kernel that would fault or hang on a TPU (an out-of-bounds
DMA, a wait no signal satisfies) raises ``KernelFault``, a verdict on the kernel.

Worker side: imports jax when called.
"""

from __future__ import annotations

import dataclasses
from typing import Any


class NotRunnable(Exception):
    """The judge's interpreters do not cover something the TPU program uses (the message says what, where)."""


def _leaf_signature(leaves: list[Any]) -> list[list[Any]]:
    import numpy as np

    return [[list(np.shape(a)), np.dtype(a.dtype).name] for a in leaves]


@dataclasses.dataclass
class Program:
    exported: Any
    facts: dict[str, Any]
    signature: list[list[Any]]
    on_tpu: bool = False  # the judge holds a TPU: the module runs as it is
    digest: str = ""  # the module's bytes' sha256: one module may run at several sizes

    def __call__(self, *args: Any) -> Any:
        import jax

        leaves = jax.tree.leaves(args)[:len(self.signature)]  # the judge's mapping: the task's first inputs
        if self.on_tpu:
            return self.exported.call(*leaves)
        if any(isinstance(x, jax.core.Tracer) for x in leaves):  # traced (a timing loop's jit): a host call
            out = jax.eval_shape(self.exported.call, *leaves)
            return jax.pure_callback(lambda *a: run_tpu_program(self.exported, list(a)), out, *leaves)
        return run_tpu_program(self.exported, leaves)

    def kernels(self) -> int:
        """The Mosaic kernels of the module's TPU program, counted by the judge from the bytes themselves (the
        verifier's facts say so too; this count does not rest on another process's answer)."""
        from .module_check import TPU_KERNEL, custom_calls

        return custom_calls(self.exported.mlir_module()).count(TPU_KERNEL)

    def plan(self, signature: list[list[Any]]) -> Any:
        """The TPU program at ``signature`` (planned once), or NotRunnable naming what it cannot run."""
        return planned(self.exported, signature)


def planned(exported: Any, signature: list[list[Any]]) -> Any:
    """The TPU program of ``exported`` at the concrete ``signature`` (runner/tpu_program/hlo_exec.py, cached
    per module and size); NotRunnable when an op of its XLA part or of a kernel is not covered."""
    from ..tpu_program.hlo_exec import tpu_program

    program = tpu_program(exported, signature)
    if program.unsupported:
        first = program.unsupported[0]
        more = f" (and {len(program.unsupported) - 1} more)" if len(program.unsupported) > 1 else ""
        raise NotRunnable(f"the TPU program uses {first}{more}, which the judge's interpreter does not cover")
    return program


def run_tpu_program(exported: Any, leaves: list[Any]) -> list[Any]:
    """The outputs of the module's TPU program on ``leaves``, run by the judge's interpreters."""
    import jax.numpy as jnp

    from ..tpu_program import faults, run_call

    program = planned(exported, _leaf_signature(leaves))
    try:
        outputs = program(*leaves, run_call=run_call)
    except faults.Unsupported as exc:
        raise NotRunnable(f"the TPU program uses {exc}, which the judge's interpreter does not cover") from None
    return [jnp.asarray(o) for o in outputs]
