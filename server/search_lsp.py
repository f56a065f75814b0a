"""'Search for a faster kernel' in the editor: command ``pallasite.search``.

The search (agents/search_job.run_search: each node one optimize iteration by the configured
provider, tested and estimated in the server's engine workers, or tested and timed on the
``pallasite.backend`` device with ``"timing": "device"``) runs as an engine job (kind ``search``) with progress per node and cancel; every
node is stored as it finishes, so running the command again resumes. When it ends, the best node (if
it beats the starting kernel) is offered as a versioned whole-document edit — refused if you typed
meanwhile — and the HTML report is opened through ``window/showDocument``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp

from .lsp_convert import whole_document_edit

SEARCH_COMMAND = "pallasite.search"


def options_from(args: dict[str, Any]) -> Any:
    """SearchOptions from the command's arguments (``algo``, ``seed``, ``budget``, ``width``, ...)."""
    from pallasite.agents.search import SearchOptions

    names = {"budget": "max_nodes", "targetSpeedup": "target", "keepFactor": "keep_factor",
             "crossoverRate": "crossover_rate"}
    fields = {names.get(k, k): v for k, v in args.items() if names.get(k, k) in SearchOptions.__dataclass_fields__}
    fields.setdefault("algo", "beam")
    fields.setdefault("max_nodes", 12)
    return SearchOptions(**fields)


