"""Model-written code's files and capabilities, worker side: a scratch folder per request, paths
mapped back, and the capability drop the sandbox ends with.

Code a model wrote (a fixer's proposal, an optimize or search candidate, a test writer's tests,
what ``eval`` runs) runs only in a sandboxed child of a confined worker (``pallasite worker
--confine SCRATCH``; ``runner/isolation/sandbox.py`` builds the sandbox). Here:

- ``Scratch``: per request, a fresh folder under ``SCRATCH/work`` receives the files the request
  carries (``messages.Sources``: the candidate, its local modules and the task files kept beside
  it, such as a MaxKernel ``kernel_task.yaml``), the request's paths are rewritten to it (the
  candidate's ``__file__`` is a scratch path, never the user's), the working folder is changed to
  it, and every message the request sends back has the scratch paths replaced by the user's, so
  findings still name the user's file and lines. HOME, TMPDIR and the XDG folders point inside
  ``SCRATCH`` (``private_environment``).
- ``drop_bounding_set`` / ``drop_capabilities``: no capability now or after any exec (runner/capabilities.py).

Stdlib only (the worker imports it before anything else).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

from ...wire.messages import SourceFile, Sources
from ..capabilities import ConfineError, drop_bounding_set, drop_capabilities  # noqa: F401 - the sandbox's

PRIVATE_DIRS = ("home", "tmp", "cache", "work")

def private_environment(scratch: str) -> None:
    """HOME, TMPDIR and the XDG folders inside ``scratch``; the working folder its ``work``."""
    for name in PRIVATE_DIRS:
        os.makedirs(os.path.join(scratch, name), exist_ok=True)
    home, tmp, cache = (os.path.join(scratch, name) for name in ("home", "tmp", "cache"))
    os.environ.update(HOME=home, TMPDIR=tmp, TMP=tmp, TEMP=tmp, XDG_CACHE_HOME=cache,
                      XDG_CONFIG_HOME=os.path.join(home, ".config"), XDG_DATA_HOME=os.path.join(home, ".local"))
    tempfile.tempdir = None  # re-read TMPDIR
    os.chdir(os.path.join(scratch, "work"))


# --------------------------------------------------------------------------- one request


class Scratch:
    """A fresh folder per request under ``root/work`` (see the module docstring)."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)
        self._count = itertools.count(1)

    @contextlib.contextmanager
    def request(self, params: Any) -> Iterator[tuple[Any, "PathMap"]]:
        """(params with every ``Sources`` moved into a fresh folder, the map back); the working
        folder is that folder for the duration (the worker restores its own afterwards)."""
        folder = os.path.join(self.root, "work", f"request-{next(self._count)}")
        os.makedirs(folder)
        paths = PathMap()
        moved = _move(params, folder, paths)
        os.chdir(folder)
        try:
            yield moved, paths
        finally:
            with contextlib.suppress(OSError):
                os.chdir(os.path.join(self.root, "work"))
            shutil.rmtree(folder, ignore_errors=True)


@dataclasses.dataclass
class PathMap:
    """Scratch path -> the user's path, applied to every string of an outgoing message."""

    pairs: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def add(self, scratch: str, original: str) -> None:
        self.pairs.append((scratch, original))
        self.pairs.sort(key=lambda pair: len(pair[0]), reverse=True)

    def back(self, value: Any) -> Any:
        if isinstance(value, str):
            for scratch, original in self.pairs:
                if scratch in value:
                    value = value.replace(scratch, original)
            return value
        if isinstance(value, dict):
            return {k: self.back(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.back(v) for v in value)
        return value


def _move(value: Any, folder: str, paths: PathMap) -> Any:
    """``value`` (a params dataclass) with each ``Sources`` in it written under ``folder``."""
    if isinstance(value, Sources):
        return _move_sources(value, folder, paths)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _move(getattr(value, f.name), folder, paths) for f in dataclasses.fields(value)
                   if isinstance(getattr(value, f.name), Sources)}
        return dataclasses.replace(value, **changes) if changes else value
    return value


def _move_sources(sources: Sources, folder: str, paths: PathMap) -> Sources:
    base = os.path.abspath(sources.root or os.path.dirname(sources.file.path))
    target = os.path.join(folder, "files")
    known = dict(paths.pairs)
    if target in known and known[target] != base:  # a second Sources from another folder (a reference file)
        target = os.path.join(folder, f"files-{len(paths.pairs)}")
    if target not in known:
        paths.add(target, base)

    def place(file: SourceFile) -> SourceFile:
        original = os.path.abspath(file.path)
        rel = os.path.relpath(original, base)
        if rel.startswith(os.pardir):  # outside the root: keep its name, in a folder of its own
            rel = os.path.join("_outside", str(len(paths.pairs)), os.path.basename(original))
        new = os.path.join(target, rel)
        os.makedirs(os.path.dirname(new), exist_ok=True)
        with open(new, "w", encoding="utf-8") as out:
            out.write(file.text)
        paths.add(new, original)
        return dataclasses.replace(file, path=new)

    return dataclasses.replace(sources, file=place(sources.file), modules=tuple(place(m) for m in sources.modules),
                               root=target if sources.root else None)
