"""What an import that went on past failing top-level statements reports (worker side).

The check op imports a file with each top-level statement run on its own (``runner/loader.py``'s
``failures``), under the recording of ``runner/recording.py``. Of the statements that raised:

- an assertion after kernels were stood in for (``recording.stand_in_failure``) is a note: the
  file's own check of kernel results cannot pass on values that were never computed;
- an import stopped at its share of the time limit (``script_mode.statement_deadlines``) is PLS903
  at the line it was executing, one stopped short of the memory limit (``memory_guard``) PLS904:
  the calls it made until then are still checked; one statement
  stopped at its own share (a CPU benchmark in a notebook cell) is PLS903 too, and the rest ran;
- the first other one is one record at its line, saying the rest of the file still ran and how
  many more statements raised: PLS909 for a missing module, PLS115 for a kernel applied to sharded
  operands outside ``shard_map`` (an error, as on a TPU), else PLS901 (engine/findings/classify.py) — a
  "could not check" warning, except where the statement is wrong on any machine (``BROKEN_EVERYWHERE``:
  a name used before it is defined, an attribute jax does not have), which is an error at its line.

A statement that failed leaves the names it would have bound undefined; a kernel that then fails on
one of them (``NameError``) failed because of that line, not its own: ``unbound_names`` and
``blame_import`` turn such a tier's error into "not checked", so the one finding is at its cause.
"""

from __future__ import annotations

import ast
import os
import re
from typing import Any

from . import errors as errors_mod
from .intercept import UnpartitionedKernel
from .recording import Recording, dedupe, stand_in_failure


def import_failure_records(run: Recording, path: str, limit_s: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """(error records, notes) for the statements of the import that raised; an import stopped at
    its share of the time limit (``limit_s``) is one PLS903 at the line it was executing."""
    from .memory_guard import MemoryStop
    from .script_mode import (ScriptTimeLimit, StatementTimeLimit, checked_sentence, executing_line, memory_record,
                              stopped_record)

    notes: list[str] = []
    real: list[tuple[int, BaseException]] = []
    for line, exc in run.failures:
        if isinstance(exc, (ScriptTimeLimit, MemoryStop)):  # the import ended there
            rec = errors_mod.record(exc, path, stage="import")
            checked = checked_sentence(len(run.applied), len(dedupe(run.applied)))
            if isinstance(exc, MemoryStop):
                return [memory_record(rec, exc, path, checked, "importing the file")], notes
            return [stopped_record(rec, exc, path, checked, limit_s, "importing the file")], notes
        if stand_in_failure(exc, run.calls):
            notes.append(f"importing the file: line {line} raised {type(exc).__name__} after kernels it called were "
                         "recorded instead of run (their outputs were zeros): the file's own check of kernel results "
                         "cannot pass here, and says nothing about the kernels; the compiler tiers checked them")
        else:
            real.append((line, exc))
    if not real:
        return [], notes
    line, exc = real[0]
    rec = errors_mod.record(exc, path, stage="import")
    if not rec.get("frames") and not rec.get("mentions"):
        rec["mentions"] = [{"line": line, "column": None}]
    more = len(real) - 1
    rest = (f"the file's other top-level statements still ran, {more} more raised or were stopped" if more
            else "the file's other top-level statements still ran")
    if isinstance(exc, StatementTimeLimit):  # a CPU benchmark in a guide's cell: stopped, not wrong
        at, function = executing_line(exc, path)
        rec.update(code="PLS903", type="StatementTimeLimit", detail=None, frames=[
            {"file": path, "line": at or line, "function": function or "<module>"}],
            sentence=(f"importing the file: the top-level statement at line {line} was still running"
                      f"{f' at line {at}' if at and at != line else ''} after {exc.seconds:.1f} s, its share of the "
                      f"import's time, and was stopped; {rest}. Raise the time limit if it only needs longer"))
        rec["message"] = rec["sentence"]
        return [rec], notes
    said = rec.get("sentence") or rec.get("message")
    if not said or said == type(exc).__name__:  # raised with no text ("AttributeError: AttributeError" was said)
        said = _empty_sentence(exc, rec, path, line)
    rec["sentence"] = f"{said} (line {line}; {rest})"
    if isinstance(exc, UnpartitionedKernel):
        rec.update(code="PLS115", tier=1)
    elif broken_everywhere(exc):
        rec["severity"] = "error"
    return [rec], notes


def _empty_sentence(exc: BaseException, rec: dict[str, Any], path: str, line: int) -> str:
    """An exception raised with no text (engine/findings/classify.py puts its type first): the statement of the file
    that raised it, and where it was raised."""
    import linecache

    code = linecache.getline(path, line).strip()
    said = "raised with no message" + (f" by `{code}`" if code else "")
    where = rec.get("raised_at") or {}
    if where.get("file") and os.path.basename(str(where["file"])) != os.path.basename(path):
        said += f", in {where['file']}:{where['line']} ({where['function']})"
    elif where.get("line") and where["line"] != line:
        said += f", at line {where['line']} ({where['function']})"
    if isinstance(exc, AttributeError):
        said += "; an object that answers attribute lookups itself (a __getattr__) refused one"
    return said


def broken_everywhere(exc: BaseException) -> bool:
    """Whether a top-level statement's exception would be raised on a TPU too: a name used before it
    is defined, or an attribute the installed jax does not have (a removed or renamed API)."""
    if isinstance(exc, NameError):  # UnboundLocalError is one
        return True
    module = getattr(getattr(exc, "obj", None), "__name__", "") or ""
    return isinstance(exc, AttributeError) and (module == "jax" or module.startswith("jax."))


def unbound_names(text: str | None, run: Recording) -> dict[str, int]:
    """{name: line} of the top-level names that the statements which raised would have bound."""
    if not text or not run.failures:
        return {}
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {}
    failed = {line for line, _ in run.failures}
    names: dict[str, int] = {}
    for node in tree.body:
        if node.lineno not in failed:
            continue
        for sub in ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else ():
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                names.setdefault(sub.id, node.lineno)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.setdefault(node.name, node.lineno)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.setdefault((alias.asname or alias.name).split(".")[0], node.lineno)
    return names


_UNDEFINED = re.compile(r"name '(\w+)' is not defined")


def blame_import(entry: dict[str, Any], unbound: dict[str, int]) -> None:
    """A tier of ``entry`` that failed on a name a failed top-level statement would have bound is
    "not checked" (that statement's finding says why), and its error record is dropped."""
    if not unbound:
        return
    kept = []
    for rec in entry.get("errors") or ():
        found = _UNDEFINED.search(str(rec.get("message") or "")) if rec.get("type") in ("NameError", "UnboundLocalError") else None
        line = unbound.get(found.group(1)) if found else None
        if line is None:
            kept.append(rec)
            continue
        tier = str(rec.get("tier"))
        if entry["tiers"].get(tier) == "error":
            entry["tiers"][tier] = (f"not checked: needs {found.group(1)!r}, which line {line} would have defined "
                                    "(it raised when the file was imported)")
            for later, state in list(entry["tiers"].items()):  # tier 2 skipped for it: not for a failure
                if state == f"skipped: tier {tier} failed":
                    entry["tiers"][later] = f"skipped: tier {tier} not checked"
    entry["errors"] = kept
