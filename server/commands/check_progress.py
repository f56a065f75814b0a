"""`pallasite check` on many files, as it goes: each file's result when it finishes, a progress line.

``CheckProgress(paths, ...)`` is the engine's ``on_report`` callback (engine/engine.py): in the
text format it prints each file's part of the report (``report_format.file_lines``) in path order,
each as soon as it and every file before it are checked (files finish in any order on several
workers; the output is the same every run); the JSON document waits for the end (path order).
``done`` holds every finished file's report, so an interrupted check (Ctrl-C) still shows them:
``close()`` prints the ones held back behind an unfinished file.
On a terminal, stderr also shows a progress line (tqdm: files done, elapsed time, the last file),
kept below the printed results; it stays quiet when stderr is not a terminal (CI, a pipe).
``close()`` removes it; the caller prints the summary with the wall time.
"""

from __future__ import annotations

import os
import sys
from typing import IO, Sequence

from tqdm import tqdm

from ...analysis.types import FileReport

from ..reports import report_format


class CheckProgress:
    """Prints results as files finish (text format) and keeps a progress line on a terminal."""

    def __init__(self, paths: Sequence[str], *, tiers: Sequence[int], text: bool = True, details: bool = False,
                 verbose: bool = False, out: IO[str] | None = None, bar: IO[str] | None = None,
                 target: str = "") -> None:
        self.tiers, self.text, self.details, self.verbose = tuple(tiers), text, details, verbose
        self.target = target  # the chip each file's compile verdict names
        self.paths = list(paths)
        self.done: list[FileReport] = []  # every finished file's report, in the order they finished
        self._held: dict[int, FileReport] = {}  # finished, waiting for an earlier file to be printed
        self._printed = 0  # files printed, a prefix of ``paths``
        self._places: dict[str, list[int]] = {}  # path -> its positions in ``paths`` not yet reported
        for i, path in enumerate(self.paths):
            self._places.setdefault(path, []).append(i)
        total = len(self.paths)
        self.out = out if out is not None else sys.stdout
        bar = bar if bar is not None else sys.stderr
        self.bar = tqdm(total=total, file=bar, unit="file", desc="pallasite check", leave=False, dynamic_ncols=True,
                        mininterval=0,  # redrawn as each file finishes (files take seconds each)
                        disable=True if total < 2 else None)  # None: shown only when ``bar`` is a terminal

    def __call__(self, report: FileReport) -> None:
        self.done.append(report)
        places = self._places.get(report.path)
        self._held[places.pop(0) if places else len(self.paths) + len(self._held)] = report
        self._print_ready()
        self.bar.set_postfix_str(os.path.basename(report.path), refresh=False)
        self.bar.update(1)

    def _print_ready(self, everything: bool = False) -> None:
        """Print the held reports that are next in path order (``everything``: all of them, in path order)."""
        for i in sorted(self._held):
            if i != self._printed and not everything:
                break
            self._print(self._held.pop(i))
            self._printed = i + 1

    def _print(self, report: FileReport) -> None:
        if self.text:
            for line in report_format.file_lines(report, tiers=self.tiers, details=self.details, verbose=self.verbose,
                                                 target=self.target):
                self.bar.write(line, file=self.out)
            self.out.flush()  # a pipe (tee, CI's log) sees each file when it is printed

    def close(self) -> None:
        """The reports still held (behind a file that never finished: an interrupted check), then no bar."""
        self._print_ready(everything=True)
        self.bar.close()
