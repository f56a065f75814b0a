"""The optional docs rankers: sentence embeddings, and a hybrid of BM25 and embeddings.

    pallasite docs search --ranker embeddings "why does my kernel run out of VMEM"
    pallasite docs search --ranker hybrid "dimension_semantics megacore"

``EmbeddingsRanker`` scores a passage by the cosine of its all-MiniLM-L6-v2 vector with the
query's (``minilm``: numpy only, the model read from an installed package, never downloaded).
Passage vectors are kept two ways: with the index (``vectors.npy`` beside the BM25 files, so a
cached index loads without encoding anything), and in a per-model memo under the cache folder
(``vectors-<model>.npz``, keyed by the passage text's digest), so rebuilding an index after one
guide changed, or building the hybrid index after the embeddings one, encodes only new texts.

``HybridRanker`` fuses the two rankings by reciprocal rank (score = sum of 1 / (60 + rank)), which
needs no score calibration between BM25 and cosines. Both are registered in ``docs.RANKERS``; when
the model is not installed, building or loading them raises ``DocsError`` saying what to install.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

RRF_K = 60  # the usual reciprocal-rank-fusion constant


def _encoder():
    """The (process-wide) MiniLM encoder, or DocsError naming what to install."""
    from . import minilm
    from .docs_bm25 import DocsError

    global _ENCODER
    if _ENCODER is None:
        try:
            _ENCODER = minilm.load_encoder(minilm.find_model())
        except ImportError as err:  # numpy missing: only possible in a stripped environment
            raise DocsError(f"the embeddings ranker needs numpy ({err}); use --ranker bm25") from err
        except (minilm.ModelNotFound, OSError, ValueError, KeyError) as err:
            raise DocsError(str(err)) from err
    return _ENCODER


_ENCODER = None


def model_available() -> bool:
    """True when the embeddings model can be found (tests skip, and the CLI explains, otherwise)."""
    from . import minilm

    try:
        minilm.find_model()
    except minilm.ModelNotFound:
        return False
    return True


class EmbeddingsRanker:
    """Cosine similarity of MiniLM sentence vectors."""

    name = "embeddings"

    def __init__(self, cache_folder: Path | None = None, vectors=None, model_id: str = "") -> None:
        self.cache_folder = cache_folder
        self.vectors = vectors  # (passages, 384) float32, unit rows
        self.model_id = model_id
        self.encoded = 0  # how many passage texts this process encoded (the rest came from a cache)

    def index(self, texts: list[str]) -> None:
        import numpy as np

        encoder = _encoder()
        self.model_id = encoder.model_id
        memo = self._read_memo()
        keys = [_digest(t) for t in texts]
        todo = [i for i, key in enumerate(keys) if key not in memo]
        if todo:
            fresh = encoder.encode([texts[i] for i in todo])
            for row, i in enumerate(todo):
                memo[keys[i]] = fresh[row]
            self._write_memo(memo)
        self.encoded = len(todo)
        dim = encoder.weights["embeddings.word_embeddings.weight"].shape[1]
        self.vectors = np.stack([memo[k] for k in keys]) if keys else np.zeros((0, dim), np.float32)

    def scores(self, query: str) -> list[float]:
        if self.vectors is None or not len(self.vectors) or not query.strip():
            return [0.0] * (0 if self.vectors is None else len(self.vectors))
        encoder = _encoder()
        if encoder.model_id != self.model_id:
            from .docs_bm25 import DocsError

            raise DocsError(f"the index's vectors come from model {self.model_id!r} but {encoder.model_id!r} is "
                            "installed; rebuild the index with --rebuild")
        return [float(s) for s in self.vectors @ encoder.encode([query])[0]]

    def save(self, folder: Path) -> None:
        import numpy as np

        np.save(folder / "vectors.npy", self.vectors)
        (folder / "vectors.model").write_text(self.model_id, encoding="utf-8")

    @classmethod
    def load(cls, folder: Path, cache_folder: Path | None = None) -> "EmbeddingsRanker":
        import numpy as np

        _encoder()  # a cached index is of no use without the model for queries: say so now
        vectors = np.load(folder / "vectors.npy")
        return cls(cache_folder, vectors, (folder / "vectors.model").read_text(encoding="utf-8"))

    # ------------------------------------------------------------------ per-model vector memo

    def _memo_path(self) -> Path | None:
        if self.cache_folder is None or not self.model_id:
            return None
        tag = hashlib.sha256(self.model_id.encode()).hexdigest()[:12]
        return Path(self.cache_folder) / f"vectors-{tag}.npz"

    def _read_memo(self) -> dict:
        import numpy as np

        path = self._memo_path()
        if path is None or not path.is_file():
            return {}
        try:
            with np.load(path) as data:
                return dict(zip(data["keys"].tolist(), data["vectors"]))
        except (OSError, ValueError, KeyError):
            return {}  # a damaged memo only costs re-encoding

    def _write_memo(self, memo: dict) -> None:
        import numpy as np

        path = self._memo_path()
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npz")
            np.savez(tmp, keys=np.array(list(memo)), vectors=np.stack(list(memo.values())))
            os.replace(tmp, path)
        except OSError:
            pass  # caching is an optimisation


class HybridRanker:
    """BM25 and embeddings fused by reciprocal rank; a passage ranked by neither scores 0."""

    name = "hybrid"

    def __init__(self, cache_folder: Path | None = None, bm25=None, embeddings=None) -> None:
        from .docs_bm25 import BM25Ranker

        self.bm25 = bm25 or BM25Ranker()
        self.embeddings = embeddings or EmbeddingsRanker(cache_folder)

    def index(self, texts: list[str]) -> None:
        self.embeddings.index(texts)  # first: it fails (model missing) before any BM25 work
        self.bm25.index(texts)

    def scores(self, query: str) -> list[float]:
        fused = [0.0] * len(self.embeddings.vectors)
        for scores in (self.bm25.scores(query), self.embeddings.scores(query)):
            ranked = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: (-scores[i], i))
            for rank, i in enumerate(ranked, 1):
                fused[i] += 1.0 / (RRF_K + rank)
        return fused

    def save(self, folder: Path) -> None:
        self.bm25.save(folder)
        self.embeddings.save(folder)

    @classmethod
    def load(cls, folder: Path, cache_folder: Path | None = None) -> "HybridRanker":
        from .docs_bm25 import BM25Ranker

        return cls(cache_folder, BM25Ranker.load(folder), EmbeddingsRanker.load(folder, cache_folder))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]
