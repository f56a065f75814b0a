"""Writing a run's result into the user's file (``--apply``) without ever losing the user's text.

A fix, an optimize or a search run takes seconds to hours; the user may edit the file meanwhile.
``apply_result(path, started, new, beside=...)`` writes ``new`` over ``path`` only when the file's
bytes are still exactly the bytes the run started from; otherwise (edited, deleted, unreadable) it
writes ``new`` beside it (``kernel.py`` -> ``kernel<beside>``) and says why. Every write is atomic: a
temporary file in the same folder, then ``os.replace``, keeping the file's permissions, so a reader
(or a crash) never sees half a file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Written:
    path: str  # where the result went
    applied: bool  # over the original file
    why: str = ""  # why it went beside the file instead

    def describe(self) -> str:
        return f"applied to {self.path}" if self.applied else f"written to {self.path}: {self.why}"


def apply_result(path: str | Path, started: bytes, new: str, *, beside: str) -> Written:
    """``new`` over ``path`` if the file is still ``started``, else beside it (see the module docstring)."""
    path = Path(path)
    try:
        now = path.read_bytes()
    except OSError as exc:
        why = f"{path} could not be read back ({exc.strerror or exc}), so it was not overwritten"
    else:
        if now == started:
            write_atomic(path, new)
            return Written(str(path), True)
        why = f"{path} changed while the run was going (your edits are kept), so it was not overwritten"
    other = path.with_name(path.name[: -len(path.suffix)] + beside if path.suffix else path.name + beside)
    write_atomic(other, new)
    return Written(str(other), False, why)


def write_atomic(path: str | Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8, newlines as given) in one step."""
    path = Path(path)
    try:
        mode = path.stat().st_mode & 0o7777
    except OSError:
        mode = None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(text.encode("utf-8"))
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
