"""What an import that went on past failing top-level statements reports (worker side).

The check op imports a file with each top-level statement run on its own (``runner/loader.py``'s
``failures``), under the recording of ``runner/recording.py``. Of the statements that raised:

- an assertion after kernels were stood in for (``recording.stand_in_failure``) is a note: the
  file's own check of kernel results cannot pass on values that were never computed;
- the first other one is one record at its line, saying the rest of the file still ran and how
  many more statements raised: PLS909 for a missing module, PLS114 for a kernel applied to sharded
  operands outside ``shard_map`` (an error, as on a TPU), else PLS901 (engine/classify.py) — the
  first two and the last are "could not check" warnings, never errors.
"""

from __future__ import annotations

from typing import Any

from . import errors as errors_mod
from .intercept import UnpartitionedKernel
from .recording import Recording, stand_in_failure


def import_failure_records(run: Recording, path: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(error records, notes) for the statements of the import that raised."""
    notes: list[str] = []
    real: list[tuple[int, Exception]] = []
    for line, exc in run.failures:
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
    rest = (f"the file's other top-level statements still ran, {more} more raised" if more
            else "the file's other top-level statements still ran")
    rec["sentence"] = f"{rec.get('sentence') or rec.get('message') or type(exc).__name__} (line {line}; {rest})"
    if isinstance(exc, UnpartitionedKernel):
        rec.update(code="PLS114", tier=1)
    return [rec], notes
