"""Tier-3 outcomes that are not the kernel's fault (worker side: imports only the stdlib).

A tier-3 run can end without saying anything about the kernel:

- jax's TPU interpreter itself fails on code the compiler accepts (``upstream_failure``): a
  pallas_call with ``dimension_semantics`` under ``jax.vmap`` (vmap adds a grid axis the semantics
  do not list: ``safe_zip() argument 1 has length 1 but argument 0 has length 2``), a reshaped or
  bitcast ref (``'ReshapeTransform'`` / ``'BitcastTransform' object has no attribute 'indices'``:
  tpu-inference's MLA-SWA, tokamax's MLA; since runner/tier3/interpret_views.py, only a jax without the
  functions it wraps), or any AttributeError/KeyError/NotImplementedError/AssertionError raised inside the
  interpreter's own modules, directly or as the last frame of a callback's traceback (a DMA wait's
  semaphore assertion in tpu-inference's gmm v2);
- the task's reference cannot be called the way the candidate is (``reference_mismatch``), or it
  raises (``reference_failure``): a note about the task (PLS905, information); the outputs are
  still checked for what needs no reference (unwritten blocks, out-of-bounds reads, races).

Such outcomes make the tier's state ``not checked: <why>`` (``NOT_CHECKED``), with a record that is
a warning (PLS306) or a note (PLS905), never the kernel's PLS300.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Callable

from ...analysis.types import NOT_CHECKED_STATE
from ..memory_guard import SOFT_SHARE

NOT_CHECKED = NOT_CHECKED_STATE  # analysis/types.py: the one word for it
UPSTREAM_CODE = "PLS306"

VMAPPED_SEMANTICS = re.compile(r"safe_zip\(\) argument \d+ has length \d+ but argument \d+ has length")
_KNOWN: tuple[tuple[re.Pattern[str], str], ...] = (
    (VMAPPED_SEMANTICS,
     "jax's TPU interpreter cannot run a pallas_call that has dimension_semantics under jax.vmap (vmap adds a "
     "grid axis the semantics do not list); the TPU compiler accepts it"),
    (re.compile(r"'(\w*Transform)' object has no attribute 'indices'"),
     "jax's TPU interpreter cannot index a ref viewed through a {0} (a reshaped or bitcast ref); the TPU compiler "
     "accepts it"),
)
_INTERPRETER_FILES = re.compile(r"jax/_src/pallas/mosaic/interpret")
_INTERNAL_TYPES = ("AttributeError", "KeyError", "NotImplementedError", "AssertionError")
_CALLBACK_INTERNAL = re.compile(r'File "[^"]*jax/_src/pallas/mosaic/interpret/(?P<file>[\w/]+\.py)", line (?P<line>\d+), '
                                r'in (?P<func>\w+)\s+(?P<type>' + "|".join(_INTERNAL_TYPES) + r')\b')


def upstream_failure(exc: BaseException, rec: dict[str, Any]) -> str | None:
    """Why ``exc`` (raised in a tier-3 run; ``rec`` its runner/errors.py record) is a failure of jax's
    interpreter rather than of the kernel; None when it may be the kernel's."""
    text = f"{type(exc).__name__}: {exc}"
    for pattern, why in _KNOWN:
        found = pattern.search(str(exc))
        if found:
            return f"{why.format(*found.groups())} (the interpreter said: {_short(text)})"
    inside = _CALLBACK_INTERNAL.search(str(exc).replace("\\", "/"))
    if inside:  # raised by the interpreter's own code inside a callback (its last frame, then the error)
        return (f"jax's TPU interpreter failed inside its own code at {inside.group('file')}:{inside.group('line')} "
                f"({inside.group('type')} in {inside.group('func')})")
    raised = rec.get("raised_at") or {}
    where = str(raised.get("file") or "")
    if _INTERPRETER_FILES.search(where.replace("\\", "/")) and type(exc).__name__ in _INTERNAL_TYPES:
        return (f"jax's TPU interpreter failed inside its own code at {where}:{raised.get('line')} "
                f"(the interpreter said: {_short(text)})")
    return None


