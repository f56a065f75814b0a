"""The results-cache seam of the checker: stored verdicts, and the protocol a store implements.

The checker talks to the results store through ``ResultCache``, so it can run without one (and
tests can give it a dict); the engine's adapter (``engine/store_cache.py``) implements it over
``knowledge.store.ResultsStore``. Verdicts are keyed by
``analysis.types.ResultKey`` (the store's own key): tier 2 by the hash of the lowered (tier-1)
module, tiers 1 and 3 by the hash of the file plus its local imports; both also by the inputs'
shapes/dtypes, the chip, the jax/libtpu versions and the backend.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

from ..analysis.types import Finding, ResultKey


@dataclass(frozen=True)
class CachedVerdict:
    """A tier's verdict as stored: its status, its findings (located), when and where."""

    status: str  # "ok" or "error"
    findings: tuple[Finding, ...]
    created: float  # seconds since the epoch
    where: str  # e.g. ".pallasite/results.sqlite", said in the reuse note


class ResultCache(Protocol):
    """Stored tier verdicts (implemented over the results store by the server layer)."""

    def source_hash(self, path: str, text: str) -> str:
        """``source:<sha256>`` of the file's text plus its local imports."""

    def get(self, key: ResultKey, tier: int) -> CachedVerdict | None:
        """The newest verdict stored for exactly ``key`` and ``tier``."""

    def put(self, key: ResultKey, tier: int, status: str, findings: Sequence[Finding], *, path: str) -> None:
        """Record one verdict."""


def reuse_note(entry: str, hit: CachedVerdict, target: str, versions: Mapping[str, Any]) -> str:
    """Says that tier 2 was not run for ``entry`` and where its verdict came from."""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(hit.created))
    made_with = ", ".join(f"{name} {versions[name]}" for name in ("jax", "libtpu") if versions.get(name))
    return (f"tier 2 for {target} reused from {hit.where}, compiled {when} ({entry}: {hit.status}; "
            f"same lowered kernel, inputs and {made_with or 'versions'}; `pallasite check --no-store` recompiles)")


class GuardedCache:
    """A ResultCache whose failures become one note and switch it off for the rest of the check."""

    def __init__(self, cache: ResultCache, notes: list[str]):
        self._cache: ResultCache | None = cache
        self._notes = notes

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        if self._cache is None:
            return None
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - a broken cache must not break the check
            self._notes.append(f"results cache not used ({what} failed: {type(exc).__name__}: {exc}); "
                               "the verdicts above were computed, not reused")
            self._cache = None
            return None

    def source_hash(self, path: str, text: str) -> str | None:
        return self._call("hashing the source", lambda: self._cache.source_hash(path, text))

    def get(self, key: ResultKey, tier: int) -> CachedVerdict | None:
        return self._call("reading it", lambda: self._cache.get(key, tier))

    def put(self, key: ResultKey, tier: int, status: str, findings: Sequence[Finding], *, path: str) -> None:
        self._call("recording a verdict", lambda: self._cache.put(key, tier, status, findings, path=path))
