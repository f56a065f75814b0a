"""`pallasite check` on many files, as it goes: each file's result when it finishes, a progress line.

``CheckProgress(total, ...)`` is the engine's ``on_report`` callback (engine/engine.py): in the
text format it prints each file's part of the report (``report_format.file_lines``) as soon as the
file is checked, in the order files finish; the JSON document waits for the end (path order).
On a terminal, stderr also shows a progress line (tqdm: files done, elapsed time, the last file),
kept below the printed results; it stays quiet when stderr is not a terminal (CI, a pipe).
``close()`` removes it; the caller prints the summary with the wall time.
"""

from __future__ import annotations

import os
import sys
from typing import IO, Sequence

from tqdm import tqdm

from ..analysis.types import FileReport

from . import report_format


class CheckProgress:
    """Prints results as files finish (text format) and keeps a progress line on a terminal."""

    def __init__(self, total: int, *, tiers: Sequence[int], text: bool = True, details: bool = False,
                 verbose: bool = False, out: IO[str] | None = None, bar: IO[str] | None = None,
                 target: str = "") -> None:
        self.tiers, self.text, self.details, self.verbose = tuple(tiers), text, details, verbose
        self.target = target  # the chip each file's compile verdict names
        self.out = out if out is not None else sys.stdout
        bar = bar if bar is not None else sys.stderr
        self.bar = tqdm(total=total, file=bar, unit="file", desc="pallasite check", leave=False, dynamic_ncols=True,
                        mininterval=0,  # redrawn as each file finishes (files take seconds each)
                        disable=True if total < 2 else None)  # None: shown only when ``bar`` is a terminal

    def __call__(self, report: FileReport) -> None:
        if self.text:
            for line in report_format.file_lines(report, tiers=self.tiers, details=self.details, verbose=self.verbose,
                                                 target=self.target):
                self.bar.write(line, file=self.out)
        self.bar.set_postfix_str(os.path.basename(report.path), refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()
