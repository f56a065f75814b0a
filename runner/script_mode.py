"""Script mode: run a file's own ``__main__`` and check every pallas_call it makes (worker side).

``pallasite check --script FILE`` needs no task convention: the file runs as ``python FILE`` would
run it (``__name__ == "__main__"``, ``sys.argv == [FILE]``, its folder first on ``sys.path``)
inside the worker, under the worker's time and memory limits, with every ``pallas_call``
recorded (``runner/recording.py``): each call's concrete operand shapes and dtypes, grid,
BlockSpecs, scratch and compiler params. Calls that ask for no interpreter are recorded and not
run (their outputs are stand-in zeros, so the script goes on); with tier 3 asked for they run in
CPU interpret mode instead, as the script's own tier-3 run. Afterwards each distinct recorded call
(same kernel, shapes and parameters counted once) is checked by tiers 1-2 for the target chip with
``interpret`` stripped — so a script that only ever ran in interpret mode still gets the TPU
compiler's verdict.

An exception the script raises itself is reported too, at its line in the file, from the "script
run" (the script's own run): PLS115 (an error) when a kernel was applied to operands sharded over
several devices outside ``shard_map``; PLS901 when it came out of a pallas_call (and only when the
compiler tiers did not already report that kernel's error) or the script's own check failed;
PLS908 when host-side code failed, PLS909 for a missing module — warnings: the kernels were not
all checked, not shown wrong; calls recorded before it are still checked. An assertion that fails
after kernel outputs were stand-ins is a note, not a finding (zeros cannot pass the script's check
of its results). A script that makes no pallas_call at all is PLS907 (a warning). The script runs
as on the target chip (``runner/target_chip.py``): ``pltpu.get_tpu_info()``,
``jax.default_backend()`` and the devices' kind answer for it, so a branch taken only on a TPU runs.
A script that runs on after its kernels (a hang, a long loop) is stopped at its own inner
deadline, a share of the request's time limit (``script_budget``), so the calls it made are still
checked in the time left; the stop is reported as PLS903 at the line the script was executing. A
file Python cannot parse is reported as PLS000 at the error. The answer has the ``check`` op's
result format (``runner/checks.py``), one entry per distinct call, named for the function holding
the call.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
import time
from typing import Any, Callable

from . import errors as errors_mod
from .intercept import RecordedCall, UnpartitionedKernel, is_kernel_error
from .loader import SkipStatement, StopLoading
from .memory_guard import MemoryStop, stop_near_limit
from .recording import (MAX_CALLS, call_name, call_record, dedupe, outside_its_axes, reach_record, recording,
                        stand_in_failure)
from .target_chip import target_chip
from .tiers import CHIPS, _line_watch, check_params, _plain_error, _say, compiler_tiers, tier2_unavailable

RESERVE_S = 3.0  # of the request's time limit, kept for checking the recorded calls: at least this,
RESERVE_SHARE = 0.4  # and at least this share of what is left when the script starts
STATEMENT_SHARE = 0.1  # of an import's time, what one top-level statement may take (at least STATEMENT_MIN_S)
STATEMENT_MIN_S = 5.0
ORIGIN = "script run"  # who spoke: the script's own run (its calls in CPU interpret mode)


class ScriptTimeLimit(StopLoading):
    """Raised inside the script (or the import) when its share of the time limit is spent
    (BaseException, so the script's own ``except Exception`` does not swallow it)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"stopped after {seconds:.1f} s")
        self.seconds = seconds


class StatementTimeLimit(SkipStatement):
    """Raised inside one top-level statement of an import that ran past its share of the import's
    time (a CPU benchmark of a guide's notebook cell): it stops; the import goes on."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"stopped after {seconds:.1f} s")
        self.seconds = seconds


def handle_script_check(params: dict[str, Any], progress: Callable[..., Any] | None = None) -> dict[str, Any]:
    """The ``check`` op with ``params["script"]``: run ``__main__``, then tiers 1-2 per distinct call."""
    import jax

    started = time.monotonic()
    say = _say(progress)
    path, text, target, tiers = check_params(params)
    result: dict[str, Any] = {"chip": target, "tasks_found": 0, "errors": [], "unavailable": {}, "entries": [],
                              "script": {"calls": 0, "distinct": 0}}
    if target not in CHIPS:
        result["errors"].append(_plain_error("task", f"unknown target {target!r}; use one of {', '.join(CHIPS)}"))
        return result
    jax.config.update("jax_pallas_verbose_errors", True)
    if 2 in tiers:
        why = tier2_unavailable(target)
        if why:
            result["unavailable"]["2"] = why

    limit = params.get("time_limit_s")
    budget = script_budget(limit, time.monotonic() - started)
    say(f"running {os.path.basename(path)} as __main__ (every pallas_call recorded)")
    # the script runs as on the target chip: pltpu.get_tpu_info() and friends get the target's figures
    with _line_watch(path, limit, say), target_chip(target):  # if the deadline cannot stop it: "at line N"
        calls, error = run_main(path, text, budget, stand_ins=3 not in tiers)
        distinct = dedupe(calls)
        result["script"] = {"calls": len(calls), "distinct": len(distinct)}
        result["tasks_found"] = len(distinct)
        notes = [f"script mode: {len(calls)} pallas_call(s) ran, {len(distinct)} distinct checked for {target}"
                 + (f" (the first {MAX_CALLS})" if len(distinct) > MAX_CALLS else "")]
        for call in distinct[:MAX_CALLS]:
            result["entries"].append(check_call(call, path, target, tiers, result["unavailable"], say))
    compiler_failed = any(state == "error" for e in result["entries"] for t, state in e["tiers"].items() if t in ("1", "2"))
    if error is not None and is_kernel_error(error) and compiler_failed and not isinstance(error, UnpartitionedKernel):
        notes.append("the script's own run stopped at the same kernel error the compiler tiers report")
    elif error is not None and stand_in_failure(error, calls):
        notes.append(stand_in_note(error, path, "the script"))
    elif error is not None:
        result["errors"].append(script_error_record(error, path, len(calls), len(distinct), limit))
    if result["entries"]:
        result["entries"][0]["notes"] = notes
    elif error is None:
        rec = _plain_error(
            "task", "the script ran to its end without making a pallas_call, so nothing past tier 0 was checked "
                    "(does its __main__ block call the kernel, or only under a condition that was false here?)")
        rec.update(code="PLS907", tier=1)
        result["errors"].append(rec)
    return result


def script_budget(limit_s: Any, elapsed_s: float) -> float | None:
    """Seconds the script may run of a request limited to ``limit_s`` (``elapsed_s`` already spent):
    what is left minus a reserve for checking its calls (None: no limit, no inner deadline)."""
    if not isinstance(limit_s, (int, float)) or isinstance(limit_s, bool) or limit_s <= 0:
        return None
    left = limit_s - elapsed_s
    return max(0.5, left - max(RESERVE_S, RESERVE_SHARE * left))


def script_error_record(error: BaseException, path: str, calls: int, distinct: int, limit_s: Any) -> dict[str, Any]:
    """The record for how the script's own run ended: PLS000 (syntax), PLS903 / PLS904 (stopped at its
    inner deadline / short of the memory limit, at the line it was executing), PLS115 (a kernel on
    sharded operands), PLS909 (a missing module), PLS908 (host code failed) or PLS901 (a kernel, or the
    script's own check, failed; or it exited non-zero)."""
    rec = errors_mod.record(error, path, stage="script")
    checked = checked_sentence(calls, distinct)
    if isinstance(error, SyntaxError) and rec.get("syntax"):
        rec.update(code="PLS000", tier=0, stage="import", origin="Python parser")
        return rec
    rec.update(tier=3, origin=ORIGIN)
    if isinstance(error, ScriptTimeLimit):
        return stopped_record(rec, error, path, checked, limit_s, "the script")
    if isinstance(error, MemoryStop):
        return memory_record(rec, error, path, checked, "the script")
    rec["code"] = "PLS901"
    if _UNPARTITIONED.search(str(error)):
        rec["code"] = "PLS115"
        rec["sentence"] = (f"{rec['sentence']}: a pallas_call applied to an array sharded over several devices must run "
                           "inside shard_map (one kernel per shard): wrap the call in jax.shard_map(f, mesh=..., "
                           "in_specs=..., out_specs=...)")
    elif isinstance(error, ModuleNotFoundError):
        rec["code"] = "PLS909"
    elif not is_kernel_error(error) and not isinstance(error, (SystemExit, AssertionError)):
        # host-side code failed: the kernels are not shown wrong, only not all checked (an assertion
        # is the script's own check of its results, and stays an error)
        rec["code"] = "PLS908"
    if isinstance(error, SystemExit):
        rec["sentence"] = f"the script exited with status {error.code!r}"
    rec["sentence"] = f"{rec['sentence']} ({checked})"
    return rec


def checked_sentence(calls: int, distinct: int) -> str:
    if not calls:
        return "it had made no pallas_call yet, so nothing was checked"
    if calls == distinct:
        return f"the {_plural(calls, 'pallas_call')} it made {'was' if calls == 1 else 'were'} still checked"
    return f"the {distinct} distinct pallas_calls of the {calls} it made were still checked"


def stopped_record(rec: dict[str, Any], error: ScriptTimeLimit, path: str, checked: str, limit_s: Any,
                   what: str) -> dict[str, Any]:
    """``rec`` made the PLS903 of a run (``what``: "the script", "importing the file") stopped at its
    inner deadline, at the line it was executing."""
    share = f", its share of the {limit_s:g} s time limit" if isinstance(limit_s, (int, float)) else ""
    return _stopped_at(rec, error, path, "PLS903", lambda where: (
        f"{what} was still running{where} after {error.seconds:.1f} s{share}: it was stopped there; {checked}. "
        "Raise the time limit if it only needs longer"))


def memory_record(rec: dict[str, Any], error: MemoryStop, path: str, checked: str, what: str) -> dict[str, Any]:
    """``rec`` made the PLS904 of a run (``what``) stopped short of the worker's memory limit."""
    return _stopped_at(rec, error, path, "PLS904", lambda where: (
        f"{what} was stopped{where} when the worker's memory reached {error.resident_mb:.0f} MiB, close to its "
        f"{error.limit_mb} MiB limit; {checked}. Raise the memory limit (`check.memoryMb`) if the file needs more on a CPU"))


def _stopped_at(rec: dict[str, Any], error: BaseException, path: str, code: str,
                sentence: Callable[[str], str]) -> dict[str, Any]:
    """``rec`` as ``code`` at the line of ``path`` the stopped run was executing."""
    line, function = executing_line(error, path)
    rec.update(code=code, type=type(error).__name__, detail=None, sentence=sentence(f" at line {line}" if line else ""))
    rec["message"] = rec["sentence"]
    rec["frames"] = [{"file": path, "line": line, "function": function}] if line else []
    rec["mentions"] = [{"line": line, "column": None}] if line else []
    return rec


# jax's words for a Mosaic kernel called on sharded operands outside shard_map (CPU and TPU say it differently)
_UNPARTITIONED = re.compile(r"mesh axes to be Manual|cannot be automatically partitioned")


def _plural(n: int, word: str) -> str:
    return f"{word}" if n == 1 else f"{n} {word}s"


def stand_in_note(error: BaseException, path: str, what: str) -> str:
    """Why a failed assertion after stand-ins is not a finding."""
    line, _ = executing_line(error, path)
    return (f"{what} stopped{f' at line {line}' if line else ''} ({type(error).__name__}) after kernels it called were "
            "recorded instead of run (their outputs were zeros): the file's own check of kernel results cannot pass "
            "here, and says nothing about the kernels; the compiler tiers checked them")


def executing_line(error: BaseException, path: str) -> tuple[int | None, str | None]:
    """The innermost line of the user's file in the traceback: where the script was when stopped."""
    target = os.path.realpath(path)
    found: tuple[int | None, str | None] = (None, None)
    tb = error.__traceback__
    while tb is not None:
        if os.path.realpath(tb.tb_frame.f_code.co_filename) == target:
            found = (tb.tb_lineno, tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    return found


def statement_deadlines(total_s: float | None) -> Callable[[], Any] | None:
    """The guard for each top-level statement of an import allowed ``total_s`` (``loader.run_statements``):
    a statement may take ``STATEMENT_SHARE`` of it (then ``StatementTimeLimit``, the import goes on);
    the import ends with ``ScriptTimeLimit`` when the whole of it is spent. None: no limit."""
    if not total_s:
        return None
    end = time.monotonic() + total_s
    each = max(STATEMENT_MIN_S, STATEMENT_SHARE * total_s)

    def guard() -> Any:
        left = end - time.monotonic()
        if left <= each:
            return deadline(max(left, 0.01), lambda _: ScriptTimeLimit(total_s))
        return deadline(each, StatementTimeLimit)

    return guard


@contextlib.contextmanager
def deadline(seconds: float | None, stop: Callable[[float], BaseException] = ScriptTimeLimit):
    """Raise ``stop(seconds)`` (``ScriptTimeLimit``) in this (main) thread after ``seconds`` (a SIGALRM timer).

    Off the main thread, or without a limit, nothing is armed: the request's own limit applies.
    """
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return
    armed = [True]

    def on_alarm(signum: int, frame: Any) -> None:
        if armed[0]:
            armed[0] = False
            raise stop(seconds)

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_main(path: str, text: str | None = None, time_limit_s: float | None = None, *,
             stand_ins: bool = True) -> tuple[list[RecordedCall], BaseException | None]:
    """Execute the file as ``__main__`` with every pallas_call recorded; (recorded calls, exception).

    Its top-level statements run one by one (a guide pasted into a script goes on past a cell that
    fails here; a ``__main__`` block is one statement): the exception is the first one that raised,
    preferring one the stand-ins cannot explain (``recording.stand_in_failure``).
    ``time_limit_s``: stop the script after this long (the exception is then a ``ScriptTimeLimit``).
    ``stand_ins``: calls that ask for no interpreter are not run (False: run in CPU interpret mode).
    """
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
        with recording(path, stand_ins=stand_ins) as recorded:
            calls = recorded.calls
            try:
                with deadline(time_limit_s), stop_near_limit():
                    load_user_module(path, text, name="__main__", failures=recorded.failures)
            except SystemExit as exc:
                if exc.code not in (None, 0):
                    error = exc
            except (Exception, StopLoading) as exc:  # noqa: BLE001 - the script's own failure is a finding
                error = exc
            raised = [exc for _, exc in recorded.failures]
            error = error or next((e for e in raised if not stand_in_failure(e, calls)), raised[0] if raised else None)
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


def check_call(call: RecordedCall, path: str, target: str, tiers: list[int], unavailable: dict[str, str],
               say: Callable[[str], None]) -> dict[str, Any]:
    """Tiers 1-2 for one recorded call, as a ``check`` result entry."""
    name = call_name(call)
    entry: dict[str, Any] = {"name": name, "line": call.line, "format": "script", "tiers": {}, "errors": [],
                             "memory": None, "call": call.describe(), "reached": [reach_record(call, path)]}
    fn = call.call_without_interpret()
    args = tuple(call.operands or ())
    compiler_tiers(entry, fn, args, target, tiers, unavailable, say, name,
                          lambda exc, tier: call_record(exc, path, tier, call), detail=f": {call.describe()}")
    outside_its_axes(entry, call)
    if 3 in tiers:
        entry["tiers"]["3"] = "skipped: in script mode the script's own run is the interpret-mode run"
    return entry
