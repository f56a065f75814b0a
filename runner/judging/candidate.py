"""The candidate's process: a fresh interpreter that holds one socket and nothing of the judge's.

``python -m pallasite.runner.judging.candidate FD [STATUS_FD [required]]``: the judge (runner/judging/channel.spawn)
starts it with one end of a socket pair as descriptor FD and every other descriptor closed; it runs jax on
the CPU only. With STATUS_FD it first puts itself in a PID namespace of its own (runner/isolation/nest.py:
the process that goes on is process 1 there, with a fresh ``/proc`` and no capability; the one the judge
started waits outside and ends it) and says how on STATUS_FD. Its first frame names the work:

- ``export``: load the candidate's file, then, for each ``{"op": "export", "signature": ..., "config":
  ..., "device_kind": ...}`` the judge sends, trace the task's entry at that signature (symbolic dims
  where the judge asks: the program cannot tell which sizes will be run) and send the serialized module,
  lowered for the TPU alone (runner/program/program_export.py): the program a TPU would run is the only one the
  judge receives; ``{"op": "refused", "why": ...}`` when the program does not export there.
  Nothing else it could send is read: the judge takes the bytes, checks them in a throwaway process and
  computes every figure itself (runner/judging/judge.py).
- ``check``: tiers 0, 1 and 3 of the ``check`` op on the candidate, each entry's lowered module kept
  for the judge's tier 2 (runner/judging/compile_check.py).
- ``configs``: load the file, then export its entry once per tuning configuration at the signature the
  judge names, for the judge to price (runner/judging/configs.py).

The candidate's code runs here and only here. Worker side: imports jax.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from typing import Any

from .frames import HOST_CALLBACKS, recv_frame, refusal_for, send_frame


def _export_loop(sock: socket.socket, params: dict[str, Any]) -> None:
    """Load the candidate's file and export its entry for the TPU at each signature the judge names, its
    questions about the hardware answered as the target chip (runner/target_chip.py: ``jax.default_backend()``
    is "tpu", ``pltpu.get_tpu_info()`` the chip's), so the program exported is the one a TPU would run - a
    kernel put in interpret mode off-TPU (``interpret=jax.default_backend() != "tpu"``) is lowered by Mosaic."""
    from ..target_chip import target_chip

    with target_chip(str(params.get("chip") or "v6e")):
        _exports(sock, params)


def _exports(sock: socket.socket, params: dict[str, Any]) -> None:
    import jax
    import numpy as np

    from ..measure import timing
    from ..measure import timing_inputs as inputs_mod
    from ..program.program_export import export_program

    try:
        prep_context, prep = _loaded(params)
    except Exception as exc:  # noqa: BLE001 - the candidate's failure is data
        send_frame(sock, {"op": "failed", "error": f"{type(exc).__name__}: {exc}"[:4000]})
        return
    treedef = jax.tree.structure(prep.task.abstract_args())

    def flat(*leaves: Any) -> Any:
        return prep.candidate(*jax.tree.unflatten(treedef, list(leaves)))

    send_frame(sock, {"op": "loaded", "takes": treedef.num_leaves})  # its entry's inputs: the judge maps or refuses
    while True:
        header, _ = recv_frame(sock)
        if header.get("op") == "propose":
            _answer(sock, prep, header)
            continue
        if header.get("op") != "export":
            return
        try:
            if len(header["signature"]) != treedef.num_leaves:
                raise ValueError(f"the judge named {len(header['signature'])} inputs; the candidate's task takes "
                                 f"{treedef.num_leaves}")
            with inputs_mod.config_scaled((prep.task.entry,), header.get("config") or None):
                blob = export_program(flat, header["signature"], str(header.get("device_kind") or "TPU v6 lite"),
                                      platforms=("tpu",))
                blob = blob.serialize()
        except Exception as exc:  # noqa: BLE001 - the program's failure is data for the judge
            send_frame(sock, {"op": "refused", "why": _why_not(exc, flat, header["signature"])[:2000]})
            continue
        send_frame(sock, {"op": "exported"}, [np.frombuffer(blob, dtype=np.uint8)])


LOAD_LIMIT_S = 30.0  # loading the candidate's file (tier 1 stops one top-level statement at 18 s of its 300)


class LoadTimeLimit(Exception):
    """The candidate's file was still importing when ``LOAD_LIMIT_S`` ran out."""


def _loaded(params: dict[str, Any]) -> tuple[Any, Any]:
    """``timing.prepared(params)`` entered (the context, the prep) within ``LOAD_LIMIT_S``: a file that loops
    at import is stopped and named by its line, not waited on to the request's limit (a loop at import kept
    optimize's compile phase 5 minutes before the check's own import said where)."""
    import traceback

    from ..measure import timing
    from ..script_mode import deadline

    path = os.path.abspath(str(params.get("path", "")))
    context = timing.prepared(params)
    try:
        with deadline(LOAD_LIMIT_S, lambda seconds: LoadTimeLimit(seconds)):
            return context, context.__enter__()
    except LoadTimeLimit as exc:
        lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
        where = f"the statement at line {lines[0]}" if lines else "the file"
        raise LoadTimeLimit(f"importing the file: {where} was still running after {LOAD_LIMIT_S:g} s, the judge's "
                            "limit for loading a candidate, and was stopped") from None


def _why_not(exc: BaseException, flat: Any, signature: Any) -> str:
    """Why the program did not export, in the judge's words where they apply (host callbacks, effects)."""
    import jax

    from ..program.program_export import structs

    why = refusal_for(exc)
    if why is None:
        try:
            jaxpr = jax.make_jaxpr(flat)(*structs(signature))
            calls_back = bool(jaxpr.effects) or _calls_back(jaxpr.jaxpr)
        except Exception:  # noqa: BLE001 - the export's own error says it
            calls_back = False
        why = f"{HOST_CALLBACKS}: {type(exc).__name__}: {exc}" if calls_back else f"{type(exc).__name__}: {exc}"
    return why


def _calls_back(jaxpr: Any) -> bool:
    """Whether ``jaxpr`` (or one nested in it) calls back into Python (pure_callback, io_callback, debug)."""
    from jax.extend import core

    for eqn in jaxpr.eqns:
        if "callback" in eqn.primitive.name:
            return True
        for value in eqn.params.values():
            inner = getattr(value, "jaxpr", value)
            if isinstance(inner, core.Jaxpr) and _calls_back(inner):
                return True
    return False


def _answer(sock: socket.socket, prep: Any, header: dict[str, Any]) -> None:
    """A reduced CONFIG size by pallasite's own rules on this program (``propose``): the judge checks the
    values, makes the inputs and maps them onto the candidate itself (runner/judging/sizes.py)."""
    from .. import memory_guard
    from ..measure import timing, timing_ladder

    try:
        knobs = header.get("knobs") or {}
        for name in ("TARGET_BYTES", "MAX_STEPS", "DEFAULT_BUDGET", "BUDGET_SHARE"):  # the judge's, not ours
            if isinstance(knobs.get(name), int):
                setattr(timing_ladder, name, knobs[name])
        if isinstance(knobs.get("LIMIT_MB"), int):
            memory_guard.LIMIT_MB = knobs["LIMIT_MB"]
        sized, _ = timing._config_size(prep, prep.task.abstract_args())
        scaled = dict(getattr(sized, "scaled", None) or {})
        send_frame(sock, {"op": "proposal", "config": scaled or None, "why_not": sized if isinstance(sized, str) else None})
    except Exception as exc:  # noqa: BLE001 - the program's failure is data for the judge
        send_frame(sock, {"op": "failed", "error": f"{type(exc).__name__}: {exc}"[:2000]})


def _check(sock: socket.socket, params: dict[str, Any]) -> None:
    from ...wire import protocol

    typed = protocol.read_params("check", params["check"])
    check_candidate(sock, typed, bool(params.get("progress")))


# --------------------------------------------------------------------------- the check and configs works


def _cpu_only() -> None:
    """In a candidate's process on a device worker: only jax's CPU backend, so model-written code never
    holds the chip (its tiers lower and compile deviceless; the candidate's process of the time request does the same)."""
    import jax

    jax.config.update("jax_platforms", "cpu")


def check_candidate(sock: socket.socket, params: Any, with_progress: bool) -> None:
    """The ``check`` work (runner/judging/compile_check.py is the judge's side): tiers 0, 1 and 3 here; the
    lowered modules go back, with
    the pallas_calls that asked for interpret mode (refused by the worker as PLS114: a model's mistake said at
    its line; a process that hides them lowered no Mosaic kernel, which the judge's test reads from its module)."""
    import dataclasses

    import numpy as np

    from .. import checks
    from ..tier3 import interpret_guard
    from .. import tiers as tiers_mod

    _cpu_only()
    tiers_mod.LOWERED = {}

    def progress(message: str, **fields: Any) -> None:
        send_frame(sock, {"op": "progress", "message": str(message), "stage": str(getattr(fields.get("stage"), "value",
                                                                                            fields.get("stage") or "")),
                          **{k: fields[k] for k in ("tier", "entry", "line") if k in fields}})

    plain = {"path": params.source.path, "text": params.source.text, "chip": params.chip,
             "tiers": list(params.tiers), "time_limit_s": params.time_limit_s,
             "entries": list(params.entries) if params.entries is not None else None,
             "tier2_known": dict(params.tier2_known),
             "inferred": _plain_inferred(params)}
    with interpret_guard.watching(interpret_guard.user_files(params)) as seen:  # what the worker then refuses
        result = checks._handle_check(plain, params.source, progress if with_progress else None)
    names = list(tiers_mod.LOWERED)
    send_frame(sock, {"op": "result", "result": result, "lowered": names,
                      "interpret": [dataclasses.asdict(c) for c in seen]},
               [np.frombuffer(tiers_mod.LOWERED[n], dtype=np.uint8) for n in names])


def _plain_inferred(params: Any) -> list[Any]:
    from ...analysis.types import to_json

    return [to_json(call) for call in params.inferred]


def export_configs(sock: Any, params: dict[str, Any]) -> None:
    """The ``configs`` work (runner/judging/configs.py is the judge's side): load the file, say "loaded", then
    export the entry once per configuration at the judge's signature and send each module's bytes."""
    import jax
    import numpy as np

    from ...analysis.types import from_json
    from ...wire.messages import Sources
    from .. import tune_ops

    with contextlib.ExitStack() as stack:
        try:
            source = from_json(Sources, params["source"])
            module = stack.enter_context(tune_ops._module(source))
            ref = params.get("reference_source")
            ref_module = stack.enter_context(tune_ops._module(from_json(Sources, ref))) if ref else None
            task = tune_ops._task(module, source, params.get("entry"), ref_module)
            treedef = jax.tree.structure(task.abstract_args())
        except Exception as exc:  # noqa: BLE001 - the file's failure is data for the judge
            send_frame(sock, {"op": "failed", "error": f"{type(exc).__name__}: {exc}"[:4000]})
            return
        send_frame(sock, {"op": "loaded"})
        header, _ = recv_frame(sock)
        if header.get("op") != "export":
            return
        signature, kind = header["signature"], str(header["device_kind"])
        started = time.monotonic()
        for config in params["configs"]:
            blob = _export_one(module, task, treedef, config, dict(params.get("kinds") or {}), signature, kind)
            if isinstance(blob, str):
                send_frame(sock, {"op": "refused", "why": blob})
            else:
                send_frame(sock, {"op": "exported"}, [np.frombuffer(blob, dtype=np.uint8)])
            if time.monotonic() - started > CLEAR_EVERY_S:  # jax keeps every configuration's trace: let it go
                jax.clear_caches()
                started = time.monotonic()


CLEAR_EVERY_S = 30.0


def _export_one(module: Any, task: Any, treedef: Any, config: dict[str, Any], kinds: dict[str, str],
                signature: list[list[Any]], device_kind: str) -> bytes | str:
    """The entry under ``config`` exported for the TPU at ``signature`` (bytes), or why not."""
    import jax

    from .. import tune_ops
    from ..program.program_export import export_program

    try:
        if len(signature) != treedef.num_leaves:
            return f"the judge named {len(signature)} inputs; the file's task takes {treedef.num_leaves}"
        with tune_ops._applied(module, task, config, kinds) as fn:
            def flat(*leaves: Any) -> Any:
                return fn(*jax.tree.unflatten(treedef, list(leaves)))

            try:
                return bytes(export_program(flat, signature, device_kind, platforms=("tpu",)).serialize())
            except Exception as exc:  # noqa: BLE001 - the program's failure is data for the judge
                return (refusal_for(exc) or f"{type(exc).__name__}: {exc}")[:2000]
    except Exception as exc:  # noqa: BLE001 - a configuration the file cannot take
        return f"{type(exc).__name__}: {str(exc)[:2000]}"


def main(argv: list[str]) -> int:
    if len(argv) > 2:  # before anything of the candidate's or the judge's request: its own PID namespace
        from ..isolation.nest import enter

        enter(int(argv[2]), required=argv[3:4] == ["required"])
    sock = socket.socket(fileno=int(argv[1]))
    import jax

    jax.config.update("jax_platforms", "cpu")  # before any backend: this process never holds a chip
    header, _ = recv_frame(sock)
    kind, params = header.get("kind"), header.get("params") or {}
    try:
        if kind == "export":
            _export_loop(sock, params)
        elif kind == "check":
            _check(sock, params)
        elif kind == "configs":
            export_configs(sock, params)
    except OSError:  # the judge hung up (it had its verdict, or it stopped): nothing to say to anyone
        return 0
    except Exception as exc:  # noqa: BLE001 - said to the judge, which believes none of it
        try:
            send_frame(sock, {"op": "failed", "error": f"{type(exc).__name__}: {exc}"[:4000]})
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    os._exit(code)  # no interpreter teardown: a candidate's atexit hooks and threads end with it
