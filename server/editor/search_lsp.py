"""'Search for a faster kernel' in the editor: command ``pallasite.search``.

The search (agents/search_job.run_search: each node one optimize iteration by the configured
provider, tested and estimated in the server's engine workers, or tested and timed on the
``pallasite.backend`` device with ``"timing": "device"``) runs as an engine job (kind ``search``) with progress per node and cancel; every
node is stored as it finishes, so running the command again resumes. When it ends, the best node (if
it beats the starting kernel) is offered as a versioned whole-document edit — refused if you typed
meanwhile — and the HTML report is opened through ``window/showDocument``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp

from ..lsp_convert import whole_document_edit

SEARCH_COMMAND = "pallasite.search"


def options_from(args: dict[str, Any]) -> Any:
    """SearchOptions from the command's arguments (``algo``, ``seed``, ``maxNodes`` (the CLI's --max-nodes;
    ``budget`` is its old name), ``width``, ...)."""
    from ...agents.search import SearchOptions

    names = {"maxNodes": "max_nodes", "budget": "max_nodes", "targetSpeedup": "target", "keepFactor": "keep_factor",
             "crossoverRate": "crossover_rate"}
    fields = {names.get(k, k): v for k, v in args.items() if names.get(k, k) in SearchOptions.__dataclass_fields__}
    fields.setdefault("algo", "beam")
    fields.setdefault("max_nodes", 12)
    return SearchOptions(**fields)


@dataclass
class SearchRun:
    """What one search command runs: the document's text at its version, the options, the run's setup
    (agents/run_setup.py: chip, check options, device, workspace), the provider, the run id (a repeat
    resumes it) and the results store."""

    path: Path
    version: int
    text: str
    options: Any
    setup: Any
    provider: Any
    rid: str
    store: Any
    done: Any = None  # the nodes already stored under ``rid`` (a repeat resumes from them)

    @property
    def chip(self) -> str:
        return self.setup.chip

    @property
    def device(self) -> Any:
        return self.setup.device

    @property
    def workspace(self) -> Path:
        return self.setup.workspace


def prepare(cmd: Any) -> SearchRun:
    """Check the command's arguments and settings (refusing through ``cmd``) and open the store."""
    from ...agents.llm.providers import ProviderError, make_provider
    from ...agents.run_setup import search_run_id, stored_nodes

    doc = cmd.doc
    setup = cmd.run_setup("Search for a faster kernel")
    try:
        options = options_from(cmd.options)
        provider = make_provider(setup.provider_config())
    except (ValueError, TypeError, ProviderError) as exc:
        cmd.refuse(f"pallasite.search: {exc}")
    rid = search_run_id(doc.text, options, setup.provider, setup.chip, setup.where())
    store = setup.open_store()
    return SearchRun(Path(doc.path), doc.version, doc.text, options, setup, provider, rid, store,
                     stored_nodes(store, rid))


def title(run: SearchRun) -> str:
    how = f"estimates for {run.chip}" if run.device is None else f"timed on {run.setup.where()}"
    return f"Searching for a faster {run.path.name} ({run.options.algo}, {how})"


def job_body(session: Any, run: SearchRun, progress: Any) -> Any:
    """The search job's work (agents/search_job.run_search): every node stored as it finishes, reported to the
    job and the editor; device jobs on the session engine's device pool (engine/workers/device.py: warm across runs)."""
    from ...agents import search_job
    from ...engine.judge import Trusted
    from ...engine.tuning.tune_workers import job_progress

    async def body(job_report: Any) -> Any:
        tell = job_progress(job_report)

        def say(message: str) -> None:
            tell(message[:200], None)
            progress.report(message[:200])

        # every node's model calls recorded under "<run id>/<node id>", as the CLI records them (replayable)
        recorder = run.setup.recorder()
        try:
            # the run's one judge (its check options, chip, device, the file as the trusted side)
            judge = run.setup.judge(session.engine, Trusted.of_file(str(run.path), run.text))
            return await search_job.run_search(
                run.path, run.text, run.options, run.provider, judge, done=run.done,
                on_node=lambda node: node_done(run, node, say), on_phase=lambda node_id, phase, message: say(
                    f"node {node_id} {phase}: {message}"), request_timeout_s=run.setup.agent.requestTimeoutS,
                recorder=recorder, run_id=run.rid)
        finally:
            recorder.close()

    return body


def node_done(run: SearchRun, node: Any, say: Any) -> None:
    """A node finished: stored at once (a repeat of the command resumes from it), and reported."""
    run.store.put_agent_step(run.rid, node.order, "search_node", node.to_json())
    say(f"node {node.id}: {node.text()} ({node.provenance})")


def failure(cmd: Any, run: SearchRun, why: str) -> dict[str, Any]:
    message = f"pallasite: the search failed ({why}); finished nodes are kept (run {run.rid} resumes)."
    cmd.session.show(message, lsp.MessageType.Error)
    return {"ok": False, "message": message}


async def report_and_offer(cmd: Any, run: SearchRun, graph: Any, progress: Any) -> dict[str, Any]:
    """Write the HTML report and open it; offer the best node as a versioned edit when it beats the
    starting kernel and the document is still the searched text."""
    from ..run_request import write_outputs

    out = write_outputs(graph, run.rid, run.workspace / ".pallasite" / "search",
                                   f"pallasite search {run.path.name} ({run.options.algo})")
    best = graph.best()
    speed = f"{best.speedup:.2f}x" if best.speedup is not None else "-"
    summary = f"best {best.id}: {speed} against the starting kernel ({best.provenance}); {len(graph.nodes)} nodes"
    progress.end(summary)
    result = {"ok": True, "run": run.rid, "best": best.id, "speedup": best.speedup, "provenance": best.provenance,
              "report": str(out), "stopped": graph.stopped, "applied": False, "summary": summary}
    try:
        await cmd.ls.window_show_document_async(lsp.ShowDocumentParams(uri=out.as_uri(), external=True))
    except Exception as exc:  # noqa: BLE001 - a client without showDocument: the path is in the message
        cmd.session.log(f"window/showDocument failed: {exc}")
    if best.op == "root" or best.speedup is None or best.speedup <= graph.root.speedup:
        cmd.session.show(f"pallasite: no node beat the starting kernel ({summary}); report: {out}", lsp.MessageType.Info)
        return result
    return await offer(cmd, run, best, result, f"{best.id} ({speed}, {best.provenance})", out)


async def offer(cmd: Any, run: SearchRun, best: Any, result: dict[str, Any], label: str, out: Path) -> dict[str, Any]:
    session, doc = cmd.session, cmd.doc
    if session.documents.get(doc.uri) is not doc or doc.version != run.version:
        session.show("pallasite: the document changed during the search; the best kernel was not applied "
                     f"(report: {out}).", lsp.MessageType.Warning)
        return {**result, "message": "document changed"}
    edit = lsp.WorkspaceEdit(document_changes=[whole_document_edit(doc.uri, run.version, run.text, best.source)])
    applied = await cmd.ls.workspace_apply_edit_async(lsp.ApplyWorkspaceEditParams(edit=edit, label=f"Search: {label}"))
    result["applied"] = bool(getattr(applied, "applied", False))
    session.show(f"pallasite: {result['summary']}; " + ("applied." if result["applied"] else "not applied."),
                 lsp.MessageType.Info)
    return result
