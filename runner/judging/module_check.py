"""What the judge accepts as a candidate's exported program: a serialized ``jax.export`` module it can
run itself, with nothing in it that reaches back into Python.

The candidate's process sends bytes; nothing it says about them is believed. ``verified(blob, ...)``
deserializes them here and refuses, naming why, a module that is not for this backend or for more
than one device, that carries effects (``jax.debug.print``, ``io_callback`` and ordered side effects
are effects), whose inputs are not the shapes the judge named, or that calls any custom call outside
jax's own list of targets guaranteed stable for serialization (plus the Mosaic TPU kernel call), or
that carries no TPU program (only the TPU program is ever run, read or priced):
host callbacks (``pure_callback``, ``io_callback``, ``jax.debug.*``, a pallas_call in TPU interpret
mode) lower to such custom calls, and a crafted module naming one would make the judge call into
memory it never set up. jax itself refuses to export host callbacks ("serialization of host_callbacks
is not yet implemented"); the candidate's process turns that into a refusal with why
(``refusal_for``), and the judge checks again here, because that process is the candidate's.

Worker side: imports jax lazily.
"""

from __future__ import annotations

import math
from typing import Any

from .frames import HOST_CALLBACKS, refusal_for  # noqa: F401 - (the refusal's words, shared)

TPU_KERNEL = "tpu_custom_call"  # a pallas_call lowered by Mosaic
CALLBACK_WORDS = ("callback",)  # xla_python_cpu_callback, xla_ffi_python_gpu_callback, ...


class Refused(Exception):
    """The module cannot be run by the judge (the message says why)."""


# What a kernel's program needs, and nothing else: Mosaic's kernel call, shape assertions of symbolic
# dimensions, sharding annotations. Every other target (LAPACK, cuSOLVER, top-k, ...) is refused: one of
# them with undersized result types segfaulted the process that ran it.
ALLOWED_TARGETS = frozenset({TPU_KERNEL, "shape_assertion", "Sharding", "SPMDFullToShardShape",
                             "SPMDShardToFullShape", "annotate_device_placement"})
SAME_TYPE_TARGETS = frozenset({"Sharding", "annotate_device_placement"})  # result type = operand type


def stable_targets() -> frozenset[str]:
    """The custom-call targets a judged module may call (``ALLOWED_TARGETS``)."""
    return ALLOWED_TARGETS


def custom_calls(text: str) -> list[str]:
    """Every custom call's target in the module's text, by walking its operations."""
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    found: list[str] = []

    def walk(op: Any) -> None:
        op = getattr(op, "operation", op)
        if op.name == "stablehlo.custom_call":
            target = str(ir.StringAttr(op.attributes["call_target_name"]).value)
            found.append(target)
            if target in SAME_TYPE_TARGETS and [str(r.type) for r in op.results] != [str(o.type) for o in op.operands]:
                found.append(f"{target} (results of other types than its operands)")
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    walk(inner)

    with mlir.make_ir_context():
        walk(ir.Module.parse(text).operation)
    return found


def verified(blob: bytes, named: list[list[Any]], concrete: list[list[Any]] | None = None, *,
             facts: bool = True) -> tuple[Any, dict[str, Any]]:
    """(the deserialized module, what was checked), or Refused naming why. ``named``: the input
    signature the judge asked for (``[[shape, dtype], ...]``); ``concrete``: the size a symbolic module's
    program facts are read at; ``facts`` False: the program's facts (``program_facts``) are not read (a
    module only priced, never run). Only the module's TPU program is ever read, run or priced."""
    import jax
    import numpy as np

    try:
        exported = jax.export.deserialize(bytearray(blob))
    except Exception as exc:  # noqa: BLE001 - bytes from the candidate's process
        raise Refused(f"the bytes sent are not a serialized jax.export module ({type(exc).__name__}: "
                      f"{str(exc)[:200]})") from None
    if "tpu" not in exported.platforms:
        raise Refused(f"the module was lowered for {', '.join(exported.platforms)}, not for the TPU: it carries no "
                      "program a TPU would run")
    if exported.nr_devices != 1:
        raise Refused(f"the module is for {exported.nr_devices} devices; the judge runs it on one")
    effects = [*exported.ordered_effects, *exported.unordered_effects]
    if effects:
        raise Refused(f"the module has effects ({', '.join(map(str, effects))[:200]}): {HOST_CALLBACKS}")
    got = [[[str(d) for d in a.shape], np.dtype(a.dtype).name] for a in exported.in_avals]
    want = [[[str(d).replace(" ", "") for d in s], np.dtype(d).name] for s, d in named]
    args, kwargs = jax.tree.unflatten(exported.in_tree, list(range(len(exported.in_avals))))
    if got != want or kwargs or list(args) != list(range(len(want))):
        raise Refused(f"the module takes {got} (as {exported.in_tree}), not the inputs the judge named {want}")
    try:
        calls = custom_calls(exported.mlir_module())
    except Exception as exc:  # noqa: BLE001
        raise Refused(f"the module's text could not be read ({type(exc).__name__}: {str(exc)[:200]})") from None
    allowed = stable_targets()
    foreign = sorted({c for c in calls if c not in allowed})
    if foreign:
        callback = any(w in c.lower() for c in foreign for w in CALLBACK_WORDS)
        raise Refused((HOST_CALLBACKS + ": " if callback else "") +
                      f"the module calls {', '.join(foreign)}, outside the custom calls a kernel's program "
                      f"needs ({', '.join(sorted(allowed))})")
    read = program_facts(exported, concrete or named) if facts else {}
    return exported, {"platforms": list(exported.platforms), "custom_calls": sorted(set(calls)),
                      "kernels": calls.count(TPU_KERNEL), "bytes": len(blob), **read}


def program_facts(exported: Any, named: list[list[Any]]) -> dict[str, Any]:
    """What the judge checks in the TPU program itself (runner/program/module_facts.py), as plain data: kernel names,
    whether each output depends on a kernel, where the work is, and what of it the judge's interpreter cannot
    run (``unsupported``, runner/tpu_program/: planned here, where a crash ends only this process)."""
    from ..program.module_facts import module_facts

    facts = module_facts(exported, named)
    if facts.error:
        return {"facts_error": facts.error}
    steps = [None if any(g is None for g in k.grid) else math.prod(k.grid) for k in facts.kernels]
    return {"kernel_names": list(facts.kernel_names), "outputs_from_kernels": list(facts.outputs_from_kernels),
            "xla_flops": facts.xla_flops + facts.xla_transcendentals,
            "kernel_flops": facts.kernel_flops + facts.kernel_transcendentals,
            "kernel_flops_known": facts.kernel_flops_known, "size_reads": list(facts.size_reads),
            "grid_steps": None if None in steps else sum(steps), "unsupported": not_covered(exported, named)}


def not_covered(exported: Any, named: list[list[Any]]) -> list[str]:
    """What of the TPU program at ``named`` (a concrete signature) the judge's interpreters do not cover,
    each with where it is; empty when every op is covered."""
    from ..tpu_program.hlo_exec import tpu_program

    if any(isinstance(d, str) for dims, _ in named for d in dims):
        return []  # a symbolic signature: planned at the sizes the judge runs
    try:
        return [str(u) for u in tpu_program(exported, named).unsupported]
    except Exception as exc:  # noqa: BLE001 - a module the planner cannot read is not covered either
        return [f"a module the interpreter cannot read ({type(exc).__name__}: {str(exc)[:300]})"]
