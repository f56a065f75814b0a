"""The generalisation benchmark's oracle: what a kernel file's task really hands to ``pallas_call``.

    python benchmarks/mutation_oracle.py < request.json > answer.json

Runs in its own process (it imports JAX; the benchmark's driver does not). The request is
``{"files": [{"id": ..., "path": ..., "text": ..., "lines": bool}, ...]}``; every text is written to its path,
imported as a fresh module, and its task's entry is traced with ``jax.make_jaxpr`` on abstract
inputs (nothing runs, nothing is compiled). The answer, per file: the inputs' shapes and dtypes,
and every ``pallas_call`` in the traced program as jax itself records it (the ``pallas_call``
equation's grid mapping: grid, each block's shape, array shape, dtype, memory space and buffer
count, scratch buffers, ``dimension_semantics``, ``vmem_limit_bytes``, the kernel's name and source
line), or the exception the trace raised; and, when ``lines`` is asked for, the lines of the file that ran while it was traced.

Independent of pallasite on purpose: it reads jax's own record of each call, so the benchmark's
ground truth (does this literal reach a block dim? did the out_shape dtype change?) never comes
from the code it measures. With ``"chip": "v6e"`` in the request, jax's chip queries (``pltpu.get_tpu_info()``, which a file
may call to size its blocks and which fails on a CPU) answer as that chip for the whole run, through
pallasite's ``runner.target_chip`` (the only part of pallasite used; it changes no value jax records).
Tasks: the native convention (``PALLASITE_ENTRY`` + ``example_inputs()``)
or JAXBench's (``workload`` + ``create_inputs``, whose inputs are taken with ``jax.eval_shape`` so
no array is made).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def _block_dim(d):
    if d is None:
        return None
    if isinstance(d, int):
        return d
    size = getattr(d, "block_size", None)
    return size if isinstance(size, int) else None


def _space(aval) -> str:
    space = getattr(aval, "memory_space", None)
    text = str(space).lower() if space is not None else ""
    for name in ("smem", "semaphore", "hbm", "any", "vmem"):
        if name in text:
            return name
    return "vmem"  # the default memory space of a block is VMEM


def _compiler_params(params) -> dict:
    cp = params.get("compiler_params")
    if isinstance(cp, dict):
        cp = cp.get("mosaic_tpu") or cp.get("mosaic") or next(iter(cp.values()), None)
    sem = getattr(cp, "dimension_semantics", None)
    sem = [str(getattr(s, "value", s)).lower().split(".")[-1] for s in sem] if sem else None
    return {"dimension_semantics": sem, "vmem_limit_bytes": getattr(cp, "vmem_limit_bytes", None)}


def _calls(jaxpr, out: list) -> None:
    from jax.extend import core as jex_core

    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "pallas_call":
            out.append(_call(eqn))
        for value in eqn.params.values():
            for sub in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(sub, jex_core.ClosedJaxpr):
                    _calls(sub.jaxpr, out)
                elif isinstance(sub, jex_core.Jaxpr):
                    _calls(sub, out)


def _call(eqn) -> dict:
    gm = eqn.params["grid_mapping"]
    info = getattr(eqn.params["jaxpr"], "debug_info", None)
    blocks = []
    for i, bm in enumerate(gm.block_mappings):
        mode = bm.pipeline_mode
        blocks.append({
            "role": "in" if i < gm.num_inputs else "out",
            "index": i if i < gm.num_inputs else i - gm.num_inputs,
            "origin": str(bm.origin),
            "block_shape": [_block_dim(d) for d in bm.block_shape],
            "array_shape": list(bm.array_aval.shape),
            "dtype": str(bm.array_aval.dtype),
            "space": _space(bm.transformed_block_aval),
            "buffers": int(getattr(mode, "buffer_count", 2) or 2) if mode is not None else 2,
        })
    scratch = [{"shape": list(getattr(a, "shape", ())), "dtype": str(getattr(a, "dtype", "")), "space": _space(a)}
               for a in gm.scratch_avals]
    src = str(getattr(info, "func_src_info", None) or "")  # "kernel_name at /path/file.py:123"
    return {
        "kernel": src.split(" at ")[0] or None,
        "src": src.rpartition(" at ")[2],
        "grid": [g if isinstance(g, int) else None for g in gm.grid],
        "num_index_operands": gm.num_index_operands,
        "num_inputs": gm.num_inputs,
        "num_outputs": gm.num_outputs,
        "blocks": blocks,
        "scratch": scratch,
        "out_dtypes": [str(v.aval.dtype) for v in eqn.outvars],
        "arg_names": [str(n) for n in (getattr(info, "arg_names", None) or ())],
        **_compiler_params(eqn.params),
    }


def _abstract(x):
    import jax

    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return jax.ShapeDtypeStruct(x.shape, x.dtype)
    return x


def examine(item: dict) -> dict:
    import jax

    path = item["path"]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(item["text"])
    name = f"_oracle_{item['id']}".replace("-", "_").replace(".", "_")
    answer: dict = {"id": item["id"], "inputs": None, "calls": [], "error": None}
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        if hasattr(module, "PALLASITE_ENTRY") and hasattr(module, "example_inputs"):
            entry = getattr(module, module.PALLASITE_ENTRY)
            inputs = jax.tree.map(_abstract, tuple(module.example_inputs()))
        elif hasattr(module, "workload") and hasattr(module, "create_inputs"):
            entry = module.workload
            inputs = tuple(jax.eval_shape(module.create_inputs))
        else:
            answer["error"] = {"stage": "task", "type": "NoTask", "message": "no task convention found"}
            return answer
        answer["inputs"] = [[list(a.shape), str(a.dtype)] if hasattr(a, "shape") else repr(a)
                            for a in jax.tree.leaves(inputs)]
    except BaseException as exc:  # noqa: BLE001 - a broken file is an answer
        answer["error"] = {"stage": "import", "type": type(exc).__name__, "message": str(exc)[:500]}
        return answer
    executed: set[int] = set()
    real_path = os.path.realpath(path)

    def tracer(frame, event, arg):  # the lines of this file that run while the entry is traced
        if os.path.realpath(frame.f_code.co_filename) != real_path:
            return None
        if event == "line":
            executed.add(frame.f_lineno)
        return tracer

    try:
        if item.get("lines"):
            sys.settrace(tracer)
        try:
            closed = jax.make_jaxpr(entry)(*inputs)
        finally:
            sys.settrace(None)
        _calls(closed.jaxpr, answer["calls"])
    except BaseException as exc:  # noqa: BLE001
        frames = traceback.extract_tb(exc.__traceback__)
        last = frames[-1] if frames else None
        answer["error"] = {"stage": "trace", "type": type(exc).__name__, "message": str(exc)[:500],
                           "raised_in": f"{last.filename}:{last.lineno}" if last else None}
    finally:
        sys.modules.pop(name, None)
        answer["executed"] = sorted(executed)
    return answer


def main() -> int:
    import contextlib

    request = json.load(sys.stdin)
    with contextlib.ExitStack() as stack:
        if request.get("chip"):
            from pallasite.runner.target_chip import target_chip

            stack.enter_context(target_chip(request["chip"]))
        answers = [examine(item) for item in request["files"]]
    json.dump({"answers": answers}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
