"""The judge of a ``time`` request: every figure computed here, from the trusted side and the candidate's
exported program; the candidate's Python never runs in this process.

One path, on the CPU and on a device, for model-written code and for the user's own file alike:

1. A throwaway verifier is forked before any backend starts (runner/judging/throwaway.py).
2. The trusted side is loaded: the user's own file (its task, inputs, ``reference``) or the task's
   reference file (JAXBench's baseline.py, MaxKernel's reference) - runner/judging/trusted.py.
3. The sizes are the judge's (runner/judging/sizes.py): the full example inputs (priced; timed on a
   device), the size the checks run at (reduced on the CPU for a large task) and a second size.
4. The candidate's process is a fresh interpreter holding one socket (runner/judging/channel.spawn), in a
   PID namespace of its own (runner/isolation/nest.py), started once this process and the verifier are
   undumpable: it loads the candidate and exports its entry at the signatures the judge names - one
   symbolic signature covering every size where the program allows (it cannot tell which sizes will run),
   else each size in turn - and is ended with everything it started before anything runs
   (``channel.end`` returns once its namespace is empty). Of what it sends only the module bytes are read.
5. Each module is checked and compiled for the CPU in the throwaway verifier; a module that crashes it
   is a verdict ("the candidate's module crashed the verifier"), not the judge's end.
6. The judge deserializes what passed, and computes: kernel presence (a Mosaic kernel in the module's
   TPU branch, on every platform), the seed (a local, fresh per request), the inputs (floats drawn
   fresh at the task's scale, integers permuted from the task's own), the reference's outputs, the
   comparison (two fresh sets, the example's answer, a second size), and on request the timing by its
   own clock (the profiler's device plane on an accelerator) and the cost-model estimate of the module.

Worker side: imports jax.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Any, Callable

from ...analysis.types import DEFAULT_CHIP
from .channel import CandidateGone, Isolation, end, gone_why, prefork, receive, send_frame, spawn
from .trusted import trusted_prep

JUDGE = "the judge"  # analysis/verdict.JudgedBy.JUDGE's value


def candidate_params(params: dict[str, Any], target: str = DEFAULT_CHIP) -> dict[str, Any]:
    """What the candidate's process is told: its own file and task, and the chip its program is exported
    for (``target``: its hardware questions are answered as that chip's); nothing of the judge's."""
    keep = ("path", "text", "modules", "package", "entry", "config", "reference_path", "reference_text",
            "reference_modules", "reference_entry")
    return {**{k: params[k] for k in keep if k in params}, "chip": target}


def target_of(params: dict[str, Any], prep: Any) -> str:
    """The chip the candidate's program is exported for: this device's, else the estimate's, else v6e."""
    from ...analysis.types import CHIP_TARGETS

    kind = str(prep.device_kind or "")
    by_kind = {t.device_kind: t.name for t in CHIP_TARGETS}
    return by_kind.get(kind) or str(params.get("chip") or "") or DEFAULT_CHIP


def judged_time(params: dict[str, Any], progress: Callable[..., Any] | None = None,
                judging: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """The ``time`` op (see the module docstring). Call before this process starts a jax backend. ``judging``
    is told the candidate's file name once its process is gone and the judge runs its program (a crash from
    then on is the program's: the client says so, engine/workers/client.py)."""
    from ..measure import timing
    from .throwaway import Throwaway

    say = timing._say(progress)
    from .forked import Forked

    verifier = Throwaway()  # first: forked at this request's clean point where it is one, as is the candidate's
    verifier.ready()
    prefork()
    record: dict[str, Any] = {"how": "exported program", "judge_pid": os.getpid(), "candidate_pid": None,
                              "processes": "forked at the request's clean point" if isinstance(verifier.proc, Forked)
                              else "fresh interpreters"}
    try:
        with contextlib.ExitStack() as stack:
            try:
                prep = trusted_prep(params, stack)
            except Exception as exc:  # noqa: BLE001 - nothing trusted: nobody judges
                return _with(timing._failed(params, f"not judged: {exc}"), record, "")
            verifier.ready()  # undumpable before the candidate exists
            try:
                sock, pid = spawn("export", candidate_params(params, target_of(params, prep)))
            except CandidateGone as exc:  # it ended before its request (a confined worker's, un-nested)
                return _with(timing._failed(params, str(exc)), record, JUDGE)
            record["candidate_pid"] = pid
            try:
                return _with(_judge(sock, pid, params, say, prep, verifier, record, judging), record, JUDGE)
            except CandidateGone as exc:
                return _with(timing._failed(params, gone_why(pid, exc)), record, JUDGE)
            finally:
                _isolated(_ended(sock, pid), record)
    finally:
        verifier.close()


def _with(result: dict[str, Any], record: dict[str, Any], judged_by: str) -> dict[str, Any]:
    record["candidate_imported"] = _candidate_imported(result.get("path"))
    result["judge"] = record
    result["judged_by"] = judged_by
    return result


def _candidate_imported(path: Any) -> bool:
    """Whether any module in this process was loaded from the candidate's file."""
    if not path:
        return False
    target = os.path.realpath(str(path))
    return any(isinstance(getattr(m, "__file__", None), str) and os.path.realpath(m.__file__) == target
               for m in list(sys.modules.values()))


def _ended(sock: Any, pid: int) -> Isolation | None:
    """``channel.end``; None when it refused (a confined worker's candidate that was not nested)."""
    try:
        return end(sock, pid)
    except CandidateGone:
        return None


def _isolated(isolation: Isolation | None, record: dict[str, Any], result: dict[str, Any] | None = None) -> None:
    """What the record (and the result's notes) say of how the candidate's side was kept and ended."""
    if isolation is None:
        return
    record["candidate_pid"] = isolation.candidate_pid or record.get("candidate_pid")
    record["isolation"] = "its own PID namespace, ended with it" if isolation.nested and not isolation.note \
        else isolation.note
    if result is not None and isolation.note and isolation.note not in result["notes"]:
        result["notes"].append(isolation.note)


def _base(params: dict[str, Any], prep: Any) -> dict[str, Any]:
    from ..tiers import versions
    from .exported_run import plays_device, STANDIN_ENV

    return {"entry": prep.task.name, "path": params.get("path"), "format": prep.task.format,
            "config": dict(params.get("config") or {}), "verdict": "rejected", "rejections": [], "flags": [],
            "checks": {}, "device": {"platform": prep.platform, "device_kind": prep.device_kind},
            "provenance": "device" if prep.on_device else "interpret", "versions": versions(), "candidate": None,
            "reference": None, "speedup": None, "spread": None, "trace": None,
            "notes": ([f"a stand-in device ({os.environ.get(STANDIN_ENV)}): its JAX runs on the CPU"]
                      if plays_device() else [])}


def _judge(sock: Any, pid: int, params: dict[str, Any], say: Callable[[str], None], prep: Any, verifier: Any,
           record: dict[str, Any], judging: Callable[[str], Any] | None = None) -> dict[str, Any]:
    from ..measure import timing
    from . import exported_run as run
    from .sizes import from_proposal, judge_sizes, ladder_knobs, mapped, not_same_arguments

    result = _base(params, prep)
    loaded, _ = receive(sock)
    if loaded.get("op") != "loaded":
        return timing._failed(params, f"the candidate's file could not be loaded: {str(loaded.get('error'))[:2000]}")
    sizes = judge_sizes(prep, reduce=not prep.on_device)  # on the CPU every run is the interpreter: reduced
    if sizes is None:  # no kernel on the trusted side to read sizes from: the candidate proposes CONFIG values
        send_frame(sock, {"op": "propose", "knobs": ladder_knobs()})
        proposal, _ = receive(sock)
        sizes = from_proposal(prep, proposal)
    if not isinstance(sizes, str):
        sizes = mapped(sizes, loaded.get("takes"), prep)
    if isinstance(sizes, str):  # nothing runs here; a price needs only the module at the task's size
        if not params.get("chip"):
            return timing._failed(params, sizes)
        return _priced_only(sock, pid, params, say, prep, verifier, result, sizes, loaded.get("takes"))
    started = time.perf_counter()
    say("the candidate's process exports its program at the judge's sizes")
    modules = run.export_all(sock, sizes, prep, want_full=bool(params.get("chip")) or prep.on_device)
    sizes = modules.get("sizes") or sizes  # a symbolic module may cover a second size of the judge's own choosing
    if sizes.takes and modules["main"][0] is None:  # the judge's prefix mapping did not fit its program either
        _isolated(end(sock, pid), record, result)
        return timing._failed(params, not_same_arguments(f"its entry takes {sizes.takes} inputs and does not export "
                                                         f"at the task's first {sizes.takes}: {modules['main'][3][:400]}"))
    # every process of the candidate's side is gone (its PID namespace empty) before anything is run or timed
    _isolated(end(sock, pid), record, result)
    if judging is not None:
        judging(os.path.basename(str(params.get("path") or "the candidate")))
    result["checks"]["export"] = {"candidate_s": round(time.perf_counter() - started, 3),
                                  "symbolic": modules.get("symbolic"), "why_not_symbolic": modules.get("why_not")}
    return run.judge_modules(result, params, say, prep, sizes, modules, verifier)


def _priced_only(sock: Any, pid: int, params: dict[str, Any], say: Callable[[str], None], prep: Any, verifier: Any,
                 result: dict[str, Any], why: str, takes: Any = None) -> dict[str, Any]:
    """A program the judge cannot check here (too big for the check's memory, arguments that differ) is still
    priced from its module at the task's size: whether it could be run is a separate fact (issue 60). The
    verdict says why it was not verified; the estimate stands beside it."""
    from . import exported_run as run
    from .sizes import Sizes, mapped

    full = prep.task.abstract_args()
    sizes = mapped(Sizes(full, full), takes, prep)
    sizes = Sizes(full, full) if isinstance(sizes, str) else sizes
    say("the candidate's process exports its program at the task's size (priced only: " + why[:200] + ")")
    modules = run.export_all(sock, sizes, prep, want_full=False)
    _ended(sock, pid)  # the candidate's side gone before the module is read
    judged = run.judge_modules(result, {**params, "checks": False}, say, prep, sizes, modules, verifier)
    if judged.get("verdict") != "rejected":
        judged.update(verdict="error", error=why)
    return judged
