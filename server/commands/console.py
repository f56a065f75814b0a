"""What a command prints on stderr while it works, beside its answer: progress is for a person watching.

On a terminal, ``Progress`` keeps one line that it rewrites (``\\r``): a bar and what is being done. When
stderr is not a terminal (a log file, CI, a pipe) it prints nothing at all: a log then holds the command's
answer and its errors, not kilobytes of rewritten bars (issue 59: `pallasite tune ... 2> log` left 15 KB of
``\\r[####...]``). ``progress_stream`` is the same rule for commands that print whole lines (time, profile,
search's phases, fix); results as they finish (eval's tasks, search's nodes, check's files) are output,
not progress, and are printed either way. `pallasite check` keeps its own tqdm line on the same rule
(server/commands/check_progress.py).
"""

from __future__ import annotations

import sys
from typing import IO


def progress_stream(stream: IO[str] | None = None) -> IO[str] | None:
    """``stream`` (default stderr) when it is a terminal, else None: no progress to print."""
    stream = sys.stderr if stream is None else stream
    try:
        return stream if stream.isatty() else None
    except (AttributeError, ValueError):  # closed, or a stand-in without isatty
        return None


class Progress:
    """One rewritten progress line on a terminal, nothing elsewhere: ``say(message, fraction)``, ``close()``."""

    WIDTH = 90

    def __init__(self, stream: IO[str] | None = None, *, quiet: bool = False) -> None:
        self.stream = None if quiet else progress_stream(stream)
        self.shown = False

    def say(self, message: str, fraction: float | None = None) -> None:
        if self.stream is None:
            return
        bar = "" if fraction is None else f"[{'#' * int(20 * max(0.0, min(1.0, fraction))):20s}] "
        line = f"{bar}{message}"[:self.WIDTH + 23]
        print(f"\r{line:{self.WIDTH + 23}s}", end="", file=self.stream, flush=True)
        self.shown = True

    def close(self) -> None:
        """Clear the line, so what follows starts on a clean one."""
        if self.stream is not None and self.shown:
            print(f"\r{'':{self.WIDTH + 23}s}\r", end="", file=self.stream, flush=True)
        self.shown = False
