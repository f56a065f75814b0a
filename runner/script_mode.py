"""Script mode: run a file's own ``__main__`` and check every pallas_call it makes (worker side).

``pallasite check --script FILE`` needs no task convention: the file runs as ``python FILE`` would
run it (``__name__ == "__main__"``, ``sys.argv == [FILE]``, its folder first on ``sys.path``)
inside the worker, under the worker's time and memory limits, with every ``pallas_call``
intercepted (``runner/intercept.py``). Each call's concrete operand shapes and dtypes, grid,
BlockSpecs, scratch and compiler params are recorded; calls that ask for no interpreter run in
CPU interpret mode so the script can go on. Afterwards each distinct recorded call (same kernel,
shapes and parameters counted once) is checked by tiers 1-2 for the target chip with ``interpret``
stripped — so a script that only ever ran in interpret mode still gets the TPU compiler's verdict.

An exception the script raises itself is reported too (PLS901, at its line in the file); calls
recorded before it are still checked. The answer has the ``check`` op's result format
(``runner/checks.py``), one entry per distinct call, named for the function holding the call.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Callable

from . import checks
from . import errors as errors_mod
from .intercept import RecordedCall, intercept_pallas_calls

MAX_CALLS = 32  # distinct calls checked at most (a sweep over many shapes checks its first ones)


def handle_script_check(params: dict[str, Any], progress: Callable[..., Any] | None = None) -> dict[str, Any]:
    """The ``check`` op with ``params["script"]``: run ``__main__``, then tiers 1-2 per distinct call."""
    import jax

    say = checks._say(progress)
    path = os.path.abspath(str(params["path"]))
    text = params.get("text")
    target = str(params.get("target") or "v6e")
    tiers = sorted({int(t) for t in params.get("tiers") or (1, 2)})
    result: dict[str, Any] = {"target": target, "tasks_found": 0, "errors": [], "unavailable": {}, "entries": [],
                              "script": {"calls": 0, "distinct": 0}}
    if target not in checks.CHIPS:
        result["errors"].append(checks._plain_error("task", f"unknown target {target!r}; use one of {', '.join(checks.CHIPS)}"))
        return result
    jax.config.update("jax_pallas_verbose_errors", True)
    if 2 in tiers:
        why = checks.tier2_unavailable(target)
        if why:
            result["unavailable"]["2"] = why

    say(f"running {os.path.basename(path)} as __main__ (every pallas_call recorded)")
    calls, error = run_main(path, text)
    if error is not None:
        rec = errors_mod.record(error, path, stage="script")
        rec.update(code="PLS901", origin="pallasite runner (the script's own run)")
        if isinstance(error, SystemExit):
            rec["sentence"] = f"the script exited with status {error.code!r}"
        result["errors"].append(rec)
    distinct = dedupe(calls)
    result["script"] = {"calls": len(calls), "distinct": len(distinct)}
    result["tasks_found"] = len(distinct)
    notes = [f"script mode: {len(calls)} pallas_call(s) ran, {len(distinct)} distinct checked for {target}"
             + (f" (the first {MAX_CALLS})" if len(distinct) > MAX_CALLS else "")]
    for call in distinct[:MAX_CALLS]:
        result["entries"].append(check_call(call, path, target, tiers, result["unavailable"], say))
    if result["entries"]:
        result["entries"][0]["notes"] = notes
    elif error is None:
        result["errors"].append(checks._plain_error(
            "task", "the script ran without making a pallas_call: nothing to check (does its __main__ block call the kernel?)"))
    return result


def run_main(path: str, text: str | None = None) -> tuple[list[RecordedCall], BaseException | None]:
    """Execute the file as ``__main__`` with pallas_call intercepted; (recorded calls, exception)."""
    from .loader import load_user_module

    folder = os.path.dirname(path)
    saved_main = sys.modules.get("__main__")
    saved_argv = list(sys.argv)
    modules_before = set(sys.modules)
    sys.path.insert(0, folder)
    sys.argv = [path]
    calls: list[RecordedCall] = []
    error: BaseException | None = None
    try:
        with intercept_pallas_calls(rewrite=_runnable_here, user_files=(path,)) as recorded:
            calls = recorded
            try:
                load_user_module(path, text, name="__main__")
            except SystemExit as exc:
                if exc.code not in (None, 0):
                    error = exc
            except Exception as exc:  # noqa: BLE001 - the script's own failure is a finding
                error = exc
    finally:
        sys.argv = saved_argv
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
        for name in set(sys.modules) - modules_before:
            file = getattr(sys.modules.get(name), "__file__", None) or ""
            if file and os.path.realpath(file).startswith(os.path.realpath(folder) + os.sep):
                sys.modules.pop(name, None)  # the script's sibling modules: re-read next time
    return [c for c in calls if c.operands is not None], error


def _runnable_here(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Run a call that asks for no interpreter in CPU interpret mode (there is no TPU here)."""
    import jax

    if not kwargs.get("interpret") and jax.default_backend() == "cpu":
        kwargs["interpret"] = True
    return kwargs


def dedupe(calls: list[RecordedCall]) -> list[RecordedCall]:
    seen: dict[tuple[Any, ...], RecordedCall] = {}
    for call in calls:
        seen.setdefault(call.key(), call)
    return list(seen.values())


def check_call(call: RecordedCall, path: str, target: str, tiers: list[int], unavailable: dict[str, str],
               say: Callable[[str], None]) -> dict[str, Any]:
    """Tiers 1-2 for one recorded call, as a ``check`` result entry."""
    name = call.function if call.function and call.function != "<module>" else call.kernel_name
    entry: dict[str, Any] = {"name": name, "line": call.line, "format": "script", "tiers": {}, "errors": [],
                             "memory": None, "call": call.describe()}
    fn = call.call_without_interpret()
    args = tuple(call.operands or ())
    failed = False
    if 1 in tiers:
        say(f"tier 1: {name} (Pallas TPU lowering for {target}: {call.describe()})")
        try:
            checks.lower_for_tpu(fn, args, target)
            entry["tiers"]["1"] = "ok"
        except Exception as exc:  # noqa: BLE001 - the lowering's verdict
            entry["tiers"]["1"] = "error"
            entry["errors"].append(_record(exc, path, 1, call))
            failed = True
    if 2 in tiers:
        if "2" in unavailable:
            entry["tiers"]["2"] = "skipped: " + unavailable["2"].split(";")[0]
        elif failed:
            entry["tiers"]["2"] = "skipped: tier 1 failed"
        else:
            say(f"tier 2: {name} (libtpu compile for {target}: {call.describe()})")
            try:
                entry["memory"] = checks.compile_for_tpu(fn, args, target)
                entry["tiers"]["2"] = "ok"
            except Exception as exc:  # noqa: BLE001 - the compiler's verdict
                entry["tiers"]["2"] = "error"
                entry["errors"].append(_record(exc, path, 2, call))
    if 3 in tiers:
        entry["tiers"]["3"] = "skipped: in script mode the script's own run is the interpret-mode run"
    return entry


def _record(exc: BaseException, path: str, tier: int, call: RecordedCall) -> dict[str, Any]:
    """The errors.py record, plus the pallas_call's line (our wrapper, not the user's code, called it)."""
    rec = errors_mod.record(exc, path, stage=f"tier {tier}")
    rec["tier"] = tier
    if call.line is not None and call.file and os.path.realpath(call.file) == os.path.realpath(path):
        rec["frames"].insert(0, {"file": path, "line": call.line, "function": call.function or "<module>"})
    rec["call"] = call.describe()
    return rec
