"""The checker's results cache over the workspace's results store (``.pallasite/results.sqlite``).

The engine (engine/engine.py) keeps one ``StoreCache`` per workspace open for its whole life: checks
record and reuse through it, hovers read through it (one connection, not one per hover).

``engine/result_cache.py`` defines the ``ResultCache`` seam; this adapter implements it with ``knowledge.store.ResultsStore``, so every check is
recorded (``pallasite store info`` counts it, hovers read it) and an unchanged kernel's tier-2
verdict is reused instead of recompiled.

    cache = StoreCache(workspace_for(paths))
    reports = check_paths(paths, options, cache=cache)
    cache.close()

The store is opened on first use; a store that cannot be opened raises ``StoreError`` there, which
the checker turns into a note and checks without the cache.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from ..analysis.local_imports import source_hash
from ..analysis.types import Finding, ResultKey
from .result_cache import CachedVerdict
from ..knowledge.store import ResultsStore, find_workspace, store_path


def workspace_for(paths: Sequence[str | Path], cwd: str | Path | None = None) -> Path:
    """Where the store of a check lives: ``knowledge.store.find_workspace`` of the first path — its
    project — or, outside any project, of ``cwd``: the folder the command was run from (the default),
    where ``pallasite store`` finds it; the server passes the file's folder. The one rule
    ``pallasite store`` and the server use too."""
    here = cwd or os.getcwd()
    if not paths:
        return find_workspace(here)
    return find_workspace(paths[0], outside=here)


class StoreCache:
    """``ResultCache`` over ``ResultsStore`` (see engine/result_cache.py for the protocol)."""

    def __init__(self, workspace: str | Path):
        self.workspace = Path(workspace).resolve()
        self.path = store_path(self.workspace)
        self._store: ResultsStore | None = None

    @property
    def where(self) -> str:
        """The store file as the user would type it: relative to the current folder when below it."""
        try:
            return os.path.relpath(self.path)
        except ValueError:  # another drive (Windows)
            return str(self.path)

    def _open(self) -> ResultsStore:
        if self._store is None:
            self._store = ResultsStore(self.path)
        return self._store

    def source_hash(self, path: str, text: str) -> str:
        file = Path(path).resolve()
        root = self.workspace if self.workspace in file.parents else None
        return source_hash(file, text, root=root)

    def get(self, key: ResultKey, tier: int) -> CachedVerdict | None:
        record = self._open().check_for(key, tier)
        if record is None or record.status not in ("ok", "error"):
            return None
        return CachedVerdict(status=record.status, findings=record.findings, created=record.created, where=self.where)

    def put(self, key: ResultKey, tier: int, status: str, findings: Sequence[Finding], *, path: str) -> None:
        self._open().put_check(key, tier=tier, status=status, findings=findings,
                               path=str(Path(path).resolve()))

    def latest_checks(self, path: str) -> list[Any]:
        """The newest stored verdicts for a file (for hovers), on this cache's one connection; [] when
        the workspace has no store yet (a hover never creates one)."""
        if self._store is None and not self.path.is_file():
            return []
        return self._open().latest_checks(path=str(Path(path).resolve()))

    def latest_measurements(self, path: str, limit: int = 20) -> list[Any]:
        """The newest stored measurements of a file (hovers), on this cache's one connection; [] when the
        workspace has no store yet."""
        if self._store is None and not self.path.is_file():
            return []
        return self._open().measurements(path=os.path.abspath(path), limit=limit)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
