"""The candidate's process: a fresh interpreter that holds one socket and nothing of the judge's.

``python -m pallasite.runner.judging.candidate FD [STATUS_FD [required]]``: the judge (runner/judging/channel.spawn)
starts it with one end of a socket pair as descriptor FD and every other descriptor closed; it runs jax on
the CPU only. With STATUS_FD it first puts itself in a PID namespace of its own (runner/judging/nest.py:
the process that goes on is process 1 there, with a fresh ``/proc`` and no capability; the one the judge
started waits outside and ends it) and says how on STATUS_FD. Its first frame names the work:

- ``export``: load the candidate's file, then, for each ``{"op": "export", "signature": ..., "config":
  ..., "device_kind": ...}`` the judge sends, trace the task's entry at that signature (symbolic dims
  where the judge asks: the program cannot tell which sizes will be run) and send the serialized module,
  lowered for the TPU alone (runner/program_export.py): the program a TPU would run is the only one the
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

import os
import socket
import sys
from typing import Any

from .channel import recv_frame, send_frame


def _export_loop(sock: socket.socket, params: dict[str, Any]) -> None:
    """Load the candidate's file and export its entry for the TPU at each signature the judge names, its
    questions about the hardware answered as the target chip (runner/target_chip.py: ``jax.default_backend()``
    is "tpu", ``pltpu.get_tpu_info()`` the chip's), so the program exported is the one a TPU would run - a
    kernel put in interpret mode off-TPU (``interpret=jax.default_backend() != "tpu"``) is lowered by Mosaic."""
    from ..target_chip import target_chip

    with target_chip(str(params.get("target") or "v6e")):
        _exports(sock, params)


def _exports(sock: socket.socket, params: dict[str, Any]) -> None:
    import jax
    import numpy as np

    from .. import timing
    from .. import timing_inputs as inputs_mod
    from ..program_export import export_program

    try:
        prep_context = timing.prepared(params)
        prep = prep_context.__enter__()
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


def _why_not(exc: BaseException, flat: Any, signature: Any) -> str:
    """Why the program did not export, in the judge's words where they apply (host callbacks, effects)."""
    import jax

    from ..program_export import structs
    from .module_check import HOST_CALLBACKS, refusal_for

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
    values and makes the inputs itself; ``own``: the task's reference does not take this entry's inputs."""
    from .. import memory_guard, timing, timing_ladder

    try:
        knobs = header.get("knobs") or {}
        for name in ("TARGET_BYTES", "MAX_STEPS", "DEFAULT_BUDGET", "BUDGET_SHARE"):  # the judge's, not ours
            if isinstance(knobs.get(name), int):
                setattr(timing_ladder, name, knobs[name])
        if isinstance(knobs.get("LIMIT_MB"), int):
            memory_guard.LIMIT_MB = knobs["LIMIT_MB"]
        sized, own = timing._config_size(prep, prep.task.abstract_args())
        scaled = dict(getattr(sized, "scaled", None) or {})
        send_frame(sock, {"op": "proposal", "config": scaled or None, "own": own is not None,
                          "why_not": sized if isinstance(sized, str) else None})
    except Exception as exc:  # noqa: BLE001 - the program's failure is data for the judge
        send_frame(sock, {"op": "failed", "error": f"{type(exc).__name__}: {exc}"[:2000]})


def _check(sock: socket.socket, params: dict[str, Any]) -> None:
    from ...wire import protocol

    from .compile_check import check_candidate

    typed = protocol.read_params("check", params["check"])
    check_candidate(sock, typed, bool(params.get("progress")))


def main(argv: list[str]) -> int:
    if len(argv) > 2:  # before anything of the candidate's or the judge's request: its own PID namespace
        from .nest import enter

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
            from .configs import export_configs

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
