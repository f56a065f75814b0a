"""The judged ``check`` op: the compiler's verdict on model-written code, out of its reach.

``judged_check``: the candidate process imports the file and runs tiers 0, 1 and 3 (its findings are its
advice: where a mistake is), and sends each entry's lowered module serialized (jax.export bytes); the judge
compiles with libtpu itself (tier 2) the module its ``time`` request tested and priced when the request
carries it (``judged_module``: engine/judge.py sends it for every candidate), else the candidate's lowering. (The ``estimate`` op of model-written code is runner/judging/configs.py: each
configuration's exported program priced by the judge.)

Worker side: imports jax.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

from ...analysis.types import DEFAULT_CHIP
from .channel import CandidateGone, end, receive, send_frame, spawn

# --------------------------------------------------------------------------- the check op


def judged_check(params: Any, progress: Callable[..., Any] | None = None) -> Any:
    """The ``check`` op with tier 2 out of the candidate's reach: the candidate process imports the
    file and runs tiers 0, 1 and 3 (each entry's lowered module kept, serialized); the judge
    compiles those modules with libtpu itself, so a candidate that patches the compiler call, its
    verdict or the reply in its own process cannot make a block that does not compile "compile"."""
    import dataclasses

    import numpy as np

    from .. import checks, tiers as tiers_mod
    from ...wire.messages import Stage

    asked = sorted({int(t) for t in params.tiers or (1, 2)})
    if params.script or 2 not in asked:
        return checks.handle_check(params, progress)
    from ...analysis.types import to_json

    sock, pid = spawn("check", {"check": to_json(dataclasses.replace(params, tiers=tuple(sorted(set(asked) - {2} | {1})))),
                                "progress": progress is not None})
    target = str(params.chip or DEFAULT_CHIP)
    unavailable = tiers_mod.tier2_unavailable(target) if target in tiers_mod.CHIPS else f"unknown target {target!r}"
    try:
        while True:
            header, arrays = receive(sock)
            if header.get("op") == "progress" and progress is not None:
                with contextlib.suppress(Exception):
                    fields = {k: header[k] for k in ("tier", "entry", "line") if isinstance(header.get(k), (int, str))}
                    progress(str(header.get("message", ""))[:500], stage=Stage(header.get("stage") or "starting"),
                             **fields)
            elif header.get("op") != "progress":
                break
        if header.get("op") != "result" or not isinstance(header.get("result"), dict):
            raise CandidateGone(str(header.get("error") or "the candidate process gave no check result"))
        result: dict[str, Any] = header["result"]
        lowered = {str(name): bytes(np.asarray(a, dtype=np.uint8).tobytes())
                   for name, a in zip(header.get("lowered") or (), arrays)}
    except CandidateGone as exc:
        result = {"chip": params.chip, "tiers": asked, "tasks_found": 0, "entries": [], "unavailable": {},
                  "versions": tiers_mod.versions(),
                  "errors": [tiers_mod._plain_error("task", f"the candidate process failed: {exc}")]}
        lowered = {}
    finally:
        end(sock, pid)
    _tier2_here(result, lowered, params, asked, unavailable, tiers_mod._say(progress), _judged(params))
    result["tiers"] = asked
    return checks.typed_result(result, asked)


def _judged(params: Any) -> dict[str, Any] | None:
    """The module the judge tested and priced (CheckParams.judged_module: TimeResult.module as JSON), or None."""
    import base64
    import json

    if not params.judged_module:
        return None
    try:
        judged = json.loads(params.judged_module)
        return {**judged, "blob": base64.b64decode(judged["module"])}
    except (ValueError, KeyError, TypeError):
        return None


def _tier2_here(result: dict[str, Any], lowered: dict[str, bytes], params: Any, asked: list[int],
                unavailable: str | None, say: Callable[..., None], judged: dict[str, Any] | None = None) -> None:
    """Tier 2 of each entry, compiled in this process: the module the judge tested and priced (``judged``) for
    its entry - the program that compiled is the one that was tested - else the module the candidate's process
    lowered, its own tier 1 (``unavailable``: why tier 2 cannot run here, found while the candidate ran)."""
    from ...wire.messages import Stage

    target = str(params.chip or DEFAULT_CHIP)
    if unavailable:
        result.setdefault("unavailable", {})["2"] = unavailable
    known = {str(k): str(v) for k, v in (params.tier2_known or {}).items()}
    for entry in result.get("entries") or ():
        if not isinstance(entry, dict) or not isinstance(entry.get("tiers"), dict):
            continue
        name = str(entry.get("name"))
        states = entry["tiers"]
        mine = judged is not None and judged.get("entry") in (name, None)
        if 1 not in asked:
            states.pop("1", None)
        if name in known:
            states["2"] = known[name]
        elif unavailable:
            states["2"] = "skipped: " + unavailable.split(";")[0]
        elif states.get("1") != "ok" or not (mine or name in lowered):
            states["2"] = "skipped: tier 1 failed"
        else:
            what = "the module the judge tested" if mine else "the candidate's lowering"
            say(f"tier 2: {name} (libtpu compile for {target} of {what}, in a process that never ran the file)",
                stage=Stage.TIER, tier=2, entry=name)
            _compile_one(entry, judged if mine else {"blob": lowered[name]}, target, str(params.source.path), what)


def _compile_one(entry: dict[str, Any], module: dict[str, Any], target: str, path: str, what: str) -> None:
    import time as time_mod

    from .. import tiers as tiers_mod

    states = entry["tiers"]
    started = time_mod.perf_counter()
    try:
        entry["memory"] = tiers_mod.compile_exported(module["blob"], target, module.get("signature"))
        states["2"] = "ok"
    except Exception as exc:  # noqa: BLE001 - the compiler's verdict
        states["2"] = "error"
        entry.setdefault("errors", []).append(tiers_mod._tier_record(exc, path, 2))
    entry["tier2_module"] = what
    entry.setdefault("timings_s", {})["2"] = round(time_mod.perf_counter() - started, 4)