def upstream_record(rec: dict[str, Any], why: str) -> dict[str, Any]:
    """The warning that replaces a PLS300 record when the interpreter, not the kernel, failed."""
    out = dict(rec)
    out.update(code=UPSTREAM_CODE, severity="warning", tier=3, origin="TPU interpreter (jax)",
               sentence=f"tier 3 not checked: {why}. Tiers 1-2 still apply; check this kernel's numbers "
                        "another way (a plain interpret=True run, or on a TPU).")
    out["message"] = out["sentence"]
    return out


def reference_mismatch(reference: Callable[..., Any], inputs: tuple[Any, ...], path: str) -> dict[str, Any] | None:
    """A PLS905 task-error record when ``reference`` cannot take the candidate's arguments; else None."""
    try:  # not through __wrapped__: a task's binding of static arguments (runner/tasks/maxkernel.py) wraps it
        sig = inspect.signature(reference, follow_wrapped=False)
    except (TypeError, ValueError):
        return None  # a builtin or C function: let the call say
    try:
        sig.bind(*inputs)
    except TypeError as exc:
        name = getattr(reference, "__name__", "reference")
        code = getattr(inspect.unwrap(reference), "__code__", None)
        mentions = []
        if code is not None and _same(code.co_filename, path):
            mentions = [{"line": code.co_firstlineno, "column": None}]
        where = f"{code.co_filename}:{code.co_firstlineno}" if code is not None else name
        sentence = (f"the reference cannot be called like the candidate: {name}{sig} does not take the "
                    f"candidate's {len(inputs)} argument(s) ({exc}); tier 3 could not compare results. Give the "
                    f"reference the candidate's parameters ({where})")
        return _note(sentence, mentions)
    return None


def semantics_dropped(exc: BaseException | None, path: str) -> dict[str, Any]:
    """The note (PLS306, information) when tier 3 ran a vmapped pallas_call without its
    dimension_semantics because jax's interpreter cannot run them under vmap."""
    sentence = ("tier 3 ran without the pallas_call's dimension_semantics: jax's TPU interpreter cannot run them "
                "under jax.vmap (vmap adds a grid axis they do not list). Everything else was checked; whether a "
                "\"parallel\" axis carries state from step to step was checked by running those axes backward")
    return {"type": "InterpreterLimit", "message": sentence, "sentence": sentence, "stage": "tier 3", "tier": 3,
            "code": UPSTREAM_CODE, "origin": "TPU interpreter (jax)", "severity": "information", "frames": [],
            "mentions": [], "refs": [], "detail": None}


def reference_failure(exc: BaseException, path: str) -> dict[str, Any]:
    """The note (PLS905) when the task's reference raised on the candidate's inputs."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _same(f.filename, path)]
    mentions = [{"line": frames[-1].lineno, "column": None}] if frames else []
    limit = getattr(exc, "limit_mb", None)  # a memory_guard.MemoryStop
    what = (f"went past {round(SOFT_SHARE * limit)} MiB, {SOFT_SHARE:.0%} of the worker's {limit} MiB memory limit"
            if limit else f"raised on the candidate's inputs ({type(exc).__name__}: {_short(str(exc), 200)})")
    sentence = (f"the reference {what}; "
                "tier 3 could not compare results (unwritten blocks, out-of-bounds reads and races were still checked)")
    return _note(sentence, mentions)


def _note(sentence: str, mentions: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "TaskError", "message": sentence, "sentence": sentence, "stage": "task", "tier": 3,
            "code": "PLS905", "origin": "pallasite runner", "severity": "information", "frames": [],
            "mentions": mentions, "refs": [], "detail": None}


def _same(a: str, b: str) -> bool:
    import os

    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def state_of(records: list[dict[str, Any]]) -> str:
    """The tier-3 state for its records: an error of the kernel wins; else a reason it was not checked."""
    if any(r.get("severity", "error") == "error" and r.get("code") != "PLS905" for r in records):
        return "error"
    for r in records:
        if r.get("code") == "PLS905":  # its sentence says why: not callable so, raised, or outgrew the worker
            return NOT_CHECKED + "the reference gave no result to compare with (PLS905)"
    for r in records:
        if r.get("code") == UPSTREAM_CODE and r.get("severity") != "information":
            return NOT_CHECKED + "jax's TPU interpreter could not run this kernel (PLS306)"
    return "ok"
