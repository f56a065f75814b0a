"""Offline docs retrieval: a BM25 index over Pallas API docstrings, our guides and user folders.

    index = load_index(DocsOptions(extra_dirs=("docs/",)))
    for hit in index.search("dimension_semantics megacore", k=5):
        print(hit.passage.id, hit.passage.source, hit.score)

The passages come from ``docs_sources`` (jax's installed sources read with ``ast``, never
imported), the guides, the error catalog, and optional folders. The index is cached on disk under
``$XDG_CACHE_HOME/pallasite/docs-<key>/``; the key covers the jax version, the public Pallas files'
sizes/mtimes, the guide and catalog files' contents, and the user folders' listings, so any change
rebuilds it. Ranking is BM25 (``bm25s``) over identifier-aware tokens: ``dimension_semantics``,
``BlockSpec`` and ``E2003`` are kept whole AND split into parts, so both spellings match.

The ranking seam is ``Ranker``: anything with ``index(texts)``, ``scores(query)``, ``save(folder)``
and ``load(folder)`` registered in ``RANKERS``. Besides BM25 there are ``embeddings`` (MiniLM
sentence vectors, an optional extra) and ``hybrid`` (both, fused by reciprocal rank), in
``docs_rankers``; ``DocsOptions(ranker=...)`` or ``pallasite docs search --ranker`` picks one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

from . import docs_api, docs_sources
from .docs_bm25 import STOPWORDS, BM25Ranker, DocsError, Ranker, tokenize  # noqa: F401  (re-exported)
from .docs_sources import Passage

INDEX_FORMAT = 3  # bump when passages or tokens change shape


def _rankers() -> dict[str, type]:
    from .docs_rankers import EmbeddingsRanker, HybridRanker  # numpy and the model load lazily

    return {"bm25": BM25Ranker, "embeddings": EmbeddingsRanker, "hybrid": HybridRanker}


# name -> Ranker class. "embeddings" and "hybrid" need the optional model (`pallasite docs fetch-model`).
RANKERS: dict[str, type] = _rankers()


# --------------------------------------------------------------------------- options, hits, index


@dataclass(frozen=True)
class DocsOptions:
    include_kernels: bool = False  # also index jax's hand-written kernels (pallas/ops)
    extra_dirs: tuple[str, ...] = ()  # folders of Markdown/reST to index too
    include_catalog: bool = True  # the error catalog's entries (catalog/PLSxxx)
    ranker: str = "bm25"  # a key of RANKERS: bm25, embeddings or hybrid
    cache_dir: str | None = None  # default: $XDG_CACHE_HOME/pallasite or ~/.cache/pallasite


@dataclass(frozen=True)
class Hit:
    passage: Passage
    score: float
    rank: int  # 1-based


@dataclass
class DocsIndex:
    passages: list[Passage]
    ranker: Ranker
    key: str = ""
    folder: Path | None = None
    built: bool = False  # True when this call built it (False: loaded from the cache)
    _by_id: dict[str, Passage] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._by_id = {p.id: p for p in self.passages}

    def get(self, passage_id: str) -> Passage | None:
        return self._by_id.get(passage_id)

    def search(self, query: str, k: int = 5, kinds: Sequence[str] | None = None) -> list[Hit]:
        if not tokenize(query):  # no word at all (only punctuation or stop words)
            return []
        scores = self.ranker.scores(query)
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        hits: list[Hit] = []
        for i in order:
            if scores[i] <= 0 or len(hits) >= k:
                break
            if kinds and self.passages[i].kind not in kinds:
                continue
            hits.append(Hit(self.passages[i], float(scores[i]), len(hits) + 1))
        return hits


def collect_passages(options: DocsOptions, cache_folder: Path | None = None) -> list[Passage]:
    """Every passage for these options, in a stable order."""
    passages: list[Passage] = list(docs_sources.guide_passages())
    root = docs_sources.jax_root()
    if root is not None:
        passages.extend(_api_passages(root, cache_folder))
        if options.include_kernels:
            passages.extend(docs_api.kernel_passages(root))
    if options.include_catalog:
        passages.extend(_catalog_passages())
    for folder in options.extra_dirs:
        passages.extend(docs_sources.extra_passages(_checked_dir(folder)))
    unique: dict[str, Passage] = {}
    for p in passages:
        unique.setdefault(p.id, p)
    return list(unique.values())


def _api_passages(root: Path, cache_folder: Path | None) -> list[Passage]:
    """jax's API passages; parsing jax's sources is the slow part, so they have their own cache
    (keyed by the jax version and the public files' stats) shared by indexes of any options."""
    key = hashlib.sha256(json.dumps([INDEX_FORMAT, docs_sources.jax_version(),
                                     [_stat(p) for p in docs_sources.api_source_files(root)]]).encode()).hexdigest()[:20]
    cached = cache_folder / f"api-{key}.json" if cache_folder else None
    if cached is not None and cached.is_file():
        try:
            return [Passage(**p) for p in json.loads(cached.read_text(encoding="utf-8"))]
        except (OSError, ValueError, TypeError):
            pass
    passages = list(docs_api.api_passages(root))
    if cached is not None:
        try:
            cache_folder.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_name(f".{cached.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps([asdict(p) for p in passages]), encoding="utf-8")
            os.replace(tmp, cached)
        except OSError:
            pass
    return passages


def _catalog_passages() -> list[Passage]:
    from . import catalog

    out = []
    for entry in catalog.all_entries():
        text = catalog.explain(entry.code, markdown=False)
        out.append(Passage(f"catalog/{entry.code}", "catalog", f"{entry.code} {entry.title}",
                           entry.source, entry.line, text))
    return out


def _checked_dir(folder: str) -> Path:
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise DocsError(f"docs folder {folder!r} does not exist or is not a folder; "
                        "pass a folder of .md/.rst files to --extra")
    return path.resolve()


# --------------------------------------------------------------------------- cache


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pallasite"


def cache_key(options: DocsOptions) -> str:
    """A digest of everything the index is built from; any change gives a new key."""
    if options.ranker not in RANKERS:
        raise DocsError(f"unknown docs ranker {options.ranker!r}; available: {', '.join(sorted(RANKERS))}")
    parts: dict[str, object] = {"format": INDEX_FORMAT, "ranker": options.ranker, "kernels": options.include_kernels,
                                "catalog": options.include_catalog, "jax": docs_sources.jax_version()}
    root = docs_sources.jax_root()
    if root is not None:
        files = docs_sources.api_source_files(root)
        if options.include_kernels:
            files += docs_sources.kernel_source_files(root)
        parts["jax_files"] = [_stat(p) for p in files]
    own = sorted(docs_sources.GUIDES_DIR.glob("*.md"))
    if options.include_catalog:
        from . import catalog

        own += catalog.catalog_files()
    parts["own"] = [(p.name, hashlib.sha256(p.read_bytes()).hexdigest()) for p in own]
    parts["extra"] = [(str(_checked_dir(d)), [_stat(p) for p in docs_sources.extra_files(_checked_dir(d))])
                      for d in options.extra_dirs]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


def _stat(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return (str(path), st.st_size, st.st_mtime_ns)


def load_index(options: DocsOptions = DocsOptions(), *, use_cache: bool = True, rebuild: bool = False) -> DocsIndex:
    """The index for these options: from the cache when its key matches, else built (and cached).

    ``rebuild`` ignores (and replaces) a cached index; ``use_cache=False`` neither reads nor writes it."""
    key = cache_key(options)
    folder = Path(options.cache_dir) if options.cache_dir else default_cache_dir()
    target = folder / f"docs-{key}"
    if rebuild and target.is_dir():
        _remove_tree(target)
    if use_cache and (target / "passages.json").is_file():
        try:
            data = json.loads((target / "passages.json").read_text(encoding="utf-8"))
            passages = [Passage(**p) for p in data["passages"]]
            return DocsIndex(passages, RANKERS[options.ranker].load(target, cache_folder=folder), key, target,
                             built=False)
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a damaged cache is rebuilt below
    passages = collect_passages(options, folder if use_cache else None)
    ranker = RANKERS[options.ranker](cache_folder=folder if use_cache else None)
    ranker.index([f"{p.title}\n{p.text}" for p in passages])
    index = DocsIndex(passages, ranker, key, target if use_cache else None, built=True)
    if use_cache:
        _save(index, folder, target)
    return index


def _save(index: DocsIndex, folder: Path, target: Path) -> None:
    """Write the cache folder atomically: build in a temporary folder, then rename it into place."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".docs-tmp-", dir=folder))
        (tmp / "passages.json").write_text(
            json.dumps({"key": index.key, "created": time.time(),
                        "passages": [asdict(p) for p in index.passages]}), encoding="utf-8")
        index.ranker.save(tmp)
        try:
            os.rename(tmp, target)
        except OSError:  # another process cached the same key first: theirs is as good
            _remove_tree(tmp)
        for old in [*folder.glob("docs-*"), *folder.glob("api-*.json"), *folder.glob("vectors-*.npz")]:  # drop week-old other keys
            if old != target and time.time() - old.stat().st_mtime > 7 * 86400:
                _remove_tree(old) if old.is_dir() else old.unlink(missing_ok=True)
    except OSError:
        pass  # caching is an optimisation; searching works without it


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def search(query: str, k: int = 5, options: DocsOptions = DocsOptions()) -> list[Hit]:
    return load_index(options).search(query, k)


def hit_json(hit: Hit) -> dict:
    """One hit as `pallasite docs search --format json` (and the MCP server's ``docs_search``) give it."""
    p = hit.passage
    return {"rank": hit.rank, "score": round(hit.score, 4), "id": p.id, "kind": p.kind, "title": p.title,
            "source": p.source, "line": p.line, "text": p.text}


def format_hits(hits: list[Hit], width: int = 400) -> str:
    """Terminal listing: rank, id, source:line, and the start of the passage."""
    if not hits:
        return "no passage matched; try other words, or --include-kernels / --extra DIR"
    out = []
    for hit in hits:
        p = hit.passage
        body = p.text.partition("\n")[2].strip() or p.text
        snippet = re.sub(r"\s+", " ", body)[:width]
        out.append(f"{hit.rank}. [{p.id}]  score {hit.score:.2f}\n   {p.title}\n   {p.source}:{p.line}\n   {snippet}")
    return "\n\n".join(out)
