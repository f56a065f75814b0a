"""The MCP server's checker and knowledge tools: ``check``, ``explain``, ``chips``, ``docs_search``.

Each is a plain async function ``(state, arguments, progress) -> result``: the arguments already checked
against the tool's input schema (server/mcp/mcp_schemas.py), the result the structured content its output
schema describes, with ``text`` in the command line's own words. They call what the commands call: the
engine's checker and report_format's JSON (``pallasite check``), the catalog (``explain``), the chip table
(``chips``), the docs index (``docs search``); nothing is decided here that those decide. A refusal is
``ToolRefused`` (what happened and what to do); the server turns it into the tool's error.

``check`` of a file runs its compiler tiers like `pallasite check` (the file is the user's, in a trusted
folder); ``check`` of a ``source`` text is model-written code: confined workers, no results store
(engine/workers/confinement.py), as the editor's fixer checks a proposal. An untrusted folder gets tier 0 only.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ...analysis.types import to_json

from ..reports import report_format
from .mcp_folder import ToolRefused, text_argument

UNTITLED = "untitled.py"  # where a ``source`` without ``path`` is checked, in the folder


async def check(state: Any, args: dict[str, Any], progress: Any) -> dict[str, Any]:
    folder = state.folder
    source = text_argument(args, "source") if "source" in args else None
    if source is None and "path" not in args:
        raise ToolRefused("check: give `path` (a kernel file in the folder) or `source` (a kernel's text)")
    path = folder.path(args.get("path", UNTITLED)) if source is not None else folder.file(args["path"])
    if path.is_dir():
        raise ToolRefused(f"path {args['path']!r:.300}: a folder; `source` is checked as if it were a file there "
                          "(give a file name, e.g. kernel.py)")
    settings, warnings = folder.settings(path)
    options = dataclasses.replace(settings.check_options(), target=args.get("target") or settings.target,
                                  tiers=tuple(args.get("tiers") or settings.tiers),
                                  locate=bool(args.get("locate", settings.check.locate)) and source is None)
    trusted = folder.trusted()
    tiers = options.tiers if trusted else (0,)
    skipped = [t for t in options.tiers if t not in tiers]
    not_run = folder.untrusted_why(f"tier{'s' if len(skipped) > 1 else ''} {','.join(map(str, skipped))}") \
        if skipped else None
    progress.say(f"checking {path.name} for {options.target}, tiers {','.join(map(str, tiers))}")
    report = await state.engine.check(str(path), options, source, tiers=tiers, on_progress=progress.say,
                                      store=source is None and trusted, untrusted=source is not None)
    return check_result(report, options, tiers, trusted, not_run, warnings)


def check_result(report: Any, options: Any, tiers: tuple[int, ...], trusted: bool, not_run: str | None,
                 warnings: list[str]) -> dict[str, Any]:
    """The check's structured result: `pallasite check --format json`'s entry for the file, each finding
    with its file, and the command's text."""
    entry = report_format.file_json(report, tiers=tiers, target=options.target)
    for finding, shown in zip(report.findings, entry["findings"]):
        shown["file"] = finding.path or report.path
    counts = report_format.summary([report])
    text = report_format.to_text([report], target=options.target, tiers=tiers)
    notes = [f"settings: {w}" for w in warnings] + entry.pop("notes")
    return {**entry, "target": options.target, "tiers": list(tiers), "trusted": trusted, "not_run": not_run,
            "notes": notes, "summary": {"errors": counts["error"], "warnings": counts["warning"],
                                        "information": counts["information"]},
            "text": text + (f"\n{not_run}" if not_run else "")}


async def explain(state: Any, args: dict[str, Any], progress: Any) -> dict[str, Any]:
    from ...knowledge import catalog

    try:
        entry = catalog.entry(args["code"])
        text, markdown = catalog.explain(args["code"]), catalog.explain(args["code"], markdown=True)
    except catalog.UnknownCode as err:
        raise ToolRefused(f"explain: {err}") from None
    except catalog.CatalogError as err:
        raise ToolRefused(f"explain: the catalog is damaged: {err}") from None
    fields = to_json(entry)
    for internal in ("patterns", "source", "line", "exceptions"):
        fields.pop(internal, None)
    return {**fields, "markdown": markdown, "text": text}


async def chips(state: Any, args: dict[str, Any], progress: Any) -> dict[str, Any]:
    """The chip table (a short-lived worker probes libtpu when the cache lacks it; no folder code runs)."""
    import anyio

    from ...engine.chip_table import table_sync
    from ...knowledge.chips import format_chip_table

    progress.say("reading the chip table (a worker probes libtpu when the cache lacks it)")
    specs, error = await anyio.to_thread.run_sync(lambda: table_sync(probe=args.get("probe", True)))
    if error:
        raise ToolRefused(f"chips: {error}")
    return {"chips": to_json(specs), "text": format_chip_table(specs)}


async def docs_search(state: Any, args: dict[str, Any], progress: Any) -> dict[str, Any]:
    """The offline docs index (built once and cached, which can take a while the first time)."""
    import anyio

    from ...knowledge import docs

    query = " ".join(args["query"].split())
    if not query:
        raise ToolRefused('docs_search: give a query, e.g. "dimension_semantics"')

    def search() -> list[Any]:
        return docs.load_index(docs.DocsOptions()).search(query, args.get("k", 5))

    progress.say("searching the docs index (built and cached on first use)")
    try:
        hits = await anyio.to_thread.run_sync(search)
    except docs.DocsError as err:
        raise ToolRefused(f"docs_search: {err}") from None
    return {"query": query, "hits": [docs.hit_json(h) for h in hits], "text": docs.format_hits(hits)}


def as_json_text(result: dict[str, Any]) -> str:
    """The structured result as compact JSON (beside the text, for hosts that show only text content)."""
    return json.dumps({k: v for k, v in result.items() if k != "text"}, separators=(",", ":"), default=str)