async def search_command(ls: Any, args: dict[str, Any], token: Any = None) -> dict[str, Any]:
    from pallasite.agents.providers import HOW_TO_CONFIGURE, ProviderError, make_provider
    from pallasite.engine.store_cache import workspace_for
    from pallasite.knowledge.store import ResultsStore
    from pallasite.engine.tune import job_progress

    from pallasite.agents import search_job

    from . import cmd_search

    session = ls.session
    uri = args.get("uri") or ""
    doc = session.documents.get(uri)
    if doc is None:
        return {"ok": False, "message": f"pallasite.search: {uri!r} is not an open document."}
    agent = session.settings.agent
    if not agent.provider:
        message = "pallasite: Search for a faster kernel needs an LLM provider. " + HOW_TO_CONFIGURE
        session.show(message, lsp.MessageType.Info)
        return {"ok": False, "message": message}
    folder = session.folder_of(doc.path)
    if not await session.trusted_or_ask(folder):
        return {"ok": False, "message": f"{folder} is not trusted: run pallasite.trustFolder to run its code."}
    try:
        options = options_from(args)
        provider = make_provider(agent.provider_config())
    except (ValueError, TypeError, ProviderError) as exc:
        return {"ok": False, "message": f"pallasite.search: {exc}"}
    version, text, chip = doc.version, doc.text, session.settings.target
    timing = args.get("timing") or "estimate"
    if timing not in ("estimate", "device"):
        return {"ok": False, "message": f"pallasite.search: timing {timing!r}: choose estimate (the cost model, "
                                        f"no device) or device (the backend in the pallasite.backend settings)"}
    device = session.settings.backend.remote() if timing == "device" else None
    path = Path(doc.path)
    workspace = workspace_for([doc.path], cwd=path.parent)
    store = ResultsStore.open(workspace)
    rid = cmd_search.run_id(text, options, agent.provider, chip, cmd_search.device_where(device))
    check_options = dataclasses.replace(session.settings.check_options([t for t in session.settings.tiers
                                                                        if t in (0, 1, 2)]), target=chip)
    done = cmd_search.stored_nodes(store, rid)

    def report(message: str) -> None:
        if token is not None:
            ls.work_done_progress.report(token, lsp.WorkDoneProgressReport(message=message))

    def work(job_report: Any) -> Any:
        tell = job_progress(job_report)

        def on_node(node: Any) -> None:
            store.put_agent_step(rid, node.order, "search_node", node.to_json())
            speed = f"{node.speedup:.2f}x" if node.speedup is not None else node.status
            message = f"node {node.id}: {speed} ({node.provenance})"
            tell(message, None)
            report(message)

        def on_phase(node_id: str, phase: str, message: str) -> None:
            tell(f"node {node_id} {phase}: {message}"[:200], None)
            report(f"node {node_id} {phase}: {message}"[:200])

        async def go() -> Any:
            backend, where_ = (cmd_search.open_device(device, session.settings.check.memoryMb * 2,
                                                      allow_unconfined=agent.allowUnconfined)
                               if device is not None else (None, ""))
            try:
                return await search_job.run_search(path, text, options, provider, chip=chip, engine=session.engine,
                                                   check_options=check_options, done=done, on_node=on_node,
                                                   device=backend, where=where_, on_phase=on_phase,
                                                   request_timeout_s=agent.requestTimeoutS)
            finally:
                if backend is not None:
                    await backend.close()

        return go()

    job = session.engine.jobs.submit("search", doc.path, work)
    if token is not None:
        how = f"estimates for {chip}" if device is None else f"timed on {cmd_search.device_where(device)}"
        ls.work_done_progress.begin(token, lsp.WorkDoneProgressBegin(
            title=f"Searching for a faster {path.name} ({options.algo}, {how})", cancellable=True))
        cancel = ls.work_done_progress.tokens.get(token)
        if cancel is not None:
            cancel.add_done_callback(lambda f: f.cancelled() and job.task.cancel())
    try:
        graph = await job.task
    except asyncio.CancelledError:
        job.task.cancel()
        _end(ls, token, "cancelled")
        store.close()
        return {"ok": False, "message": f"cancelled; the finished nodes are kept (run {rid} resumes)"}
    except Exception as exc:  # noqa: BLE001 - a failed search must not take the server down
        _end(ls, token, "failed")
        store.close()
        message = f"pallasite: the search failed ({type(exc).__name__}: {exc}); finished nodes are kept."
        session.show(message, lsp.MessageType.Error)
        return {"ok": False, "message": message}
    store.close()
    if graph is None:  # the job failed: engine/jobs.py keeps the error as data
        message = f"pallasite: the search failed ({job.error}); finished nodes are kept (run {rid} resumes)."
        _end(ls, token, "failed")
        session.show(message, lsp.MessageType.Error)
        return {"ok": False, "message": message}
    out = cmd_search.write_outputs(graph, rid, Path(workspace) / ".pallasite" / "search",
                                   f"pallasite search {path.name} ({options.algo})")
    best = graph.best()
    speed = f"{best.speedup:.2f}x" if best.speedup is not None else "-"
    summary = f"best {best.id}: {speed} against the starting kernel ({best.provenance}); {len(graph.nodes)} nodes"
    _end(ls, token, summary)
    result = {"ok": True, "run": rid, "best": best.id, "speedup": best.speedup, "provenance": best.provenance,
              "report": str(out), "stopped": graph.stopped, "applied": False, "summary": summary}
    try:
        await ls.window_show_document_async(lsp.ShowDocumentParams(uri=out.as_uri(), external=True))
    except Exception as exc:  # noqa: BLE001 - a client without showDocument: the path is in the message
        session.log(f"window/showDocument failed: {exc}")
    if best.op == "root" or best.speedup is None or best.speedup <= graph.root.speedup:
        session.show(f"pallasite: no node beat the starting kernel ({summary}); report: {out}", lsp.MessageType.Info)
        return result
    if session.documents.get(uri) is not doc or doc.version != version:
        session.show("pallasite: the document changed during the search; the best kernel was not applied "
                     f"(report: {out}).", lsp.MessageType.Warning)
        return {**result, "message": "document changed"}
    edit = lsp.WorkspaceEdit(document_changes=[whole_document_edit(uri, version, text, best.source)])
    applied = await ls.workspace_apply_edit_async(lsp.ApplyWorkspaceEditParams(
        edit=edit, label=f"Search: {best.id} ({speed}, {best.provenance})"))
    result["applied"] = bool(getattr(applied, "applied", False))
    session.show(f"pallasite: {summary}; " + ("applied." if result["applied"] else "not applied."),
                 lsp.MessageType.Info)
    return result


def _end(ls: Any, token: Any, message: str) -> None:
    if token is not None:
        ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd(message=message))
        ls.work_done_progress.tokens.pop(token, None)
