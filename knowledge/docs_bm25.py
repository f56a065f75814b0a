"""The docs search's lexical half: identifier-aware tokens, the ranker seam every ranker fills, the
BM25 ranker, and the error a docs source the user named raises. ``docs`` (the index) and
``docs_rankers`` (embeddings, hybrid) both build on it, so neither imports the other's module."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Protocol


class DocsError(Exception):
    """A docs source the user named cannot be used (the message says which and why)."""


# --------------------------------------------------------------------------- tokens

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
STOPWORDS = frozenset(
    """a an and are as at be by for from has have in is it its of on or that the this to was were
    will with can not no but if then than so do does into when which where what how why you your
    we our they their there these those be been being all any each other such only also may""".split()
)


def tokenize(text: str) -> list[str]:
    """Lower-case tokens; identifiers are kept whole and also split at ``_`` and case changes."""
    tokens: list[str] = []
    for word in _WORD.findall(text):
        whole = word.lower().strip("_")
        if not whole or whole in STOPWORDS:
            continue
        tokens.append(_norm(whole))
        parts = [p.lower() for chunk in word.split("_") for p in _CAMEL.findall(chunk)]
        if len(parts) > 1:
            tokens.extend(_norm(p) for p in parts if p not in STOPWORDS and len(p) > 1)
    return tokens


def _norm(token: str) -> str:
    """A light plural fold (blocks -> block) applied to queries and passages alike."""
    if len(token) > 4 and token.endswith("s") and not token.endswith(("ss", "us", "is")):
        return token[:-1]
    return token


# --------------------------------------------------------------------------- ranking seam


class Ranker(Protocol):
    """Scores every passage for a query. Registered by name in ``RANKERS`` and built as
    ``cls(cache_folder=...)`` (the cache root, or None when nothing may be cached); the index folder
    holds whatever ``save`` writes, and ``load(folder, cache_folder)`` (a classmethod) reads it back.
    Scores above 0 mean "matches"; higher is better."""

    def index(self, texts: list[str]) -> None: ...

    def scores(self, query: str) -> list[float]: ...

    def save(self, folder: Path) -> None: ...


def _import_bm25s():
    """bm25s imports jax when it can (for top-k); the server must never import jax, so hide it."""
    if "jax" in sys.modules:
        import bm25s

        return bm25s
    sys.modules["jax"] = None  # type: ignore[assignment]  # makes `import jax` raise ImportError
    try:
        import bm25s
    finally:
        if sys.modules.get("jax", 0) is None:
            del sys.modules["jax"]
    return bm25s


class BM25Ranker:
    """BM25 (Lucene variant) via bm25s, over identifier-aware tokens (``tokenize``)."""

    name = "bm25"

    def __init__(self, model=None, cache_folder: Path | None = None) -> None:
        self._model = model

    def index(self, texts: list[str]) -> None:
        bm25s = _import_bm25s()
        self._model = bm25s.BM25()
        self._model.index([tokenize(t) or ["<empty>"] for t in texts], show_progress=False)

    def scores(self, query: str) -> list[float]:
        known = [t for t in tokenize(query) if t in self._model.vocab_dict]
        if not known:
            return [0.0] * self._model.scores["num_docs"]
        return list(self._model.get_scores(known))

    def save(self, folder: Path) -> None:
        self._model.save(str(folder / "bm25"))

    @classmethod
    def load(cls, folder: Path, cache_folder: Path | None = None) -> "BM25Ranker":
        bm25s = _import_bm25s()
        return cls(bm25s.BM25.load(str(folder / "bm25")))
