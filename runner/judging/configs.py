"""Tune's configurations priced by the judge: one request, one module per configuration, every figure the
judge's own.

``judged_configs(params)`` answers the ``estimate`` op (``EstimateParams`` with ``judged``, and every
estimate in a confined worker) for a batch of configurations of one file, the user's own (``pallasite
tune``) or model-written (optimize's autotune phase):

1. A throwaway verifier is started (runner/judging/throwaway.py), and the file's process: a fresh
   interpreter holding one socket (runner/judging/channel.spawn, kind "configs"). That process loads the
   file and, once the judge names the signature, exports its entry once per configuration with the file's
   tunables applied as the ``estimate`` op applies them (runner/tune_ops._applied: keywords, module
   constants, TUNED_PARAMS entries), lowered for the chip's TPU (runner/program/program_export.py), and sends the
   bytes, or why it would not export. Nothing else it sends is read.
2. The judge loads the trusted side while that process works: the user's own file (``params.trusted``;
   for the user's own file in an unconfined worker, the file itself): its task, the inputs the modules
   are exported at (the signature is the judge's; integer inputs made for real, so scalar-prefetch index
   maps see the task's values), and, when asked, the reference by the same cost model.
3. Each module is verified and priced in the throwaway process (runner/program/module_cost.price_exported, the
   model ``time`` prices a candidate by): a process that never ran the file's code, so module-level code
   that wraps the cost model, in the file's process or in this one, changes no configuration's figure. A
   module that crashes the verifier, or does not export, is that configuration's "no estimate: <why>".

Returns the ``EstimateResult`` the ``estimate`` op always returned (one estimate per configuration, in
order), with ``judged_by`` "the judge". The reference's figure is computed here, in the process that
loaded the trusted side: for the user's own file, its own code.

Worker side: imports jax.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

from .channel import CandidateGone, end, receive, send_frame, spawn
from .judge import JUDGE


def _failed(config: dict[str, Any], chip: Any, why: str) -> Any:
    from ...analysis.types import CostEstimate
    from ..program.cost_model import ASSUMPTIONS, MODEL

    return CostEstimate(chip=chip.name, config=tuple(sorted(config.items())), status="trace_error",
                        error=f"no estimate: {why}"[:2000], assumptions=ASSUMPTIONS, model=MODEL)


# --------------------------------------------------------------------------- the judge's side


def judged_configs(params: Any, progress: Callable[..., Any] | None = None) -> Any:
    """The ``estimate`` op with every figure computed by the judge (see the module docstring)."""
    from .throwaway import Throwaway

    verifier = Throwaway()
    try:
        verifier.ready()  # undumpable before the file's process exists
        sock, pid = spawn("configs", _candidate_params(params))
        try:
            return _judge(sock, params, verifier, progress or (lambda *a, **k: None))
        finally:
            end(sock, pid)
    finally:
        verifier.close()


def _candidate_params(params: Any) -> dict[str, Any]:
    """What the file's process is told: its own file, the configurations, how each tunable reaches the code."""
    from ...analysis.types import to_json

    return {"source": to_json(params.source), "entry": params.entry, "kinds": dict(params.kinds),
            "configs": [dict(c) for c in params.configs] or [{}],
            "reference_source": to_json(params.reference_source) if params.reference_source else None}


def _judge(sock: Any, params: Any, verifier: Any, say: Callable[..., Any]) -> Any:
    from ...analysis.types import DEFAULT_CHIP, to_json
    from ...wire.messages import Stage
    from .. import tune_ops

    configs = [dict(c) for c in params.configs] or [{}]
    with contextlib.ExitStack() as stack:
        task, ref_module, args = _trusted_side(params, stack)
        chip = tune_ops.chip_spec(params.chip or DEFAULT_CHIP, probe=params.probe)
        signature, values = _signature(args)
        try:
            loaded, _ = receive(sock)
            if loaded.get("op") != "loaded":
                raise RuntimeError(f"the file could not be loaded for export: {str(loaded.get('error'))[:2000]}")
            send_frame(sock, {"op": "export", "signature": signature, "device_kind": chip.device_kind})
        except CandidateGone as exc:
            raise RuntimeError(f"the file's process failed before exporting: {exc}") from None
        # while the file's process exports: the reference by the same model, in the judge
        reference = tune_ops.reference_estimate(task, ref_module, args, chip) if params.reference else None
        floors = tune_ops._floors(task, args) if params.floors else None
        out, gone = [], ""
        for i, config in enumerate(configs):
            say(f"pricing {i + 1}/{len(configs)}: {config} (its exported program, in the judge)", stage=Stage.TUNE,
                entry=task.name, fraction=(i + 1) / len(configs))
            if gone:
                out.append(_failed(config, chip, gone))
                continue
            estimate, gone = _priced(sock, verifier, config, signature, values, chip, to_json(chip))
            out.append(estimate)
    return tune_ops.estimate_result(task, chip, out, reference, args, floors, judged_by=JUDGE)


def _trusted_side(params: Any, stack: contextlib.ExitStack) -> tuple[Any, Any, tuple[Any, ...]]:
    """(the task, a separate reference file's module, the inputs) from the user's own file: the request's
    ``trusted`` one, or, outside a confined worker, the file itself (the user's own)."""
    from .. import tune_ops
    from . import ACTIVE

    own = params.trusted
    if own is None and ACTIVE:
        raise RuntimeError("model-written configurations are priced against the user's own file, and the request "
                           "carries none (EstimateParams.trusted): nothing trusted to read the inputs from")
    own = own or params.source
    module = stack.enter_context(tune_ops._module(own))
    ref_module = stack.enter_context(tune_ops._module(params.reference_source)) if params.reference_source else None
    task = tune_ops._task(module, own, params.entry, ref_module)
    return task, ref_module, tune_ops._inputs(task)


def _signature(args: tuple[Any, ...]) -> tuple[list[list[Any]], list[Any]]:
    """The judge's signature of the inputs, and their concrete values where the trusted side made them."""
    import jax
    import numpy as np

    from ..measure import timing_inputs as inputs_mod

    leaves = jax.tree.leaves(args)
    values = [None if isinstance(a, jax.ShapeDtypeStruct) else np.asarray(a) for a in leaves]
    return inputs_mod.signature(args), values


def _priced(sock: Any, verifier: Any, config: dict[str, Any], signature: list[list[Any]], values: list[Any],
            chip: Any, chip_json: dict[str, Any]) -> tuple[Any, str]:
    """(the configuration's estimate, why the file's process is gone or ""): its module verified and priced
    in the throwaway process; a module that is refused, crashes the verifier or never came is no estimate."""
    from ...analysis.types import CostEstimate, from_json

    try:
        header, blobs = receive(sock)
    except CandidateGone as exc:
        why = f"the file's process ended before exporting this configuration ({exc})"
        return _failed(config, chip, why), why
    if header.get("op") != "exported" or not blobs:
        why = str(header.get("why") or header.get("error") or header.get("op"))[:1500]
        return _failed(config, chip, f"the program does not lower for the TPU with this configuration: {why}"), ""
    checked = verifier.price(bytes(blobs[0].tobytes()), signature, chip_json, values, config)
    if checked.estimate is None:
        return _failed(config, chip, f"the judge cannot price the exported program: "
                                     f"{checked.refused or checked.crashed}"), ""
    return from_json(CostEstimate, checked.estimate), ""
