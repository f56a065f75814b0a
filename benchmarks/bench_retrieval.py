"""Docs retrieval quality and speed on the retrieval test set (tests/data/retrieval/queries.json).

Quality: recall@1 and recall@5 (a query counts when the passage it names, or one of that
passage's parts id~N, is among the top 1 / top 5), overall and split into the real compiler
error messages and the hand-written questions. Speed: index build from scratch (no cache: reading
jax's sources with ast + BM25 indexing), loading the cached index, and per-query search latency
(median / p95 over every query, --repeat times), all wall-clock milliseconds (time.perf_counter) on
this host's CPU. The issue's target: recall@5 >= 0.8.

Rankers: bm25 (default), embeddings and hybrid (need the model: ``pallasite docs fetch-model``); ``--ranker
all`` measures every one whose model is installed, in one cache folder, so the hybrid index reuses
the passage vectors the embeddings index computed (its build time says so: "vectors reused").

    python benchmarks/bench_retrieval.py [--ranker bm25|embeddings|hybrid|all] [--repeat 20]
                                         [--include-kernels] [--misses]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from pallasite.knowledge import docs, docs_rankers, docs_sources

QUERIES = Path(__file__).resolve().parent.parent / "tests" / "data" / "retrieval" / "queries.json"


def same(hit: str, expected: str) -> bool:
    return hit == expected or hit.startswith(expected + "~")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="search each query this many times for latency")
    parser.add_argument("--include-kernels", action="store_true", help="index jax's pallas/ops kernels too")
    parser.add_argument("--misses", action="store_true", help="list the queries whose passage was not in the top 5")
    parser.add_argument("--ranker", default="bm25", choices=[*sorted(docs.RANKERS), "all"],
                        help="which ranker to measure (all: each one whose model is installed)")
    args = parser.parse_args()
    queries = json.loads(QUERIES.read_text())["queries"]
    rankers = [args.ranker] if args.ranker != "all" else ["bm25"] + (
        ["embeddings", "hybrid"] if docs_rankers.model_available() else [])
    if args.ranker == "all" and len(rankers) == 1:
        print("(embeddings model not installed: pallasite docs fetch-model; measuring bm25 only)")
    with tempfile.TemporaryDirectory() as cache:
        for name in rankers:
            measure(name, queries, cache, args)
            print()


def measure(ranker: str, queries: list[dict], cache: str, args: argparse.Namespace) -> None:
    options = docs.DocsOptions(include_kernels=args.include_kernels, cache_dir=cache, ranker=ranker)
    t0 = time.perf_counter()
    built = docs.load_index(options)
    build_ms = (time.perf_counter() - t0) * 1e3
    vectors = getattr(built.ranker, "embeddings", built.ranker)  # hybrid keeps an embeddings ranker inside
    reused = (f" ({len(built.passages) - vectors.encoded} of {len(built.passages)} passage vectors reused)"
              if hasattr(vectors, "encoded") else "")
    t0 = time.perf_counter()
    index = docs.load_index(options)  # searched below as a later process would: loaded from the cache
    load_ms = (time.perf_counter() - t0) * 1e3
    assert built.built and not index.built
    index.search("warm up the query encoder", 1)  # the model's weights load on the first query

    groups: dict[str, list[tuple[bool, bool]]] = {"all": [], "error message": [], "question": []}
    misses = []
    for q in queries:
        hits = [h.passage.id for h in index.search(q["query"], 5)]
        at1 = bool(hits) and same(hits[0], q["expect"])
        at5 = any(same(h, q["expect"]) for h in hits)
        groups["all"].append((at1, at5))
        groups[q["kind"]].append((at1, at5))
        if not at5:
            misses.append((q["id"], q["expect"], hits[:3]))

    latencies = []
    for _ in range(args.repeat):
        for q in queries:
            t0 = time.perf_counter()
            index.search(q["query"], 5)
            latencies.append((time.perf_counter() - t0) * 1e3)
    latencies.sort()

    kinds: dict[str, int] = {}
    for p in index.passages:
        kinds[p.kind] = kinds.get(p.kind, 0) + 1
    print(f"ranker {ranker}; jax {docs_sources.jax_version()}; index: {len(index.passages)} passages "
          f"({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})")
    for name, results in groups.items():
        n = len(results)
        if n:
            print(f"recall@1 {sum(a for a, _ in results) / n:.3f}  recall@5 {sum(b for _, b in results) / n:.3f}"
                  f"  ({name}, {n} queries)")
    print(f"index build: {build_ms:.0f} ms{reused}; cached load: {load_ms:.1f} ms")
    print(f"search latency over {len(latencies)} searches: median {statistics.median(latencies):.2f} ms, "
          f"p95 {latencies[int(0.95 * (len(latencies) - 1))]:.2f} ms")
    print("(wall clock on this host's CPU, time.perf_counter)")
    if args.misses:
        for miss in misses:
            print("miss:", miss)


if __name__ == "__main__":
    main()
